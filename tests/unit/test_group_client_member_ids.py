"""KIP-1082 at the coordinator (broker/group/group.py, broker/group/coordinator.py): a member names
its own member id, generated once by the consumer and kept for its lifetime, and a join (epoch 0)
naming an id the group does not have creates the member under that id, as Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` (``getOrMaybeCreateMember(memberId, true)``,
GroupMetadataManagerTest.testMemberJoinsEmptyConsumerGroup). A join naming no id still gets one."""
from __future__ import annotations

import pytest

from broker.errors import FencedInstanceIdError, FencedMemberEpochError
from broker.group.coordinator import GroupShard
from broker.group.group import STABLE

pytestmark = pytest.mark.unit

G = "g"
SIZES = {"t": 4}


def _hb(shard: GroupShard, member_id: str, epoch: int = 0, now: int = 0, records: list | None = None, **kw):
    kw.setdefault("topics", ["t"])
    kw.setdefault("owned", set())   # as the handler passes it: a request always says what it owns
    result, written = shard.heartbeat(G, member_id, epoch, partitions=SIZES, now_ms=now, **kw)
    if records is not None:
        records.extend(written)
    return result


def _settle(shard: GroupShard, now: int = 0) -> None:
    group = shard.groups[G]
    for _ in range(6):
        for m in list(group.members.values()):
            if m.active:
                _hb(shard, m.member_id, m.epoch, now=now, owned=set(m.assigned), instance_id=m.instance_id)
    assert group.state == STABLE


def test_a_join_naming_its_own_member_id_is_given_that_id():
    shard = GroupShard(0)
    result = _hb(shard, "client-made-a")
    assert result.member_id == "client-made-a"
    assert list(shard.groups[G].members) == ["client-made-a"]
    assert _hb(shard, "").member_id not in ("", "client-made-a")   # no id: the coordinator makes one


def test_a_join_sent_again_after_its_answer_was_lost_does_not_make_a_second_member():
    """KIP-1082's reason: the retried join names the same id, so the group keeps one member."""
    shard = GroupShard(0)
    first = _hb(shard, "a")
    epoch = shard.groups[G].group_epoch
    again = _hb(shard, "a", 0, now=1)                    # the first answer never arrived
    assert again.member_id == "a" and again.assignment == first.assignment
    assert list(shard.groups[G].members) == ["a"] and shard.groups[G].group_epoch == epoch


def test_a_dynamic_member_that_left_joins_again_under_the_same_id():
    shard = GroupShard(0)
    _hb(shard, "a")
    _hb(shard, "b", now=1)
    _settle(shard, now=2)
    _hb(shard, "a", -1, now=3)
    assert list(shard.groups[G].members) == ["b"]
    assert _hb(shard, "a", 0, now=4).member_id == "a"
    assert sorted(shard.groups[G].members) == ["a", "b"]


def test_a_join_naming_a_member_at_a_later_epoch_is_fenced():
    """Guard (already matched): testConsumerGroupMemberEpochValidation: epoch 0 is neither the
    member's epoch nor its previous one once it moved on twice."""
    shard = GroupShard(0)
    _hb(shard, "a")
    _settle(shard)
    _hb(shard, "b", now=1)
    _settle(shard, now=2)
    member = shard.groups[G].members["a"]
    assert member.previous_epoch > 0
    with pytest.raises(FencedMemberEpochError):
        _hb(shard, "a", 0, now=3)


def test_a_static_member_back_after_leaving_for_now_gets_its_partitions_under_the_same_id():
    """Its member id is the consumer's for its lifetime: a static member that left with -2 (its
    poll() was late) joins again naming it, and gets its partitions back with no rebalance."""
    shard = GroupShard(0)
    _hb(shard, "a", instance_id="pod-a")
    _hb(shard, "b", now=1, instance_id="pod-b")
    _settle(shard, now=2)
    group = shard.groups[G]
    held, epoch = set(group.members["a"].assigned), group.group_epoch
    _hb(shard, "a", -2, now=3, instance_id="pod-a")
    back = _hb(shard, "a", 0, now=4, instance_id="pod-a")
    assert back.member_id == "a" and back.assignment == held
    assert group.group_epoch == epoch and sorted(group.members) == ["a", "b"]
    assert "a" not in group.fenced_members


def test_a_fenced_static_member_joining_again_under_its_id_is_not_fenced_again():
    shard = GroupShard(0)
    _hb(shard, "a", instance_id="pod-a")
    _settle(shard)
    member = shard.groups[G].members["a"]
    with pytest.raises(FencedMemberEpochError):
        _hb(shard, "a", member.epoch + 3, now=1, instance_id="pod-a")
    back = _hb(shard, "a", 0, now=2, instance_id="pod-a")
    assert back.member_id == "a" and back.assignment == {("t", p) for p in range(4)}


def test_a_new_incarnation_of_a_static_member_replaces_the_old_one_on_any_coordinator():
    """The new process names a new id and takes the group.instance.id over; the old incarnation,
    also one still joining (epoch 0) and also after the group's coordinator moved, is fenced."""
    records: list = []
    shard = GroupShard(0)
    _hb(shard, "b", records=records)
    _settle(shard)
    _hb(shard, "old", now=1, instance_id="pod-1", records=records)
    assert shard.groups[G].members["old"].epoch == 0             # still waiting for b to let go
    new = _hb(shard, "new", now=2, instance_id="pod-1", records=records)
    assert new.member_id == "new" and sorted(shard.groups[G].members) == ["b", "new"]
    with pytest.raises(FencedInstanceIdError):
        _hb(shard, "old", 0, now=3, instance_id="pod-1")

    moved = GroupShard(0)
    moved.load(records, now_ms=4)                                # another broker coordinates it now
    with pytest.raises(FencedInstanceIdError):
        _hb(moved, "old", 0, now=5, instance_id="pod-1")
    assert sorted(moved.groups[G].members) == ["b", "new"]
