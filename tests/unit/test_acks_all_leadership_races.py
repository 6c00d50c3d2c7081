"""An acks=all write is acknowledged only by the leader that appended it, in the epoch it appended it
in (Kafka's ``DelayedProduce``/``Partition.checkEnoughReplicasReachOffset``: off the leader the answer
is NOT_LEADER_OR_FOLLOWER). Each test forces one interleaving of a leadership change with a waiting
produce by calling the pieces in that order."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import NotLeaderOrFollowerError
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.records import arrow_body
from broker.server.handlers import Handlers
from broker.storage.log import Log

pytestmark = pytest.mark.unit


def partition(directory, node_id: int) -> Partition:
    clock = ManualClock()
    return Partition("t", 0, "id", Log.open(str(directory), TOPIC_CONFIG.parse({}), clock),
                     AppendNotifier(), node_id=node_id, clock=clock)


def batch(*values: bytes) -> bytes:
    return arrow_body.encode_batch(arrow_body.record_batch([None] * len(values), list(values),
                                                           list(range(1, len(values) + 1))))


def lose_the_batch_to(old: Partition, new_leader: Partition, epoch: int) -> None:
    """Broker 2 leads ``epoch`` without the old leader's batch and writes others in its place;
    broker 1 follows it, truncates to 0 and replicates them, its HW passing the old batch's end."""
    new_leader.make_leader(epoch, 2, [1, 2], [2])
    new_leader.append_records(batch(b"other-1", b"other-2", b"other-3"))
    old.make_follower(2, epoch, 2, [1, 2], [2])
    assert old.truncate_to(0, epoch)
    data = new_leader.read(0, 1 << 20, up_to_high_watermark=False).records
    old.append_as_follower(bytes(data), new_leader.high_watermark, 0, fetched=(epoch, 0))
    assert old.high_watermark == 3


def test_a_follower_whose_high_watermark_passed_a_truncated_batch_does_not_acknowledge_it(tmp_path):
    old = partition(tmp_path / "b1", 1)
    old.make_leader(5, 1, [1, 2], [1, 2])
    info = old.append_records(batch(b"mine"), acks=-1)
    assert not old.is_replicated(info, 5)                 # broker 2 has not fetched it
    lose_the_batch_to(old, partition(tmp_path / "b2", 2), 6)
    with pytest.raises(NotLeaderOrFollowerError):
        old.is_replicated(info, 5)                        # not "replicated": offset 0 is broker 2's now


def test_a_leader_again_does_not_acknowledge_a_batch_of_its_previous_epoch(tmp_path):
    # the wait for a marker or a coordinator's write starts after the append returned: leadership
    # lost and won back meanwhile must not make the new epoch's HW answer for the lost batch
    old = partition(tmp_path / "b1", 1)
    old.make_leader(5, 1, [1, 2], [1, 2])
    info = old.append_records(batch(b"mine"), acks=-1)
    lose_the_batch_to(old, partition(tmp_path / "b2", 2), 6)
    old.make_leader(7, 3, [1, 2], [1])                    # HW 3 already (from broker 2)
    with pytest.raises(NotLeaderOrFollowerError):
        old.wait_for_replication(info, 0.5)


def test_a_batch_replicated_in_its_epoch_is_acknowledged(tmp_path):
    leader = partition(tmp_path / "b1", 1)
    leader.make_leader(5, 1, [1, 2], [1, 2])
    info = leader.append_records(batch(b"mine"), acks=-1)
    leader.read_for_follower(2, 1, 1 << 20, 5)
    assert leader.is_replicated(info, 5)
    leader.wait_for_replication(info, 0.5)


class Moving(Partition):
    """A partition whose leadership moves on (to broker 2, then back) just before an append."""

    def append_records(self, data, acks=1, min_insync_replicas=None):
        if self.leader_epoch == 5:
            self.make_follower(2, 6, 2, [1, 2], [1, 2])
            self.make_leader(7, 3, [1, 2], [1, 2])
        return super().append_records(data, acks, min_insync_replicas)


class OneBroker:
    is_broker = False

    def __init__(self, p: Partition):
        self.p = p

    def partition(self, topic: str, index: int) -> Partition:
        return self.p


def test_a_produce_waits_for_the_epoch_its_append_was_made_in(tmp_path):
    p = Moving("t", 0, "id", Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), ManualClock()), AppendNotifier(),
               node_id=1, clock=ManualClock())
    p.make_leader(5, 1, [1, 2], [1, 2])
    handlers = Handlers(OneBroker(p), "127.0.0.1", 0)
    request = pb.ProduceRequest(acks=-1, timeout_ms=30_000)
    request.topics.add(name="t").partitions.add(partition=0, records=batch(b"v"))
    response, waiting = handlers.append(request)
    assert len(waiting) == 1 and p.leader_epoch == 7
    p.read_for_follower(2, 1, 1 << 20, 7)                 # broker 2 holds it: replicated in epoch 7
    assert handlers.settle(waiting) == []
    answer = response.topics[0].partitions[0]
    assert (answer.error_code, answer.base_offset) == (0, 0)
