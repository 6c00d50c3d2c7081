"""A model-based simulation of Connect's connector and task lifecycle over random histories: the
pure cores (:mod:`connect.states`' transition tables and restart backoff, :mod:`connect.storage_format`'s
records of connect-configs / connect-status / connect-offsets and their folds, ``can_write_safely``)
driven by a small herder over three in-memory logs, no Spark and no broker.

Events (``OPS``): create (with or without KIP-980's initial target state, sometimes with a config
that fails to start), a config update (PUT or PATCH: a new ``tasks.max`` or a fix), pause, resume,
stop, restart (alone, ``includeTasks``, ``onlyFailed``), delete, a task failure (retriable: restarted
after Kafka's backoff while ``errors.retry.timeout`` allows; or not), time passing, a worker restart
(graceful or a crash; the three logs compacted first, tombstones possibly gone, and the new worker's
state rebuilt only from what they hold), lost membership (a newer generation on another worker takes
over; the old one's late writes must not hide it), and alter/reset of source offsets.

The oracle is Kafka's rules (``AbstractHerder``, ``DistributedHerder.stopConnector``/``restartConnectorAndTasks``,
``AbstractHerder.buildRestartPlan``, ``KafkaConfigBackingStore``'s record rules, ``KafkaStatusBackingStore``'s
generation guard, ``ConnectorsResource``' offsets endpoints only on a STOPPED connector) kept as plain
dicts. Invariants after every event: the folded connect-configs give the model's connectors, configs,
target states and task counts (a STOPPED connector has none, a PAUSED one keeps them); the status
topic's fold gives the model's connector and task states; a deleted connector has no config, target
state, task or status; the offsets fold gives the model's offsets. After a worker restart all of that
holds again from the compacted logs alone.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, fields

from connect.states import CONNECTOR, TASK, ConnectorState, Failures, TargetState, running_state
from connect.config import WorkerConfig
from connect.storage import ConnectStorage
from connect.storage_format import Status
from tests.simulation.seeds import ModelFailure

S, T = ConnectorState, TargetState
NAMES = ("a", "b-c", "d")
STATUS_PARTITIONS = 3
RETRY_TIMEOUT_MS, RETRY_DELAY_MAX_MS = 1_000, 600

OPS = ("create", "update", "pause", "resume", "stop", "restart", "delete", "task_fail", "time",
       "worker_restart", "lost", "offsets")
WEIGHTS = (3, 2, 2, 2, 2, 3, 1, 6, 2, 1, 1, 2)
OP_POOL = tuple(i for i, w in enumerate(WEIGHTS) for _ in range(w))


@dataclass
class Stats:
    """Counts of the outcomes the invariants judge; a suite of histories must see each."""
    creates: int = 0
    created_stopped: int = 0          # KIP-980 initial target state
    recreated_after_delete: int = 0
    updates: int = 0
    pauses: int = 0
    resumes: int = 0
    stops: int = 0
    plain_restarts: int = 0
    plan_restarts: int = 0            # includeTasks and/or onlyFailed
    restart_of_paused: int = 0
    deletes: int = 0
    start_failures: int = 0
    retriable_task_failures: int = 0
    fatal_task_failures: int = 0
    auto_restarts: int = 0
    retries_exhausted: int = 0
    worker_restarts: int = 0
    tombstones_compacted: int = 0
    lost_memberships: int = 0
    zombie_writes_refused: int = 0
    offsets_altered: int = 0
    offsets_refused: int = 0


def add(total: Stats, stats: Stats) -> None:
    for f in fields(Stats):
        setattr(total, f.name, getattr(total, f.name) + getattr(stats, f.name))


class Logs:
    """The three topics: connect-configs (one partition), connect-status (several), connect-offsets."""

    def __init__(self):
        self.configs: list[list] = [[]]
        self.status: list[list] = [[] for _ in range(STATUS_PARTITIONS)]
        self.offsets: list[list] = [[], []]

    def compact(self, rng: random.Random, stats: Stats) -> None:
        """Kafka's log cleaner on a random prefix of each partition (the active segment is never
        cleaned): a record with a later record of its key goes; a tombstone may go too."""
        def clean(log: list) -> None:
            upto = rng.randint(0, len(log))
            last = {key: i for i, (key, _) in enumerate(log)}
            kept = []
            for i, (key, value) in enumerate(log):
                if i < upto and last[key] != i:
                    continue
                if i < upto and value is None and rng.random() < 0.7:
                    stats.tombstones_compacted += 1
                    continue
                kept.append((key, value))
            log[:] = kept
        for partitions in (self.configs, self.status, self.offsets):
            for log in partitions:
                clean(log)


class MemLog:
    """A :class:`connect.storage.TopicLog` over in-memory partitions: ``send`` appends to the key's
    partition, ``read_to_end`` folds what this reader has not read yet (its own writes included,
    as a real consumer reads them back), the partitions in a random interleaving."""

    def __init__(self, partitions: list[list], rng: random.Random):
        self.store, self.rng = partitions, rng
        self.topic, self.partitions = "t", len(partitions)
        self.pos = [0] * len(partitions)

    def partition_for(self, key: bytes) -> int:
        return sum(key) % self.partitions

    def send(self, records: list) -> None:
        for key, value in records:
            self.store[self.partition_for(key)].append((key, value))

    def read_to_end(self, view) -> None:
        pending = {p: list(log[self.pos[p]:]) for p, log in enumerate(self.store)}
        self.pos = [len(log) for log in self.store]
        while any(pending.values()):
            p = self.rng.choice([p for p, left in pending.items() if left])
            view.apply(*pending[p].pop(0))

    def close(self) -> None:
        pass


class Running:
    """What one worker runs of a connector (the herder's in-memory side)."""

    def __init__(self):
        self.state: ConnectorState = S.UNASSIGNED
        self.tasks: list[ConnectorState] = []
        self.failures: dict[int, Failures] = {}
        self.restart_at: dict[int, int] = {}


class Herder:
    """A worker over the logs through the real :class:`connect.storage.ConnectStorage` (its
    writes and folds); it moves states only through the transition tables."""

    def __init__(self, logs: Logs, worker_id: str, generation: int, rng: random.Random):
        self.logs, self.worker_id, self.generation, self.rng = logs, worker_id, generation, rng
        self.storage = ConnectStorage(WorkerConfig.parse({"bootstrap.servers": "unused:9092", "group.id": "sim"}))
        self.storage.config_log = MemLog(logs.configs, rng)
        self.storage.status_log = MemLog(logs.status, rng)
        self.storage.offset_log = MemLog(logs.offsets, rng)
        self.configs, self.statuses, self.offsets = self.storage.configs, self.storage.statuses, self.storage.offsets
        self.running: dict[str, Running] = {}

    def read_to_end(self) -> None:
        self.storage.read_to_end()

    def put_status(self, status: Status, safe: bool = False) -> bool:
        self.read_to_end()
        if safe:
            return self.storage.put_status_safe(status)
        self.storage.put_status(status)
        return True

    # ------------------------------------------------------------------------------ states
    def set_connector(self, name: str, state: ConnectorState, trace: str | None = None) -> None:
        r = self.running[name]
        if state != r.state:
            r.state = CONNECTOR.move(r.state, state)
        self.put_status(Status(name, state, self.worker_id, self.generation, trace))

    def set_task(self, name: str, task: int, state: ConnectorState) -> None:
        r = self.running[name]
        if state != r.tasks[task]:
            r.tasks[task] = TASK.move(r.tasks[task], state)
        self.put_status(Status(name, state, self.worker_id, self.generation, None, task))

    def destroy_tasks(self, name: str, keep: int = 0) -> None:
        r = self.running[name]
        for i in range(keep, len(r.tasks)):
            TASK.move(r.tasks[i], S.DESTROYED)
            self.put_status(Status(name, S.DESTROYED, self.worker_id, self.generation, task=i))
            r.failures.pop(i, None)
            r.restart_at.pop(i, None)
        del r.tasks[keep:]

    def fails_to_start(self, name: str) -> bool:
        return self.configs.connector_configs[name].get("fail.start") == "true"

    def apply_target(self, name: str, regenerate: bool = False) -> None:
        """Bring ``name`` to its target state (AbstractHerder / Worker.startConnector): STOPPED writes
        zero task configs first; a start that fails leaves the connector FAILED and its tasks as
        they are; only a STARTED connector computes task configs."""
        r = self.running.setdefault(name, Running())
        target = self.configs.target_state(name)
        if target == T.STOPPED:
            if self.configs.tasks(name) or self.configs.task_counts.get(name):
                self.storage.put_task_configs(name, [])
            self.destroy_tasks(name)
            self.set_connector(name, S.STOPPED)
            return
        failed = target == T.STARTED and self.fails_to_start(name)
        if failed:   # its tasks are the worker's to run all the same
            self.set_connector(name, S.FAILED, "ConnectException: the connector failed to start")
        else:
            self.set_connector(name, running_state(target))
        if target == T.STARTED and not failed:
            props = self.configs.connector_configs[name]
            wanted = [{"task": str(i), "version": props.get("version", "0")}
                      for i in range(int(props.get("tasks.max", "1")))]
            changed = wanted != self.configs.tasks(name)
            if changed:
                self.storage.put_task_configs(name, wanted)
            if changed or regenerate:
                self.destroy_tasks(name, keep=len(wanted))
                r.tasks += [S.UNASSIGNED] * (len(wanted) - len(r.tasks))
                for i in range(len(wanted)):
                    self.restart_task(name, i, S.RESTARTING if r.tasks[i] != S.UNASSIGNED else None)
                return
        # PAUSED: the committed tasks, paused; STARTED and unchanged: the tasks it has, started
        committed = len(self.configs.tasks(name))
        self.destroy_tasks(name, keep=committed)
        r.tasks += [S.UNASSIGNED] * (committed - len(r.tasks))
        for i in range(committed):
            if r.tasks[i] == S.FAILED:
                continue  # a failed task stays FAILED until restarted (paused or resumed alike)
            if r.tasks[i] != running_state(target):
                self.set_task(name, i, running_state(target))

    def restart_task(self, name: str, task: int, via: ConnectorState | None = S.RESTARTING) -> None:
        r = self.running[name]
        if via is not None:
            self.set_task(name, task, via)
        r.failures.pop(task, None)
        r.restart_at.pop(task, None)
        self.set_task(name, task, running_state(self.configs.target_state(name)))

    def start_all(self) -> None:
        for name in self.configs.connectors():
            self.apply_target(name)

    def shutdown(self) -> None:
        """Kafka's onShutdown for every connector and task it ran: UNASSIGNED."""
        for name, r in self.running.items():
            if r.state != S.UNASSIGNED:
                self.set_connector(name, S.UNASSIGNED)
            for i, state in enumerate(r.tasks):
                if state != S.UNASSIGNED:
                    self.set_task(name, i, S.UNASSIGNED)


# ---------------------------------------------------------------------------------- the model
@dataclass
class Model:
    """Kafka's view of one connector."""
    config: dict
    target: TargetState
    state: ConnectorState
    committed: tuple = ()          # the committed task configs' (tasks.max, version)
    tasks: list = None
    failures: dict = None          # task -> (attempts, first failure ms)
    due: dict = None               # task -> when its retry restarts it


def expected_delay(attempt: int, elapsed: int, jitter: float) -> int | None:
    """Kafka's ``RetryWithToleranceOperator.backoff`` applied to a restart: None when no retry."""
    if elapsed >= RETRY_TIMEOUT_MS:
        return None
    delay = 300 * 2 ** (attempt - 1)
    if delay > RETRY_DELAY_MAX_MS:
        delay = int(jitter * RETRY_DELAY_MAX_MS)
    return min(delay, RETRY_TIMEOUT_MS - elapsed)


class Sim:
    def __init__(self, seed: int, trace: list[str]):
        self.rng = random.Random(seed)
        self.trace = trace
        self.stats = Stats()
        self.logs = Logs()
        self.herder = Herder(self.logs, "w1", 0, self.rng)
        self.model: dict[str, Model] = {}
        self.offsets: dict[str, dict] = {}
        self.deleted: set[str] = set()
        self.now = 0

    def fail(self, message: str) -> None:
        raise ModelFailure(message)

    # ------------------------------------------------------------------------------ model moves
    def m_apply(self, name: str, regenerate: bool = False) -> None:
        m = self.model[name]
        if m.target == T.STOPPED:
            m.state, m.tasks, m.committed, m.failures, m.due = S.STOPPED, [], (), {}, {}
            return
        failed = m.config.get("fail.start") == "true" and m.target == T.STARTED   # only start() fails
        m.state = S.FAILED if failed else running_state(m.target)
        wanted = (int(m.config.get("tasks.max", "1")), m.config.get("version", "0"))
        if m.target == T.STARTED and not failed and (wanted != m.committed or regenerate):
            changed = wanted != m.committed
            m.committed = wanted
            if changed or regenerate:
                m.tasks, m.failures, m.due = [S.RUNNING] * wanted[0], {}, {}
                return
        count = m.committed[0] if m.committed else 0
        m.tasks = (m.tasks + [S.UNASSIGNED] * count)[:count]
        m.tasks = [t if t == S.FAILED else running_state(m.target) for t in m.tasks]

    # ------------------------------------------------------------------------------ events
    def step(self, op: str, arg: int) -> None:
        h, name = self.herder, NAMES[arg % len(NAMES)]
        m = self.model.get(name)
        if op == "create":
            if m is not None:
                return  # 409: it exists
            initial = [None, None, T.PAUSED, T.STOPPED][arg % 4]
            config = {"tasks.max": str(1 + arg % 3), "version": str(arg),
                      "fail.start": "true" if arg % 5 == 4 else "false"}
            self.trace.append(f"create {name} {config} initial={initial}")
            h.read_to_end()
            h.storage.put_connector_config(name, config, initial)
            self.stats.creates += 1
            self.stats.created_stopped += initial == T.STOPPED
            self.stats.recreated_after_delete += name in self.deleted
            self.stats.start_failures += config["fail.start"] == "true" and initial is None
            self.model[name] = Model(config, initial or T.STARTED, S.UNASSIGNED, (), [], {}, {})
            h.apply_target(name)
            self.m_apply(name)
        elif m is None:
            return  # 404 for every other call on an unknown connector
        elif op == "update":
            patch = arg % 2 == 0
            change = {"tasks.max": str(1 + arg % 3)} if arg % 3 else {"fail.start": "false"}
            if arg % 4 == 1:
                change["version"] = str(arg)
            if arg % 7 == 6:
                change["fail.start"] = "true"
            config = {**m.config, **change} if patch else {"tasks.max": m.config["tasks.max"],
                                                            "version": m.config["version"], **change}
            self.trace.append(f"{'PATCH' if patch else 'PUT'} {name} {config}")
            h.read_to_end()
            h.storage.put_connector_config(name, config)
            m.config = config
            self.stats.updates += 1
            self.stats.start_failures += config.get("fail.start") == "true" and m.target == T.STARTED
            if h.running[name].state != S.UNASSIGNED:   # the connector is shut down, then started again
                h.set_connector(name, S.UNASSIGNED)
            h.apply_target(name)
            self.m_apply(name)
        elif op in ("pause", "resume", "stop"):
            target = {"pause": T.PAUSED, "resume": T.STARTED, "stop": T.STOPPED}[op]
            self.trace.append(f"{op} {name}")
            setattr(self.stats, op + "s", getattr(self.stats, op + "s") + 1)
            if target == T.STOPPED:   # DistributedHerder.stopConnector: zero task configs, then the target
                h.storage.put_task_configs(name, [])
            h.storage.put_target_state(name, target)
            m.target = target
            if m.state == S.FAILED and target != T.STOPPED:
                # the connector stays FAILED until restarted; its tasks follow the target
                self._tasks_follow(name)
                return
            h.apply_target(name)
            self.m_apply(name)
        elif op == "restart":
            include_tasks, only_failed = [(False, False), (True, False), (True, True), (False, True)][arg % 4]
            self.trace.append(f"restart {name} includeTasks={include_tasks} onlyFailed={only_failed}")
            self.stats.restart_of_paused += m.target == T.PAUSED
            if not (include_tasks or only_failed):
                self.stats.plain_restarts += 1
                h.set_connector(name, S.RESTARTING)
                h.apply_target(name)
                self.m_apply(name)
                return
            self.stats.plan_restarts += 1
            connector = not only_failed or m.state == S.FAILED
            tasks = [i for i, t in enumerate(m.tasks) if include_tasks and (not only_failed or t == S.FAILED)]
            if connector:
                h.set_connector(name, S.RESTARTING)
                h.apply_target(name)
                self.m_apply(name)
            for i in tasks:
                if i < len(m.tasks) and i < len(h.running[name].tasks):
                    h.restart_task(name, i)
                    m.tasks[i] = running_state(m.target)
                    m.failures.pop(i, None)
                    m.due.pop(i, None)
        elif op == "delete":
            self.trace.append(f"delete {name}")
            h.storage.remove_connector_config(name)
            h.destroy_tasks(name)
            h.put_status(Status(name, S.DESTROYED, h.worker_id, h.generation))
            del h.running[name]
            del self.model[name]
            self.deleted.add(name)
            self.stats.deletes += 1
        elif op == "task_fail":
            running = [i for i, t in enumerate(m.tasks) if t == S.RUNNING]
            if not running:
                return
            again = [i for i in running if i in m.failures]   # a run of failures goes on, more often
            i, retriable = (again or running)[arg % len(again or running)], arg % 3 != 0
            self.trace.append(f"task {name}-{i} fails ({'retriable' if retriable else 'fatal'}) at {self.now}")
            h.set_task(name, i, S.FAILED)
            m.tasks[i] = S.FAILED
            if not retriable:
                self.stats.fatal_task_failures += 1
                return
            self.stats.retriable_task_failures += 1
            r = h.running[name]
            r.failures[i] = r.failures.get(i, Failures()).failed(self.now)
            jitter = self.rng.random()
            decision = r.failures[i].decide(self.now, RETRY_TIMEOUT_MS, RETRY_DELAY_MAX_MS, jitter)
            attempts, first = m.failures.get(i, (0, self.now))
            m.failures[i] = (attempts + 1, first)
            expected = expected_delay(attempts + 1, self.now - first, jitter)
            if (expected is None) != (not decision.restart) or (decision.restart and decision.delay_ms != expected):
                self.fail(f"restart decision {decision} for attempt {attempts + 1}, {self.now - first} ms after the "
                          f"first failure; Kafka's backoff gives {expected}")
            if decision.restart:
                r.restart_at[i] = self.now + decision.delay_ms
                m.due[i] = self.now + expected
            else:
                self.stats.retries_exhausted += 1
        if op == "time":
            self.now += self.rng.randint(0, 1_500)
            self.trace.append(f"time -> {self.now}")
            for n, mm in self.model.items():
                r = h.running[n]
                for i, at in sorted(r.restart_at.items()):
                    if at <= self.now and r.tasks[i] == S.FAILED:
                        del r.restart_at[i]
                        h.set_task(n, i, S.RESTARTING)
                        h.set_task(n, i, running_state(h.configs.target_state(n)))
                for i, at in sorted(mm.due.items()):
                    if at <= self.now and mm.tasks[i] == S.FAILED:
                        del mm.due[i]
                        mm.tasks[i] = running_state(mm.target)
                        self.stats.auto_restarts += 1
        elif op == "worker_restart":
            graceful = arg % 2 == 0
            self.trace.append(f"worker restart ({'graceful' if graceful else 'crash'})")
            if graceful:
                h.shutdown()
            self.logs.compact(self.rng, self.stats)
            self.stats.worker_restarts += 1
            fresh = Herder(self.logs, h.worker_id, 0, self.rng)
            fresh.read_to_end()
            fresh.generation = max((s.generation for s in fresh.statuses.connectors.values()), default=-1) + 1
            self.check_views(fresh, statuses=False)
            for n, mm in self.model.items():
                st = fresh.statuses.connector(n)
                want = S.UNASSIGNED if graceful else mm.state
                if st is None or st.state != want:
                    self.fail(f"after the restart connect-status says {n} is {st}, the last written was {want}")
            self.herder = fresh
            self._take_over()
        elif op == "lost":
            self.trace.append(f"membership lost: w2 takes over at generation {h.generation + 1}")
            self.stats.lost_memberships += 1
            w2 = Herder(self.logs, "w2" if h.worker_id == "w1" else "w1", h.generation + 1, self.rng)
            w2.read_to_end()
            self.herder = w2
            self._take_over()
            h.read_to_end()
            for n, r in h.running.items():   # the old owner's onShutdown, written late
                if n in self.model:
                    self.stats.zombie_writes_refused += not h.put_status(
                        Status(n, S.UNASSIGNED, h.worker_id, h.generation), safe=True)
                    for i in range(len(r.tasks)):
                        h.put_status(Status(n, S.UNASSIGNED, h.worker_id, h.generation, task=i), safe=True)
            self.herder.read_to_end()
        elif op == "offsets":
            stopped = h.configs.target_state(name) == T.STOPPED
            if (m.target == T.STOPPED) != stopped:
                self.fail(f"target state of {name} is {h.configs.target_state(name)}, Kafka's is {m.target}")
            if not stopped:
                self.stats.offsets_refused += 1
                self.trace.append(f"alter offsets of {name}: refused, it is {m.target}")
                return
            partition = {"p": arg % 2}
            if arg % 3 == 0:
                self.trace.append(f"reset offsets of {name}")
                records = [(p, None) for p, _ in h.offsets.connector_offsets(name)]
                self.offsets[name] = {}
            else:
                value = None if arg % 5 == 0 else {"pos": arg}
                self.trace.append(f"alter offsets of {name}: {partition} -> {value}")
                records = [(partition, value)]
                self.offsets.setdefault(name, {}).pop(arg % 2, None)
                if value is not None:
                    self.offsets[name][arg % 2] = value
            h.read_to_end()
            h.storage.put_offsets(name, records)
            self.stats.offsets_altered += 1

    def _tasks_follow(self, name: str) -> None:
        h, m = self.herder, self.model[name]
        if m.target == T.STOPPED:
            return
        for i, t in enumerate(m.tasks):
            if t != S.FAILED:
                m.tasks[i] = running_state(m.target)
                h.set_task(name, i, m.tasks[i])

    def _take_over(self) -> None:
        """A worker (re)starting every connector of the config topic, as Kafka's does: failed tasks
        start afresh, a failed connector tries to start again."""
        self.herder.start_all()
        for name, m in self.model.items():
            m.failures, m.due = {}, {}
            m.tasks = [S.UNASSIGNED if t == S.FAILED else t for t in m.tasks]
            self.m_apply(name)

    # ------------------------------------------------------------------------------ invariants
    def check_views(self, h: Herder, statuses: bool = True) -> None:
        if h.configs.connectors() != sorted(self.model):
            self.fail(f"connect-configs holds {h.configs.connectors()}, Kafka's are {sorted(self.model)}")
        for name in NAMES:
            offsets = {p["p"]: o for p, o in h.offsets.connector_offsets(name)}
            if offsets != self.offsets.get(name, {}):
                self.fail(f"connect-offsets of {name}: {offsets}, Kafka's {self.offsets.get(name, {})}")
            m = self.model.get(name)
            if m is None:
                if h.configs.target_state(name) is not None or h.configs.tasks(name) or \
                        (statuses and (h.statuses.connector(name) or h.statuses.task_statuses(name))):
                    self.fail(f"deleted connector {name} reappears: target {h.configs.target_state(name)}, "
                              f"tasks {h.configs.tasks(name)}, status {h.statuses.connector(name)}")
                continue
            if h.configs.connector_configs[name] != m.config or h.configs.target_state(name) != m.target:
                self.fail(f"{name}: config {h.configs.connector_configs[name]} target {h.configs.target_state(name)}, "
                          f"Kafka's {m.config} {m.target}")
            count = len(h.configs.tasks(name))
            if m.target == T.STOPPED and count:
                self.fail(f"STOPPED {name} has {count} task configs; Kafka writes zero")
            if statuses and count != len(m.tasks):
                self.fail(f"{name} has {count} committed task configs, Kafka's {len(m.tasks)} tasks")
            if not statuses:
                continue
            st = h.statuses.connector(name)
            tasks = [s.state for s in h.statuses.task_statuses(name)]
            if st is None or st.state != m.state or tasks != m.tasks:
                self.fail(f"status of {name}: {st and st.state} tasks {tasks}; Kafka's {m.state} {m.tasks}")
            r = h.running[name]
            if r.state != m.state or r.tasks != m.tasks:
                self.fail(f"worker runs {name} {r.state} {r.tasks}; Kafka's {m.state} {m.tasks}")


def random_ops(seed: int, length: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.choice(OP_POOL), rng.randint(0, 59)) for _ in range(length)]


def run(ops: list[tuple[int, int]], trace: list[str], seed: int = 0) -> Sim:
    sim = Sim(seed, trace)
    for step, (op, arg) in enumerate(ops):
        sim.step(OPS[op], arg)
        try:
            sim.check_views(sim.herder)
        except ModelFailure as e:
            raise ModelFailure(f"step {step} ({OPS[op]} {arg}): {e}") from None
    return sim
