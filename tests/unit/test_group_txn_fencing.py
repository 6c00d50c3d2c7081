"""Offsets committed inside transactions are fenced by producer epoch in the group coordinator
(pure): a zombie whose TxnOffsetCommit arrives after its transaction was aborted can never have
its offsets committed by its successor, which shares its producer id."""
from __future__ import annotations

import pytest

from broker.errors import IllegalGenerationError, ProducerFencedError
from broker.group.coordinator import GroupShard
from broker.group.group import Committed

pytestmark = pytest.mark.unit

G, PID, TP = "g", 7, ("in", 0)


def _offsets(offset: int) -> dict:
    return {TP: Committed(offset, "", -1, 0)}


def _replayed(shard: GroupShard, records: list) -> GroupShard:
    again = GroupShard(0)
    again.load(records, 0)
    return again


def test_a_zombie_s_offsets_that_arrive_after_the_fencing_abort_are_refused_and_never_committed():
    shard, log = GroupShard(0), []
    log += shard.commit_in_transaction(G, "", -1, PID, 3, _offsets(10))    # zombie, epoch 3
    log += shard.end_transaction(G, PID, 4, commit=False)                  # fenced: abort at epoch 4
    with pytest.raises(ProducerFencedError, match="epoch 3 was fenced by epoch 4"):
        shard.commit_in_transaction(G, "", -1, PID, 3, _offsets(99))       # the zombie goes on
    log += shard.commit_in_transaction(G, "", -1, PID, 4, _offsets(20))    # successor
    log += shard.end_transaction(G, PID, 4, commit=True)
    assert shard.committed(G, [TP])[TP].offset == 20
    # the fence survives a coordinator failover (replayed from __consumer_offsets)
    with pytest.raises(ProducerFencedError):
        _replayed(shard, log).commit_in_transaction(G, "", -1, PID, 3, _offsets(99))


def test_older_epoch_offsets_are_dropped_when_a_newer_epoch_commits_first():
    shard = GroupShard(0)
    shard.commit_in_transaction(G, "", -1, PID, 3, _offsets(10))  # zombie's offsets, marker not yet here
    shard.commit_in_transaction(G, "", -1, PID, 5, _offsets(30))  # the successor (epoch bumped twice)
    with pytest.raises(ProducerFencedError):
        shard.commit_in_transaction(G, "", -1, PID, 3, _offsets(11))
    shard.end_transaction(G, PID, 5, commit=True)
    assert shard.committed(G, [TP])[TP].offset == 30


def test_offsets_from_before_a_rebalance_are_illegal_generation_not_retriable():
    # Kafka's validateTransactionalOffsetCommit: a stale member epoch is ILLEGAL_GENERATION, which
    # makes the producer's transaction abortable (a retriable StaleMemberEpoch let it commit
    # without the offsets: the records were processed again, duplicates downstream).
    shard = GroupShard(0)
    result, _ = shard.heartbeat(G, "", 0, partitions={"in": 2}, now_ms=0, topics=["in"])
    member, epoch = result.member_id, result.member_epoch
    with pytest.raises(IllegalGenerationError) as caught:
        shard.commit_in_transaction(G, member, epoch - 1, PID, 0, _offsets(10))
    assert not caught.value.retriable and shard.groups[G].pending == {}
    shard.commit_in_transaction(G, member, epoch, PID, 0, _offsets(10))  # the current epoch is fine
    shard.end_transaction(G, PID, 0, commit=True)
    assert shard.committed(G, [TP])[TP].offset == 10


def test_a_commit_marker_of_another_epoch_commits_nothing():
    shard = GroupShard(0)
    shard.commit_in_transaction(G, "", -1, PID, 3, _offsets(10))
    shard.end_transaction(G, PID, 4, commit=True)  # not the epoch these offsets were sent under
    assert shard.committed(G, [TP]) == {}


def test_the_same_epoch_goes_on_across_transactions():
    shard = GroupShard(0)
    for offset in (10, 20, 30):
        shard.commit_in_transaction(G, "", -1, PID, 3, _offsets(offset))
        shard.end_transaction(G, PID, 3, commit=True)
        assert shard.committed(G, [TP])[TP].offset == offset
    shard.commit_in_transaction(G, "", -1, PID, 3, _offsets(40))
    shard.end_transaction(G, PID, 3, commit=False)
    assert shard.committed(G, [TP])[TP].offset == 30
