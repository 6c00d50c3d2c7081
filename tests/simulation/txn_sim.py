"""Random histories of a transaction coordinator: the real :class:`TransactionRuntime` and
:class:`TransactionShard` (one ``__transaction_state`` partition) in-process with a manual clock,
against a reference model written from Kafka's rules (``TransactionCoordinator.scala``,
``TransactionMetadata.scala``) and the decisions ``docs/transactions.md`` documents.

Only the runtime's edges are replaced: its log is a list of records (a write may fail, its record
kept or lost: the runtime drops the shard and the sim fails over, loading a new shard from the log),
and WriteTxnMarkers goes to model partitions and groups on three nodes (a node may be down, or
lossy: it writes the markers and the answer is lost; a partition may refuse them).

Events: a new producer instance (InitProducerId), a KIP-360 bump by an instance (with its own id
and epoch: the current one, a retry, or a zombie), AddPartitionsToTxn (also re-adding),
AddOffsetsToTxn, the verification of a TxnOffsetCommit (KIP-890), records produced by the current
producer, EndTxn commit/abort by any instance (retries of the last one too), an operator's abort,
time passing (``transaction.timeout.ms`` aborts, ``transactional.id.expiration.ms``), faults, a
coordinator failover; the coordinator it replaced lives on, deposed, and retries its markers until a
partition refuses its coordinator epoch (Kafka's ``checkCoordinatorEpoch``, modelled here). Ids
"b" and "c" start near the end of their producer id's epochs, so exhaustion is common.

Checked after every event: each answer (result or error) is the model's; the coordinator's state of
every id is the model's (producer id, epoch, state, partitions, groups, timeout, times, the pair a
KIP-360 bump replaced). After a failover, each id's loaded state is one it passed through durably in
the failed event. Always: a transaction's markers are all of one kind, its decision's; a partition
never sees a marker of an older epoch than the producer's last record or marker there; no epoch
handed out or written is ever handed out again (the coordinator's epoch never falls below one).
At the end, with faults off: every decided transaction has its marker in every partition and group
it registered, and every record produced is closed by the marker of its own transaction.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import random
from types import SimpleNamespace as NS

from broker.clock import ManualClock
from broker.errors import (CoordinatorNotAvailableError, NetworkError, NotCoordinatorError, NotLeaderOrFollowerError,
                           RiverlogError, TransactionCoordinatorFencedError)
from broker.proto import riverlog_pb2 as pb
from broker.server.coordinator_runtime import _Loaded
from broker.server.txn_runtime import TransactionRuntime
from broker.transaction.coordinator import MAX_EPOCH, TransactionMetadata, _key, verify_offsets_in_transaction
from tests.simulation.txn_model import (CONFIG, EXPIRATION, GROUP_NODE, GROUPS, IDS, MAX_TIMEOUT, NODES,
                                        PARTITIONS, M, ReferenceModel, Stats)

OPS = ("init", "bump", "add", "add_group", "produce", "commit", "abort", "admin_abort", "tick", "fault",
       "failover", "write_fault", "verify", "deposed_tick")
WEIGHTS = (2, 1, 5, 2, 4, 4, 2, 1, 3, 3, 1, 1, 1, 1)
OP_POOL = tuple(i for i, w in enumerate(WEIGHTS) for _ in range(w))


class ModelFailure(AssertionError):
    """An answer or a state the model does not allow; ``trace`` holds the events before it."""

    def __init__(self, message: str, trace: list[str]):
        super().__init__(message)
        self.message, self.trace = message, trace


def real_view(meta: TransactionMetadata) -> tuple:
    return (meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state.value, frozenset(meta.partitions),
            frozenset(meta.groups), meta.start_ms, meta.last_update_ms, (meta.last_producer_id, meta.last_epoch))


class Env:
    """What the runtime touches outside its shard: the log, the nodes, the partitions, the groups."""

    def __init__(self, sim: "Sim"):
        self.sim = sim
        self.log: list[tuple[bytes, bytes | None]] = []
        self.down: set[int] = set()
        self.lossy: set[int] = set()
        self.refusing: set = set()               # partitions that refuse markers (no leader just then)
        self.fail_next_write: bool | None = None  # None, or whether the failed write's record is kept
        self.pids_down = False                    # the controller hands out no producer ids
        self.partition_log = {tp: [] for tp in PARTITIONS}   # ("data"|"marker", pid, epoch, serial/commit)
        self.group_markers = {g: [] for g in GROUPS}
        self.open = {tp: {} for tp in PARTITIONS}            # pid -> serial of its open transaction there
        self.coordinator_epochs: dict[tuple, int] = {}       # (partition or group, pid) -> newest marker's


class SimRuntime(TransactionRuntime):
    """The real runtime with its edges replaced: the shard's lock, the log write and WriteTxnMarkers.
    ``deposed``: a coordinator whose ``__transaction_state`` partition has a newer leader."""

    def __init__(self, env: Env, clock: ManualClock, next_pid):
        image = NS(topics={"t": NS(num_partitions=len(PARTITIONS),
                                   partitions=[NS(leader=i % NODES) for i in range(len(PARTITIONS))])})
        broker = NS(node_id=0, clock=clock, config=CONFIG, image=image, producer_ids=NS(next_id=next_pid))
        super().__init__(broker, groups=NS(find_coordinator=lambda group: (GROUP_NODE, "", 0)))
        self.env, self.loaded, self.deposed = env, None, False

    def load(self, leader_epoch: int) -> None:
        shard = self.new_shard(0)
        shard.load(list(self.env.log), self.broker.clock.time_ms())
        self.loaded = _Loaded(shard, NS(high_watermark=1 << 62), leader_epoch, contextlib.nullcontext(), end=0)

    @contextlib.contextmanager
    def locked(self, key: str):
        if self.loaded is None or not self.loaded.live:
            raise CoordinatorNotAvailableError("the shard was dropped")
        yield self.loaded

    def _write(self, loaded, records) -> None:
        if self.deposed:   # its __transaction_state partition has a newer leader: nothing is written
            self._drop(0, loaded)
            raise NotCoordinatorError("not the leader of __transaction_state-0 any more")
        keep, self.env.fail_next_write = self.env.fail_next_write, None
        if keep is not False:
            self.env.log.extend(records)
            self.env.sim.durable(records)
        if keep is None:
            return
        self.env.sim.stats.failed_writes += 1
        self._drop(0, loaded)
        raise CoordinatorNotAvailableError("could not write the change (simulated)")

    def _send(self, node: int, request: pb.WriteTxnMarkersRequest) -> pb.WriteTxnMarkersResponse:
        env = self.env
        if node in env.down:
            raise NotLeaderOrFollowerError(f"node {node} is down")
        response = pb.WriteTxnMarkersResponse()
        for g in request.partitions:
            for p in g.partitions:
                r = response.partitions.add(topic=g.topic, partition=p)
                if (g.topic, p) in env.refusing:
                    r.error_code, r.error_message = NotLeaderOrFollowerError.code, "no leader"
                elif not self._coordinator_epoch_ok((g.topic, p), request, r):
                    continue
                else:
                    env.sim.marker((g.topic, p), request.producer_id, request.producer_epoch, request.commit,
                                   self.deposed)
        for group in request.groups:
            r = response.groups.add(group_id=group)
            if self._coordinator_epoch_ok(group, request, r):
                env.sim.group_marker(group, request.producer_id, request.producer_epoch, request.commit,
                                     self.deposed)
        if node in env.lossy:
            raise NetworkError(f"the answer of node {node} was lost")
        return response

    def _coordinator_epoch_ok(self, where, request, result) -> bool:
        """Kafka's ``checkCoordinatorEpoch``: a marker of an older coordinator than the producer's
        last one there is refused."""
        key = (where, request.producer_id)
        if request.coordinator_epoch < self.env.coordinator_epochs.get(key, -1):
            result.error_code = TransactionCoordinatorFencedError.code
            result.error_message = "a newer coordinator wrote a marker here"
            return False
        self.env.coordinator_epochs[key] = request.coordinator_epoch
        return True


class Sim(ReferenceModel):
    """One history: the events run on the real runtime and on the model, then compared."""

    def __init__(self, ops, trace: list[str] | None = None, trace_events: int = 40):
        self.ops, self.trace, self.trace_events = ops, trace if trace is not None else [], trace_events
        self.clock = ManualClock()
        self.stats = Stats()
        self.env = Env(self)
        self._pids = itertools.count(1000)
        self.issued: set[int] = set()
        self.runtime = SimRuntime(self.env, self.clock, self._next_pid)
        self.model: dict[str, M] = {}
        self.instances: dict[str, list[tuple[int, int]]] = {t: [] for t in IDS}  # every pair handed out
        self.kinds: dict[int, bool] = {}           # serial -> commit?
        self.decided_at: dict[tuple[int, int], int] = {}   # (pid, epoch) -> serial of its last decision
        self.members: dict[int, tuple] = {}        # serial -> (parts, groups) at its decision
        self.marked: dict[int, set] = {}           # serial -> partitions and groups with its marker
        self.highest: dict[int, int] = {}          # pid -> highest epoch handed out or written
        self.serials = itertools.count()
        self.leader_epoch = 0
        self.deposed: SimRuntime | None = None
        self.snapshots: dict[str, list] | None = None   # per id: its durable views during an event
        self.durable_views: dict[str, tuple | None] = {}
        self.used_pids: set[int] = set()
        self._seed_log()

    # ------------------------------------------------------------------ setup and helpers
    def _next_pid(self) -> int:
        if self.env.pids_down:
            self.stats.no_producer_ids += 1
            raise CoordinatorNotAvailableError("the controller did not answer allocate_producer_ids (simulated)")
        pid = next(self._pids)
        self.issued.add(pid)
        return pid

    def _seed_log(self) -> None:
        """Ids "b" and "c" start durable near the end of their epochs, loaded from the log."""
        for txn_id, epoch in (("b", MAX_EPOCH - 2), ("c", MAX_EPOCH - 1)):
            pid = self._next_pid()
            now = self.clock.time_ms()
            meta = TransactionMetadata(txn_id, pid, epoch, 30_000, "CompleteCommit", last_update_ms=now)
            self.env.log.append((_key(txn_id), meta.to_value()))
            self.durable_views[txn_id] = real_view(meta)
            self.used_pids.add(pid)
            self.model[txn_id] = M(pid, epoch, 30_000, "CompleteCommit", updated=now)
            self.instances[txn_id].append((pid, epoch))
            self.highest[pid] = epoch
        self.runtime.load(self.leader_epoch)

    def fail(self, message: str):
        raise ModelFailure(message, self.trace[-self.trace_events:])

    def durable(self, records) -> None:
        """Records reached the log: what a coordinator loading it now would know of their ids."""
        for key, value in records:
            txn_id = json.loads(key)["id"]
            meta = self.runtime.loaded.shard.txns.get(txn_id)   # what was written: the state in memory
            view = None if value is None else real_view(meta)
            self.durable_views[txn_id] = view
            if self.snapshots is not None:
                self.snapshots[txn_id].append(view)

    # ------------------------------------------------------------------ model partitions and groups
    def marker(self, tp, pid: int, epoch: int, commit: bool, deposed: bool = False) -> None:
        serial = self.decided_at.get((pid, epoch))
        if serial is None:
            self.fail(f"marker {pid}/{epoch} commit={commit} on {tp} for no decided transaction")
        if self.kinds[serial] != commit:
            self.fail(f"{'commit' if commit else 'abort'} marker on {tp} for transaction {serial} decided "
                      f"{'commit' if self.kinds[serial] else 'abort'}")
        if tp not in self.members[serial][0]:
            self.fail(f"marker of transaction {serial} on {tp}, not one of its partitions {self.members[serial][0]}")
        for kind, p, e, _ in reversed(self.env.partition_log[tp]):
            if p == pid:
                if e > epoch:
                    self.fail(f"marker {pid}/{epoch} on {tp} after an entry of epoch {e}")
                break
        opened = self.env.open[tp].pop(pid, None)
        if opened is not None and opened != serial:
            self.fail(f"marker of transaction {serial} closes records of transaction {opened} on {tp}")
        self.env.partition_log[tp].append(("marker", pid, epoch, commit))
        self.stats.deposed_markers += deposed
        self.marked.setdefault(serial, set()).add(tp)
        self.highest[pid] = max(self.highest.get(pid, -1), epoch)

    def group_marker(self, group: str, pid: int, epoch: int, commit: bool, deposed: bool = False) -> None:
        serial = self.decided_at.get((pid, epoch))
        if serial is None or self.kinds[serial] != commit or group not in self.members[serial][1]:
            self.fail(f"group marker {pid}/{epoch} commit={commit} for {group}: not a decision of it")
        self.env.group_markers[group].append((pid, epoch, commit))
        self.stats.deposed_markers += deposed
        self.marked.setdefault(serial, set()).add(group)

    # ------------------------------------------------------------------ events
    def pick(self, txn_id: str, arg: int) -> tuple[int, int]:
        """Mostly the newest instance of ``txn_id``; sometimes an older one (a zombie)."""
        handed = self.instances[txn_id]
        if not handed:
            return (999, 0)
        return handed[-1] if arg % 4 else handed[(arg // 4) % len(handed)]

    def step(self, name: str, arg: int) -> None:
        txn_id, now, env = IDS[arg % len(IDS)], self.clock.time_ms(), self.env
        rt = self.runtime
        self.snapshots = {t: [self.durable_views.get(t)] for t in IDS}
        failed_before = self.stats.failed_writes
        if name in ("init", "bump"):
            timeout = (2_000, 10_000, 30_000, 10_000, 30_000, MAX_TIMEOUT + 1)[(arg // 3) % 6]
            expected = self.pick(txn_id, arg // 3) if name == "bump" else None
            before = self.model.get(txn_id)
            current = None if before is None else (before.pid, before.epoch)
            self.trace.append(f"{name} {txn_id} timeout={timeout} expected={expected}")
            model = self._outcome(lambda: self._pair(self.model_init(txn_id, timeout, expected, now)))
            real = self._outcome(lambda: rt.init_producer_id(txn_id, timeout, expected))
            if real[0] == "ok":
                self.instances[txn_id].append(real[1])
                self.stats.inits += name == "init"
                self.stats.kip360_bumps += name == "bump" and expected == current
        elif name in ("add", "add_group", "commit", "abort"):
            pid, epoch = self.pick(txn_id, arg // 3)
            if name == "add":
                parts = [tp for i, tp in enumerate(PARTITIONS) if (arg >> (i + 2)) & 1] or [PARTITIONS[arg % 4]]
                self.trace.append(f"add {txn_id} {pid}/{epoch} {parts}")
                model = self._outcome(lambda: self.model_add(txn_id, pid, epoch, parts, now))
                real = self._outcome(lambda: rt.run(txn_id, lambda shard: (None, shard.add_partitions(
                    txn_id, pid, epoch, parts, now))))
            elif name == "add_group":
                group = GROUPS[(arg >> 3) & 1]
                self.trace.append(f"add_group {txn_id} {pid}/{epoch} {group}")
                model = self._outcome(lambda: self.model_add_group(txn_id, pid, epoch, group, now))
                real = self._outcome(lambda: rt.run(txn_id, lambda shard: (None, shard.add_group(
                    txn_id, pid, epoch, group, now))))
            else:
                commit = name == "commit"
                self.trace.append(f"{name} {txn_id} {pid}/{epoch}")
                model = self._outcome(lambda: self.model_end(txn_id, pid, epoch, commit, now))
                real = self._outcome(lambda: rt.end(txn_id, pid, epoch, commit))
        elif name == "admin_abort":
            self.trace.append(f"admin_abort {txn_id}")
            model = self._outcome(lambda: self._pair(self.model_admin_abort(txn_id, now)))
            real = self._outcome(lambda: rt.abort(txn_id))
        elif name == "verify":
            pid, epoch = self.pick(txn_id, arg // 3)
            group = GROUPS[(arg >> 3) & 1]
            self.trace.append(f"verify {txn_id} {pid}/{epoch} {group}")
            model = self._outcome(lambda: self.model_verify(txn_id, pid, epoch, group))
            real = self._outcome(lambda: verify_offsets_in_transaction(
                rt.loaded.shard.txns.get(txn_id), txn_id, pid, epoch, group))
            self.stats.verified += real == ("ok", None)
        elif name == "deposed_tick":
            self._deposed_tick()
            model = real = None
        elif name == "produce":
            self._produce(txn_id, PARTITIONS[(arg >> 2) % len(PARTITIONS)])
            model = real = None
        elif name == "tick":
            self.clock.advance((100, 1_000, 5_000, 31_000, MAX_TIMEOUT + 1, EXPIRATION)[arg % 6])
            now = self.clock.time_ms()
            self.trace.append(f"tick at {now}")
            model = self._outcome(lambda: self.model_tick(now))
            real = self._outcome(lambda: rt.tick(rt.loaded, now))
        elif name == "fault":
            self._fault(arg)
            model = real = None
        elif name == "write_fault":
            env.fail_next_write = bool(arg & 1)
            self.trace.append(f"the next write fails, its record {'kept' if arg & 1 else 'lost'}")
            model = real = None
        else:
            model = real = None
        if self.stats.failed_writes != failed_before or name == "failover":
            self.failover(exact=self.stats.failed_writes == failed_before)
            model = real
        self._adopt_new_pids()
        if model and model[0] == "ok" and isinstance(model[1], M):
            model = ("ok", (model[1].pid, model[1].epoch))
        if model != real:
            self.fail(f"{name}: the coordinator answered {real}, the model {model}")
        if real and real[0] == "err":
            self.stats.concurrent += real[1] == "ConcurrentTransactionsError"
            self.stats.zombies_fenced += real[1] == "ProducerFencedError"
        self.snapshots = None
        self.compare()

    @staticmethod
    def _pair(m: M) -> M:
        return m   # its (producer id, epoch) once a new producer id is known

    @staticmethod
    def _outcome(fn) -> tuple:
        try:
            return ("ok", fn())
        except RiverlogError as e:
            return ("err", type(e).__name__)

    def _adopt_new_pids(self) -> None:
        for txn_id, m in self.model.items():
            if m.pid == "new":
                meta = self.runtime.loaded.shard.txns.get(txn_id) if self.runtime.loaded.live else None
                if meta is None or meta.producer_id not in self.issued or meta.producer_id in self.used_pids:
                    self.fail(f"{txn_id}: a new producer id was due, the coordinator has {meta}")
                m.pid = meta.producer_id
                self.used_pids.add(m.pid)

    def _produce(self, txn_id: str, tp) -> None:
        m = self.model.get(txn_id)
        if m is None or m.state != "Ongoing" or tp not in m.parts or self.instances[txn_id][-1:] != [(m.pid, m.epoch)]:
            return
        self.trace.append(f"produce {txn_id} {m.pid}/{m.epoch} to {tp} (transaction {m.serial})")
        for kind, p, e, _ in reversed(self.env.partition_log[tp]):
            if p == m.pid and e > m.epoch:
                self.fail(f"{txn_id}: the current producer {m.pid}/{m.epoch} is older than a {kind} of epoch {e} "
                          f"on {tp}: an epoch was reused")
        opened = self.env.open[tp].setdefault(m.pid, m.serial)
        if opened != m.serial:
            self.fail(f"{tp}: records of transaction {m.serial} while transaction {opened} is still open there")
        self.env.partition_log[tp].append(("data", m.pid, m.epoch, m.serial))

    def _fault(self, arg: int) -> None:
        env, kind, node = self.env, arg % 4, (arg >> 2) % NODES
        if kind == 0:
            env.down ^= {node}
        elif kind == 1:
            env.lossy ^= {node}
        elif kind == 2:
            env.refusing ^= {PARTITIONS[(arg >> 2) % len(PARTITIONS)]}
        elif (arg >> 2) & 1:
            env.pids_down = not env.pids_down
        else:
            env.down, env.lossy, env.refusing, env.pids_down = set(), set(), set(), False
        self.trace.append(f"faults: down={sorted(env.down)} lossy={sorted(env.lossy)} refusing={sorted(env.refusing)}"
                          f"{' no producer ids' if env.pids_down else ''}")

    def _deposed_tick(self) -> None:
        """The coordinator before the last failover, not knowing it was deposed, retries its markers
        and times transactions out: it can write no record, so it never decides anything; each
        marker it still writes must be the decision's, until a partition refuses its epoch."""
        old = self.deposed
        if old is None or not old.loaded.live:
            return
        self.trace.append(f"the deposed coordinator (epoch {old.loaded.leader_epoch}) ticks")
        before = old.loaded.live
        with contextlib.suppress(RiverlogError):
            old.tick(old.loaded, self.clock.time_ms())
        if before and not old.loaded.live:
            self.stats.deposed_fenced += 1

    def failover(self, exact: bool) -> None:
        """A new coordinator loads the log. Each id's state is one it durably had in the event (the
        last durable one without a failed write); the model goes on from there. After a failover
        by leadership change (not a failed write), the old coordinator lives on, deposed."""
        self.stats.failovers += 1
        self.leader_epoch += 1
        if exact and self.runtime.loaded.live:
            old = SimRuntime(self.env, self.clock, self._next_pid)
            old.loaded, old.deposed, old._next_expiry = self.runtime.loaded, True, dict(self.runtime._next_expiry)
            self.deposed = old
        self.runtime.load(self.leader_epoch)
        self.trace.append(f"failover (coordinator epoch {self.leader_epoch})")
        loaded = self.runtime.loaded.shard.txns
        self.next_expiry = self.runtime._next_expiry.get(0, 0)  # a failed tick stops before its expiry pass
        for txn_id in IDS:
            meta = loaded.get(txn_id)
            view = None if meta is None else real_view(meta)
            choices = self.snapshots[txn_id][-1:] if exact else self.snapshots[txn_id]
            if view not in choices:
                self.fail(f"{txn_id}: loaded {view}, not one of its durable states {choices}")
            old = self.model.get(txn_id)
            if meta is None:
                self.model.pop(txn_id, None)
                continue
            prepared = meta.state.value.startswith("Prepare")
            serial = old.serial if old is not None else -1
            if serial < 0 and (prepared or meta.state.value == "Ongoing"):
                serial = next(self.serials)
            parts, groups = frozenset(meta.partitions), frozenset(meta.groups)
            self.model[txn_id] = M(meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state.value, parts,
                                   groups, parts if prepared else frozenset(), groups if prepared else frozenset(),
                                   meta.start_ms, meta.last_update_ms, (meta.last_producer_id, meta.last_epoch),
                                   serial)
            if prepared:
                self.members[serial] = (parts, groups)

    def compare(self) -> None:
        txns = self.runtime.loaded.shard.txns
        for txn_id in IDS:
            m, meta = self.model.get(txn_id), txns.get(txn_id)
            mine = None if m is None else m.view()
            theirs = None if meta is None else real_view(meta)
            if mine != theirs:
                self.fail(f"{txn_id}: coordinator {theirs}, model {mine}")
            if meta is not None and meta.producer_epoch < self.highest.get(meta.producer_id, -1):
                self.fail(f"{txn_id}: epoch {meta.producer_epoch} of producer {meta.producer_id} is below "
                          f"{self.highest[meta.producer_id]}, handed out or written before")
        for txn_id, handed in self.instances.items():
            for pid, epoch in handed[-1:]:
                self.highest[pid] = max(self.highest.get(pid, -1), epoch)

    def quiesce(self) -> None:
        """Faults stop; time passes until every transaction is decided and completed."""
        self.env.down, self.env.lossy, self.env.refusing = set(), set(), set()
        self.env.fail_next_write, self.env.pids_down = None, False
        self.trace.append("-- quiet --")
        for _ in range(4):
            self.step("tick", 4)   # past every transaction.timeout.ms
        for txn_id, m in self.model.items():
            if m.state in ("Ongoing", "PrepareCommit", "PrepareAbort"):
                self.fail(f"{txn_id} is still {m.state} after the faults stopped")
        for serial, commit in self.kinds.items():
            parts, groups = self.members[serial]
            missing = (set(parts) | set(groups)) - self.marked.get(serial, set())
            if missing:
                self.fail(f"transaction {serial} ({'commit' if commit else 'abort'}) has no marker in {missing}")
        for tp, open_ in self.env.open.items():
            if open_:
                self.fail(f"{tp}: records of transactions {open_} were never closed by a marker")

    def run(self) -> Stats:
        for op, arg in self.ops:
            self.step(OPS[op % len(OPS)], arg)
        self.quiesce()
        return self.stats


def run(ops, trace: list[str] | None = None, trace_events: int = 40) -> Sim:
    sim = Sim(ops, trace, trace_events)
    sim.run()
    return sim


def run_seed(seed: int, n: int = 60, trace_events: int = 40) -> Stats:
    return run(random_ops(seed, n), trace_events=trace_events).stats


def random_ops(seed: int, n: int = 60) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(op, rng.randrange(64)) for op in rng.choices(range(len(OPS)), WEIGHTS, k=n)]

