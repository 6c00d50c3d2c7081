"""Random histories of the exactly-once protocol (:class:`broker.client.exactly_once.ExactlyOnce`,
the real class, its pure decisions and its decide-record-end order) over an in-process model of
what the brokers answer: transactional ids with producer ids and epochs, EndTxn by handle, abort
by id, the listing of open transactions, and the decisions topic. The history has batches of
several tasks, attempts failing (aborted or left open) and retried, speculative duplicates,
zombie attempts that open their transaction late, the driver dying at every durable step of a
commit (before or after the decision record, between commits, before the strays' aborts), replays
of a batch with another partitioning, failed batches aborted, and a lost checkpoint (a new owner).

The oracle: each batch's rows become visible (committed) exactly once, all of them, in batch
order; only a recorded decision's transactions ever commit; a replayed decided batch writes
nothing; a zombie's rows never show; and once a later batch of the owner ended, none of its
earlier attempts is still open (no hanging transaction holds the last stable offset).
"""
from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field, fields

from broker.client.batch_decision import SKIP, Decision, OwnerReusedError, attempt_batch, offsets_transactional_id
from broker.client.exactly_once import ExactlyOnce, TransactionLostError
from broker.client.txn_admin import TransactionHandle, TransactionListing
from broker.errors import InvalidTxnStateError, ProducerFencedError, TransactionalIdNotFoundError
from tests.simulation.seeds import SimulationFailure


class Crash(Exception):
    """The driver died at this step: nothing after it happens."""


@dataclass
class Stats:
    batches: int = 0
    tasks: int = 0
    retries: int = 0                  # attempts that failed and were retried
    left_open: int = 0                # failed attempts whose transaction stayed open
    speculative: int = 0
    zombies_fired: int = 0            # attempts that opened their transaction late
    crashes: int = 0
    crashes_after_record: int = 0
    replays_skipped: int = 0          # tasks of a replay told SKIP
    failed_batches: int = 0           # batches aborted (too many failures), then run again
    strays_aborted: int = 0
    new_owners: int = 0               # lost checkpoints
    owner_reuse_refused: int = 0
    undecided_commits: int = 0        # commits told the batch is undecided (no log read)
    failed_replays: int = 0           # a replay of a decided batch failed: abort() keeps the decision
    offsets_attempts: int = 0         # committer records written in the committer's own attempt

    def add(self, other: "Stats") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class _Txn:
    owner: str
    pid: int
    epoch: int = -1
    state: str = "Empty"
    pending: list = field(default_factory=list)


def _done(value=None, error: Exception | None = None) -> Future:
    f: Future = Future()
    if error is not None:
        f.set_exception(error)
    else:
        f.set_result(value)
    return f


class Cluster:
    """The brokers' answers: transactions by id, the decisions topic, and what read_committed sees."""

    def __init__(self, trace: list[str]):
        self.txns: dict[str, _Txn] = {}
        self.decisions: dict[str, Decision] = {}
        self.visible: list[tuple[str, int, str]] = []   # (owner, batch, row) in commit order
        self.crash_in: int | None = None
        self.steps_done: list[str] = []
        self.trace = trace
        self._pids = 1000

    def step(self, what: str) -> None:
        """A durable step of the driver's; the chosen one is where it dies."""
        if self.crash_in is not None:
            if self.crash_in == 0:
                self.crash_in = None
                self.trace.append(f"  driver dies before {what}")
                raise Crash(what)
            self.crash_in -= 1
        self.steps_done.append(what)

    # -------------------------------------------------------------- producers
    def init(self, txn_id: str, owner: str) -> int:
        """init_transactions: a new epoch; an open transaction of the id is aborted (fenced)."""
        t = self.txns.get(txn_id)
        if t is None:
            self._pids += 1
            t = self.txns[txn_id] = _Txn(owner, self._pids)
        if t.state == "Ongoing":
            self.trace.append(f"  init {txn_id} aborts its open transaction (epoch {t.epoch})")
        t.state, t.pending = "Empty", []
        t.epoch += 1
        return t.epoch

    def produce(self, txn_id: str, epoch: int, rows: list) -> bool:
        t = self.txns[txn_id]
        if t.epoch != epoch or t.state not in ("Empty", "Ongoing"):
            return False  # fenced
        t.state = "Ongoing"
        t.pending.extend(rows)
        return True

    def handle(self, txn_id: str) -> TransactionHandle:
        t = self.txns[txn_id]
        return TransactionHandle(txn_id, t.pid, t.epoch)

    # -------------------------------------------------------------- coordinator
    def end(self, h: TransactionHandle, commit: bool) -> None:
        t = self.txns.get(h.transactional_id)
        if t is None or t.pid != h.producer_id or t.epoch != h.producer_epoch:
            raise ProducerFencedError(f"{h.transactional_id}: epoch {h.producer_epoch} is fenced")
        if t.state == "Ongoing":
            if commit:
                decision = self.decisions.get(t.owner)
                if decision is None or h not in decision.attempts:
                    raise SimulationFailure(-1, -1, f"{h} committed without a recorded decision holding it "
                                            f"({decision})", self.trace)
                self.visible.extend(t.pending)
            self.trace.append(f"  {'commit' if commit else 'abort'} {h.transactional_id}@{h.producer_epoch} "
                              f"({len(t.pending)} rows)")
            t.state, t.pending = ("CompleteCommit" if commit else "CompleteAbort"), []
        elif t.state != ("CompleteCommit" if commit else "CompleteAbort"):
            raise InvalidTxnStateError(f"{h.transactional_id} is {t.state}")

    def abort_by_id(self, txn_id: str) -> None:
        t = self.txns.get(txn_id)
        if t is None:
            raise TransactionalIdNotFoundError(txn_id)
        if t.state != "Ongoing":
            raise InvalidTxnStateError(f"{txn_id} is {t.state}")
        self.trace.append(f"  abort by id {txn_id}@{t.epoch} ({len(t.pending)} rows)")
        t.state, t.pending = "CompleteAbort", []
        t.epoch += 1

    def open_ids(self, prefix: str = "") -> list[str]:
        return sorted(i for i, t in self.txns.items() if t.state == "Ongoing" and i.startswith(prefix))


class FakeLog:
    """The decisions topic (DecisionLog's two calls)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def latest(self, owner: str) -> Decision | None:
        d = self.cluster.decisions.get(owner)
        return None if d is None else Decision.from_value(d.to_value())

    def record(self, decision: Decision) -> None:
        self.cluster.step(f"record {decision.owner}/{decision.batch_id}")
        self.cluster.trace.append(f"  record {decision.owner}/{decision.batch_id}: "
                                  f"{[a.transactional_id for a in decision.attempts]}")
        self.cluster.decisions[decision.owner] = Decision.from_value(decision.to_value())


class FakeAdmin:
    """The admin client's transaction calls ExactlyOnce makes."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def list_transactions(self, timeout=None, states=None, prefix=""):
        return _done([TransactionListing(i, self.cluster.txns[i].pid, "Ongoing")
                      for i in self.cluster.open_ids(prefix)])

    def _end(self, handles, commit: bool) -> dict[str, Future]:
        out = {}
        for h in handles:
            self.cluster.step(f"{'commit' if commit else 'abort'} {h.transactional_id}")
            try:
                self.cluster.end(h, commit)
                out[h.transactional_id] = _done()
            except (ProducerFencedError, InvalidTxnStateError) as e:
                out[h.transactional_id] = _done(error=e)
        return out

    def commit_transactions(self, handles, timeout=None):
        return self._end(handles, True)

    def abort_transactions(self, handles, timeout=None):
        return self._end(handles, False)

    def abort_transaction(self, txn_id, timeout=None):
        self.cluster.step(f"abort-by-id {txn_id}")
        try:
            self.cluster.abort_by_id(txn_id)
            return _done(None)
        except (InvalidTxnStateError, TransactionalIdNotFoundError) as e:
            return _done(error=e)


@dataclass(frozen=True)
class SimConfig:
    batches: int = 6
    max_tasks: int = 3
    max_rows: int = 5
    p_crash: float = 0.3
    p_new_owner: float = 0.08
    max_attempts: int = 4
    # Spark numbers a task's attempts from 0 again in every run of a batch (after a driver restart or
    # a failed batch), so a killed attempt of an earlier run that opens late takes over the same id
    # as the replay's attempt and aborts it, even once decided (the seeds of
    # test_a_late_attempt_of_an_earlier_run_under_a_reused_id_is_caught). False: attempt numbers
    # unique across runs (what a writer must pass), and the oracle holds.
    attempts_restart: bool = False


class Simulation:
    def __init__(self, seed: int, config: SimConfig = SimConfig()):
        self.seed, self.config = seed, config
        self.rng = random.Random(seed)
        self.trace: list[str] = []
        self.cluster = Cluster(self.trace)
        self.stats = Stats()
        self.zombies: list[tuple[str, str, list]] = []   # (owner, txn id, rows): attempts still to open
        self.gen = 0
        self.step = 0
        self.runs = 0

    def fail(self, message: str):
        raise SimulationFailure(self.seed, self.step, message, self.trace)

    def eo(self, owner: str) -> ExactlyOnce:
        eo = ExactlyOnce({}, owner, log=FakeLog(self.cluster))
        eo._admin = FakeAdmin(self.cluster)
        eo._offsets_attempt = lambda batch_id, group_id, offsets, records=(): self.offsets_attempt(
            owner, batch_id, records)
        return eo

    def rows(self, owner: str, batch: int) -> list:
        """The batch's rows: its tasks', then maybe one committer record (the offsets attempt's)."""
        r = random.Random(f"{self.seed}/{owner}/{batch}")
        rows = [(owner, batch, f"r{i}") for i in range(r.randint(1, self.config.max_rows))]
        return rows + [(owner, batch, "committer")] * (r.random() < 0.4)

    def offsets_attempt(self, owner: str, batch_id: int, records: list) -> TransactionHandle:
        """The committer's own attempt (ExactlyOnce._offsets_attempt without a real producer): one id
        per batch, so a restarted committer's init fences its predecessor's."""
        self.stats.offsets_attempts += 1
        return self.write(owner, offsets_transactional_id(owner, batch_id), list(records))

    def maybe_fire_zombie(self, p: float = 0.3) -> None:
        if self.zombies and self.rng.random() < p:
            owner, txn_id, rows = self.zombies.pop(self.rng.randrange(len(self.zombies)))
            epoch = self.cluster.init(txn_id, owner)
            self.cluster.produce(txn_id, epoch, [(*r[:2], "zombie") for r in rows])
            self.trace.append(f"  zombie {txn_id} opens late")
            self.stats.zombies_fired += 1

    def write(self, owner: str, txn_id: str, rows: list) -> TransactionHandle:
        epoch = self.cluster.init(txn_id, owner)
        self.cluster.produce(txn_id, epoch, rows)
        return self.cluster.handle(txn_id)

    def run_task(self, eo: ExactlyOnce, batch: int, task: int, rows: list) -> TransactionHandle | None | bool:
        """One task with its retries: its reported handle, None (nothing written), False (gave up)."""
        self.stats.tasks += 1
        self.maybe_fire_zombie()
        if eo.write_action(batch) == SKIP:
            self.stats.replays_skipped += 1
            return None
        if not rows:
            return None
        base = 0 if self.config.attempts_restart else self.runs * self.config.max_attempts
        for attempt in range(base, base + self.config.max_attempts):
            txn_id = eo.transactional_id(batch, task, attempt)
            outcome = self.rng.choice(["ok"] * 6 + ["fail_abort", "fail_open", "spec", "zombie"])
            if outcome == "ok":
                return self.write(eo.owner, txn_id, rows)
            if outcome == "spec" and attempt + 1 < base + self.config.max_attempts:
                self.stats.speculative += 1
                other = eo.transactional_id(batch, task, attempt + 1)
                a, b = self.write(eo.owner, txn_id, rows), self.write(eo.owner, other, rows)
                win, lose = (a, b) if self.rng.random() < 0.5 else (b, a)
                if self.rng.random() < 0.5:
                    self.cluster.end(lose, False)  # Spark killed it, its task aborted
                self.trace.append(f"  speculative {a.transactional_id} / {b.transactional_id}: "
                                  f"{win.transactional_id} wins")
                return win
            self.stats.retries += 1
            if outcome == "zombie":
                self.zombies.append((eo.owner, txn_id, rows))
                self.trace.append(f"  attempt {txn_id} lost before opening (a zombie later)")
                continue
            h = self.write(eo.owner, txn_id, rows)
            if outcome == "fail_abort":
                self.cluster.end(h, False)
            else:
                self.stats.left_open += 1
            self.trace.append(f"  attempt {txn_id} failed ({outcome})")
        return False

    def run_batch(self, owner: str, batch: int, clean: bool = False) -> None:
        """Run ``batch`` until its commit returns: driver deaths and failed runs replay it."""
        rows = [r for r in self.rows(owner, batch) if r[2] != "committer"]
        committer = [r for r in self.rows(owner, batch) if r[2] == "committer"]
        while True:
            self.step += 1
            self.runs += 1
            eo = self.eo(owner)
            tasks = self.rng.randint(1, self.config.max_tasks)
            self.trace.append(f"{owner} batch {batch}: {tasks} task(s), {len(rows)} row(s)")
            chunks = [rows[i::tasks] for i in range(tasks)]
            reported, gave_up = [], False
            skips = self.stats.replays_skipped
            for task, chunk in enumerate(chunks):
                h = self.run_task(eo, batch, task, chunk)
                if h is False:
                    gave_up = True
                    break
                if h is not None:
                    reported.append(h)
            if not clean and not gave_up and self.rng.random() < 0.08:
                gave_up = True  # the job failed otherwise (a replay's too, whose tasks skipped)
                self.stats.failed_replays += self.stats.replays_skipped > skips
            # Every task was told WRITE: the writer tells the committer not to read the log again.
            undecided = self.stats.replays_skipped == skips and self.rng.random() < 0.5
            if not clean:
                self.maybe_fire_zombie()
            try:
                if gave_up:
                    self.stats.failed_batches += 1
                    self.trace.append("  batch failed: abort")
                    eo.abort(batch, reported)
                    continue
                if not clean and self.rng.random() < self.config.p_crash:
                    self.cluster.crash_in = self.rng.randint(0, len(reported) + 3)
                self.cluster.steps_done = []
                before = set(self.cluster.open_ids(f"{owner}-"))
                eo.commit(batch, reported, undecided=undecided,
                          records=(lambda: committer) if committer else None)
                self.stats.undecided_commits += undecided
                self.cluster.crash_in = None
                self.stats.strays_aborted += len(before - set(self.cluster.open_ids(f"{owner}-"))
                                                 - {h.transactional_id for h in reported})
                break
            except Crash:
                self.cluster.crash_in = None
                self.stats.crashes += 1
                if any(s.startswith("record") for s in self.cluster.steps_done):
                    self.stats.crashes_after_record += 1
            except TransactionLostError as e:
                self.fail(f"a decided transaction was lost: {e}")
        self.stats.batches += 1
        self.check(owner, batch)

    def check(self, owner: str, last: int) -> None:
        """Batches 0..last of ``owner`` visible exactly once each, whole, in order; nothing of a
        zombie; no attempt of an earlier batch still open."""
        seen = [v for v in self.cluster.visible if v[0] == owner]
        if any(v[2] == "zombie" for v in seen):
            self.fail(f"a zombie's rows are visible: {seen}")
        order = [v[1] for v in seen]
        if order != sorted(order):
            self.fail(f"batches of {owner} visible out of order: {order}")
        for b in range(last + 1):
            got = Counter(v for v in seen if v[1] == b)
            if got != Counter(self.rows(owner, b)):
                self.fail(f"batch {b} of {owner}: visible {sorted(got.items())}, expected once each "
                          f"{self.rows(owner, b)}")
        hanging = [i for i in self.cluster.open_ids(f"{owner}-")
                   if (b := attempt_batch(i, owner)) is not None and b < last]
        if hanging:
            self.fail(f"after batch {last} of {owner} ended, earlier attempts are still open: {hanging}")

    def run(self) -> Stats:
        owner = "s0"
        batch = 0
        for _ in range(self.config.batches):
            self.run_batch(owner, batch)
            batch += 1
            if self.rng.random() < self.config.p_new_owner:
                old = owner
                self.gen += 1
                owner, batch = f"s{self.gen}", 0
                self.stats.new_owners += 1
                self.trace.append(f"checkpoint lost: new owner {owner}")
                try:
                    self.eo(old).write_action(0)
                    if self.cluster.decisions[old].batch_id > 0:
                        self.fail(f"owner {old} reused from batch 0 after deciding a later batch")
                except OwnerReusedError:
                    self.stats.owner_reuse_refused += 1
        while self.zombies:  # every late attempt opens, then two clean batches end all of them
            self.maybe_fire_zombie(1.0)
        self.run_batch(owner, batch, clean=True)
        self.run_batch(owner, batch + 1, clean=True)
        return self.stats


def run_seed(seed: int, config: SimConfig = SimConfig()) -> Stats:
    return Simulation(seed, config).run()
