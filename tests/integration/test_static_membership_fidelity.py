"""Group membership as librdkafka keeps it, against a real broker: what a member does when it cannot
reach its group's coordinator for longer than its session, and the rebalance callbacks of a member
left with nothing."""
from __future__ import annotations

import time

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.errors import NetworkError
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GROUP_CONFIG = {"group.min.session.timeout.ms": 300, "group.consumer.heartbeat.interval.ms": 200,
                "offsets.topic.num.partitions": 1}
SESSION_MS = 2000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from tests.conftest import BrokerProcess
    b = BrokerProcess(str(tmp_path_factory.mktemp("static-membership")), GROUP_CONFIG).start()
    yield b
    b.kill9()


class Tracked:
    """A subscribed consumer and what its callbacks and polls saw."""

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str = "range"):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 200,
                                  "partition.assignment.strategy": strategy})
        self.events: list[tuple[str, list[int]]] = []
        self.records: list[tuple[int, int]] = []
        self.consumer.subscribe([topic], on_assign=self._on("assign"), on_revoke=self._on("revoke"),
                                on_lost=self._on("lost"))

    def _on(self, kind: str):
        return lambda c, ps: self.events.append((kind, sorted(tp.partition for tp in ps)))

    def poll(self) -> None:
        """One poll (the rebalance callbacks run in it); a record is processed and committed."""
        m = self.consumer.poll(0.02)
        if m is not None and m.error() is None:
            self.records.append((m.partition(), m.offset()))
            self.consumer.commit(m, asynchronous=False)

    @property
    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}


def _cut_heartbeats(consumer: Consumer) -> callable:
    """Make the consumer's heartbeats fail as when its coordinator is unreachable; fetches and
    commits still work. Returns the function that heals the cut."""
    coordinator = consumer._membership.coordinator
    real = coordinator.call

    def call(method, request, timeout=None):
        if method == "ConsumerGroupHeartbeat":
            raise NetworkError("coordinator unreachable")
        return real(method, request, timeout)

    coordinator.call = call
    return lambda: setattr(coordinator, "call", real)


def test_a_member_without_a_successful_heartbeat_for_its_session_drops_its_partitions_as_lost(broker, topic_name):
    """librdkafka's ``rd_kafka_cgrp_session_timeout_check``: after session.timeout.ms without a
    successful heartbeat response the assignment is lost (``on_lost``) and the member rejoins. It
    used to go on consuming its partitions after the coordinator had handed them to another member,
    so both processed the same records at once; once back, it resumes from the committed offsets."""
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic_name, value=b"%d" % i, partition=i % 2)
        assert producer.flush(30) == 0

    cut, other = Tracked(broker.bootstrap, "cut-off", topic_name), Tracked(broker.bootstrap, "cut-off", topic_name)
    try:
        def step(*members):
            for m in members:
                m.poll()
            return True

        wait_until(lambda: step(cut, other) and len(cut.owned) == 1 and len(other.owned) == 1, 30, 0,
                   "one partition each")
        produce(20)
        wait_until(lambda: step(cut, other) and len(cut.records) + len(other.records) == 20, 30, 0,
                   "the first records processed")
        (mine,) = cut.owned
        heal = _cut_heartbeats(cut.consumer)
        wait_until(lambda: step(cut, other) and other.owned == {0, 1}, 30, 0,
                   "the coordinator to expire the cut-off member")
        wait_until(lambda: step(cut, other) and ("lost", [mine]) in cut.events and not cut.owned,
                   2 * SESSION_MS / 1000 + 5, 0, "the cut-off member to treat its partition as lost")
        seen = len(cut.records)
        produce(20)
        wait_until(lambda: step(cut, other) and len(other.records) == 40 - seen, 30, 0,
                   "the other member to process the new records")
        assert len(cut.records) == seen, "only the partitions' new owner processes them"

        heal()
        wait_until(lambda: step(cut, other) and len(cut.owned) == 1 and len(other.owned) == 1, 30, 0,
                   "the member back in the group")
        produce(20)
        wait_until(lambda: step(cut, other) and len(cut.records) + len(other.records) == 60, 30, 0,
                   "every record processed")
        processed = cut.records + other.records
        assert sorted(processed) == sorted({(p, o) for p in range(2) for o in range(30)}), \
            "each record exactly once: every commit went through, so nothing is read again"
    finally:
        cut.consumer.close()
        other.consumer.close()
        producer.flush(5)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_member_left_with_nothing_hears_on_assign_with_an_empty_list(broker, topic_name, strategy):
    """librdkafka calls the rebalance callback with every assignment a rebalance brings
    (``rd_kafka_cgrp_handle_assignment``, ``rd_kafka_rebalance_op_incr``), an empty one too, so an
    application waiting for ``on_assign`` knows its consumer is in the group. A member that joined
    to find nothing free, or whose partitions all went to another, never heard ``on_assign``."""
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    group = f"empty-{strategy}"
    members = []
    try:
        members.append(Tracked(broker.bootstrap, group, topic_name, strategy))
        first = members[0]
        wait_until(lambda: first.poll() or first.owned == {0}, 30, 0, "the first member's partition")
        members.append(Tracked(broker.bootstrap, group, topic_name, strategy))
        second = members[1]

        def settled():
            first.poll()
            second.poll()
            return len(first.owned | second.owned) == 1 and ("assign", []) in (first.events + second.events)
        wait_until(settled, 30, 0, "the member without a partition to hear on_assign([])")
        empty = first if not first.owned else second
        assert empty.events[-1] == ("assign", []), empty.events
        assert not empty.owned and empty.consumer.assignment() == []
    finally:
        for m in members:
            m.consumer.close()


def test_positions_of_a_lost_assignment_are_not_auto_committed_after_the_member_joined_again(broker, topic_name):
    """librdkafka's ``rd_kafka_cgrp_offsets_commit`` refuses to commit an assignment that is lost
    (``_ASSIGNMENT_LOST``) until the rebalance callback ran. The auto-commit in ``poll()`` used to
    run before ``on_lost``: a member that had joined again in the background (so its new epoch was
    accepted) committed its old position of a partition another member owned by then, moving that
    member's committed offset back (its records were processed again)."""
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    group = "lost-auto-commit"
    commits: list = []
    auto = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 200, "enable.auto.commit": True,
                     "auto.commit.interval.ms": 3000, "on_commit": lambda err, ps: commits.append(err)})
    lost: list = []
    auto.subscribe([topic_name], on_lost=lambda c, ps: lost.extend(tp.partition for tp in ps))
    other = Tracked(broker.bootstrap, group, topic_name)
    try:
        def both(condition):
            auto.poll(0.02)
            other.poll()
            return condition()

        wait_until(lambda: both(lambda: len(auto.assignment()) == 1 and len(other.owned) == 1), 30, 0,
                   "one partition each")
        (mine,) = [tp.partition for tp in auto.assignment()]
        producer.produce(topic_name, value=b"first", partition=mine)
        producer.flush(30)
        wait_until(lambda: both(lambda: commits), 30, 0, "an automatic commit")
        committed_at = time.monotonic()   # the next automatic commit is due 3 s later
        for i in range(20):
            producer.produce(topic_name, value=b"%d" % i, partition=mine)
        producer.flush(30)
        wait_until(lambda: both(lambda: auto.position([TopicPartition(topic_name, mine)])[0].offset == 21),
                   2, 0, "the records read, not yet committed")
        before = auto.memberid()
        heal = _cut_heartbeats(auto)   # and ``auto`` is busy: no poll() for a while
        wait_until(lambda: (other.poll(), other.owned == {0, 1})[1], 30, 0, "the partition to move")
        for i in range(20):
            producer.produce(topic_name, value=b"%d" % i, partition=mine)
        producer.flush(30)
        wait_until(lambda: (other.poll(), (mine, 40) in other.records)[1], 30, 0,
                   "the new owner to process and commit the partition")
        wait_until(lambda: (other.poll(), auto.memberid() is None)[1], 30, 0,
                   "the busy member out of the group (no successful heartbeat for its session)")
        heal()
        wait_until(lambda: (other.poll(), auto.memberid() == before)[1], 30, 0,
                   "the busy member back in the group under the same member id (its heartbeat thread joins again)")
        wait_until(lambda: (other.poll(), time.monotonic() - committed_at > 3.2)[1], 10, 0,
                   "auto.commit.interval.ms to pass: the busy member's next poll() commits")
        auto.poll(0.02)
        assert lost == [mine]
        assert auto.committed([TopicPartition(topic_name, mine)], 10)[0].offset == 41, \
            "the new owner's committed offset stays"
    finally:
        auto.close()
        other.consumer.close()
        producer.flush(5)


def test_an_argument_less_commit_of_a_lost_assignment_fails_until_poll_has_handled_it(broker, topic_name):
    """librdkafka's ``rd_kafka_cgrp_offsets_commit``: while the assignment is lost and the rebalance
    callback has not run, ``commit()`` without offsets is ``_ASSIGNMENT_LOST``; it used to commit
    the old positions under the member's new epoch, moving back its successor's offsets."""
    from broker.client import KafkaError, KafkaException
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic_name, value=b"%d" % i)
    assert producer.flush(30) == 0
    member = Tracked(broker.bootstrap, "lost-commit", topic_name)
    try:
        wait_until(lambda: member.consumer.poll(0.02) is not None or False, 30, 0, "a first record")
        _cut_heartbeats(member.consumer)
        wait_until(lambda: member.consumer._membership.assignment_lost, 2 * SESSION_MS / 1000 + 5, 0.05,
                   "the session to run out")
        with pytest.raises(KafkaException) as raised:
            member.consumer.commit(asynchronous=False)
        assert raised.value.args[0].code() == KafkaError._ASSIGNMENT_LOST
        member.consumer.poll(0.02)                       # handles the loss: on_lost
        assert ("lost", [0]) in member.events
        with pytest.raises(KafkaException) as raised:
            member.consumer.commit(asynchronous=False)
        assert raised.value.args[0].code() == KafkaError._NO_OFFSET    # nothing assigned now
    finally:
        member.consumer.close()


def test_a_fenced_static_member_gets_a_fatal_error_event_from_poll_not_an_exception(broker, topic_name):
    """librdkafka's ``rd_kafka_set_fatal_error`` for FENCED_INSTANCE_ID: a consumer's fatal error is
    a ``_FATAL`` event that ``poll()`` returns (``fatal()`` true), not an exception nor an
    ``error_cb``; its partitions go without a rebalance callback, and commits and ``subscribe()``
    fail with ``_FATAL``. ``poll()`` used to raise FencedInstanceIdError, which ends a
    confluent-kafka poll loop (``if msg.error(): ...``) with a traceback instead."""
    from broker.client import KafkaError, KafkaException
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    errors: list = []
    events: list = []

    def member():
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fenced", "group.instance.id": "pod-1",
                      "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 200, "error_cb": errors.append})
        c.subscribe([topic_name], on_assign=lambda _, ps: events.append(("assign", len(ps))),
                    on_revoke=lambda _, ps: events.append(("revoke", len(ps))),
                    on_lost=lambda _, ps: events.append(("lost", len(ps))))
        return c

    old = member()
    new = None
    try:
        wait_until(lambda: old.poll(0.02) is None and bool(old.assignment()), 30, 0, "the first instance's partition")
        new = member()                                   # the same instance id started again
        wait_until(lambda: new.poll(0.02) is None and bool(new.assignment()), 30, 0, "the new instance's partition")
        seen: list = []
        wait_until(lambda: (m := old.poll(0.05)) is not None and m.error() is not None and seen.append(m) is None,
                   30, 0, "the old instance's fatal event")
        error = seen[0].error()
        assert error.code() == KafkaError._FATAL and error.fatal()
        assert "fenced" in error.str() and "group.instance.id" in error.str()
        assert old.assignment() == [] and events == [("assign", 1), ("assign", 1)]
        assert errors == []
        with pytest.raises(KafkaException) as raised:
            old.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        assert raised.value.args[0].code() == KafkaError._FATAL
        with pytest.raises(KafkaException) as raised:
            old.subscribe([topic_name])
        assert raised.value.args[0].code() == KafkaError._FATAL
        assert old.poll(0.05) is None                    # one event; the consumer stays quiet
        assert new.assignment() == [TopicPartition(topic_name, 0)]
    finally:
        old.close()
        if new is not None:
            new.close()
