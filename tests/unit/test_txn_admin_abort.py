"""An administrator's abort of a hanging transaction (Kafka's ``Admin.abortTransaction`` ->
``WriteTxnMarkers`` ABORT at the partition's leader, checked by
``ProducerAppendInfo.appendEndTxnMarker``): which requests the client listener takes, the
coordinator epoch the marker carries, and the marker checks on a real partition."""
from __future__ import annotations

import pytest

from broker.cli.hanging_transactions import coordinator_holds, spec_text
from broker.client import TopicPartition
from broker.client.admin_abort import AbortTransactionSpec
from broker.client.txn_admin import TransactionDescription
from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError, UnknownTopicOrPartitionError
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL
from broker.server.admin_markers import coordinator_epoch_for, refusal, write_admin_abort
from broker.storage.log import Log

pytestmark = pytest.mark.unit


def _abort(pid: int, epoch: int, coordinator_epoch: int = -1, **fields) -> pb.WriteTxnMarkersRequest:
    return pb.WriteTxnMarkersRequest(producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
                                     timeout_ms=5000, partitions=grouped([("t", 0)]), **fields)


def test_the_client_listener_takes_only_an_abort_of_partitions():
    assert refusal(_abort(7, 0)) is None
    assert "only aborts" in refusal(_abort(7, 0, commit=True))
    assert "group" in refusal(_abort(7, 0, groups=["g"]))
    internal = pb.WriteTxnMarkersRequest(producer_id=7, producer_epoch=0, partitions=grouped([("__consumer_offsets", 0)]))
    assert "user topics" in refusal(internal)


def test_a_negative_coordinator_epoch_is_the_producers_last_one_on_the_partition():
    assert coordinator_epoch_for(5, 3) == 5          # as given: the partition checks it
    assert coordinator_epoch_for(0, 4) == 0
    assert coordinator_epoch_for(-1, 4) == 4
    assert coordinator_epoch_for(-1, -1) == 0        # no marker seen yet: Kafka's CLI sends 0
    assert coordinator_epoch_for(-1, None) == 0      # producer unknown to the partition


def test_the_cli_goes_through_a_coordinator_only_when_it_holds_the_producer_on_that_partition():
    def held(pid, *tps):
        return TransactionDescription("app", "Ongoing", pid, 0, 60_000, 1, [TopicPartition(*tp) for tp in tps])
    assert coordinator_holds(held(7, ("t", 0)), 7, "t", 0)
    assert not coordinator_holds(None, 7, "t", 0)                    # no coordinator knows it: hanging
    assert not coordinator_holds(held(7, ("t", 1)), 7, "t", 0)       # its transaction lacks the partition
    assert not coordinator_holds(held(8, ("t", 0)), 7, "t", 0)       # the id moved on to a new producer id
    assert spec_text("t", 0, 7, 2, -1) == \
        "AbortTransactionSpec(topicPartition=t-0, producerId=7, producerEpoch=2, coordinatorEpoch=-1)"
    assert AbortTransactionSpec(TopicPartition("t", 0), 7, 2).coordinator_epoch == -1


class _Broker:
    """What write_admin_abort uses of a broker: its partitions (t-0, led here, a single replica)."""

    def __init__(self, tmp_path):
        clock = ManualClock()
        self.p = Partition("t", 0, "id", Log.open(str(tmp_path / "t-0"), TOPIC_CONFIG.parse({}), clock),
                           AppendNotifier(), clock=clock)
        self.p.make_leader(0, 0, [0], [0])

    def partition(self, topic: str, index: int) -> Partition:
        if (topic, index) != ("t", 0):
            raise UnknownTopicOrPartitionError(f"{topic}-{index}")
        return self.p

    def produce(self, pid: int, epoch: int, sequence: int, transactional: bool = True) -> None:
        self.p.append_records(encode_batch(record_batch([b"k"], [b"v"], [1]),
                                           attributes=TRANSACTIONAL if transactional else 0,
                                           producer_id=pid, producer_epoch=epoch, base_sequence=sequence))


def _errors(response) -> list[int]:
    return [r.error_code for r in response.partitions]


def test_an_abort_marker_ends_the_open_transaction_and_moves_the_last_stable_offset(tmp_path):
    broker = _Broker(tmp_path)
    broker.produce(9, 0, 0, transactional=False)      # offset 0, committed
    broker.produce(7, 2, 0)                           # offset 1: the hanging transaction
    broker.produce(9, 0, 1, transactional=False)      # offset 2
    assert broker.p.stable_offsets() == (1, 3)
    assert _errors(write_admin_abort(broker, _abort(7, 1))) == [InvalidProducerEpochError.code]   # stale epoch
    assert broker.p.stable_offsets() == (1, 3)
    assert _errors(write_admin_abort(broker, _abort(7, 2))) == [0]
    assert broker.p.stable_offsets() == (4, 4)        # the marker at offset 3
    assert [t[0] for t in broker.p.open_transactions()] == []
    # As Kafka's: with no open transaction the marker is still written (a retried abort succeeds), ending nothing
    assert _errors(write_admin_abort(broker, _abort(7, 2))) == [0]
    assert broker.p.stable_offsets() == (5, 5)
    # ... and a newer epoch is taken, fencing the older one on this partition
    assert _errors(write_admin_abort(broker, _abort(7, 3))) == [0]
    with pytest.raises(InvalidProducerEpochError):
        broker.produce(7, 2, 1)
    unknown = write_admin_abort(broker, pb.WriteTxnMarkersRequest(
        producer_id=7, producer_epoch=3, partitions=grouped([("t", 1)])))
    assert _errors(unknown) == [UnknownTopicOrPartitionError.code]


def test_the_coordinator_epoch_defaults_to_the_producers_last_marker_and_an_older_one_is_fenced(tmp_path):
    broker = _Broker(tmp_path)
    broker.produce(7, 0, 0)
    broker.p.write_marker(7, 0, True, 4)              # its coordinator (epoch 4) committed it
    broker.produce(7, 0, 1)                           # offset 2: a new transaction, now hanging
    assert broker.p.stable_offsets() == (2, 3)
    assert _errors(write_admin_abort(broker, _abort(7, 0, coordinator_epoch=3))) == \
        [TransactionCoordinatorFencedError.code]
    assert broker.p.stable_offsets() == (2, 3)
    assert _errors(write_admin_abort(broker, _abort(7, 0))) == [0]    # -1: the partition's 4
    assert broker.p.stable_offsets() == (4, 4)
    assert broker.p.producers.producers[7].coordinator_epoch == 4
