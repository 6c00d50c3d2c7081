"""Transactions on a 3-node cluster while nodes are killed (Kafka's ``TransactionCoordinator``,
``TransactionStateManager`` and ``TransactionMarkerChannelManager`` rules): a coordinator that takes
over a ``__transaction_state`` partition finishes every ``PrepareCommit``/``PrepareAbort`` it loads,
so a decision reaches every partition and is never half-visible; a data partition's new leader
keeps aborted and open transactions out of ``read_committed`` reads (producer state and aborted
transactions are replicated, not rebuilt by the leader alone), and the idempotent producers it
remembers are the ones its predecessor did."""
from __future__ import annotations

import threading
import time

import pytest

from broker.client import Producer, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, create
from tests.integration.test_transactions import read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

CONFIG = {**FAST, "group.min.session.timeout.ms": 300, "transaction.state.log.num.partitions": 1}


def _state(cluster, txn_id: str) -> str | None:
    try:
        with cluster.admin() as admin:
            return admin.describe_transactions([txn_id])[txn_id].result(5).state
    except Exception:  # noqa: BLE001 - the coordinator may be moving
        return None


def test_a_new_coordinator_finishes_a_commit_it_loads_prepared(cluster_factory, topic_name):
    cluster = cluster_factory(3, CONFIG)
    create(cluster, topic_name, partitions=3, rf=3, min_insync_replicas=2)
    txn_id = f"{topic_name}-app"
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "linger.ms": 1})
    p.init_transactions(30)
    coordinator = p._txn.coordinator.node_id
    leaders = {i: cluster.partition(topic_name, i).leader for i in range(3)}
    partition = next(i for i, leader in leaders.items() if leader != coordinator)
    p.begin_transaction()
    values = [b"a%03d" % i for i in range(200)]
    for v in values:
        p.produce(topic_name, value=v, partition=partition)
    assert p.flush(30) == 0

    # The data leader is paused: the commit decision is durable, its markers cannot be written.
    cluster.nodes[leaders[partition]].pause()
    outcome: dict = {}

    def commit():
        try:
            p.commit_transaction(90)
            outcome["error"] = None
        except Exception as e:  # noqa: BLE001 - the test inspects it
            outcome["error"] = e

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()
    wait_until(lambda: _state(cluster, txn_id) == "PrepareCommit" or "error" in outcome, 30, 0.05,
               "the commit decided (PrepareCommit) with its markers pending")
    cluster.nodes[coordinator].kill9()
    cluster.nodes[leaders[partition]].resume()
    committer.join(120)
    assert outcome.get("error", "unfinished") is None, outcome

    # Decided is committed: its markers reach every partition (as in Kafka, possibly after the
    # answer: the new coordinator finishes them once enough replicas are back).
    wait_until(lambda: sorted(read(cluster.bootstrap, topic_name, "read_committed", partitions=3, settle=0.5))
               == values, 60, 0.2, "the decided commit visible to read_committed readers")
    wait_until(lambda: _state(cluster, txn_id) == "CompleteCommit", 30, 0.1, "CompleteCommit")
    # The producer goes on with the new coordinator.
    p.begin_transaction()
    more = [b"b%03d" % i for i in range(100)]
    for v in more:
        p.produce(topic_name, value=v, partition=partition)
    p.commit_transaction(60)
    assert sorted(read(cluster.bootstrap, topic_name, "read_committed", partitions=3)) == values + more
    p.close()


def test_a_new_data_leader_hides_aborted_and_open_transactions_until_their_marker(cluster_factory, topic_name):
    cluster = cluster_factory(3, CONFIG)
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"{topic_name}-app", "linger.ms": 1})
    p.init_transactions(30)
    committed = [b"c%03d" % i for i in range(100)]
    for prefix, end in ((b"c", p.commit_transaction), (b"x", p.abort_transaction)):
        p.begin_transaction()
        for i in range(100):
            p.produce(topic_name, value=prefix + b"%03d" % i, partition=0)
        assert p.flush(30) == 0
        end(30)
    p.begin_transaction()
    still_open = [b"o%03d" % i for i in range(100)]
    for v in still_open:
        p.produce(topic_name, value=v, partition=0)
    assert p.flush(30) == 0

    leader = cluster.partition(topic_name, 0).leader
    cluster.nodes[leader].kill9()
    wait_until(lambda: cluster.partition(topic_name, 0).leader not in (leader, -1), 30, 0.1, "a new leader")
    # The open transaction holds the new leader's last stable offset; the aborted one stays skipped.
    assert read(cluster.bootstrap, topic_name, "read_committed", partitions=1) == committed

    p.commit_transaction(60)       # its marker goes to the new leader
    assert read(cluster.bootstrap, topic_name, "read_committed", partitions=1) == committed + still_open
    assert len(read(cluster.bootstrap, topic_name, "read_uncommitted", partitions=1)) == 300
    p.close()


def test_a_new_leader_remembers_an_idempotent_producer_writing_old_timestamps(cluster_factory, topic_name):
    """The leader measures a producer's idleness on its clock; followers must not forget it by its
    records' own (old) timestamps, or the new leader answers UnknownProducerId and the producer has
    to take a new epoch: a batch in flight across the failover would then be written twice."""
    cluster = cluster_factory(3, {**CONFIG, "producer.id.expiration.ms": 600_000,
                                  "producer.id.expiration.check.interval.ms": 100})
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    hour_ago = int(time.time() * 1000) - 3_600_000  # replayed event times
    p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 1})
    for i in range(200):
        p.produce(topic_name, value=b"%05d" % i, partition=0, timestamp=hour_ago + i)
    assert p.flush(30) == 0
    before = _producers(cluster, topic_name)
    assert [(e, s) for _, e, s in before] == [(0, 199)]

    leader = cluster.partition(topic_name, 0).leader
    cluster.nodes[leader].kill9()   # followers ran many expiry passes while the failover is detected
    wait_until(lambda: cluster.partition(topic_name, 0).leader not in (leader, -1), 30, 0.1, "a new leader")
    assert _producers(cluster, topic_name) == before
    for i in range(200, 400):
        p.produce(topic_name, value=b"%05d" % i, partition=0, timestamp=hour_ago + i)
    assert p.flush(60) == 0
    assert _producers(cluster, topic_name) == [(before[0][0], 0, 399)]   # same epoch: nothing was renumbered
    assert read(cluster.bootstrap, topic_name, "read_uncommitted", partitions=1) == [b"%05d" % i for i in range(400)]
    p.close()


def _producers(cluster, topic: str) -> list[tuple[int, int, int]]:
    tp = TopicPartition(topic, 0)
    with cluster.admin() as admin:
        found = admin.describe_producers([tp])[tp].result(10)
    return [(a.producer_id, a.producer_epoch, a.last_sequence) for a in found.active_producers]
