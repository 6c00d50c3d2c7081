"""``offsets.retention.minutes`` as Kafka's ``OffsetMetadataManager.cleanupExpiredOffsets`` for
consumer groups: an offset expires once its commit is older than the retention, only for a topic
no member subscribes to, never while an open transaction holds its partition; a group left with
nothing is deleted. Tombstones make it stick across a reload."""
from __future__ import annotations

import pytest

from broker.group.coordinator import GroupShard
from broker.group.group import Committed
from tests.unit.test_group_coordinator import hb

pytestmark = pytest.mark.unit

DAY = 86_400_000


def _reload(shard: GroupShard, records) -> GroupShard:
    again = GroupShard(0)
    again.load(records, now_ms=0)
    return again


def test_a_simple_groups_offsets_expire_and_the_group_goes():
    shard, log = GroupShard(0), []
    log += shard.commit("simple", "", -1, {("t", 0): Committed(5, commit_timestamp=0),
                                           ("t", 1): Committed(9, commit_timestamp=DAY)})
    log += shard.expire_offsets(now_ms=7 * DAY - 1, retention_ms=7 * DAY)
    assert set(shard.committed("simple", None)) == {("t", 0), ("t", 1)}
    log += shard.expire_offsets(now_ms=7 * DAY, retention_ms=7 * DAY)
    assert set(shard.committed("simple", None)) == {("t", 1)}
    log += shard.expire_offsets(now_ms=8 * DAY, retention_ms=7 * DAY)
    assert "simple" not in shard.groups
    assert "simple" not in _reload(shard, log).groups


def test_a_subscribed_topics_offsets_never_expire_and_the_group_stays():
    shard, log = GroupShard(0), []
    member = hb(shard, group_id="g", topics=["t"])
    g = shard.groups["g"]
    log += shard.commit("g", member.member_id, g.members[member.member_id].epoch,
                        {("t", 0): Committed(5, commit_timestamp=0), ("old", 0): Committed(3, commit_timestamp=0)})
    log += shard.expire_offsets(now_ms=30 * DAY, retention_ms=7 * DAY)
    assert set(shard.committed("g", None)) == {("t", 0)}
    assert set(_reload(shard, log).committed("g", None)) == {("t", 0)}


def test_an_offset_an_open_transaction_holds_does_not_expire():
    shard = GroupShard(0)
    shard.commit("simple", "", -1, {("t", 0): Committed(5, commit_timestamp=0)})
    shard.commit_in_transaction("simple", "", -1, 1000, 0, {("t", 0): Committed(8, commit_timestamp=0)})
    shard.expire_offsets(now_ms=30 * DAY, retention_ms=7 * DAY)
    assert shard.committed("simple", None)[("t", 0)].offset == 5
    shard.end_transaction("simple", 1000, 0, commit=False)
    shard.expire_offsets(now_ms=30 * DAY, retention_ms=7 * DAY)
    assert shard.committed("simple", None) == {}
