"""The client-facing OffsetForLeaderEpoch (KIP-320), answered by a real leader partition through
the handler: Kafka's ``Partition.lastOffsetForLeaderEpoch`` semantics (the largest epoch <= the
one asked and where it ends; -1/-1 when unknown; the current leader epoch fenced)."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import KafkaError, UnknownTopicOrPartitionError
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.records.arrow_body import encode_batch, record_batch
from broker.server.handlers import Handlers
from broker.storage.log import Log

pytestmark = pytest.mark.unit


@pytest.fixture
def handlers(tmp_path):
    """Node 1 leads t-0: 4 records in epoch 3, then 2 in epoch 5; it follows t-2, does not host t-1."""
    def open_partition(index):
        return Partition("t", index, "id", Log.open(str(tmp_path / str(index)), TOPIC_CONFIG.parse({}), ManualClock()),
                         AppendNotifier(), node_id=1)
    p = open_partition(0)
    p.make_leader(3, 1, [1], [1])
    p.append_records(encode_batch(record_batch([None] * 4, [b"v"] * 4, [1] * 4)))
    p.make_leader(5, 2, [1], [1])
    p.append_records(encode_batch(record_batch([None] * 2, [b"v"] * 2, [1] * 2)))
    hosted = {("t", 0): p, ("t", 2): open_partition(2)}

    def partition(topic, index):
        if (topic, index) not in hosted:
            raise UnknownTopicOrPartitionError(f"{topic}-{index} is not hosted here")
        return hosted[(topic, index)]
    return Handlers(NS(is_broker=True, serving=True, partition=partition), "127.0.0.1", 1)


def ask(handlers, *partitions) -> list[tuple[int, int, int]]:
    request = pb.OffsetForLeaderEpochRequest(topics=[pb.OffsetForLeaderEpochTopic(name="t", partitions=[
        pb.OffsetForLeaderEpochPartition(**p) for p in partitions])])
    return [(r.error_code, r.leader_epoch, r.end_offset)
            for r in handlers.offset_for_leader_epoch(request).topics[0].partitions]


@pytest.mark.parametrize("epoch,expected", [
    (3, (0, 3, 4)),      # an older epoch ends where the next one starts
    (4, (0, 3, 4)),      # an epoch the leader never had: the largest below it
    (5, (0, 5, 6)),      # the current epoch ends at the log end
    (9, (0, -1, -1)),    # above every known epoch: unknown
    (-1, (0, -1, -1)),
])
def test_the_end_of_the_largest_epoch_at_or_below_the_one_asked(handlers, epoch, expected):
    assert ask(handlers, dict(partition=0, leader_epoch=epoch)) == [expected]


@pytest.mark.parametrize("current,code", [(4, KafkaError.FENCED_LEADER_EPOCH), (6, KafkaError.UNKNOWN_LEADER_EPOCH),
                                          (5, 0), (-1, 0)])
def test_the_askers_current_leader_epoch_is_fenced(handlers, current, code):
    answer = ask(handlers, dict(partition=0, leader_epoch=3, current_leader_epoch=current))
    assert answer == [(code, 3, 4) if code == 0 else (code, -1, -1)]


def test_a_partition_not_led_here_is_answered_with_its_error_beside_the_others(handlers):
    answers = ask(handlers, dict(partition=1, leader_epoch=3), dict(partition=0, leader_epoch=3),
                  dict(partition=2, leader_epoch=3))
    assert answers == [(KafkaError.UNKNOWN_TOPIC_OR_PART, -1, -1), (0, 3, 4),
                       (KafkaError.NOT_LEADER_OR_FOLLOWER, -1, -1)]
