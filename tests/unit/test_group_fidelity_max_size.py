"""``group.consumer.max.size`` and static members, as Kafka's ``throwIfConsumerGroupIsFull`` since
KAFKA-20601: a full group still lets a restarted static member (a new process, so a new member id,
under its ``group.instance.id``) take its own place, with its partitions and no rebalance, and tells
the incarnation it replaced ``FENCED_INSTANCE_ID``; a member it does not have is still refused with
``GROUP_MAX_SIZE_REACHED``. Both refusals are fatal to the consumer, so answering a restarted pod
``GROUP_MAX_SIZE_REACHED`` killed every rolling restart of a group at its limit."""
from __future__ import annotations

import pytest

from broker.errors import FencedInstanceIdError, GroupMaxSizeReachedError
from broker.group.coordinator import GroupShard

pytestmark = pytest.mark.unit

G = "g"
PARTITIONS = {"t": 4}


def _beat(shard: GroupShard, member_id: str, epoch: int, now: int, instance_id: str = "", owned=None):
    result, _ = shard.heartbeat(G, member_id, epoch, partitions=PARTITIONS, now_ms=now, instance_id=instance_id,
                                topics=["t"], assignor_name="range", session_timeout_ms=45_000, owned=owned,
                                max_size=2)
    return result


def _full_group_of_two_static_members() -> tuple[GroupShard, dict]:
    shard = GroupShard(0)
    members = {pod: _beat(shard, f"{pod}-a", 0, 0, instance_id=pod) for pod in ("pod-1", "pod-2")}
    for now in (1, 2, 3):
        for pod, r in members.items():
            members[pod] = _beat(shard, r.member_id, r.member_epoch, now, instance_id=pod, owned=r.assignment)
    assert shard.groups[G].state == "Stable" and all(r.assignment for r in members.values())
    return shard, members


@pytest.mark.parametrize("left_first", [True, False], ids=["left-for-now", "crashed"])
def test_a_restarted_static_member_takes_its_place_in_a_full_group(left_first):
    shard, members = _full_group_of_two_static_members()
    old = members["pod-1"]
    group = shard.groups[G]
    epoch = group.group_epoch
    if left_first:
        _beat(shard, old.member_id, -2, 10, instance_id="pod-1")
    new = _beat(shard, "pod-1-b", 0, 20, instance_id="pod-1")
    assert new.assignment == old.assignment and group.group_epoch == epoch     # no rebalance
    assert sorted(group.members) == ["pod-1-b", "pod-2-a"]
    # the incarnation it replaced is fenced, not told the group is full
    with pytest.raises(FencedInstanceIdError):
        _beat(shard, old.member_id, old.member_epoch, 30, instance_id="pod-1", owned=old.assignment)


def test_a_full_group_still_refuses_a_member_it_does_not_have():
    shard, _ = _full_group_of_two_static_members()
    with pytest.raises(GroupMaxSizeReachedError, match="maximum capacity of 2 members"):
        _beat(shard, "pod-3-a", 0, 10, instance_id="pod-3")
    with pytest.raises(GroupMaxSizeReachedError):
        _beat(shard, "dynamic", 0, 10)
    assert sorted(shard.groups[G].members) == ["pod-1-a", "pod-2-a"]
