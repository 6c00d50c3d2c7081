"""Static membership (KIP-345) at the group coordinator (broker/group/group.py): a replaced
instance is fenced by its ``group.instance.id``, wherever the group is coordinated now."""
from __future__ import annotations

import pytest

from broker.errors import FencedInstanceIdError
from broker.group.coordinator import GroupShard

pytestmark = pytest.mark.unit

G = "g"
PARTITIONS = {"t": 2}


def _beat(shard: GroupShard, records: list, member_id: str = "", epoch: int = 0, now: int = 0, **fields):
    result, written = shard.heartbeat(G, member_id, epoch, partitions=PARTITIONS, now_ms=now,
                                      instance_id="pod-1", topics=["t"], **fields)
    records.extend(written)
    return result


def test_a_replaced_static_member_is_fenced_by_a_coordinator_that_took_the_group_over():
    """Kafka's ``throwIfInstanceIdIsFenced``: the instance id maps to the newer member, so the old
    member's heartbeat is FENCED_INSTANCE_ID on any coordinator. Answering UNKNOWN_MEMBER_ID sent
    the old instance back to join, taking the partitions from the live one (which then died of
    the fence)."""
    records: list = []
    first = GroupShard(0)
    old = _beat(first, records)
    new = _beat(first, records, now=10)   # the same instance started again (the old one still runs)
    assert old.member_id != new.member_id

    moved = GroupShard(0)
    moved.load(records, now_ms=20)        # the __consumer_offsets partition moved to another broker
    with pytest.raises(FencedInstanceIdError):
        _beat(moved, [], old.member_id, old.member_epoch, now=30)
    # the live instance is untouched
    again = _beat(moved, [], new.member_id, new.member_epoch, now=40, owned=new.assignment)
    assert again.member_id == new.member_id and again.assignment == new.assignment
    assert list(moved.groups[G].members) == [new.member_id]


def test_a_replaced_static_member_leaving_changes_nothing():
    records: list = []
    shard = GroupShard(0)
    old = _beat(shard, records)
    new = _beat(shard, records, now=10)
    _beat(shard, records, old.member_id, -2, now=20)
    group = shard.groups[G]
    assert list(group.members) == [new.member_id] and group.members[new.member_id].active


def test_a_static_member_that_leaves_mid_revocation_is_kept_for_its_session_not_its_rebalance_timeout():
    """Kafka's ``consumerGroupStaticMemberGroupLeave`` clears the partitions the member was revoking
    and its rebalance timer no longer applies (it checks the member's epoch, -2 now): a static
    member restarting during a cooperative rebalance keeps its place for ``session.timeout.ms``. It
    was removed once its rebalance timeout (max.poll.interval.ms) passed, a second rebalance."""
    shard = GroupShard(0)

    def beat(member_id="", epoch=0, now=0, instance_id="pod-1", **fields):
        result, _ = shard.heartbeat(G, member_id, epoch, partitions={"t": 4}, now_ms=now, instance_id=instance_id,
                                    topics=["t"], assignor_name="cooperative-sticky", session_timeout_ms=10_000,
                                    rebalance_timeout_ms=100, **fields)
        return result

    a = beat().member_id
    group = shard.groups[G]
    beat(a, group.members[a].epoch, now=1, owned=group.members[a].assigned)
    beat(now=2, instance_id="pod-2")
    assert beat(a, group.members[a].epoch, now=3, owned=group.members[a].assigned).reconciling  # revoking
    beat(a, -2, now=4)
    shard.expire({"t": 4}, 500)                  # past the rebalance timeout, within the session
    assert a in group.members and not group.members[a].active
    shard.expire({"t": 4}, 10_005)               # past the session
    assert a not in group.members


def test_replaced_members_are_remembered_up_to_a_bound():
    """Every restart of a static member replaces one member id; the group remembers the newest
    ``FENCED_MEMBERS_KEPT`` of them (a commit from one is FENCED_INSTANCE_ID), not every one ever."""
    from broker.group.group import FENCED_MEMBERS_KEPT
    shard = GroupShard(0)
    records: list = []
    first = _beat(shard, records)
    last = first
    for i in range(FENCED_MEMBERS_KEPT + 5):
        last = _beat(shard, records, now=10 + i)
    group = shard.groups[G]
    assert len(group.fenced_members) == FENCED_MEMBERS_KEPT
    assert first.member_id not in group.fenced_members and last.member_id not in group.fenced_members
    assert list(group.members) == [last.member_id]
