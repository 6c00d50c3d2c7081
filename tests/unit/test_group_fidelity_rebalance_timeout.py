"""The rebalance timeout of a member asked to give partitions up, as Kafka's
``scheduleConsumerGroupRebalanceTimeout``: it is scheduled afresh with each revocation the
coordinator hands out, so a member that let go of everything it was asked to is timed anew for
what a newer assignment takes from it; one that holds on is removed once its timeout passes,
however the group changes meanwhile. (``cooperative-sticky``; ``rebalance.timeout.ms`` 300.)"""
from __future__ import annotations

import pytest

from broker.group.group import ConsumerGroup

pytestmark = pytest.mark.unit

P = {"t": 6}
TIMEOUT = 300
ALL = {("t", p) for p in range(6)}


def _beat(g: ConsumerGroup, member_id: str, epoch: int, now: int, owned=None):
    return g.heartbeat(member_id, epoch, topics=["t"], assignor_name="cooperative-sticky", partitions=P,
                       now_ms=now, session_timeout_ms=10_000, rebalance_timeout_ms=TIMEOUT, owned=owned)


def _a_told_to_give_up_half() -> tuple[ConsumerGroup, object]:
    g = ConsumerGroup("g")
    a = _beat(g, "a", 0, 0)
    a = _beat(g, "a", a.member_epoch, 1, a.assignment)
    assert a.assignment == ALL
    _beat(g, "b", 0, 10)
    a = _beat(g, "a", a.member_epoch, 20, ALL)            # its on_revoke is slow: it still holds all
    assert len(a.assignment) == 3 and a.reconciling
    return g, a


def test_a_member_that_keeps_up_with_successive_revocations_stays():
    g, a = _a_told_to_give_up_half()
    _beat(g, "c", 0, 250)                                 # the group changes again before a is done
    a = _beat(g, "a", a.member_epoch, 260, a.assignment)  # a let go of all it was first asked to
    assert len(a.assignment) == 2                         # and is now asked for one more
    assert g.expire(P, 20 + TIMEOUT + 10) == []           # timed from 260, not from 20
    assert "a" in g.members
    assert g.expire(P, 260 + TIMEOUT + 1) == ["a"]        # but not for ever if it holds on to that one


def test_a_member_that_holds_on_is_removed_whatever_the_group_does_meanwhile():
    g, a = _a_told_to_give_up_half()
    _beat(g, "c", 0, 250)
    a = _beat(g, "a", a.member_epoch, 260, ALL)           # still holding what it was asked for at 20
    assert g.expire(P, 20 + TIMEOUT + 1) == ["a"]
