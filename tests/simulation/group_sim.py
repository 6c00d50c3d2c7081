"""A model-based simulation of one consumer group's coordinator over random histories: the real
:class:`~broker.group.coordinator.GroupShard` (its :class:`~broker.group.group.ConsumerGroup`, the
assignors, :mod:`~broker.group.offset_fetch` and :mod:`~broker.group.offset_expiry`) driven in-process
with a manual clock by several consumers, a transactional producer and the admin tools.

Events (``OPS``): a member heartbeats (joining, with or without a member id, applying what it was
told at random); heartbeats with a wrong epoch; leaves (-1, or -2 for a static member); crashes; a
static member restarts under its ``group.instance.id`` (a new member id or its own); a replaced
incarnation speaks again; time passes (sessions and rebalance timeouts run out); OffsetCommit
(from a member, with a stale epoch, from outside the group); TxnOffsetCommit and its marker;
OffsetFetch (``require_stable``); offset expiry; DeleteGroups; OffsetDelete; the coordinator moves
(a new shard replays the records written so far).

The oracle is Kafka's rules (``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid``,
``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch``, ``OffsetMetadataManager``'s
replay of commit markers and its expiry, ``deleteGroups``) and a model of the offsets. Invariants
after every event: the answer (or error) is Kafka's; a refused heartbeat changes nothing; no
partition is assigned to one member while another owns or is assigned it; epochs are ordered
(member <= assignment <= group) and never go back; an accepted offset is what OffsetFetch returns
until it expires or is deleted, a refused one never is; and replaying the records written so far
gives the same group (what a coordinator that takes over would hold). At the end every member
heartbeats until the group is Stable, and each subscribed partition has exactly one owner.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, fields

from broker.errors import (FencedInstanceIdError, FencedMemberEpochError, GroupIdNotFoundError,
                           IllegalGenerationError, NonEmptyGroupError, ProducerFencedError, RiverlogError,
                           StaleMemberEpochError, UnknownMemberIdError, UnsupportedAssignorError)
from broker.group.assignors import strategies
from broker.group.coordinator import PRODUCER_FENCE_RETENTION_MS, GroupShard
from broker.group.group import STABLE, Committed
from broker.group.offset_fetch import fetch_offsets
from tests.simulation.seeds import ModelFailure

G = "g"
SESSION = 1_000
REBALANCE = 3_000
RETENTION = 5_000
TOPICS = {"a": 3, "b": 2}
PRODUCERS = (7, 8)
ASSIGNORS = ("range", "cooperative-sticky")

OPS = ("beat", "stale_beat", "leave", "crash", "restart", "zombie", "join", "time", "commit", "txn_commit",
       "end_txn", "fetch", "expire_offsets", "delete_group", "move", "delete_offsets", "lost", "topics")
WEIGHTS = (12, 2, 1, 1, 1, 1, 1, 2, 3, 2, 2, 2, 1, 1, 1, 1, 2, 1)
OP_POOL = tuple(i for i, w in enumerate(WEIGHTS) for _ in range(w))


@dataclass
class Stats:
    """Counts of the outcomes the invariants judge; a suite of histories must see each."""
    joins: int = 0
    fenced_epochs: int = 0            # FENCED_MEMBER_EPOCH for a wrong epoch
    previous_epoch_accepted: int = 0  # a lost answer's previous epoch, accepted
    fenced_instances: int = 0         # a replaced incarnation told FENCED_INSTANCE_ID
    static_rejoins: int = 0
    expired_members: int = 0
    commits: int = 0
    stale_commits: int = 0            # STALE_MEMBER_EPOCH
    outside_commits_refused: int = 0  # UNKNOWN_MEMBER_ID for a commit from outside a non-empty group
    txn_committed: int = 0            # pending offsets a commit marker applied
    txn_overtaken: int = 0            # a commit marker whose offset a later plain commit kept
    unstable_fetches: int = 0
    offsets_expired: int = 0
    groups_deleted: int = 0
    moves: int = 0
    assignors_refused: int = 0        # a join with no partition.assignment.strategy in common
    topics_changed: int = 0           # a subscribed topic grew or was deleted
    producers_forgotten: int = 0      # a producer's fence dropped after its retention
    stable: int = 0


@dataclass
class Consumer:
    name: str
    instance_id: str
    topics: list[str]
    assignors: str = "range"    # partition.assignment.strategy
    member_id: str = ""
    epoch: int = 0
    assignment: frozenset = frozenset()
    held: frozenset = frozenset()
    needs_leave: bool = False   # fenced: its incarnation leaves before it joins again
    last_ok: int = 0            # its last successful heartbeat: a session later it drops everything


class Model:
    def __init__(self, assignor: str, trace: list[str] | None = None):
        self.assignor, self.trace = assignor, trace if trace is not None else []
        self.now = 1_000_000
        self.sizes = dict(TOPICS)               # partition counts; a deleted topic is not created again
        self.shard = GroupShard(0)
        self.records: list = []
        self.stats = Stats()
        self.live: list[Consumer] = []
        self.crashed: list[Consumer] = []
        self.zombies: list[Consumer] = []       # replaced static incarnations
        self.serial = 0
        self.offsets: dict = {}                 # tp -> (offset, timestamp, order): the model's truth
        self.pending: dict = {}                 # producer -> {tp: (offset, timestamp, order)}
        self.producer_epoch = {p: 0 for p in PRODUCERS}
        self.order = 0
        self.epochs_seen: dict[str, int] = {}   # member id -> highest epoch answered
        self.fenced_ids: set[str] = set()       # replaced incarnations the group must know as such

    # ---------------------------------------------------------------- helpers
    def fail(self, message: str) -> None:
        raise ModelFailure(message)

    def log(self, line: str) -> None:
        self.trace.append(f"t={self.now} {line}")

    @property
    def group(self):
        return self.shard.groups.get(G)

    def write(self, records) -> None:
        self.records += records

    def snapshot(self):
        g = self.group
        if g is None:
            return None
        return (g.group_epoch, g.assignment_epoch, g.assignor,
                {k: (m.epoch, m.previous_epoch, frozenset(m.assigned), frozenset(m.owned - m.assigned), m.active,
                     m.instance_id, tuple(m.topics))
                 for k, m in g.members.items()},
                {k: frozenset(v) for k, v in g.target.items()}, dict(g.offsets),
                {p: dict(o) for p, o in g.pending.items()}, dict(g.producer_epochs), set(g.fenced_members))

    def new_consumer(self, static: bool) -> Consumer:
        self.serial += 1
        topics = ["a", "b"] if self.serial % 3 else ["a"]
        # eager groups mix strategy lists: one with nothing in common with the group is refused
        eager = ("range", "range,roundrobin", "roundrobin,range", "range", "roundrobin")
        assignors = self.assignor if self.assignor != "range" else eager[self.serial % len(eager)]
        c = Consumer(f"c{self.serial}", f"i{self.serial}" if static else "", topics, assignors)
        self.live.append(c)
        return c

    def heartbeat(self, c: Consumer, epoch: int, owned, member_id: str | None = None):
        self.now += 10
        outcome, records = self.shard.heartbeat_outcome(  # as the server: written, then answered
            G, c.member_id if member_id is None else member_id, epoch, partitions=self.sizes, now_ms=self.now,
            instance_id=c.instance_id, topics=c.topics, assignor_name=c.assignors, session_timeout_ms=SESSION,
            rebalance_timeout_ms=REBALANCE, owned=set(owned))
        self.write(records)
        if isinstance(outcome, RiverlogError):
            raise outcome
        return outcome

    def lose(self, c: Consumer) -> None:
        """The consumer gives everything up (on_lost) and joins again under its member id."""
        c.held = c.assignment = frozenset()
        c.epoch = 0

    # ---------------------------------------------------------------- membership events
    def beat(self, c: Consumer, apply: bool, lost: bool = False) -> None:
        """One heartbeat; ``lost``: the coordinator handles it but its answer never arrives."""
        if c.needs_leave:
            self.leave(c, static=False, fenced=True)
            return
        if apply:
            c.held = c.assignment
        joining = c.epoch == 0
        if joining and not c.member_id and self.serial % 2:
            c.member_id = f"{c.name}-id"  # the consumer's own id (KIP-1082); else the coordinator's
        g = self.group
        before = g.members.get(c.member_id) if g is not None and c.member_id else None
        owned = c.held | c.assignment
        # Kafka's throwIfConsumerGroupMemberEpochIsInvalid (a static member's join replaces it instead)
        fenced = before is not None and not (joining and c.instance_id) and not (before.active and (
            c.epoch == before.epoch or (c.epoch == before.previous_epoch and owned <= before.assigned)))
        snapshot, written = self.snapshot(), len(self.records)
        others = [m.assignors for m in g.members.values() if not (c.instance_id and m.instance_id == c.instance_id)
                  and m.member_id != c.member_id] if g is not None else []
        refused = (before is None or (joining and c.instance_id)) and others and \
            not set(strategies(c.assignors)).intersection(*others)
        try:
            result = self.heartbeat(c, c.epoch, owned)
        except UnsupportedAssignorError:
            if not refused:
                self.fail(f"{c.name} ({c.assignors}) refused, the group's members support {others}")
            if self.snapshot() != snapshot or len(self.records) != written:
                self.fail(f"a refused join of {c.name} changed the group")
            self.stats.assignors_refused += 1
            self.log(f"{c.name} ({c.assignors}) refused: no assignor in common")
            self.live.remove(c)  # the application hears the error and stops
            return
        except FencedMemberEpochError:
            if not fenced:
                self.fail(f"{c.name} fenced at epoch {c.epoch} (member at {before and before.epoch}, previous "
                          f"{before and before.previous_epoch}), owning {sorted(owned)}")
            if self.snapshot() != snapshot or len(self.records) != written:
                self.fail(f"a fenced heartbeat of {c.name} changed the group")
            self.stats.fenced_epochs += 1
            self.log(f"{c.name} fenced at epoch {c.epoch}")
            self.lose(c)
            c.needs_leave = not c.instance_id
            return
        except UnknownMemberIdError:
            if before is not None or joining:
                self.fail(f"{c.name} ({c.member_id}) told UNKNOWN_MEMBER_ID while in the group or joining")
            self.log(f"{c.name} unknown: joins again")
            self.lose(c)
            return
        if refused:
            self.fail(f"{c.name} ({c.assignors}) joined a group whose members support {others}")
        if fenced:
            self.fail(f"{c.name}'s heartbeat at epoch {c.epoch} accepted (member at {before.epoch}, previous "
                      f"{before.previous_epoch}, assigned {sorted(before.assigned)}), owning {sorted(owned)}")
        if before is not None and c.epoch != before.epoch and not joining:
            self.stats.previous_epoch_accepted += 1
        if lost:
            self.log(f"{c.name} beat at {c.epoch}: answer lost")
            return
        if joining:
            self.stats.joins += 1
        c.last_ok = self.now
        c.member_id, c.epoch, c.assignment = result.member_id, result.member_epoch, frozenset(result.assignment)
        if result.member_epoch < self.epochs_seen.get(c.member_id, 0) and not joining:
            self.fail(f"{c.name}'s epoch went back to {result.member_epoch}")
        self.epochs_seen[c.member_id] = result.member_epoch
        self.log(f"{c.name} beat -> epoch {c.epoch} assigned {sorted(c.assignment)}")

    def stale_beat(self, c: Consumer, arg: int) -> None:
        g = self.group
        m = g.members.get(c.member_id) if g is not None else None
        if m is None or not m.active or c.epoch == 0:
            return
        epoch = (m.epoch + 1, m.previous_epoch, m.epoch - 1)[arg % 3]
        if epoch <= 0:
            return
        owned = set(c.held | c.assignment) | ({("a", arg % 3)} if arg % 2 else set())
        # Kafka's throwIfConsumerGroupMemberEpochIsInvalid
        accepted = epoch == m.epoch or (epoch == m.previous_epoch and owned <= m.assigned)
        before, written = self.snapshot(), len(self.records)
        try:
            result = self.heartbeat(c, epoch, owned)
        except FencedMemberEpochError:
            if accepted:
                self.fail(f"{c.name} fenced at its previous epoch {epoch} owning {sorted(owned)} "
                          f"of {sorted(m.assigned)}")
            if self.snapshot() != before or len(self.records) != written:
                self.fail(f"a fenced heartbeat of {c.name} changed the group")
            self.stats.fenced_epochs += 1
            self.log(f"{c.name} stale epoch {epoch} fenced")
            self.lose(c)
            c.needs_leave = not c.instance_id
            return
        if not accepted:
            self.fail(f"{c.name}'s heartbeat at epoch {epoch} (member at {m.epoch}, previous {m.previous_epoch}, "
                      f"owning {sorted(owned)} of {sorted(m.assigned)}) was accepted")
        self.stats.previous_epoch_accepted += 1
        c.epoch, c.assignment = result.member_epoch, frozenset(result.assignment)
        self.log(f"{c.name} previous epoch {epoch} accepted -> {c.epoch}")

    def leave(self, c: Consumer, static: bool, fenced: bool = False) -> None:
        c.held = c.assignment = frozenset()
        if not c.member_id:
            return
        self.heartbeat(c, -2 if static else -1, set())
        c.needs_leave = False
        if fenced:
            c.epoch = 0  # it joins again; one that went keeps its last epoch (for a late commit)
        self.log(f"{c.name} leaves ({'-2' if static else '-1'}{', fenced' if fenced else ''})")
        if not fenced:
            self.live.remove(c)
            if static:
                self.crashed.append(c)

    def restart(self, c: Consumer, new_id: bool) -> None:
        """A static member's process comes back (after a crash, or a -2 leave) under its instance id."""
        self.crashed.remove(c)
        g = self.group
        old = c.member_id
        still = g is not None and old in g.members
        n = Consumer(c.name, c.instance_id, c.topics, c.assignors,
                     member_id=f"{c.name}-r{self.serial}" if new_id else old)
        self.serial += 1
        self.live.append(n)
        self.beat(n, apply=False)
        if new_id and c.member_id:
            self.zombies.append(c)  # its old incarnation may still be around
            if still:
                self.fenced_ids.add(c.member_id)
            self.stats.static_rejoins += still

    def zombie(self, c: Consumer, arg: int) -> None:
        """A replaced incarnation heartbeats (or commits) under its old member id: FENCED_INSTANCE_ID."""
        self.zombies.remove(c)
        g = self.group
        if g is None or not any(m.instance_id == c.instance_id and m.member_id != c.member_id
                                for m in g.members.values()):
            return
        before = {k: m.epoch for k, m in g.members.items()}
        try:
            # A join naming the old id is recognised only if the group had that incarnation when it
            # was replaced, or heard it since: one it had already removed is not told from a restart
            # (the newest join wins, see docs/groups.md "Static membership").
            if arg % 2 or c.member_id not in self.fenced_ids:
                self.heartbeat(c, c.epoch or 1, set(c.held | c.assignment))
            else:
                self.heartbeat(c, 0, set(), member_id=c.member_id)
        except FencedInstanceIdError:
            self.fenced_ids.add(c.member_id)
            self.stats.fenced_instances += 1
            self.log(f"zombie {c.name} ({c.member_id}) fenced")
        else:
            self.fail(f"replaced incarnation {c.member_id} of {c.instance_id} was answered: "
                      f"members {before} -> {[(k, m.epoch) for k, m in self.group.members.items()]}")
        self.zombies.append(c)  # it may speak again

    def advance(self, ms: int) -> None:
        self.now += ms
        for c in self.live:  # as the consumer's own session timer does, before the coordinator's
            if c.member_id and self.now - c.last_ok >= SESSION and (c.held or c.assignment or c.epoch):
                self.log(f"{c.name}: no heartbeat for a session, partitions lost")
                self.lose(c)
        g = self.group
        due = set()
        if g is not None:
            due = {k for k, m in g.members.items()
                   if self.now - (m.left_ms if m.left_ms is not None else m.last_heartbeat_ms) > SESSION
                   or (m.revoking_since_ms is not None and self.now - m.revoking_since_ms > REBALANCE)}
        for c in self.live:
            m = g.members.get(c.member_id) if g is not None else None
            if m is not None and m.revoking_since_ms is not None and self.now - m.revoking_since_ms > REBALANCE:
                # it did not give partitions up within max.poll.interval.ms (its rebalance timeout): a
                # consumer that does not poll leaves on its own timer, as the coordinator removes it
                self.log(f"{c.name}: poll overdue, partitions lost")
                self.lose(c)
        before = set(g.members) if g is not None else set()
        producers = set(g.producer_epochs) if g is not None else set()
        self.write(self.shard.expire(self.sizes, self.now))
        self.stats.producers_forgotten += len(producers - set(self.group.producer_epochs if self.group else ()))
        after = set(self.group.members) if self.group is not None else set()
        if before - after != due:
            self.fail(f"expired {sorted(before - after)}, expected {sorted(due)}")
        self.stats.expired_members += len(due)
        if due:
            self.log(f"expired {sorted(due)}")

    # ---------------------------------------------------------------- offsets
    def expected_commit_error(self, member_id: str, epoch: int, txn: bool):
        """Kafka's ``validateOffsetCommit`` (and ``validateTransactionalOffsetCommit``)."""
        g = self.group
        if g is None:
            return None if epoch < 0 else (IllegalGenerationError if txn else GroupIdNotFoundError)
        if epoch < 0 and not g.members:
            return None
        if member_id not in g.members:
            return FencedInstanceIdError if member_id in g.fenced_members else UnknownMemberIdError
        m = g.members[member_id]
        if epoch != (m.epoch if m.active else -2):  # a static member away for now is at epoch -2
            return IllegalGenerationError if txn else StaleMemberEpochError
        return None

    def caller(self, arg: int) -> tuple[str, int]:
        # live members, static ones away for now (or crashed: a late request), replaced incarnations
        members = [c for c in self.live + self.crashed if c.member_id] + self.zombies
        kind = arg % 4
        if kind == 0 or not members:
            return "", -1
        c = members[arg % len(members)]
        return c.member_id, (c.epoch, c.epoch - 1, c.epoch)[kind - 1]

    def commit(self, arg: int) -> None:
        member_id, epoch = self.caller(arg)
        tp = ("a", arg % 3) if arg % 4 else ("b", arg % 2)
        if tp[0] not in self.sizes:
            return  # the server drops a deleted topic's partitions before the coordinator
        expected = self.expected_commit_error(member_id, epoch, txn=False)
        offset = self.order * 10 + arg
        try:
            self.write(self.shard.commit(G, member_id, epoch, {tp: Committed(offset, commit_timestamp=self.now)}))
        except RiverlogError as e:
            if expected is None or not isinstance(e, expected):
                self.fail(f"commit by {member_id or '(outside)'} at epoch {epoch}: {type(e).__name__}, "
                          f"expected {expected}")
            self.stats.stale_commits += isinstance(e, StaleMemberEpochError)
            self.stats.outside_commits_refused += not member_id
            self.log(f"commit {tp}={offset} by {member_id or '-'}@{epoch} refused {type(e).__name__}")
            return
        if expected is not None:
            self.fail(f"commit by {member_id or '(outside)'} at epoch {epoch} accepted, expected {expected.__name__}")
        self.order += 1
        self.offsets[tp] = (offset, self.now, self.order)
        self.stats.commits += 1
        self.log(f"commit {tp}={offset} by {member_id or '-'}@{epoch}")

    def txn_commit(self, arg: int) -> None:
        producer = PRODUCERS[arg % 2]
        if arg % 5 == 4:
            self.producer_epoch[producer] += 1  # a new instance of the transactional.id
        epoch = self.producer_epoch[producer] - (1 if arg % 7 == 6 else 0)
        member_id, member_epoch = self.caller(arg // 2)
        tp = ("b", arg % 2)
        if tp[0] not in self.sizes:
            return
        offset = self.order * 10 + arg
        expected = self.expected_commit_error(member_id, member_epoch, txn=True)
        g = self.group
        known = g.producer_epochs.get(producer, -1) if g is not None else -1
        if expected is None and epoch < known:
            expected = ProducerFencedError
        try:
            self.write(self.shard.commit_in_transaction(G, member_id, member_epoch, producer, epoch,
                                                        {tp: Committed(offset, commit_timestamp=self.now)}))
        except RiverlogError as e:
            if expected is None or not isinstance(e, expected):
                self.fail(f"txn commit p{producer}/{epoch} by {member_id or '-'}@{member_epoch}: "
                          f"{type(e).__name__}, expected {expected}")
            self.log(f"txn commit p{producer} refused {type(e).__name__}")
            return
        if expected is not None:
            self.fail(f"txn commit accepted, expected {expected.__name__}")
        if epoch > known:
            self.pending.pop(producer, None)
        self.order += 1
        self.pending.setdefault(producer, {})[tp] = (offset, self.now, self.order, epoch)
        self.log(f"txn commit p{producer}/{epoch} {tp}={offset}")

    def end_txn(self, arg: int) -> None:
        producer, commit = PRODUCERS[arg % 2], bool(arg % 3)
        epoch = self.producer_epoch[producer]
        g = self.group
        known = g.producer_epochs.get(producer, -1) if g is not None else -1
        self.write(self.shard.end_transaction(G, producer, epoch, commit))
        pending = self.pending.pop(producer, {}) if g is not None else {}
        if commit and epoch == known:
            for tp, (offset, ts, order, _) in pending.items():
                if tp not in self.offsets or self.offsets[tp][2] < order:
                    self.offsets[tp] = (offset, ts, order)
                    self.stats.txn_committed += 1
                else:
                    self.stats.txn_overtaken += 1
        self.log(f"marker p{producer}/{epoch} {'commit' if commit else 'abort'} {sorted(pending)}")

    def fetch(self, arg: int) -> None:
        stable = bool(arg % 2)
        member_id, epoch = self.caller(arg // 2)
        g = self.group
        wanted = None if arg % 3 == 0 else [("a", arg % 3), ("b", 0), ("b", 1)]
        try:
            got = fetch_offsets(self.shard, G, member_id, epoch, wanted, stable)
        except (UnknownMemberIdError, StaleMemberEpochError) as e:
            m = g.members.get(member_id) if g is not None else None
            ok = (isinstance(e, UnknownMemberIdError) and m is None and member_id) or (
                isinstance(e, StaleMemberEpochError) and m is not None and epoch != (m.epoch if m.active else -2))
            if not ok:
                self.fail(f"fetch by {member_id}@{epoch}: {type(e).__name__}")
            return
        want = {tp: v[0] for tp, v in self.offsets.items() if wanted is None or tp in wanted}
        if {tp: c.offset for tp, c in got.offsets.items()} != want:
            self.fail(f"fetched {({tp: c.offset for tp, c in got.offsets.items()})}, committed {want}")
        # Kafka's fetchAllOffsets: those committed; fetchOffsets: those asked for
        unstable = {tp for tp in (want if wanted is None else wanted)
                    if any(tp in o for o in self.pending.values())} if stable else set()
        if got.unstable != unstable:
            self.fail(f"unstable {sorted(got.unstable)}, expected {sorted(unstable)}")
        self.stats.unstable_fetches += bool(unstable)

    def expire_offsets(self, arg: int) -> None:
        self.now += arg * 1_000
        g = self.group
        subscribed = {t for m in g.members.values() for t in m.topics} if g is not None else set()
        gone = {tp for tp, (_, ts, _) in self.offsets.items() if tp[0] not in subscribed
                and self.now - ts >= RETENTION and not any(tp in o for o in self.pending.values())}
        self.write(self.shard.expire_offsets(self.now, RETENTION))
        for tp in gone:
            del self.offsets[tp]
        self.stats.offsets_expired += len(gone)
        if g is not None and not (g.members or self.offsets or self.pending) and self.group is not None:
            self.fail("a group with nothing left was not deleted")

    def delete_group(self) -> None:
        g = self.group
        try:
            self.write(self.shard.delete_group(G))
        except GroupIdNotFoundError:
            if g is not None:
                self.fail("DeleteGroups: GROUP_ID_NOT_FOUND for an existing group")
            return
        except NonEmptyGroupError:
            if not g.members:
                self.fail("DeleteGroups: NON_EMPTY_GROUP for a group without members")
            return
        if g is None or g.members:
            self.fail("DeleteGroups accepted for a missing or non-empty group")
        self.offsets, self.pending = {}, {}
        self.stats.groups_deleted += 1
        self.log("group deleted")

    def delete_offsets(self, arg: int) -> None:
        g = self.group
        tp = (("a", "b")[arg % 2], arg % 2)
        if g is None:
            return
        subscribed = tp[0] in g.subscribed_topics()
        errors, records = self.shard.delete_offsets(G, [tp])
        self.write(records)
        if bool(errors) != subscribed:
            self.fail(f"OffsetDelete of {tp}: errors {errors}, subscribed {subscribed}")
        if not subscribed:
            self.offsets.pop(tp, None)
            for o in self.pending.values():
                o.pop(tp, None)

    def change_topics(self, arg: int) -> None:
        """A subscribed topic grows, or is deleted (its offsets go, Kafka's onPartitionsDeleted)."""
        topic = ("a", "b")[arg % 2]
        if topic not in self.sizes:
            return
        self.stats.topics_changed += 1
        if arg % 3:
            self.sizes[topic] += 1
            self.log(f"{topic} grows to {self.sizes[topic]}")
            return
        del self.sizes[topic]
        self.write(self.shard.delete_topics({topic}))
        self.offsets = {tp: v for tp, v in self.offsets.items() if tp[0] != topic}
        for o in self.pending.values():
            for tp in [tp for tp in o if tp[0] == topic]:
                del o[tp]
        self.pending = {p: o for p, o in self.pending.items() if o}
        self.log(f"{topic} deleted")

    def move(self) -> None:
        """The coordinator moves: a new shard replays the records (members get a fresh session)."""
        self.shard = self.replayed()
        self.stats.moves += 1
        self.log("coordinator moved")

    def replayed(self) -> GroupShard:
        shard = GroupShard(0)
        shard.load(self.records, self.now)
        return shard

    # ---------------------------------------------------------------- invariants
    def check(self) -> None:
        g = self.group
        replayed = self.replayed()
        mine, saved = self.snapshot(), None
        self.shard, real = replayed, self.shard
        try:
            saved = self.snapshot()
        finally:
            self.shard = real
        if mine != saved:
            self.fail(f"the records written replay to another group:\n  held     {mine}\n  replayed {saved}")
        if g is None:
            if self.offsets:
                self.fail(f"group gone with offsets {self.offsets} committed")
            self.fenced_ids.clear()  # a group deleted (or expired) forgets everything
            return
        if {tp: c.offset for tp, c in g.offsets.items()} != {tp: v[0] for tp, v in self.offsets.items()}:
            self.fail(f"offsets {g.offsets} != model {self.offsets}")
        if not g.group_epoch >= g.assignment_epoch >= max((m.epoch for m in g.members.values()), default=0):
            self.fail(f"epochs out of order: group {g.group_epoch}, assignment {g.assignment_epoch}")
        members = list(g.members.values())
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if (a.assigned | a.owned) & b.assigned or (b.assigned | b.owned) & a.assigned:
                    shared = (a.assigned | a.owned) & (b.assigned | b.owned)
                    self.fail(f"{a.member_id} and {b.member_id} share {sorted(shared)}")
        held: dict = {}
        for c in self.live:
            for tp in c.held:
                if tp in held:
                    self.fail(f"{tp} consumed by {held[tp]} and {c.name} at once")
                held[tp] = c.name

    def settle(self) -> None:
        self.zombies.clear()
        for c in list(self.crashed):
            self.crashed.remove(c)
        for _ in range(200):
            for c in list(self.live):
                self.beat(c, apply=True)
            self.advance(10)
            self.check()
            g = self.group
            if not self.live:
                return
            if g is not None and g.state == STABLE and set(g.members) == {c.member_id for c in self.live} and all(
                    c.held == c.assignment == frozenset(g.members[c.member_id].assigned)
                    and c.epoch == g.assignment_epoch for c in self.live):
                wanted = {(t, p) for c in self.live for t in c.topics for p in range(self.sizes.get(t, 0))}
                owned = sorted(tp for c in self.live for tp in c.held)
                if owned != sorted(wanted):
                    self.fail(f"stable group owns {owned}, subscribed {sorted(wanted)}")
                self.stats.stable += 1
                return
        self.fail(f"no convergence: state {self.group.state if self.group else None}")


def step(m: Model, name: str, arg: int) -> None:
    live = m.live
    if name == "beat" and live:
        m.beat(live[arg % len(live)], apply=arg % 3 != 0)
    elif name == "stale_beat" and live:
        m.stale_beat(live[arg % len(live)], arg)
    elif name == "leave" and live:
        c = live[arg % len(live)]
        m.leave(c, static=bool(c.instance_id) and arg % 2 == 0)
    elif name == "crash" and live:
        c = live[arg % len(live)]
        live.remove(c)
        if c.instance_id and c.member_id:
            m.crashed.append(c)
    elif name == "restart" and m.crashed:
        m.restart(m.crashed[arg % len(m.crashed)], new_id=arg % 3 != 0)
    elif name == "zombie" and m.zombies:
        m.zombie(m.zombies[arg % len(m.zombies)], arg)
    elif name == "join" and len(live) < 4:
        m.beat(m.new_consumer(static=arg % 2 == 0), apply=False)
    elif name == "time":
        m.advance(PRODUCER_FENCE_RETENTION_MS + 1 if arg == 11 else (200, 600, 1_100, 3_500)[arg % 4])
    elif name == "commit":
        m.commit(arg)
    elif name == "txn_commit":
        m.txn_commit(arg)
    elif name == "end_txn":
        m.end_txn(arg)
    elif name == "fetch":
        m.fetch(arg)
    elif name == "expire_offsets":
        m.expire_offsets(arg)
    elif name == "delete_group":
        m.delete_group()
    elif name == "move":
        m.move()
    elif name == "delete_offsets":
        m.delete_offsets(arg)
    elif name == "topics":
        m.change_topics(arg)
    elif name == "lost" and live:
        m.beat(live[arg % len(live)], apply=arg % 2 == 0, lost=True)


def run(ops: list[tuple[int, int]], assignor: str, trace: list[str] | None = None) -> Model:
    m = Model(assignor, trace)
    for op, arg in ops:
        name = OPS[op % len(OPS)]
        m.log(f"-- {name} {arg}")
        step(m, name, arg)
        m.check()
    m.settle()
    return m


def random_ops(seed: int, n: int = 80) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(op, rng.randrange(12)) for op in rng.choices(range(len(OPS)), WEIGHTS, k=n)]


def add(total: Stats, other: Stats) -> None:
    for f in fields(total):
        setattr(total, f.name, getattr(total, f.name) + getattr(other, f.name))
