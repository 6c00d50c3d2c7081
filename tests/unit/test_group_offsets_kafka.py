"""Committed offsets as Kafka's ``OffsetMetadataManagerTest`` expects them of a consumer group's
coordinator (broker/group/coordinator.py): who may commit, what a commit stores, what a fetch
answers while a transaction holds offsets, and when offsets expire."""
from __future__ import annotations

import pytest

from broker.errors import (GroupIdNotFoundError, IllegalGenerationError, InvalidGroupIdError, StaleMemberEpochError,
                           UnknownMemberIdError)
from broker.group.coordinator import GroupShard
from broker.group.group import Committed
from tests.unit.test_group_coordinator import hb

pytestmark = pytest.mark.unit

G = "g"
MINUTE = 60_000


def _reload(records) -> GroupShard:
    shard = GroupShard(0)
    shard.load(records, now_ms=0)
    return shard


def test_a_commit_with_a_member_epoch_to_an_unknown_group_is_group_id_not_found():
    """testOffsetCommitWithUnknownGroup (OffsetCommit v9+): only a member epoch < 0 creates a
    simple group; a member of a group that is gone learns that the group is gone."""
    shard = GroupShard(0)
    for member_id in ("member", ""):
        with pytest.raises(GroupIdNotFoundError, match="does not exist"):
            shard.commit("foo", member_id, 10, {("bar", 0): Committed(100)})
    assert "foo" not in shard.groups
    with pytest.raises(IllegalGenerationError):   # the TxnOffsetCommit counterpart stays ILLEGAL_GENERATION
        shard.commit_in_transaction("foo", "member", 10, 1000, 0, {("bar", 0): Committed(100)})
    assert shard.commit("foo", "", -1, {("bar", 0): Committed(100)})   # the simple group
    # the group exists now, without members: a member epoch is an unknown member, as Kafka
    with pytest.raises(UnknownMemberIdError):
        shard.commit("foo", "member", 10, {("bar", 0): Committed(101)})
    assert shard.committed("foo", None)[("bar", 0)].offset == 100


def test_a_member_commits_any_partition_with_its_current_epoch_only():
    """testConsumerGroupOffsetCommit / ...WithStaleMemberEpoch: guard (already matched). A member may
    commit partitions it does not own; the offset keeps its metadata, leader epoch and timestamp."""
    shard, log = GroupShard(0), []
    r = hb(shard, topics=["t"], partitions={"t": 2, "other": 1})
    epoch = shard.groups[G].members[r.member_id].epoch
    log += shard.commit(G, r.member_id, epoch, {("other", 0): Committed(100, "meta", 10, 1234)})
    with pytest.raises(StaleMemberEpochError):
        shard.commit(G, r.member_id, epoch + 1, {("other", 0): Committed(5)})
    assert _reload(log).committed(G, [("other", 0), ("t", 1)]) == {("other", 0): Committed(100, "meta", 10, 1234)}


def test_pending_transactional_offsets_show_only_after_the_commit_marker():
    """testFetchOffsetsWithPendingTransactionalOffsets / testReplayTransactionEndMarkerWithCommit:
    guard (already matched). A fetch sees the committed offset, require_stable sees the partition as
    unstable, the marker applies it; an aborted transaction's offsets are dropped."""
    shard, log = GroupShard(0), []
    log += shard.commit(G, "", -1, {("foo", 0): Committed(100)})
    log += shard.commit_in_transaction(G, "", -1, 10, 0, {("foo", 0): Committed(101), ("foo", 1): Committed(7)})
    log += shard.commit_in_transaction(G, "", -1, 11, 0, {("bar", 0): Committed(9)})
    assert shard.committed(G, [("foo", 0), ("foo", 1), ("bar", 0)]) == {("foo", 0): Committed(100)}
    assert shard.unstable(G, [("foo", 0), ("foo", 1), ("bar", 0), ("bar", 1)]) == {("foo", 0), ("foo", 1), ("bar", 0)}
    assert _reload(log).unstable(G, None) == {("foo", 0)}
    log += shard.end_transaction(G, 10, 0, commit=True)
    log += shard.end_transaction(G, 11, 0, commit=False)
    for s in (shard, _reload(log)):
        assert s.committed(G, None) == {("foo", 0): Committed(101), ("foo", 1): Committed(7)}
        assert s.unstable(G, None) == set() and s.unstable(G, [("bar", 0)]) == set()


def test_cleanup_expired_offsets_as_kafka():
    """testCleanupExpiredOffsets: guard (already matched). Retention counts from each offset's commit
    timestamp; a subscribed topic's offsets stay; the group goes once everything expired."""
    shard, log = GroupShard(0), []
    r = hb(shard, topics=["firstTopic"], partitions={"firstTopic": 2, "secondTopic": 2})
    epoch = shard.groups[G].members[r.member_id].epoch
    log += shard.commit(G, r.member_id, epoch, {("firstTopic", 0): Committed(100, commit_timestamp=0),
                                                 ("secondTopic", 0): Committed(100, commit_timestamp=0)})
    log += shard.commit(G, r.member_id, epoch, {("secondTopic", 1): Committed(100, commit_timestamp=500)})
    log += shard.expire_offsets(now_ms=MINUTE, retention_ms=MINUTE)
    assert set(shard.committed(G, None)) == {("firstTopic", 0), ("secondTopic", 1)}
    log += shard.expire_offsets(now_ms=MINUTE + 500, retention_ms=MINUTE)
    assert set(shard.committed(G, None)) == {("firstTopic", 0)}
    hb(shard, r.member_id, -1, now=1)                        # the member leaves: nothing is subscribed
    log += shard.expire_offsets(now_ms=MINUTE + 500, retention_ms=MINUTE)
    assert G not in shard.groups and G not in _reload(log).groups


def test_offset_delete_of_an_empty_group_id_is_invalid_group_id():
    """GroupCoordinatorService.deleteOffsets: INVALID_GROUP_ID for an empty group id, before
    GROUP_ID_NOT_FOUND for an unknown one."""
    shard = GroupShard(0)
    with pytest.raises(InvalidGroupIdError):
        shard.delete_offsets("", [("t", 0)])
    with pytest.raises(GroupIdNotFoundError):
        shard.delete_offsets("foo", [("t", 0)])


def test_deleting_a_group_also_deletes_its_offsets_pending_in_a_transaction():
    """testDeleteGroupAllOffsetsWithPendingTransactionalOffsets: guard (already matched). The
    transaction's later commit marker brings none of the group's offsets back, also after a reload."""
    shard, log = GroupShard(0), []
    log += shard.commit(G, "", -1, {("foo", 0): Committed(100)})
    log += shard.commit_in_transaction(G, "", -1, 10, 0, {("foo", 0): Committed(101), ("foo", 1): Committed(7)})
    log += shard.delete_group(G)
    reloaded = _reload(log)
    for s in (shard, reloaded):
        log_tail = s.end_transaction(G, 10, 0, commit=True)
        assert s.committed(G, None) == {} and G not in s.groups and log_tail == []
