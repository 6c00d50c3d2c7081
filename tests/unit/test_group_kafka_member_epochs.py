"""The coordinator's member-epoch and group-existence rules, checked against Kafka's own
group-coordinator unit tests (GroupMetadataManagerTest, OffsetMetadataManagerTest), on the pure
coordinator (broker/group/group.py, broker/group/coordinator.py)."""
from __future__ import annotations

import pytest

from broker.errors import FencedInstanceIdError, FencedMemberEpochError, InvalidGroupIdError, InvalidRequestError
from broker.group.coordinator import GroupShard
from broker.group.group import STABLE, Committed, ConsumerGroup

pytestmark = pytest.mark.unit

G = "g"
SIZES = {"t": 4}


def _hb(target, member_id="", epoch=0, now=0, **kw):
    kw.setdefault("topics", ["t"])
    kw.setdefault("assignor_name", "cooperative-sticky")
    if isinstance(target, GroupShard):
        result, _ = target.heartbeat(G, member_id, epoch, partitions=SIZES, now_ms=now, **kw)
        return result
    return target.heartbeat(member_id, epoch, partitions=SIZES, now_ms=now, **kw)


def _settle(g: ConsumerGroup, now=0) -> None:
    for _ in range(6):
        for mid in list(g.members):
            m = g.members[mid]
            if m.active:
                _hb(g, mid, m.epoch, now=now, owned=set(m.assigned), instance_id=m.instance_id)
    assert g.state == STABLE


def _bumped_member(g: ConsumerGroup):
    """A member of a stable group whose epoch moved at least once since it joined (so its
    previous epoch is a real one), with partitions."""
    a = _hb(g).member_id
    b = _hb(g, now=1).member_id
    _settle(g)
    _hb(g, now=2)  # a third member: a and b give partitions up, then move to a new epoch
    _settle(g, now=3)
    m = g.members[a]
    assert m.previous_epoch >= 1 and m.epoch > m.previous_epoch and m.assigned
    return m, b


# ------------------------------------------------------------------ GroupMetadataManagerTest
def test_previous_epoch_is_accepted_only_with_a_subset_of_the_current_assignment():
    """testConsumerGroupMemberEpochValidation: a member at its previous epoch (the response that
    moved it on was lost) is answered with its current epoch only if what it owns is part of its
    current assignment; owning anything else, or not saying what it owns, fences it."""
    g = ConsumerGroup(G)
    m, b = _bumped_member(g)
    other = next(iter(g.members[b].assigned))
    with pytest.raises(FencedMemberEpochError):
        _hb(g, m.member_id, m.previous_epoch, now=4, owned=set(m.assigned) | {other})
    with pytest.raises(FencedMemberEpochError):
        _hb(g, m.member_id, m.previous_epoch, now=4)          # owned not reported
    part = set(list(m.assigned)[:1])
    r = _hb(g, m.member_id, m.previous_epoch, now=4, owned=part)
    assert r.member_epoch == m.epoch and r.assignment == m.assigned
    assert g.members[b].assigned >= {other}                    # nothing moved to the fenced claim


def test_a_static_member_away_for_now_is_fenced_by_a_late_heartbeat_of_its_old_incarnation():
    """Kafka writes member epoch -2 for a static member that left for now
    (consumerGroupStaticMemberGroupLeave), so a heartbeat with its old epoch arriving after the
    leave is FENCED_MEMBER_EPOCH (throwIfConsumerGroupMemberEpochIsInvalid) and changes nothing:
    the partitions it was giving up stay released, and it comes back only by joining again."""
    g = ConsumerGroup(G)
    a = _hb(g, instance_id="ia").member_id
    _hb(g, now=1, instance_id="ib")
    _settle(g)
    m = g.members[a]
    epoch, assigned = m.epoch, set(m.assigned)
    _hb(g, a, -2, now=5, instance_id="ia")
    with pytest.raises(FencedMemberEpochError):
        _hb(g, a, epoch, now=6, instance_id="ia", owned=assigned)
    assert g.members[a].left_ms == 5 and g.members[a].owned == set()
    r = _hb(g, "", 0, now=7, instance_id="ia")                 # joining again: its partitions back
    assert r.assignment == assigned and a not in g.members


# ------------------------------------------------------------------ OffsetMetadataManagerTest
def test_an_empty_group_id_is_invalid_before_anything_else():
    """GroupCoordinatorService.commitOffsets / commitTransactionalOffsets: INVALID_GROUP_ID for an
    empty group id, whatever the member epoch."""
    shard = GroupShard(0)
    for epoch in (-1, 3):
        with pytest.raises(InvalidGroupIdError):
            shard.commit("", "m", epoch, {("t", 0): Committed(1)})
        with pytest.raises(InvalidGroupIdError):
            shard.commit_in_transaction("", "m", epoch, 1000, 0, {("t", 0): Committed(1)})
    assert shard.groups == {}


def test_heartbeat_with_an_invalid_epoch_or_without_a_member_id_is_an_invalid_request():
    """testConsumerHeartbeatRequestValidation: a member epoch below -2 is INVALID_REQUEST
    ("MemberEpoch is invalid."), and so is a heartbeat with an epoch that names no member id
    ("MemberId can't be empty."); neither touches the group."""
    g = ConsumerGroup(G)
    a = _hb(g).member_id
    before = (g.group_epoch, set(g.members))
    with pytest.raises(InvalidRequestError, match="MemberEpoch is invalid"):
        _hb(g, a, -3, now=1)
    with pytest.raises(InvalidRequestError, match="MemberId can't be empty"):
        _hb(g, "", 1, now=1)
    assert (g.group_epoch, set(g.members)) == before


def test_a_replaced_static_member_joining_again_under_its_old_member_id_is_fenced():
    """testStaticMemberRejoinWithExplicitUnknownMemberId / testJoinGroupReplaceStaticMember: once a
    new incarnation took the group.instance.id over, a join (epoch 0) that names the old member id
    is FENCED_INSTANCE_ID - also from a member that had not finished its first reconciliation
    (still at epoch 0) - instead of taking the instance id, and its partitions, back."""
    g = ConsumerGroup(G)
    b = _hb(g, assignor_name="range").member_id
    _settle(g)                                                   # b holds every partition
    old = _hb(g, now=1, instance_id="ia", assignor_name="range").member_id
    assert g.members[old].epoch == 0                             # waiting for b to let go
    new = _hb(g, now=2, instance_id="ia", assignor_name="range").member_id   # a restart replaces it
    assert old not in g.members and new in g.members
    with pytest.raises(FencedInstanceIdError):
        _hb(g, old, 0, now=3, instance_id="ia", assignor_name="range")
    assert set(g.members) == {b, new}


def test_a_member_joining_moves_the_group_epoch_once():
    """GroupMetadataManagerTest.testMemberJoinsEmptyConsumerGroup: the first member of an empty
    group gets epoch 1 (its join and the subscribed topics' metadata bump the group epoch once);
    a second member's join moves it to 2; a subscription change later moves it once more."""
    g = ConsumerGroup(G)
    a = _hb(g)
    assert (a.member_epoch, g.group_epoch, g.assignment_epoch) == (1, 1, 1) and len(a.assignment) == 4
    b = _hb(g, now=1)
    assert g.group_epoch == 2 and b.member_id != a.member_id
    _hb(g, b.member_id, b.member_epoch, now=2, topics=["t", "u"])
    assert g.group_epoch == 3
