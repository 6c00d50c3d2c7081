"""An eager member's assignment can grow in steps within one rebalance: the coordinator hands a
partition over only once its old owner let it go. Eager means the whole assignment is handed over
at once (``on_revoke`` with everything, then ``on_assign`` with all of it, as librdkafka's eager
rebalance does), so a partition the member kept is never dropped from what ``poll()`` reads."""
from __future__ import annotations

import pytest

from broker.client import Consumer
from broker.client.assignment import EAGER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


class _Steps:
    """A membership whose coordinator hands over ``{t-3}``, then ``{t-2, t-3}``."""

    def __init__(self, *assignments):
        self.assignments, self.owned = list(assignments), None

    def pending(self):
        return self.assignments[0], False, None

    def applied(self, owned):
        self.owned = set(owned)

    def poll_exceeded(self):
        return None

    def polled(self):
        pass

    def joined_empty(self):
        return False

    def metadata(self):
        return "", -1   # not in the group as far as offset fetches go: they name no member


def test_a_grown_eager_assignment_is_handed_over_whole(shared_broker, topic_name):
    seen = []
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name,
                  "partition.assignment.strategy": "range"})
    try:
        c._protocol = EAGER
        c._callbacks = {"assign": lambda consumer, tps: seen.append(("assign", [tp.partition for tp in tps])),
                        "revoke": lambda consumer, tps: seen.append(("revoke", [tp.partition for tp in tps]))}
        steps = _Steps({(topic_name, 3)}, {(topic_name, 2), (topic_name, 3)})
        c._membership = steps
        c._group_step()
        assert [tp.partition for tp in c.assignment()] == [3]
        steps.assignments.pop(0)
        c._group_step()
        assert [tp.partition for tp in c.assignment()] == [2, 3], "partition 3 must still be read"
        assert seen == [("assign", [3]), ("revoke", [3]), ("assign", [2, 3])]
        assert steps.owned == {(topic_name, 2), (topic_name, 3)}
    finally:
        c._membership = None
        c.close()
