"""``riverlog transactions abort --topic --partition --start-offset`` of a hanging transaction, against
a real broker process: a transaction open on a partition under a producer id no coordinator holds
(a late transactional write, sent here raw) holds the last stable offset back for good;
``find-hanging`` lists it, and ``abort`` writes its abort marker at the partition (Kafka's
``Admin.abortTransaction``), after which ``read_committed`` readers see the records after it and
never the aborted ones."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from broker.cli import main

from broker.client import AdminClient, TopicPartition
from broker.client.admin import AbortTransactionSpec
from broker.client.cluster import ClusterClient
from broker.errors import ClusterAuthorizationFailedError, InvalidProducerEpochError
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL
from tests.conftest import wait_until
from tests.integration.test_cli import create_topic, lines
from tests.integration.test_cli_transactions import _kafka_table, _plain, _read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _late_transactional_write(cluster: ClusterClient, topic: str, values: list[bytes], epoch: int) -> int:
    """Transactional records of a producer id that no coordinator holds (an idempotent one's): the
    partition opens a transaction for it that no coordinator will ever end. Its producer id."""
    pid = cluster.call("InitProducerId", pb.InitProducerIdRequest()).producer_id
    data = encode_batch(record_batch([None] * len(values), values, [1] * len(values)), attributes=TRANSACTIONAL,
                        producer_id=pid, producer_epoch=epoch, base_sequence=0)
    r = cluster.call("Produce", pb.ProduceRequest(acks=-1, topics=[pb.ProduceTopic(
        name=topic, partitions=[pb.ProducePartition(partition=0, records=data)])])).topics[0].partitions[0]
    assert not r.error_code, r.error_message
    return pid


def _cli(bootstrap: str, *args):
    """The command in this process (a few of them, so no interpreter start each): its result."""
    return CliRunner().invoke(main, ["-b", bootstrap, *map(str, args)])


def test_cli_aborts_a_hanging_transaction_at_its_partition(shared_broker, topic_name):
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    where = ("--topic", topic_name, "--partition", "0")
    cluster = ClusterClient(bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        _plain(bootstrap, topic_name, [b"before"])                                       # offset 0
        pid = _late_transactional_write(cluster, topic_name, [b"h0", b"h1"], epoch=3)    # offsets 1-2, open
        _plain(bootstrap, topic_name, [b"after"])                                        # offset 3
        held = admin.describe_producers([tp])[tp].result(30)
        assert (held.last_stable_offset, held.high_watermark) == (1, 4), held            # read_committed stuck at 1
        assert [(o.producer_id, o.first_offset) for o in held.open_transactions] == [(pid, 1)]

        hanging = wait_until(lambda: _kafka_table(_cli(bootstrap, "transactions", "find-hanging", *where[:2],
                                                       "--max-transaction-timeout", 0).stdout)[1:],
                             30, 0.05, "find-hanging to list it")
        assert [(r[2], r[3], r[5]) for r in hanging] == [(str(pid), "3", "1")], hanging

        # the client listener still refuses a commit marker; a stale epoch is Kafka's INVALID_PRODUCER_EPOCH
        commit = pb.WriteTxnMarkersRequest(producer_id=pid, producer_epoch=3, commit=True,
                                           partitions=grouped([tp]))
        with pytest.raises(ClusterAuthorizationFailedError):
            cluster.call("WriteTxnMarkers", commit)
        with pytest.raises(InvalidProducerEpochError):
            admin.abort_transaction(AbortTransactionSpec(tp, pid, 2)).result(30)
        stale = _cli(bootstrap, "transactions", "abort", *where, "--producer-id", pid, "--producer-epoch", 2,
                     "--coordinator-epoch", -1)
        assert stale.exit_code == 1 and len(lines(stale.stderr)) == 1, stale.stderr
        assert stale.stderr.startswith(
            f"Error: Failed to abort transaction AbortTransactionSpec(topicPartition={topic_name}-0, producerId={pid}, "
            "producerEpoch=2, coordinatorEpoch=-1): INVALID_PRODUCER_EPOCH: "), stale.stderr
        assert admin.describe_producers([tp])[tp].result(30).last_stable_offset == 1

        aborted = _cli(bootstrap, "transactions", "abort", *where, "--start-offset", 1)
        assert (aborted.exit_code, aborted.output) == (0, ""), aborted.output
        held = admin.describe_producers([tp])[tp].result(30)
        assert (held.last_stable_offset, held.high_watermark, held.open_transactions) == (5, 5, []), held

        _plain(bootstrap, topic_name, [b"last"])                                         # offset 5
        assert _read(bootstrap, topic_name, 0, "read_committed", b"last") == [b"before", b"after", b"last"]
        assert _read(bootstrap, topic_name, 0, "read_uncommitted", b"last") == \
            [b"before", b"h0", b"h1", b"after", b"last"]
        again = _cli(bootstrap, "transactions", "abort", *where, "--start-offset", 1)
        assert again.exit_code == 1 and "Could not find any open transactions starting at offset 1" in again.stderr
    finally:
        admin.close()
        cluster.close()

