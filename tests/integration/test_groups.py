"""Consumer groups against real broker processes: sharing, failover of members, rebalances, offsets."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from broker.client import OFFSET_INVALID, AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.client.group_admin import ConsumerGroupTopicPartitions
from broker.errors import KafkaError, NonEmptyGroupError, UnknownMemberIdError, UnsupportedAssignorError
from tests.conftest import ROOT, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GROUP_CONFIG = {"group.min.session.timeout.ms": 300, "group.consumer.heartbeat.interval.ms": 200,
                "offsets.topic.num.partitions": 3}
SESSION_MS = 2000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from tests.conftest import BrokerProcess
    b = BrokerProcess(str(tmp_path_factory.mktemp("groups")), GROUP_CONFIG).start()
    yield b
    b.kill9()


def make_topic(bootstrap: str, name: str, partitions: int = 6, records: int = 600, rf: int = 1) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, rf)])[name].result(30)
    produce(bootstrap, name, records)


def produce(bootstrap: str, name: str, records: int, start: int = 0) -> None:
    with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as p:
        for i in range(start, start + records):
            p.produce(name, key=b"%d" % i, value=b"v%d" % i)
        assert p.flush(30) == 0


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 200,
                     **{k if k.startswith("on_") else k.replace("_", "."): v for k, v in extra.items()}})


class Member:
    """A subscribed consumer polled by its own thread, recording what it processed and its callbacks."""

    def __init__(self, bootstrap: str, group: str, topic: str, commit_each: bool = False, **extra):
        self.consumer = consumer(bootstrap, group, **extra)
        self.records: list[tuple[int, int]] = []
        self.events: list[tuple[str, list[int]]] = []
        self.commit_each = commit_each
        self._stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _assigned(self, c, partitions):
        self.events.append(("assign", sorted(tp.partition for tp in partitions)))

    def _revoked(self, c, partitions):
        self.events.append(("revoke", sorted(tp.partition for tp in partitions)))

    def _run(self):
        while not self._stop.is_set():
            for m in self.consumer.consume(500, 0.05):
                assert m.error() is None, m.error()
                self.records.append((m.partition(), m.offset()))
                if self.commit_each:
                    self.consumer.commit(m, asynchronous=False)

    @property
    def alive(self) -> bool:
        """Its polling thread still runs (an error record ends it)."""
        return self._thread.is_alive()

    @property
    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self):
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def test_three_members_share_six_partitions_and_process_every_record_once(broker, topic_name):
    make_topic(broker.bootstrap, topic_name)
    # A session long enough that a starved heartbeat thread (three members in one Python process on
    # a loaded machine) cannot expire it: a lost session hands partitions over without the commit on
    # revocation, and the re-read records are Kafka's at-least-once, not what this test is about.
    members = [Member(broker.bootstrap, "share", topic_name, session_timeout_ms=8000) for _ in range(3)]
    try:
        # The first member to join may read all 600 before the others arrive; the partitions it
        # gives up then move with their committed positions.
        try:
            wait_until(lambda: all(len(m.owned) == 2 for m in members), 60, 0.05, "two partitions each")
        except AssertionError as e:  # say where the group stopped: each member's callbacks and thread
            raise AssertionError(f"{e}; members: {[(m.events, m.owned, m.alive) for m in members]}") from None
        assert set().union(*(m.owned for m in members)) == set(range(6))
        before = [len(m.records) for m in members]
        produce(broker.bootstrap, topic_name, 600, start=600)
        wait_until(lambda: sum(len(m.records) for m in members) >= 1200, 30, 0.05, "all 1,200 records")
        seen = [r for m in members for r in m.records]
        assert len(seen) == len(set(seen)) == 1200
        assert all(len(m.records) > n for m, n in zip(members, before)), "every member processed new records"
    finally:
        for m in members:
            m.close()


_KILLABLE = """
import sys
from broker.client import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "auto.offset.reset": "earliest",
              "session.timeout.ms": %d, "heartbeat.interval.ms": 200, "enable.auto.commit": False})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", *[p.partition for p in ps], flush=True))
while True:
    for m in c.consume(1, 0.1):
        c.commit(m, asynchronous=False)
        print("processed", m.partition(), m.offset(), flush=True)
""" % SESSION_MS


def test_a_killed_member_s_partitions_move_and_resume_from_committed_offsets(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, records=300)
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, broker.bootstrap, "failover", topic_name],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_until(lambda: sum(1 for line in lines if line.startswith("processed")) >= 40, 30, 0.05,
                   "the member to process and commit some records")
        survivor = Member(broker.bootstrap, "failover", topic_name, enable_auto_commit=False)
        # The member's partitions are split between the two; the survivor gets three of the six.
        wait_until(lambda: len(survivor.owned) == 3, 30, 0.05, "a rebalance between the two members")
        proc.kill()
        proc.wait(10)
        killed = time.monotonic()
        wait_until(lambda: len(survivor.owned) == 6, 30, 0.05, "the dead member's partitions to move")
        moved_after = time.monotonic() - killed
        assert moved_after < SESSION_MS / 1000 + 5, moved_after
        ends = [survivor.consumer.get_watermark_offsets(TopicPartition(topic_name, p), 10)[1] for p in range(6)]
        reader.join(10)   # every line the dead member wrote, including those still in the pipe at the kill
        assert not reader.is_alive()
        processed = {tuple(int(x) for x in line.split()[1:]) for line in list(lines) if line.startswith("processed")}
        # Everything is processed, with no gap: the survivor started each moved partition at the
        # offset the dead member had committed (at most the one record it processed but had not
        # committed is processed twice).
        wait_until(lambda: processed | set(survivor.records) >= {(p, o) for p in range(6) for o in range(ends[p])},
                   30, 0.05, "every record processed")
        for p in range(6):
            by_dead = sorted(o for q, o in processed if q == p)
            by_survivor = sorted(o for q, o in survivor.records if q == p)
            if by_dead and by_survivor:
                assert by_survivor[0] <= by_dead[-1] + 1, (p, by_dead[-1], by_survivor[0])
                assert by_survivor[0] >= by_dead[-1], (p, by_dead[-1], by_survivor[0])
        survivor.close()
    finally:
        proc.kill()


def test_a_cooperative_rebalance_leaves_unaffected_partitions_with_their_owners(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, records=100)
    strategy = {"partition_assignment_strategy": "cooperative-sticky"}
    a = Member(broker.bootstrap, "coop", topic_name, **strategy)
    b = Member(broker.bootstrap, "coop", topic_name, **strategy)
    try:
        wait_until(lambda: len(a.owned) == 3 and len(b.owned) == 3, 30, 0.05, "two members with three each")
        before = {"a": set(a.owned), "b": set(b.owned)}
        a.events.clear(), b.events.clear()
        c = Member(broker.bootstrap, "coop", topic_name, **strategy)
        wait_until(lambda: len(a.owned) == len(b.owned) == len(c.owned) == 2, 30, 0.05, "three members with two each")
        # Each old member gave up exactly one partition, and only that one: nothing else was revoked.
        for name, member in (("a", a), ("b", b)):
            revoked = [p for kind, ps in member.events if kind == "revoke" for p in ps]
            assert len(revoked) == 1 and member.owned == before[name] - set(revoked), (name, member.events)
            assert not [e for e in member.events if e[0] == "assign"], member.events
        # The kept partitions were consumed throughout: new records on them arrive while c settles in.
        produce(broker.bootstrap, topic_name, 120, start=100)
        kept = (a.owned | b.owned)
        wait_until(lambda: {p for p, o in a.records + b.records if o >= 10 and p in kept} == kept, 30, 0.05,
                   "new records on the kept partitions")
        c.close()
    finally:
        a.close(), b.close()


def test_an_eager_rebalance_revokes_everything_first(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, records=10)
    a = Member(broker.bootstrap, "eager", topic_name)
    try:
        wait_until(lambda: len(a.owned) == 6, 30, 0.05, "the only member to own everything")
        a.events.clear()
        b = Member(broker.bootstrap, "eager", topic_name)
        wait_until(lambda: len(a.owned) == len(b.owned) == 3, 30, 0.05, "a range assignment of three each")
        assert a.events[0] == ("revoke", list(range(6))), a.events
        assert a.events[1][0] == "assign" and len(a.events[1][1]) == 3, a.events
        b.close()
    finally:
        a.close()


def test_a_static_member_restarting_within_its_session_keeps_its_partitions_without_a_rebalance(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, records=10)
    a = Member(broker.bootstrap, "static", topic_name, group_instance_id="pod-a")
    b = Member(broker.bootstrap, "static", topic_name, group_instance_id="pod-b")
    try:
        wait_until(lambda: len(a.owned) == len(b.owned) == 3, 30, 0.05, "three partitions each")
        mine = set(a.owned)
        epoch = _describe(broker.bootstrap, "static").group_epoch
        b.events.clear()
        a.close()  # a static member leaves "for now"
        a = Member(broker.bootstrap, "static", topic_name, group_instance_id="pod-a")
        wait_until(lambda: a.owned == mine, 30, 0.05, "the restarted member to get its partitions back")
        assert _describe(broker.bootstrap, "static").group_epoch == epoch
        assert b.events == [] and len(b.owned) == 3
    finally:
        a.close(), b.close()


def test_commits_sync_async_and_auto_are_visible_in_committed_and_survive_a_restart(broker_factory, topic_name):
    node = broker_factory(GROUP_CONFIG)
    make_topic(node.bootstrap, topic_name, partitions=2, records=100)
    c = consumer(node.bootstrap, "commits", enable_auto_commit=False)
    c.subscribe([topic_name])
    got = []
    wait_until(lambda: got.extend(m for m in c.consume(100, 0.1) if m.error() is None) or len(got) >= 100, 30, 0.01,
               "100 records")
    last = {m.partition(): m for m in got}
    c.commit(last[0], asynchronous=False)                              # one message, synchronously
    committed = []
    done = threading.Event()
    c.close()
    c = consumer(node.bootstrap, "commits", enable_auto_commit=False,
                 on_commit=lambda err, tps: (committed.append((err, tps)), done.set()))
    c.assign([TopicPartition(topic_name, 1, 0)])
    c.commit(offsets=[TopicPartition(topic_name, 1, 42, metadata="checkpoint-7")], asynchronous=True)
    # on_commit is served from poll()/consume(), as confluent-kafka serves it.
    wait_until(lambda: (c.consume(100, 0.05), done.is_set())[1], 10, 0, "on_commit from consume()")
    assert committed[0][0] is None
    parts = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    assert [(tp.offset, tp.metadata) for tp in c.committed(parts)] == [(last[0].offset() + 1, None), (42, "checkpoint-7")]
    c.close()
    node.stop()
    node.start()
    c = consumer(node.bootstrap, "commits")
    try:
        assert [tp.offset for tp in wait_until(lambda: _committed(c, parts), 30, 0.1, "offsets after restart")] == \
            [last[0].offset() + 1, 42]
        # Auto-commit: consume the rest; close() commits the final positions.
    finally:
        c.close()
    c = consumer(node.bootstrap, "auto", enable_auto_commit=True, auto_commit_interval_ms=100)
    c.subscribe([topic_name])
    n = 0
    deadline = time.monotonic() + 30
    while n < 100 and time.monotonic() < deadline:
        n += sum(1 for m in c.consume(100, 0.1) if m.error() is None)
    c.close()
    c = consumer(node.bootstrap, "auto")
    ends = [c.get_watermark_offsets(tp, 10)[1] for tp in parts]
    assert [tp.offset for tp in c.committed(parts)] == ends
    c.close()


def test_members_with_different_strategy_lists_share_a_common_assignor_and_one_with_none_hears_why(
        broker, topic_name):
    """As Kafka's classic protocol chooses an assignor every member supports; with none in common the
    joining member's poll() raises (and error_cb hears it), instead of it retrying unseen forever."""
    make_topic(broker.bootstrap, topic_name, records=10)
    a = Member(broker.bootstrap, "lists", topic_name, partition_assignment_strategy="range,roundrobin")
    b = Member(broker.bootstrap, "lists", topic_name, partition_assignment_strategy="roundrobin")
    errors = []
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lists", "partition.assignment.strategy": "range",
                  "error_cb": errors.append})
    try:
        wait_until(lambda: len(a.owned) == len(b.owned) == 3, 30, 0.05, "three partitions each")
        assert _describe(broker.bootstrap, "lists").partition_assignor == "roundrobin"
        c.subscribe([topic_name])
        with pytest.raises(UnsupportedAssignorError, match="in common"):
            wait_until(lambda: c.poll(0.1) and False, 30, 0, "the refusal")
        c.poll(0.1)                                            # serves error_cb
        assert [e.code() for e in errors] == [KafkaError.UNSUPPORTED_ASSIGNOR]
        assert len(a.owned) == len(b.owned) == 3 and a.alive and b.alive
    finally:
        c.close(), a.close(), b.close()


def test_a_commit_from_outside_a_group_with_members_is_refused(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, partitions=1, records=1)
    a = Member(broker.bootstrap, "busy", topic_name)
    try:
        wait_until(lambda: a.owned == {0}, 30, 0.05, "the member's assignment")
        outsider = consumer(broker.bootstrap, "busy")
        with pytest.raises(UnknownMemberIdError):  # Kafka's answer to a commit with no member id
            outsider.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        outsider.close()
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:   # per partition, as librdkafka's
            [refused] = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                "busy", [TopicPartition(topic_name, 0, 1)])])["busy"].result(10).topic_partitions
        assert isinstance(refused.error.exception(), UnknownMemberIdError) and refused.offset == 1
    finally:
        a.close()


def test_a_member_that_stops_polling_leaves_and_its_partitions_move(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, partitions=2, records=10)
    slow = consumer(broker.bootstrap, "slow", max_poll_interval_ms=1000)
    slow.subscribe([topic_name])
    wait_until(lambda: slow.poll(0.1) is not None and len(slow.assignment()) == 2, 30, 0.01, "the slow member's partitions")
    other = Member(broker.bootstrap, "slow", topic_name)
    try:
        # ``slow`` is never polled again: after max.poll.interval.ms it leaves and ``other`` owns all.
        wait_until(lambda: other.owned == {0, 1}, 30, 0.05, "the silent member's partitions to move")
    finally:
        other.close()
        slow.close()


def test_a_static_member_that_stops_polling_keeps_its_partitions_for_its_session_without_a_rebalance(
        broker, topic_name):
    """Kafka's consumer leaves with epoch -2 when a static member's poll timer expires: the coordinator
    keeps its partitions for session.timeout.ms, so nobody rebalances; it used to leave for good (-1),
    and its return moved everything back in a second rebalance."""
    make_topic(broker.bootstrap, topic_name, partitions=2, records=10)
    slow = consumer(broker.bootstrap, "slow-static", max_poll_interval_ms=1000, session_timeout_ms=20_000,
                    group_instance_id="pod-slow")
    lost = []
    slow.subscribe([topic_name], on_lost=lambda c, ps: lost.extend(tp.partition for tp in ps))
    other = Member(broker.bootstrap, "slow-static", topic_name, group_instance_id="pod-other",
                   session_timeout_ms=20_000)
    try:
        wait_until(lambda: (slow.poll(0.05), len(slow.assignment()) == 1 and len(other.owned) == 1)[1],
                   30, 0, "one partition each")
        mine, epoch = {tp.partition for tp in slow.assignment()}, _describe(broker.bootstrap, "slow-static").group_epoch
        other.events.clear()
        time.sleep(3)                            # past max.poll.interval.ms: slow leaves "for now"
        d = _describe(broker.bootstrap, "slow-static")
        assert other.events == [] and d.group_epoch == epoch
        assert sorted(m.group_instance_id for m in d.members) == ["pod-other", "pod-slow"]
        wait_until(lambda: (slow.poll(0.05), {tp.partition for tp in slow.assignment()} == mine and lost)[1],
                   30, 0, "the slow member's partitions back")
        assert lost == sorted(mine) and other.events == []
        assert _describe(broker.bootstrap, "slow-static").group_epoch == epoch
    finally:
        other.close()
        slow.close()


def test_offsets_and_membership_follow_the_coordinator_when_its_broker_dies(cluster_factory, topic_name):
    cluster = cluster_factory(3, {**GROUP_CONFIG, "replica.lag.time.max.ms": 1500, "broker.session.timeout.ms": 1500,
                                  "broker.heartbeat.interval.ms": 200})
    make_topic(cluster.bootstrap, topic_name, partitions=3, records=90, rf=3)
    c = consumer(cluster.bootstrap, "moving", enable_auto_commit=False)
    parts = [TopicPartition(topic_name, p, 10 + p) for p in range(3)]
    c.assign(parts)
    c.commit(offsets=parts, asynchronous=False)
    coordinator = c._coordinator.node_id
    c.close()
    cluster.nodes[coordinator].kill9()
    c = consumer(cluster.bootstrap, "moving")
    try:
        found = wait_until(lambda: _committed(c, parts), 60, 0.2, "committed offsets from the new coordinator")
        assert [tp.offset for tp in found] == [10, 11, 12]
        assert c._coordinator.node_id != coordinator
        c.subscribe([topic_name])
        first = {}
        wait_until(lambda: [first.setdefault(m.partition(), m.offset()) for m in c.consume(100, 0.1)
                            if m.error() is None] is not None and len(first) == 3, 60, 0.01, "consumption")
        assert first == {0: 10, 1: 11, 2: 12}
    finally:
        c.close()


def test_deleting_a_group_with_members_is_refused(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, partitions=1, records=1)
    a = Member(broker.bootstrap, "undeletable", topic_name)
    try:
        wait_until(lambda: a.owned == {0}, 30, 0.05, "the member's assignment")
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            with pytest.raises(NonEmptyGroupError):
                admin.delete_consumer_groups(["undeletable"])["undeletable"].result(10)
    finally:
        a.close()
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        wait_until(lambda: _deleted(admin, "undeletable"), 30, 0.2, "the group deleted once empty")


def _deleted(admin, group) -> bool:
    try:
        admin.delete_consumer_groups([group])[group].result(10)
        return True
    except NonEmptyGroupError:
        return False


def _committed(c, parts):
    try:
        found = c.committed(parts, timeout=5)
    except Exception:  # noqa: BLE001 - the coordinator may still be moving
        return None
    return found if all(tp.offset != OFFSET_INVALID for tp in found) else None


def _describe(bootstrap: str, group: str):
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        return admin.describe_consumer_groups([group])[group].result(10)


def test_a_deleted_topics_offsets_go_so_a_topic_created_again_is_read_from_its_start(broker, topic_name):
    """Kafka's onPartitionsDeleted: the group's offsets of a deleted topic are dropped; they used to
    stay, so a group reading the topic created again under the name skipped its first records."""
    make_topic(broker.bootstrap, topic_name, partitions=1, records=10)
    tp = TopicPartition(topic_name, 0, 8)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-g", "enable.auto.commit": False})
    c.commit(offsets=[tp], asynchronous=False)
    assert c.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset == 8
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_topics([topic_name])[topic_name].result(30)
        wait_until(lambda: topic_name not in admin.list_topics(timeout=10).topics, 30, 0.1, "the topic gone")
    wait_until(lambda: c.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset == OFFSET_INVALID,
               30, 0.1, "the deleted topic's offsets dropped")
    c.close()
    make_topic(broker.bootstrap, topic_name, partitions=1, records=10)
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-g",
                       "auto.offset.reset": "earliest"})
    reader.subscribe([topic_name])
    offsets: list[int] = []
    wait_until(lambda: offsets.extend(m.offset() for m in reader.consume(10, timeout=0.5) if m.error() is None)
               or len(offsets) >= 10, 60, 0.1, "the new topic's records")
    reader.close()
    assert offsets[:10] == list(range(10))
