"""The heartbeat thread survives an unexpected exception (a bug, a channel closed under it): it is
logged and the heartbeat is sent again after ``retry.backoff.ms``, as Kafka's consumer network
thread catches what ``runOnce`` throws and goes on. A heartbeat thread that died silently would let
the member's session run out at the coordinator, its partitions go to others, while the application
went on reading them with no ``on_lost``."""
from __future__ import annotations

import pytest

from tests.unit.test_client_membership import _joined, _wait, app, coordinator  # noqa: F401 (fixtures)

pytestmark = pytest.mark.unit


def test_an_unexpected_heartbeat_exception_does_not_stop_the_heartbeats(coordinator, app):  # noqa: F811
    a = app()
    _joined(a)
    membership = a._membership
    asked = len(coordinator.requests)
    coordinator.errors.append(RuntimeError("a bug below the heartbeat"))
    _wait(lambda: len(coordinator.requests) >= asked + 3, timeout=5.0)  # beats on after it
    assert membership._thread.is_alive()
    for _ in range(3):
        a._group_step()
    assert a.calls == [] and a._owned == {("t", 0), ("t", 1)}
