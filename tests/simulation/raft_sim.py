"""A seeded, single-threaded simulation of a Raft quorum (3 or 5 :class:`RaftNode` s).

Everything random comes from one ``random.Random(seed)``, and time is a virtual clock, so a seed
replays exactly (``RIVERLOG_SIM_SEED=<seed> pytest tests/simulation/test_raft_simulation.py``).

Model
-----
- **Nodes** run the real :class:`RaftNode` on a :class:`CheckedStorage` (an in-memory storage that
  also checks log matching on every append). A crash throws the node object away (votes in flight,
  commit index, leader progress: all volatile state is lost); a restart builds a new node on the
  same storage, as a real node reopens its directory. The state machine of each node is the list of
  entries it applied, ``[(term, data), ...]``; it is snapshotted (``compact``) at random moments, and
  a restarted node loads it from its storage's snapshot.
- **Network**: every message is delayed (1..``max_delay_ms``), may be dropped or duplicated, and so
  arrives in any order. Partitions split the nodes into groups, cut single links in one
  direction, slow every message to one node by up to 400 ms, or cut one node (often the leader)
  from some of the others while the rest still talk. A message is lost if its link is cut when it
  is sent or when it arrives.
- **Pauses** freeze a node for 100-800 ms (a GC pause, SIGSTOP): it neither ticks nor receives
  (messages wait for it). A leader that wakes up may first accept a client's proposal while a newer
  leader already exists: a stale leader's entries that must never commit.
- **Clients** propose unique payloads to any node that believes it leads (there may be two: one is
  stale) and sometimes to a follower, which must refuse with ``NotControllerError``.
- A step advances the clock 1-10 ms, delivers what is due, ticks every live node, maybe injects a
  fault or a proposal, applies what each node committed, and checks the invariants.

Invariants (a violation raises :class:`SimulationFailure` naming the seed)
--------------------------------------------------------------------------
1. **Election safety**: at most one leader per term, ever.
2. **Log matching**: an ``(index, term)`` pair always has the same data and the same previous term,
   on every node, for the whole run (checked on each append, so any two logs that share an entry
   share everything before it).
3. **Leader completeness**: an entry committed in term T is in the log (or snapshot) of every
   leader of a later term — checked when a node becomes leader and whenever something commits.
4. **State machine safety**: each node's committed entries and applied state (including states
   loaded from snapshots) are a prefix of one global committed sequence: nothing committed is ever
   lost, changed or reordered.
5. **Commit index** never moves back on a live node (it restarts at the snapshot after a crash).
6. **Durability**: the last committed entry is stored by a majority of nodes, crashed or not.

Then every fault is switched off (partitions healed, crashed nodes restarted, no drops) and the
cluster must converge: within ``stable_within_ms`` one leader that every node follows with equal
commit indexes, and then every new proposal applied on every node within ``commit_within_ms``.
"""
from __future__ import annotations

import bisect
import heapq
import json
import random
from collections import deque
from dataclasses import dataclass, field

from broker.errors import NotControllerError
from broker.raft import MemoryRaftStorage, RaftNode, Role, from_dict, to_dict


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, step: int, now: int, message: str, trace: list[str]):
        self.seed, self.step, self.now, self.message, self.trace = seed, step, now, message, trace
        super().__init__(f"seed {seed}, step {step}, t={now}ms: {message}")


@dataclass(frozen=True)
class SimConfig:
    """The cluster and the run; times are virtual milliseconds."""
    node_counts: tuple[int, ...] = (3, 5)        # the seed picks one
    fault_steps: int = 500
    election_timeout_ms: tuple[int, int] = (150, 300)
    heartbeat_ms: int = 30
    max_entries_choices: tuple[int, ...] = (1, 2, 4, 16)  # per seed; small ones split logs finely
    stable_within_ms: int = 6_000
    commit_within_ms: int = 1_000
    faults_off_proposals: int = 3
    json_wire: bool = False                      # send every message through to_dict/JSON/from_dict
    node_class: type = RaftNode                  # tests swap in deliberately broken nodes
    trace_events: int = 120                      # recent events kept for a failure report
    keep_votes: bool = True                      # False: a restarted node forgets its vote (broken)


@dataclass
class Faults:
    """Per-seed fault rates (per step), drawn from the seed so runs differ in character."""
    drop: float
    duplicate: float
    max_delay_ms: int
    propose: float
    crash: float
    restart: float
    reboot: float        # crash and restart at once (kill -9 under a supervisor)
    pause: float         # freeze a node for 100-800 ms: no ticks, messages wait for it
    partition: float
    heal: float
    compact: float

    @classmethod
    def draw(cls, rng: random.Random) -> "Faults":
        return cls(drop=rng.choice([0.0, 0.05, 0.15, 0.3]), duplicate=rng.choice([0.0, 0.03, 0.1]),
                   max_delay_ms=rng.choice([3, 15, 40, 80]), propose=rng.choice([0.05, 0.2, 0.5]),
                   crash=rng.choice([0.0, 0.005, 0.015, 0.03]), restart=rng.choice([0.01, 0.05, 0.2]),
                   reboot=rng.choice([0.0, 0.01, 0.05]), pause=rng.choice([0.0, 0.005, 0.02]),
                   partition=rng.choice([0.0, 0.005, 0.02]), heal=rng.choice([0.01, 0.03, 0.1]),
                   compact=rng.choice([0.0, 0.02, 0.1]))

    @classmethod
    def off(cls) -> "Faults":
        """Faults-off: a reliable network (still delayed and reordered), no crashes, no partitions."""
        return cls(0.0, 0.0, 10, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass
class Stats:
    """What a run exercised; the seed loop requires each to happen somewhere."""
    leaders: int = 0               # (node, term) pairs that led
    commits: int = 0               # globally committed entries
    proposals_refused: int = 0     # NotControllerError from a non-leader
    stale_leader_proposals: int = 0  # proposals to a leader that was not the newest one
    pauses: int = 0                # a node froze (GC pause, SIGSTOP) and resumed
    crashes: int = 0
    partitions: int = 0
    compactions: int = 0
    snapshots_installed: int = 0   # a follower loaded the leader's snapshot
    truncated_entries: int = 0     # divergent entries a follower cut
    step_downs: int = 0            # a leader became a follower
    duplicates: int = 0
    drops: int = 0

    def add(self, other: "Stats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def encode_state(state: list[tuple[int, bytes]]) -> bytes:
    return json.dumps([[term, data.decode("latin-1")] for term, data in state]).encode()


def decode_state(data: bytes) -> list[tuple[int, bytes]]:
    return [(term, text.encode("latin-1")) for term, text in json.loads(data)]


class CheckedStorage(MemoryRaftStorage):
    """Memory storage that reports every append to the simulation (log matching) and counts cuts."""

    def __init__(self, sim: "Simulation", node_id: int) -> None:
        super().__init__()
        self.sim, self.node_id = sim, node_id

    def append(self, entries):
        if entries:
            prev_term = self.term_at(entries[0].index - 1)
            for entry in entries:
                self.sim.check_log_matching(self.node_id, entry, prev_term)
                prev_term = entry.term
        super().append(entries)

    def truncate_from(self, index):
        self.sim.stats.truncated_entries += max(0, self.last_index() - index + 1)
        node = self.sim.nodes[self.node_id].raft
        if node is not None and node.state is Role.LEADER:
            self.sim.fail(f"leader {self.node_id} truncated its own log at {index}")
        super().truncate_from(index)


class SimNode:
    """One node's host: its durable storage, its (volatile) RaftNode and its state machine."""

    def __init__(self, sim: "Simulation", node_id: int) -> None:
        self.id = node_id
        self.storage = CheckedStorage(sim, node_id)
        self.raft: RaftNode | None = None
        self.state: list[tuple[int, bytes]] = []
        self.last_commit = -1
        self.last_seen: tuple[str, int] = ("follower", 0)
        self.checked_term = -1  # the last term in which it was checked as a new leader

    def __repr__(self) -> str:
        if self.raft is None:
            return f"node {self.id}: crashed, log end {self.storage.last_index()}, snapshot {self._snap()}"
        r = self.raft
        return (f"node {self.id}: {r.state.value} term {r.term} leader {r.leader_id} commit {r.commit_index} "
                f"applied {len(self.state) - 1} log {self.storage.first_index()}..{r.last_index} "
                f"snapshot {self._snap()} terms {self._terms()}")

    def _snap(self):
        s = self.storage.snapshot()
        return None if s is None else s[:2]

    def _terms(self) -> str:
        log = self.storage.entries(self.storage.first_index(), self.storage.last_index() + 1)
        runs: list[list[int]] = []
        for e in log:
            if runs and runs[-1][0] == e.term:
                runs[-1][2] = e.index
            else:
                runs.append([e.term, e.index, e.index])
        return " ".join(f"t{t}:{a}-{b}" for t, a, b in runs)


@dataclass
class Simulation:
    seed: int
    config: SimConfig = field(default_factory=SimConfig)
    faults: Faults | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        if self.faults is None:
            self.faults = Faults.draw(self.rng)
        count = self.rng.choice(self.config.node_counts)
        self.max_entries = self.rng.choice(self.config.max_entries_choices)
        self.ids = list(range(1, count + 1))
        self.majority = count // 2 + 1
        self.now = 0
        self.steps = 0
        self.stats = Stats()
        self.trace: deque = deque(maxlen=self.config.trace_events)
        self.queue: list = []
        self._seq = 0
        self.group = {i: 0 for i in self.ids}
        self.cut_links: set[tuple[int, int]] = set()
        self.slow: dict[int, int] = {}                 # node -> extra delay of every message to it
        self.paused: dict[int, int] = {}               # node -> when it resumes
        self.committed: list[tuple[int, bytes]] = []   # the global committed sequence (term, data)
        self.commit_terms: list[int] = []              # term each entry was committed in (non-decreasing)
        self.leaders: dict[int, int] = {}              # term -> the node that led it
        self.seen_entries: dict[tuple[int, int], tuple[bytes, int]] = {}
        self.proposals = 0
        self._stable_key, self._stable_since = None, 0
        self.nodes = {i: SimNode(self, i) for i in self.ids}
        for node in self.nodes.values():
            self._boot(node)

    # ------------------------------------------------------------------------------ failing
    def event(self, *what) -> None:
        self.trace.append((self.now, what))

    def fail(self, message: str) -> None:
        lines = [f"t={t} " + " ".join(map(str, what)) for t, what in self.trace]
        lines += [repr(n) for n in self.nodes.values()]
        lines.append(f"faults {self.faults}")
        lines.append(f"committed {len(self.committed)} entries; commit terms {self.commit_terms[-20:]}")
        raise SimulationFailure(self.seed, self.steps, self.now, message, lines)

    # ------------------------------------------------------------------------------ nodes
    def _boot(self, node: SimNode) -> None:
        cfg = self.config
        if not cfg.keep_votes:
            term, _ = node.storage.hard_state()
            node.storage.save_hard_state(term, None)
        node.raft = cfg.node_class(node.id, self.ids, node.storage, random.Random(self.rng.getrandbits(32)),
                                   self.now, election_timeout_ms=cfg.election_timeout_ms,
                                   heartbeat_ms=cfg.heartbeat_ms,
                                   max_entries_per_append=self.max_entries)
        snapshot = node.storage.snapshot()
        node.state = []
        if snapshot is not None:
            node.state = decode_state(snapshot[2])
            self.check_state(node, snapshot[0])
        node.last_commit = node.raft.commit_index
        node.last_seen = ("follower", node.raft.term)

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        self.paused.pop(node_id, None)
        if node.raft is not None:
            node.raft = None
            self.stats.crashes += 1
            self.event("crash", node_id)

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.raft is None:
            self._boot(node)
            self.event("restart", node_id, "term", node.raft.term)

    def live(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raft is not None]

    def leader_nodes(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raft is not None and n.raft.state is Role.LEADER]

    # ------------------------------------------------------------------------------ network
    def blocked(self, src: int, dst: int) -> bool:
        return self.group[src] != self.group[dst] or (src, dst) in self.cut_links

    def isolate(self, node_id: int) -> None:
        self.group[node_id] = max(self.group.values()) + 1
        self.event("isolate", node_id)

    def heal(self) -> None:
        self.group = {i: 0 for i in self.ids}
        self.cut_links.clear()
        self.slow.clear()
        self.event("heal")

    def send(self, envelopes) -> None:
        f, rng = self.faults, self.rng
        for env in envelopes:
            if self.blocked(env.src, env.dst):
                continue
            if f.drop and rng.random() < f.drop:
                self.stats.drops += 1
                continue
            message = env.message
            if self.config.json_wire:
                message = from_dict(json.loads(json.dumps(to_dict(message))))
            self._enqueue(env.src, env.dst, message)
            if f.duplicate and rng.random() < f.duplicate:
                self.stats.duplicates += 1
                self._enqueue(env.src, env.dst, message)

    def _enqueue(self, src: int, dst: int, message) -> None:
        self._seq += 1
        at = self.now + self.rng.randint(1, self.faults.max_delay_ms)
        if self.slow:
            at += self.slow.get(dst, 0)
        heapq.heappush(self.queue, (at, self._seq, src, dst, message))

    def deliver_due(self) -> None:
        queue = self.queue
        while queue and queue[0][0] <= self.now:
            at, seq, src, dst, message = heapq.heappop(queue)
            node = self.nodes[dst].raft
            if node is None or self.blocked(src, dst):
                continue
            if dst in self.paused:
                heapq.heappush(queue, (self.paused[dst], seq, src, dst, message))
                continue
            self.event("deliver", src, "->", dst, message)
            self.send(node.step(src, message, at))

    # ------------------------------------------------------------------------------ clients
    def propose(self, node: SimNode) -> tuple[int, bytes] | None:
        self.proposals += 1
        data = b"p%d" % self.proposals
        try:
            index, out = node.raft.propose(data, self.now)
        except NotControllerError as e:
            if node.raft.state is Role.LEADER:
                self.fail(f"leader {node.id} refused a proposal: {e}")
            self.stats.proposals_refused += 1
            return None
        if node.raft.state is not Role.LEADER:
            self.fail(f"follower {node.id} accepted a proposal")
        if node.raft.term < max(self.leaders, default=0):
            self.stats.stale_leader_proposals += 1
        self.event("propose", node.id, data, "at", index)
        self.send(out)
        return index, data

    def compact(self, node: SimNode) -> None:
        applied = len(node.state) - 1
        snapshot = node.storage.snapshot()
        if applied >= 0 and (snapshot is None or applied > snapshot[0]):
            node.raft.compact(applied, encode_state(node.state))
            self.stats.compactions += 1
            self.event("compact", node.id, "through", applied)

    # ------------------------------------------------------------------------------ stepping
    def step(self) -> None:
        self.steps += 1
        self.now += self.rng.randint(1, 10)
        self._resume_paused()
        self.deliver_due()
        for node in self.running():
            self.send(node.raft.tick(self.now))
        self.inject()
        self.check()

    def running(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raft is not None and n.id not in self.paused]

    def pause(self, node_id: int, ms: int) -> None:
        self.paused[node_id] = self.now + ms
        self.stats.pauses += 1
        self.event("pause", node_id, "for", ms)

    def _resume_paused(self) -> None:
        """A node that wakes up from a pause still believes what it believed: a leader that froze
        first serves the client request that waited for it, before it notices it lost its quorum."""
        for node_id, until in list(self.paused.items()):
            if until <= self.now:
                del self.paused[node_id]
                node = self.nodes[node_id]
                self.event("resume", node_id)
                if node.raft.state is Role.LEADER and self.rng.random() < 0.7:
                    self.propose(node)

    def inject(self) -> None:
        f, rng = self.faults, self.rng
        if f.propose and rng.random() < f.propose:
            leaders = [n for n in self.leader_nodes() if n.id not in self.paused]
            live = self.running()
            if leaders and rng.random() < 0.9:
                self.propose(rng.choice(leaders))
            elif live:
                self.propose(rng.choice(live))
        if f.crash and rng.random() < f.crash:
            live = self.live()
            if live:
                self.crash(rng.choice(live).id)
        if f.reboot and rng.random() < f.reboot:
            live = self.live()
            if live:
                node_id = rng.choice(live).id
                self.crash(node_id)
                self.restart(node_id)
        if f.restart:
            for node in self.nodes.values():
                if node.raft is None and rng.random() < f.restart:
                    self.restart(node.id)
        if f.partition and rng.random() < f.partition:
            self._partition()
        if f.heal and rng.random() < f.heal and (len(set(self.group.values())) > 1 or self.cut_links or self.slow):
            self.heal()
        if f.compact and rng.random() < f.compact:
            live = self.running()
            if live:
                self.compact(rng.choice(live))
        if f.pause and rng.random() < f.pause:
            live = self.running()
            leaders = [n for n in live if n.raft.state is Role.LEADER]
            if live:
                self.pause(rng.choice(leaders if leaders and rng.random() < 0.6 else live).id,
                           rng.randint(100, 800))

    def _partition(self) -> None:
        rng = self.rng
        self.stats.partitions += 1
        kind = rng.random()
        if kind < 0.4:
            self.isolate(rng.choice(self.ids))
        elif kind < 0.55:
            node_id = rng.choice(self.ids)
            self.slow[node_id] = rng.randint(50, 400)
            self.event("slow", node_id, self.slow[node_id])
        elif kind < 0.7:
            self._cut_off_partly()
        elif kind < 0.8:
            side = set(rng.sample(self.ids, rng.randint(1, len(self.ids) - 1)))
            self.group = {i: (1 if i in side else 0) for i in self.ids}
            self.event("split", sorted(side))
        else:
            link = tuple(rng.sample(self.ids, 2))
            self.cut_links.add(link)
            self.event("cut", link)

    def _cut_off_partly(self) -> None:
        """Cut one node (the leader, when there is one) from some of the others, both ways, while
        everyone else still talks: the nodes that lost the leader must not depose it while a
        majority still hears it, and must elect another when it keeps less than a majority."""
        leaders = self.leader_nodes()
        node_id = self.rng.choice(leaders).id if leaders else self.rng.choice(self.ids)
        others = [i for i in self.ids if i != node_id]
        lost = self.rng.sample(others, self.rng.randint(1, len(others) - 1))
        for other in lost:
            self.cut_links.update({(node_id, other), (other, node_id)})
        self.event("cut off", node_id, "from", sorted(lost))

    def apply(self, node: SimNode) -> None:
        raft = node.raft
        snapshot = raft.take_snapshot_to_apply()
        if snapshot is not None:
            node.state = decode_state(snapshot[2])
            self.stats.snapshots_installed += 1
            self.event("install", node.id, "snapshot through", snapshot[0])
            self.check_state(node, snapshot[0])
        committed = self.committed
        for entry in raft.take_committed():
            if entry.index != len(node.state):
                self.fail(f"node {node.id} was handed entry {entry.index} after applying {len(node.state) - 1}")
            if entry.index >= len(committed) or committed[entry.index] != (entry.term, entry.data):
                self.fail(f"node {node.id} applied {entry} but the committed entry there is "
                          f"{committed[entry.index] if entry.index < len(committed) else None}")
            node.state.append((entry.term, entry.data))

    # ------------------------------------------------------------------------------ invariants
    def check_log_matching(self, node_id: int, entry, prev_term: int) -> None:
        key = (entry.index, entry.term)
        seen = self.seen_entries.get(key)
        if seen is None:
            self.seen_entries[key] = (entry.data, prev_term)
        elif seen != (entry.data, prev_term):
            self.fail(f"log matching: node {node_id} stores {entry} after term {prev_term}, but that index "
                      f"and term hold {seen[0]!r} after term {seen[1]} elsewhere")

    def check_state(self, node: SimNode, last_index: int) -> None:
        """A state loaded from a snapshot must be exactly the committed prefix through last_index."""
        if len(node.state) != last_index + 1 or node.state != self.committed[:last_index + 1]:
            self.fail(f"node {node.id} loaded a snapshot through {last_index} that is not the committed "
                      f"prefix ({len(node.state)} entries; committed {len(self.committed)})")

    def check(self) -> None:
        for node in self.nodes.values():
            raft = node.raft
            if raft is None:
                continue
            seen = (raft.state.value, raft.term)
            if seen != node.last_seen:
                if node.last_seen[0] == "leader":
                    self.stats.step_downs += 1
                node.last_seen = seen
                self.event("role", node.id, *seen)
            if raft.state is Role.LEADER:
                self._check_leader(node)
            self._observe_commit(node)
            self.apply(node)
        self._check_durable()


    def _check_leader(self, node: SimNode) -> None:
        term = node.raft.term
        holder = self.leaders.setdefault(term, node.id)
        if holder != node.id:
            self.fail(f"election safety: nodes {holder} and {node.id} both led term {term}")
        if node.checked_term != term:
            node.checked_term = term
            self.stats.leaders += 1
            # Leader completeness: everything committed in an earlier term is in its log.
            last = bisect.bisect_left(self.commit_terms, term) - 1
            self._require_holds(node, last, f"the new leader of term {term}")

    def _require_holds(self, node: SimNode, index: int, who: str) -> None:
        if index < 0:
            return
        storage = node.storage
        snapshot = storage.snapshot()
        if snapshot is not None and index <= snapshot[0]:
            return
        if storage.term_at(index) != self.committed[index][0]:
            self.fail(f"leader completeness: node {node.id}, {who}, lacks committed entry {index} "
                      f"(term {self.committed[index][0]}, committed in term {self.commit_terms[index]})")

    def _observe_commit(self, node: SimNode) -> None:
        raft, storage = node.raft, node.storage
        commit = raft.commit_index
        if commit < node.last_commit:
            self.fail(f"node {node.id}'s commit index went back from {node.last_commit} to {commit}")
        if commit == node.last_commit:
            return
        lo, node.last_commit = node.last_commit + 1, commit
        first = storage.first_index()
        if lo < first:
            if len(self.committed) < first:
                self.fail(f"node {node.id} has a snapshot through {first - 1} but only "
                          f"{len(self.committed)} entries were seen committed")
            lo = first
        committed = self.committed
        for entry in storage.entries(lo, commit + 1):
            if entry.index < len(committed):
                if committed[entry.index] != (entry.term, entry.data):
                    self.fail(f"state machine safety: node {node.id} committed {entry}, but "
                              f"{committed[entry.index]} was committed there before")
            elif entry.index == len(committed):
                committed.append((entry.term, entry.data))
                self.commit_terms.append(raft.term)
                self.stats.commits += 1
            else:
                self.fail(f"node {node.id} committed {entry.index} with a gap after {len(committed) - 1}")
        self._lower_commit_terms(commit, raft.term)
        for other in self.leader_nodes():
            if other.raft.term > raft.term:
                self._require_holds(other, commit, f"the leader of term {other.raft.term}")

    def _lower_commit_terms(self, index: int, term: int) -> None:
        """Committing ``index`` in ``term`` commits everything before it no later than ``term``."""
        terms = self.commit_terms
        while index >= 0 and terms[index] > term:
            terms[index] = term
            index -= 1

    def _check_durable(self) -> None:
        last = len(self.committed) - 1
        if last < 0:
            return
        term = self.committed[last][0]
        holders = 0
        for node in self.nodes.values():
            snapshot = node.storage.snapshot()
            if (snapshot is not None and snapshot[0] >= last) or node.storage.term_at(last) == term:
                holders += 1
        if holders < self.majority:
            self.fail(f"durability: committed entry {last} is stored on {holders} nodes, "
                      f"fewer than a majority ({self.majority})")

    # ------------------------------------------------------------------------------ phases
    def run_until(self, condition, within_ms: int, what: str):
        deadline = self.now + within_ms
        while True:
            result = condition()
            if result:
                return result
            if self.now >= deadline:
                self.fail(f"liveness: {what} within {within_ms} ms of virtual time")
            self.step()

    def stable_leader(self) -> SimNode | None:
        """A leader that every node follows in its term, with every log committed everywhere, and so
        for a whole election timeout (a leader that just woke up from a pause looks stable until its
        first tick finds its quorum silent)."""
        leader = self._agreed_leader()
        key = (leader.id, leader.raft.term) if leader else None
        if key != self._stable_key:
            self._stable_key, self._stable_since = key, self.now
        if leader is None or self.now - self._stable_since < self.config.election_timeout_ms[1]:
            return None
        return leader

    def _agreed_leader(self) -> SimNode | None:
        leaders = self.leader_nodes()
        if len(leaders) != 1 or len(self.live()) != len(self.ids):
            return None
        leader = leaders[0].raft
        for node in self.nodes.values():
            r = node.raft
            if r.term != leader.term or r.leader_id != leader.node_id or r.commit_index != leader.last_index:
                return None
        return leaders[0]

    def faults_off(self) -> None:
        self.faults = Faults.off()
        self.paused.clear()
        self.heal()
        for node_id in self.ids:
            self.restart(node_id)
        self.event("faults off")

    def run(self) -> Stats:
        """The faulty phase, then faults off: the cluster must converge and commit new proposals."""
        for _ in range(self.config.fault_steps):
            self.step()
        self.faults_off()
        leader = self.run_until(self.stable_leader, self.config.stable_within_ms,
                                "the cluster did not settle on one leader with all entries committed")
        proposed = []
        for _ in range(self.config.faults_off_proposals):
            accepted = self.propose(leader)
            if accepted is None:
                self.fail(f"liveness: node {leader.id} stopped leading with faults off")
            proposed.append(accepted)
            self.step()
        target = max(index for index, _ in proposed)
        self.run_until(lambda: all(len(n.state) > target for n in self.nodes.values()),
                       self.config.commit_within_ms, f"faults-off proposals up to {target} were not applied "
                       "on every node")
        for node in self.nodes.values():
            for index, data in proposed:
                if node.state[index][1] != data:
                    self.fail(f"node {node.id} applied {node.state[index]} at {index}, where {data!r} was "
                              "proposed with faults off")
        return self.stats


def run_seed(seed: int, config: SimConfig | None = None) -> Stats:
    """Run one seed; any failure, including an exception raised inside a node, comes out as a
    :class:`SimulationFailure` carrying the seed and the trace."""
    sim = Simulation(seed, config or SimConfig())
    try:
        return sim.run()
    except SimulationFailure:
        raise
    except Exception as e:  # noqa: BLE001 - a node's own assertion is a finding like any other
        try:
            sim.fail(f"{type(e).__name__} raised: {e}")
        except SimulationFailure as failure:
            raise failure from e
