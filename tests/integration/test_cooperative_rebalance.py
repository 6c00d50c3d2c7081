"""Cooperative (``cooperative-sticky``) group members against a real broker: each member ends up
with its fair share, the rebalance callbacks receive incremental lists as confluent-kafka's do,
and ``assignment()`` is always what the callbacks imply."""
from __future__ import annotations

import threading

import pytest

from broker.client import AdminClient, Consumer, KafkaError, KafkaException, NewTopic
from tests.conftest import BrokerProcess, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GROUP_CONFIG = {"group.min.session.timeout.ms": 300, "group.consumer.heartbeat.interval.ms": 200,
                "offsets.topic.num.partitions": 3}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("cooperative")), GROUP_CONFIG).start()
    yield b
    b.kill9()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


class Member:
    """A cooperative-sticky member polled by its own thread, recording its rebalance callbacks
    and checking, at each, that ``assignment()`` is what the callbacks so far imply. With
    ``apply=True`` the callbacks change the assignment themselves, as confluent-kafka's
    documentation shows; otherwise the consumer does it for them."""

    def __init__(self, bootstrap: str, group: str, topic: str, apply: bool = False):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "session.timeout.ms": 2000,
                                  "heartbeat.interval.ms": 200, "partition.assignment.strategy": "cooperative-sticky"})
        self.events: list[tuple[str, list[int]]] = []
        self.apply = apply
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _check(self, kind: str, partitions) -> None:
        implied = self.implied()
        current = {tp.partition for tp in self.consumer.assignment()}
        if current != implied:
            self.errors.append(f"at {kind} {partitions}: assignment() {sorted(current)}, callbacks imply {sorted(implied)}")
        given = {tp.partition for tp in partitions}
        if kind == "assign" and given & implied:
            self.errors.append(f"assigned again: {sorted(given & implied)} (already owned {sorted(implied)})")
        if kind == "revoke" and given - implied:
            self.errors.append(f"revoked {sorted(given - implied)} it did not own ({sorted(implied)})")

    def _on_assign(self, consumer, partitions):
        with self._lock:
            self._check("assign", partitions)
            self.events.append(("assign", sorted(tp.partition for tp in partitions)))
        if self.apply:
            consumer.incremental_assign(partitions)

    def _on_revoke(self, consumer, partitions):
        with self._lock:
            self._check("revoke", partitions)
            self.events.append(("revoke", sorted(tp.partition for tp in partitions)))
        if self.apply:
            consumer.incremental_unassign(partitions)

    def implied(self) -> set[int]:
        """What the callbacks so far say this member owns."""
        owned: set[int] = set()
        for kind, partitions in self.events:
            owned = owned | set(partitions) if kind == "assign" else owned - set(partitions)
        return owned

    def _run(self):
        while not self._stop.is_set():
            self.consumer.poll(0.05)

    @property
    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def settled(self, count: int) -> bool:
        with self._lock:
            return len(self.owned) == count and self.owned == self.implied()

    def close(self):
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def _settle(members: list[Member], counts: list[int], what: str) -> None:
    wait_until(lambda: all(m.settled(n) for m, n in zip(members, counts)), 30, 0.05, what)
    for m in members:
        assert not m.errors, m.errors


@pytest.mark.parametrize("apply", [False, True], ids=["consumer-applies", "callbacks-apply"])
def test_four_partitions_go_four_then_two_and_two_then_four(broker, topic_name, apply):
    create_topic(broker.bootstrap, topic_name, 4)
    a = Member(broker.bootstrap, topic_name, topic_name, apply)
    b = None
    try:
        _settle([a], [4], "the first member to own all four partitions")
        assert a.events == [("assign", [0, 1, 2, 3])]
        b = Member(broker.bootstrap, topic_name, topic_name, apply)
        _settle([a, b], [2, 2], "two members with two partitions each")
        assert a.owned.isdisjoint(b.owned) and a.owned | b.owned == {0, 1, 2, 3}
        # Incremental: a gave up only the two that moved, and was not handed its own back.
        assert a.events == [("assign", [0, 1, 2, 3]), ("revoke", sorted(b.owned))], a.events
        assert b.events == [("assign", sorted(b.owned))], b.events
        moved = sorted(b.owned)
        b.close()
        b = None
        _settle([a], [4], "the remaining member to own all four again")
        assert a.events[2:] == [("assign", moved)], a.events
    finally:
        a.close()
        if b is not None:
            b.close()


@pytest.mark.parametrize("apply", [False, True], ids=["consumer-applies", "callbacks-apply"])
def test_two_partitions_go_one_each_then_both_to_the_one_left(broker, topic_name, apply):
    create_topic(broker.bootstrap, topic_name, 2)
    a = Member(broker.bootstrap, topic_name, topic_name, apply)
    b = Member(broker.bootstrap, topic_name, topic_name, apply)
    try:
        _settle([a, b], [1, 1], "two members with one partition each")
        assert a.owned | b.owned == {0, 1}
        kept, moved = set(a.owned), set(b.owned)
        b.close()
        _settle([a], [2], "the remaining member to own both")
        # a kept its partition throughout and was handed only the one b gave back.
        assert a.events[-1] == ("assign", sorted(moved)) and kept < a.owned, a.events
        assert not [e for e in a.events if e[0] == "revoke" and kept & set(e[1])], a.events
    finally:
        a.close()


def test_assign_inside_a_cooperative_on_assign_fails_instead_of_dropping_what_the_member_owns(broker, topic_name):
    """The way a member used to end up with one partition where it should have two: an eager-style
    ``on_assign`` calling ``assign(partitions)`` replaced the whole assignment with the newly added
    ones. confluent-kafka refuses it with ``_STATE`` (raised from poll), and so does Riverlog."""
    create_topic(broker.bootstrap, topic_name, 2)
    errors = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                  "partition.assignment.strategy": "cooperative-sticky"})
    try:
        c.subscribe([topic_name], on_assign=lambda consumer, partitions: consumer.assign(partitions))

        def polled_until_error():
            try:
                c.poll(0.05)
            except KafkaException as e:
                errors.append(e)
            return errors
        wait_until(polled_until_error, 30, 0, "poll() to raise the callback's error")
        assert errors[0].args[0].code() == KafkaError._STATE
        assert "incremental_assign" in errors[0].args[0].str()
        assert c.assignment() == []  # the callback made an assign call, so the consumer made none
    finally:
        c.close()
