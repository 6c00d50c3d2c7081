"""A heartbeat at the member's previous epoch is accepted (Kafka's
``throwIfConsumerGroupMemberEpochIsInvalid``: the answer that moved it on may have been lost), but
it may be an older request overtaken by later ones: it must never let partitions go that the member
was given at its current epoch and may be reading. Found by tests/simulation/membership_sim.py."""
from __future__ import annotations

import pytest

from broker.group.coordinator import GroupShard

pytestmark = pytest.mark.unit

G = "g"
SIZES = {"t": 2}


def _beat(shard, member_id, epoch, now, owned=(), instance_id=""):
    result, _ = shard.heartbeat(G, member_id, epoch, partitions=SIZES, now_ms=now, topics=["t"],
                                owned=set(owned), instance_id=instance_id, assignor_name="range")
    return result


@pytest.mark.parametrize("instance_id", ["", "i1"])
def test_an_overtaken_join_does_not_hand_on_what_the_member_took_up(instance_id):
    shard = GroupShard(0)
    first = _beat(shard, "m1", 0, 1, instance_id=instance_id)   # the join's answer arrives...
    assert first.assignment == {("t", 0), ("t", 1)}
    _beat(shard, "m1", first.member_epoch, 2, owned={("t", 0), ("t", 1)}, instance_id=instance_id)
    _beat(shard, "m2", 0, 3)                                    # m2 joins: range splits the topic
    _beat(shard, "m1", 0, 4, owned=(), instance_id=instance_id)  # ...and m1's first try, held up, too
    second = _beat(shard, "m2", 0, 5)
    assert second.assignment == set(), "m2 was given a partition m1 still reads"
    assert second.reconciling


def test_an_overtaken_join_does_not_count_as_letting_go_of_what_the_answer_gave():
    """m1 took up what its join's answer gave but has not said so at the new epoch yet."""
    shard = GroupShard(0)
    first = _beat(shard, "m1", 0, 1)
    assert first.assignment == {("t", 0), ("t", 1)}
    _beat(shard, "m2", 0, 2)
    _beat(shard, "m1", 0, 3, owned=())   # the same join, delivered again
    assert _beat(shard, "m2", 0, 4).assignment == set()


def test_a_lost_answer_retried_at_the_previous_epoch_still_moves_on():
    """guard (already matched): a member that gave everything up (eager) is moved to the next
    epoch; that answer is lost, and its retry at the previous epoch gets the same answer, while
    the other member gets the rest."""
    shard = GroupShard(0)
    first = _beat(shard, "m1", 0, 1)
    _beat(shard, "m1", first.member_epoch, 2, owned=first.assignment)
    _beat(shard, "m2", 0, 3)
    assert _beat(shard, "m1", first.member_epoch, 4, owned=first.assignment).assignment == set()  # give up all
    moved = _beat(shard, "m1", first.member_epoch, 5, owned=())                                 # answer lost
    again = _beat(shard, "m1", first.member_epoch, 6, owned=())
    assert (again.member_epoch, again.assignment) == (moved.member_epoch, moved.assignment)
    assert moved.member_epoch > first.member_epoch and len(moved.assignment) == 1
    assert _beat(shard, "m2", 0, 7).assignment == {("t", 0), ("t", 1)} - moved.assignment
