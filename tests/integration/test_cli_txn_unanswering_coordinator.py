"""A coordinator that does not answer is not a coordinator holding nothing: ``list_transactions``
fails (Kafka's ``ListTransactionsResult.all()`` fails when any broker's request fails), and
``riverlog transactions find-hanging`` and ``abort --start-offset`` exit with status 1 without
calling a live transaction hanging or writing its abort marker at one partition (which would break
its atomicity: its coordinator could still commit it elsewhere)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from broker.cli import main
from broker.client import AdminClient, Producer, TopicPartition
from broker.errors import CoordinatorNotAvailableError
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, create

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# One __transaction_state partition on one node: once that node is down, no broker holds its state.
CONFIG = {**FAST, "transaction.state.log.num.partitions": 1, "transaction.state.log.replication.factor": 1}


def _listing(admin):
    try:
        return admin.list_transactions(request_timeout=5).result(30)
    except CoordinatorNotAvailableError:
        return None


def test_a_down_coordinator_fails_the_listing_and_nothing_is_aborted(cluster_factory, topic_name):
    cluster = cluster_factory(3, CONFIG)
    create(cluster, topic_name, partitions=3, rf=1)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"{topic_name}-app", "linger.ms": 1})
    p.init_transactions(30)
    coordinator = p._txn.coordinator.node_id
    partition = next(i for i in range(3) if cluster.partition(topic_name, i).leader != coordinator)
    p.begin_transaction()
    p.produce(topic_name, value=b"live", partition=partition)
    assert p.flush(30) == 0
    pid = p.transaction_handle().producer_id
    tp = TopicPartition(topic_name, partition)

    cluster.nodes[coordinator].kill9()       # the transaction stays live in its coordinator's log
    bootstrap = cluster.bootstrap
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        where = ["--topic", topic_name, "--partition", str(partition)]
        aborted = CliRunner().invoke(main, ["-b", bootstrap, "transactions", "abort", *where, "--start-offset", "0"])
        assert aborted.exit_code == 1, aborted.stdout + aborted.stderr
        assert "nothing was aborted" in aborted.stderr and "COORDINATOR_NOT_AVAILABLE" in aborted.stderr
        held = admin.describe_producers([tp])[tp].result(30)
        assert [(o.first_offset, o.producer_id) for o in held.open_transactions] == [(0, pid)], held
        assert held.last_stable_offset == 0

        hanging = CliRunner().invoke(main, ["-b", bootstrap, "transactions", "find-hanging", *where,
                                            "--max-transaction-timeout", "0"])
        assert hanging.exit_code == 1, hanging.stdout + hanging.stderr
        assert hanging.stderr.startswith("Error: Failed to list transactions for 1 producers: "
                                         "COORDINATOR_NOT_AVAILABLE: "), hanging.stderr
        assert hanging.stdout == ""

        def listing_error() -> str:
            with pytest.raises(CoordinatorNotAvailableError) as listing:
                admin.list_transactions(request_timeout=5).result(30)
            return str(listing.value)
        assert "__transaction_state-0" in listing_error() or f"broker {coordinator}" in listing_error()
        # once the controller fences the node, its partition has no leader: still not an empty listing
        wait_until(lambda: "__transaction_state-0 has no leader" in listing_error(), 30, 0.1,
                   "the listing to name the leaderless __transaction_state partition")

    cluster.nodes[coordinator].restart()      # back: the transaction is listed, Ongoing, as it was
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        listed = wait_until(lambda: _listing(admin), 60, 0.1, "a complete listing")
        assert [(t.producer_id, t.state) for t in listed if t.transactional_id == f"{topic_name}-app"] == \
            [(pid, "Ongoing")], listed
    p.close(1)
