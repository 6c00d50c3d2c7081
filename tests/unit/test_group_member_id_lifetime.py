"""KIP-1082 on the consumer's side (broker/client/membership.py): the consumer generates its member
id once and joins under it for its lifetime (Kafka's ``AbstractMembershipManager.memberId``,
librdkafka's ``rd_kafka_cgrp_new`` for the consumer protocol), also when it joins again after
being fenced, after leaving for a late ``poll()`` and after ``unsubscribe()``. Driven against the
real coordinator in-process, as tests/unit/test_client_membership.py does."""
from __future__ import annotations

import pytest

from broker.errors import FencedMemberEpochError, UnknownMemberIdError
from tests.unit.test_client_membership import G, AppSide, InProcessCoordinator, _joined, _wait

pytestmark = pytest.mark.unit


class _Coordinator(InProcessCoordinator):
    """The in-process coordinator with the consumer's member id, as the consumer's
    ``CoordinatorClient`` carries it for every membership of the consumer."""

    def __init__(self, sizes):
        super().__init__(sizes)
        self.member_id = "consumer-made-id"


@pytest.fixture
def coordinator():
    return _Coordinator({"t": 2})


@pytest.fixture
def app(coordinator):
    made = []
    yield lambda **conf: made.append(AppSide(coordinator, **conf)) or made[-1]
    for a in made:
        if a._membership is not None:
            a._membership.close(1.0)


def test_the_first_join_already_names_the_consumers_own_member_id(coordinator, app):
    a = app()
    _joined(a)
    joins = [r for r in coordinator.requests if r.member_epoch == 0]
    assert joins and all(r.member_id == coordinator.member_id for r in joins)
    assert a._membership.metadata()[0] == coordinator.member_id
    assert list(coordinator.shard.groups[G].members) == [coordinator.member_id]


@pytest.mark.parametrize("error", [FencedMemberEpochError("fenced"), UnknownMemberIdError("unknown")])
def test_joining_again_after_a_fence_or_removal_keeps_the_member_id(coordinator, app, error):
    a = app()
    _joined(a)
    coordinator.errors.append(error)
    _wait(lambda: a._membership.assignment_lost)
    a.poll_until(lambda: a.calls[-1:] == [("assign", [("t", 0), ("t", 1)])], timeout=5.0)
    assert a._membership.metadata()[0] == coordinator.member_id
    assert list(coordinator.shard.groups[G].members) == [coordinator.member_id]   # one member, not two


def test_subscribing_again_after_unsubscribe_joins_under_the_same_member_id(coordinator, app):
    a = app()
    _joined(a)
    a.unsubscribe()
    assert not coordinator.shard.groups.get(G) or not coordinator.shard.groups[G].members
    a.calls.clear()
    _joined(a)
    assert list(coordinator.shard.groups[G].members) == [coordinator.member_id]

