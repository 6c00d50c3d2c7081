"""The periodic group clean-up (``offsets.retention.check.interval.ms``) against Kafka's
``GroupCoordinatorShard.cleanupGroupMetadata``: every group is looked at, and one that is empty
(no members) once its expired offsets are gone — or that never had any — is deleted
(``OffsetMetadataManager.cleanupExpiredOffsets`` answers "all expired" for a group without
offsets; ``GroupMetadataManager.maybeDeleteGroup``)."""
from __future__ import annotations

import pytest

from broker.group.coordinator import GroupShard
from broker.group.group import Committed

pytestmark = pytest.mark.unit

G = "g"
DAY = 86_400_000
SIZES = {"t": 2}


def _beat(shard: GroupShard, log: list, member_id: str = "", epoch: int = 0, now: int = 0, **kw):
    result, records = shard.heartbeat(G, member_id, epoch, partitions=SIZES, now_ms=now, topics=["t"], **kw)
    log += records
    return result


def _reload(log) -> GroupShard:
    shard = GroupShard(0)
    shard.load(log, now_ms=0)
    return shard


def test_an_empty_group_that_never_committed_is_deleted_at_the_next_check():
    shard, log = GroupShard(0), []
    a = _beat(shard, log).member_id
    _beat(shard, log, a, -1, now=1)
    assert G in shard.groups and not shard.groups[G].members     # Empty, as Kafka's
    assert G in _reload(log).groups
    log += shard.expire_offsets(now_ms=2, retention_ms=7 * DAY)
    assert G not in shard.groups
    assert G not in _reload(log).groups                          # tombstoned: it stays deleted


def test_a_group_with_members_or_offsets_or_an_open_transaction_is_kept():
    shard, log = GroupShard(0), []
    a = _beat(shard, log, instance_id="pod-1").member_id
    log += shard.expire_offsets(now_ms=1, retention_ms=7 * DAY)
    assert G in shard.groups                                     # a live member
    _beat(shard, log, a, -2, now=2)
    log += shard.expire_offsets(now_ms=3, retention_ms=7 * DAY)
    assert G in shard.groups                                     # a static member away for now
    log += shard.expire({"t": 2}, now_ms=2 + 45_001)              # its session ran out
    assert not shard.groups[G].members
    log += shard.commit(G, "", -1, {("t", 0): Committed(4, commit_timestamp=DAY)})
    log += shard.expire_offsets(now_ms=DAY + 1, retention_ms=7 * DAY)
    assert shard.committed(G, None) == {("t", 0): Committed(4, commit_timestamp=DAY)}
    log += shard.commit_in_transaction("txn", "", -1, 7, 0, {("t", 1): Committed(1, commit_timestamp=0)})
    log += shard.expire_offsets(now_ms=30 * DAY, retention_ms=7 * DAY)
    assert G not in shard.groups                                 # its offset expired: nothing left
    assert "txn" in shard.groups                                 # an open transaction holds it
    log += shard.end_transaction("txn", 7, 0, commit=False)
    log += shard.expire_offsets(now_ms=30 * DAY + 1, retention_ms=7 * DAY)
    assert "txn" not in shard.groups and set(_reload(log).groups) == set()
