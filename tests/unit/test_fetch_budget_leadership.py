"""A fetch that has no bytes left for a partition still answers it only as that partition's leader
(Kafka's ``ReplicaManager.readFromLog`` checks leadership for every partition, read or not): a
follower's offsets come back as NOT_LEADER_OR_FOLLOWER, not as a leader's empty answer."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import FencedLeaderEpochError, NotLeaderOrFollowerError
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.records import arrow_body
from broker.server.handlers import Handlers
from broker.storage.log import Log

pytestmark = pytest.mark.unit


class TwoPartitions:
    is_broker = False
    config = BROKER_CONFIG.parse({})

    def __init__(self, partitions):
        self.partitions = partitions

    def partition(self, topic: str, index: int) -> Partition:
        return self.partitions[index]


def hosted(tmp_path, index: int) -> Partition:
    clock = ManualClock()
    return Partition("t", index, "id", Log.open(str(tmp_path / str(index)), TOPIC_CONFIG.parse({}), clock),
                     AppendNotifier(), node_id=1, clock=clock)


@pytest.mark.parametrize("second", ["follower", "older-epoch"])
def test_a_partition_past_the_fetch_size_is_answered_only_by_its_leader(tmp_path, second):
    first, other = hosted(tmp_path, 0), hosted(tmp_path, 1)
    first.make_leader(5, 1, [1], [1])
    first.append_records(arrow_body.encode_batch(arrow_body.record_batch([None], [b"x" * 100], [1])))
    if second == "follower":
        other.make_follower(2, 6, 2, [1, 2], [2])
    else:
        other.make_leader(7, 2, [1], [1])
    request = pb.FetchRequest(replica_id=-1, max_bytes=10, min_bytes=1)
    topic = request.topics.add(name="t")
    topic.partitions.add(partition=0, fetch_offset=0)
    topic.partitions.add(partition=1, fetch_offset=0, current_leader_epoch=6)
    response, answered = Handlers(TwoPartitions([first, other]), "127.0.0.1", 0).fetch_once(request)
    read, skipped = response.topics[0].partitions
    assert len(read.records) > 10                     # the first batch, whole (KIP-74)
    expected = NotLeaderOrFollowerError if second == "follower" else FencedLeaderEpochError
    assert skipped.error_code == expected.code and answered
