"""A model-based simulation of the consumer group protocol end to end, in-process: several real
client memberships (:class:`~broker.client.membership.GroupMembership` under the consumer's
:class:`~broker.client.consumer_assignment.ConsumerAssignment`, the rebalance callbacks and the
commit before revocation) talking to the real coordinator core
(:class:`~broker.group.coordinator.GroupShard`) through a transport the history controls, on a
manual clock. The heartbeat thread does not run: the history takes its turns (``_step``).

Events (``OPS``): a member's heartbeat turn, its request delivered, dropped, its answer dropped,
delivered twice, or held back and delivered later; the application polls (the rebalance callbacks
run); it commits what it owns; it changes its subscription; it closes; it crashes; a crashed static
member restarts under its ``group.instance.id``; a new member joins; a topic gains a partition;
time passes (sessions run out at the coordinator).

Invariants (KIP-848; Kafka's ConsumerMembershipManager, librdkafka's rdkafka_cgrp.c): a partition
is owned (from ``on_assign`` to ``on_revoke``/``on_lost``) by one live member at a time, unless the
coordinator no longer has the other (its session ran out, or it was fenced); an accepted commit
comes from a member owning the partition; epochs never go back on either side; once the history
goes quiet every subscribed partition has exactly one owner.
"""
from __future__ import annotations

import contextlib
import logging
import random
import threading
from dataclasses import dataclass, fields

from broker.client import consumer_assignment, membership
from broker.client.config import CONSUMER_CONFIG, client_config
from broker.client.consumer_assignment import ConsumerAssignment
from broker.client.fetch_state import FetchState
from broker.client.membership import GroupMembership
from broker.client.message import TopicPartition
from broker.client.start_offsets import AUTO_OFFSET_RESET
from broker.clock import SYSTEM_CLOCK
from broker.errors import RequestTimedOutError, RiverlogError
from broker.group.coordinator import GroupShard
from broker.group.group import Committed
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped, pairs

G = "g"
SESSION = 1_000
POLL_INTERVAL = 2_500
TOPICS = ("a", "b")
ASSIGNORS = ("range", "cooperative-sticky")
MAX_LIVE = 3

OPS = ("beat", "poll", "commit", "late", "subscribe", "close", "crash", "restart", "join", "grow", "time")
WEIGHTS = (14, 8, 2, 1, 1, 1, 1, 1, 2, 1, 3)
OP_POOL = tuple(i for i, w in enumerate(WEIGHTS) for _ in range(w))
#: a heartbeat turn's transport: how its request and answer travel
DELIVER, DROP_REQUEST, DROP_ANSWER, TWICE, HOLD = range(5)
FAULTS = (DELIVER,) * 6 + (DROP_REQUEST, DROP_ANSWER, TWICE, HOLD)


class ModelFailure(AssertionError):
    pass


@dataclass
class Stats:
    joins: int = 0
    assigns: int = 0
    revokes: int = 0
    losts: int = 0
    commits: int = 0
    commits_refused: int = 0
    dropped: int = 0
    late_delivered: int = 0
    fenced: int = 0              # FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID answered
    expired: int = 0
    static_restarts: int = 0
    poll_exceeded: int = 0
    subscriptions: int = 0
    grown: int = 0
    settled: int = 0


class Clock:
    """Stands in for the ``time`` module membership.py reads."""

    def __init__(self):
        self.ms = 1_000_000

    def monotonic(self) -> float:
        return self.ms / 1000.0


class Threadless(GroupMembership):
    """The real membership, its heartbeat thread's turns taken by the history."""

    stretch = 0  # how many times it was out of the group: epochs start over each time

    def _run(self) -> None:
        return

    def _reset(self, lost: bool) -> None:
        self.stretch += 1
        super()._reset(lost)

    def _leave(self, epoch: int) -> None:
        self.stretch += 1
        super()._leave(epoch)

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            if self._stopped:
                return
            self._leaving = -2 if self.config["group.instance.id"] else -1
        self._step()
        with self._cond:
            self._stopped = True


class Transport:
    """One client's connection to the coordinator; ``fault`` says what happens to the next request."""

    def __init__(self, sim: "Sim", name: str):
        self.sim, self.name, self.group_id = sim, name, G
        self.fault = DELIVER

    def call(self, method, request, timeout=None):
        fault, self.fault = self.fault, DELIVER
        if fault == DROP_REQUEST:
            self.sim.stats.dropped += 1
            raise RequestTimedOutError("request dropped")
        if fault == HOLD:
            self.sim.held.append((self.name, request))
            raise RequestTimedOutError("request held back")
        result = self.sim.deliver(self.name, request)
        if fault == TWICE:
            result = self.sim.deliver(self.name, request)
        if fault == DROP_ANSWER:
            self.sim.stats.dropped += 1
            raise RequestTimedOutError("answer dropped")
        if isinstance(result, RiverlogError):
            raise result
        return pb.ConsumerGroupHeartbeatResponse(
            member_id=result.member_id, member_epoch=result.member_epoch, heartbeat_interval_ms=100,
            assignment=grouped(result.assignment), reconciling=result.reconciling)


class Committer:
    def __init__(self, app: "App"):
        self.app = app

    def commit_sync(self, offsets, timeout, retry_stale_epoch=False):
        self.app.sim.commit(self.app, {(tp.topic, tp.partition) for tp in offsets})

    def committed_offsets(self, keys, timeout, wait_stable=True, with_epoch=False):
        return {}

    def serve(self):
        pass


class Nothing:
    def __getattr__(self, name):
        return lambda *a, **k: None


class App(ConsumerAssignment):
    """A consumer's application side (the assignment mixin over a real FetchState)."""

    def __init__(self, sim: "Sim", name: str, instance_id: str, assignor: str):
        self.sim, self.name = sim, name
        self.config = client_config(CONSUMER_CONFIG, {
            "group.id": G, "bootstrap.servers": "unused:1", "heartbeat.interval.ms": 100,
            "session.timeout.ms": SESSION, "max.poll.interval.ms": POLL_INTERVAL, "group.instance.id": instance_id,
            "partition.assignment.strategy": assignor, "enable.auto.commit": True}, {})
        self._cond = threading.Condition()
        self._fetch_state = FetchState(AUTO_OFFSET_RESET["earliest"], False, 0.1, 1 << 20, SYSTEM_CLOCK)
        self._fetcher, self._events = Nothing(), Nothing()
        self._committer = Committer(self)
        self._coordinator = Transport(sim, name)
        self._membership = self._subscription = self._fatal_error = self._protocol = None
        self._callbacks, self._owned, self._assign_calls = {}, set(), 0

    def _check_open(self):
        pass

    def _to_commit(self, keys=None):
        return [TopicPartition(t, p, 1) for t, p in sorted(keys if keys is not None else self._owned)]

    def _maybe_auto_commit(self):
        pass

    def join(self, topics: list[str]) -> None:
        sim = self.sim
        self.subscribe(topics, on_assign=lambda c, ps: sim.assigned(self, ps),
                       on_revoke=lambda c, ps: sim.released(self, ps, lost=False),
                       on_lost=lambda c, ps: sim.released(self, ps, lost=True))


class Sim:
    def __init__(self, assignor: str, trace: list[str] | None = None):
        self.assignor, self.trace = assignor, trace if trace is not None else []
        self.clock = Clock()
        self.shard = GroupShard(0)
        self.sizes = {t: 2 for t in TOPICS}
        self.stats = Stats()
        self.apps: dict[str, App] = {}       # live ones
        self.crashed: list[App] = []         # static ones may restart
        self.owner: dict = {}                # tp -> the app between its on_assign and on_revoke/on_lost
        self.forfeited: set = set()          # owned partitions whose owner the coordinator dropped since
        self.callbacks: list = []            # (app name, "assign"/"revoke"/"lost", partitions), in order
        self.held: list = []                 # requests held back, delivered later
        self.client_epochs: dict[str, int] = {}
        self.coordinator_epochs: dict[str, int] = {}
        self.serial = 0

    # ------------------------------------------------------------------ plumbing
    def fail(self, message: str) -> None:
        raise ModelFailure(message)

    def log(self, line: str) -> None:
        self.trace.append(f"t={self.clock.ms} {line}")

    @property
    def members(self) -> dict:
        group = self.shard.groups.get(G)
        return group.members if group is not None else {}

    def deliver(self, name: str, request):
        result, _ = self.shard.heartbeat_outcome(
            G, request.member_id, request.member_epoch, partitions=self.sizes, now_ms=self.clock.ms,
            instance_id=request.instance_id, client_id=request.client_id, topics=list(request.subscribed_topics),
            assignor_name=request.assignor, session_timeout_ms=request.session_timeout_ms or SESSION,
            rebalance_timeout_ms=request.rebalance_timeout_ms or POLL_INTERVAL, owned=set(pairs(request.owned)))
        what = type(result).__name__ if isinstance(result, RiverlogError) else \
            f"epoch {result.member_epoch} {sorted(result.assignment)}{' reconciling' if result.reconciling else ''}"
        self.log(f"  {name} hb(epoch {request.member_epoch}, owned {sorted(pairs(request.owned))}) -> {what}")
        self.check_coordinator_epochs()
        self.forfeit()
        return result

    # ------------------------------------------------------------------ what the invariants watch
    def forfeit(self) -> None:
        """Partitions whose owner the coordinator no longer has (its session ran out, it left, a
        newer incarnation replaced it) may go to another member before the old one hears of it."""
        for tp, app in self.owner.items():
            m = app._membership
            if m is None or m.member_id not in self.members:
                self.forfeited.add(tp)

    def assigned(self, app: App, tps) -> None:
        self.stats.assigns += 1
        keys = [(tp.topic, tp.partition) for tp in tps]
        self.log(f"  {app.name} on_assign {keys}")
        self.callbacks.append((app.name, "assign", keys))
        for tp in keys:
            other = self.owner.get(tp)
            if other is not None and other is not app and tp not in self.forfeited:
                self.fail(f"{app.name} assigned {tp} while {other.name} still owns it (and is in the group)")
            self.owner[tp] = app
            self.forfeited.discard(tp)

    def released(self, app: App, tps, lost: bool) -> None:
        keys = [(tp.topic, tp.partition) for tp in tps]
        self.log(f"  {app.name} on_{'lost' if lost else 'revoke'} {keys}")
        self.callbacks.append((app.name, "lost" if lost else "revoke", keys))
        if lost:
            self.stats.losts += 1
        else:
            self.stats.revokes += 1
        for tp in keys:
            if self.owner.get(tp) is app:
                del self.owner[tp]
                self.forfeited.discard(tp)

    def commit(self, app: App, keys: set) -> None:
        member_id, epoch = app._membership.metadata() if app._membership is not None else ("", -1)
        try:
            self.shard.commit(G, member_id, epoch if member_id else -1,
                              {tp: Committed(1, "", -1, self.clock.ms) for tp in keys})
        except RiverlogError as e:
            self.stats.commits_refused += 1
            self.log(f"  {app.name} commit {sorted(keys)} (epoch {epoch}) refused: {type(e).__name__}")
            return
        self.stats.commits += 1
        self.log(f"  {app.name} commit {sorted(keys)} (epoch {epoch}) accepted")
        for tp in keys:
            other = self.owner.get(tp)
            if other is not app:
                self.fail(f"{app.name}'s commit of {tp} accepted while "
                          f"{other.name if other else 'no member'} owns it")

    def check_coordinator_epochs(self) -> None:
        for member_id, member in self.members.items():
            if member.epoch < self.coordinator_epochs.get(member_id, -1) and member.epoch != 0:
                self.fail(f"coordinator: member {member_id} went back from epoch "
                          f"{self.coordinator_epochs[member_id]} to {member.epoch}")
            self.coordinator_epochs[member_id] = member.epoch

    def check_client_epoch(self, app: App) -> None:
        m = app._membership
        if m is None or not m._in_group:
            return
        key = m.member_id, m.stretch
        seen = self.client_epochs.get(key, -1)
        if m.epoch < seen:
            self.fail(f"{app.name}: epoch went back from {seen} to {m.epoch}")
        self.client_epochs[key] = m.epoch

    # ------------------------------------------------------------------ events
    def pick(self, arg: int) -> App | None:
        names = sorted(self.apps)
        return self.apps[names[arg % len(names)]] if names else None

    def new_app(self, instance_id: str, topics: list[str]) -> App:
        self.serial += 1
        app = App(self, f"c{self.serial}", instance_id, self.assignor)
        self.apps[app.name] = app
        app.join(topics)
        self.stats.joins += 1
        self.log(f"{app.name} joins{' as ' + instance_id if instance_id else ''} for {topics}")
        return app

    def beat(self, app: App, fault: int) -> None:
        m = app._membership
        if m is None:
            return
        app._coordinator.fault = fault
        before = m.member_id, m._in_group
        m._step()
        if before[1] and not m._in_group and m._lost:
            self.stats.fenced += 1
        if m._left_for_poll_timeout:
            self.stats.poll_exceeded += 1
        self.check_client_epoch(app)

    def poll(self, app: App) -> None:
        self.log(f"{app.name} polls")
        try:
            app._group_step()
        except RiverlogError as e:
            self.fail(f"{app.name}: poll raised {e!r}")

    def close(self, app: App) -> None:
        self.log(f"{app.name} closes")
        app.unsubscribe()
        del self.apps[app.name]

    def crash(self, app: App) -> None:
        self.log(f"{app.name} crashes")
        del self.apps[app.name]
        for tp in [tp for tp, owner in self.owner.items() if owner is app]:
            del self.owner[tp]  # a dead process reads nothing
            self.forfeited.discard(tp)
        if app.config["group.instance.id"]:
            self.crashed.append(app)

    def restart(self, arg: int) -> None:
        if not self.crashed or len(self.apps) >= MAX_LIVE:
            return
        old = self.crashed.pop(arg % len(self.crashed))
        self.stats.static_restarts += 1
        self.log(f"{old.name} restarts")
        self.new_app(old.config["group.instance.id"], list(old._membership.topics))

    def late(self, arg: int) -> None:
        if not self.held:
            return
        name, request = self.held.pop(arg % len(self.held))
        self.stats.late_delivered += 1
        self.log(f"late request of {name}")
        self.deliver(name, request)

    def subscribe(self, app: App, arg: int) -> None:
        topics = [["a"], ["b"], ["a", "b"]][arg % 3]
        self.stats.subscriptions += 1
        self.log(f"{app.name} subscribes to {topics}")
        app.join(topics)

    def grow(self, arg: int) -> None:
        topic = TOPICS[arg % len(TOPICS)]
        if self.sizes[topic] < 4:
            self.sizes[topic] += 1
            self.stats.grown += 1
            self.log(f"{topic} grows to {self.sizes[topic]} partitions")

    def advance(self, ms: int) -> None:
        self.clock.ms += ms
        before = set(self.members)
        self.shard.expire(self.sizes, self.clock.ms)
        gone = before - set(self.members)
        self.forfeit()
        self.stats.expired += len(gone)
        self.log(f"time +{ms}ms" + (f"; expired {sorted(gone)}" if gone else ""))

    # ------------------------------------------------------------------ the end
    def settle(self) -> None:
        """No more faults: every live member heartbeats and polls until nothing moves; then every
        subscribed partition has exactly one owner, one that subscribes to its topic."""
        for _ in range(60):
            for name in sorted(self.apps):
                app = self.apps[name]
                self.beat(app, DELIVER)
                self.poll(app)
            self.clock.ms += 100
            self.shard.expire(self.sizes, self.clock.ms)
        subscribed = {t for app in self.apps.values() for t in app._membership.topics}
        wanted = {(t, p) for t in subscribed for p in range(self.sizes[t])}
        owners = {}
        for app in self.apps.values():
            for tp in app._owned:
                if tp in owners:
                    self.fail(f"{tp} owned by both {owners[tp]} and {app.name} after settling")
                owners[tp] = app.name
                if tp[0] not in app._membership.topics:
                    self.fail(f"{app.name} owns {tp} without subscribing to {tp[0]}")
        if self.apps and set(owners) != wanted:
            self.fail(f"after settling owned {sorted(owners)}, subscribed {sorted(wanted)}")
        self.stats.settled += 1


def step(sim: Sim, name: str, arg: int) -> None:
    app = sim.pick(arg)
    if name == "join":
        if len(sim.apps) < MAX_LIVE:
            static = arg % 2 == 0
            sim.new_app(f"i{sim.serial + 1}" if static else "", [["a"], ["b"], ["a", "b"]][arg % 3])
    elif name == "restart":
        sim.restart(arg)
    elif name == "late":
        sim.late(arg)
    elif name == "grow":
        sim.grow(arg)
    elif name == "time":
        sim.advance(200 * (1 + arg % 6))
    elif app is None:
        return
    elif name == "beat":
        sim.beat(app, FAULTS[arg % len(FAULTS)])
    elif name == "poll":
        sim.poll(app)
    elif name == "commit":
        # Consumer.commit(): refused (_ASSIGNMENT_LOST) while a loss awaits poll(), as librdkafka's
        if app._membership is not None and app._owned and not app._membership.assignment_lost:
            app._committer.commit_sync(app._to_commit(), 5.0)
    elif name == "subscribe":
        sim.subscribe(app, arg)
    elif name == "close":
        sim.close(app)
    elif name == "crash":
        sim.crash(app)


@contextlib.contextmanager
def threadless(clock: Clock):
    """membership.py on the simulation's clock, and the consumer's memberships without a thread."""
    saved = membership.time, consumer_assignment.GroupMembership
    membership.time, consumer_assignment.GroupMembership = clock, Threadless
    try:
        yield
    finally:
        membership.time, consumer_assignment.GroupMembership = saved


def run(ops: list[tuple[int, int]], assignor: str, trace: list[str] | None = None) -> Sim:
    sim = Sim(assignor, trace)
    quiet = logging.getLogger(membership.__name__)
    level, quiet.level = quiet.level, logging.CRITICAL  # sessions run out by design here
    with threadless(sim.clock):
        sim.new_app("", ["a", "b"])
        for op, arg in ops:
            step(sim, OPS[op], arg)
        sim.settle()
    quiet.setLevel(level)
    return sim


def random_ops(seed: int, n: int = 80) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.choice(OP_POOL), rng.randrange(12)) for _ in range(n)]


def add(total: Stats, other: Stats) -> None:
    for f in fields(Stats):
        setattr(total, f.name, getattr(total, f.name) + getattr(other, f.name))
