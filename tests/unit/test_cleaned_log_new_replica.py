"""A replica that copies a cleaned log (a replica added by a reassignment, or rebuilt from an empty
disk) knows every idempotent producer as its leader did, so after it takes over the producer's
next batch is accepted (Kafka keeps the last sequence through compaction: ``overrideLastOffset``,
``RETAIN_EMPTY``). Real partitions and logs; the fetch is the follower's, without the network."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.records.batch import stamp_producer
from broker.storage.log import Log

pytestmark = pytest.mark.unit

COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.0"}
PID, EPOCH = 77, 0


def partition(directory, node_id: int) -> Partition:
    clock = ManualClock()
    return Partition("t", 0, "id", Log.open(str(directory), TOPIC_CONFIG.parse(COMPACT), clock),
                     AppendNotifier(), node_id=node_id, clock=clock)


def batch(keys, seq: int | None = None) -> bytes:
    data = arrow_body.encode_batch(arrow_body.record_batch(list(keys), [b"v"] * len(keys), [1000] * len(keys)))
    return data if seq is None else stamp_producer(data, PID, EPOCH, seq)


def copy_log(follower: Partition, leader: Partition) -> None:
    """Fetch from the leader until the follower holds its whole log (the replica fetcher's loop)."""
    while follower.log.log_end_offset < leader.log.log_end_offset:
        got = leader.read_for_follower(2, follower.log.log_end_offset, 1 << 20, leader.leader_epoch)
        follower.append_as_follower(bytes(got.records), got.high_watermark, got.log_start_offset)


def test_a_replica_copying_a_cleaned_log_accepts_the_producer_after_taking_over(tmp_path):
    leader, follower = partition(tmp_path / "b1", 1), partition(tmp_path / "b2", 2)
    leader.make_leader(1, 1, [1, 2], [1])
    leader.append_records(batch([b"a", b"b"], 0))
    leader.append_records(batch([b"c", b"d", b"e"], 2))      # the producer's last batch: sequences 2-4
    leader.append_records(batch([b"d", b"e"]))               # supersedes d and e
    leader.append_records(batch([b"f"], 5))                  # sequence 5, superseded below: nothing survives
    leader.append_records(batch([b"f"]))
    leader.log.roll()
    leader.append_records(batch([b"z"]))                     # a record past the roll: the clean reaches the roll
    assert leader.clean(leader.clock.time_ms()) is not None
    follower.make_follower(1, 1, 1, [1, 2], [1])
    copy_log(follower, leader)
    assert [p[:3] for p in follower.active_producers()] == [p[:3] for p in leader.active_producers()] == [(PID, EPOCH, 5)]
    follower.make_leader(2, 2, [1, 2], [2])
    info = follower.append_records(batch([b"g"], 6))         # the producer goes on at sequence 6
    assert info.first_offset == leader.log.log_end_offset
