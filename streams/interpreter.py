"""The reference interpreter: a topology run in plain Python over in-memory topics.

It is the oracle the Spark compilation is tested against and the engine of
:class:`streams.testing.TopologyTestDriver`. Records are processed one at a time, to completion,
in the order they were appended to the topics the topology reads (records a sub-topology writes to
a repartition topic are processed after the record that caused them, as Kafka's test driver does).
Tasks are per sub-topology and partition, exactly as in the queries, so stream time, stores and
changelogs match.
"""
from __future__ import annotations

import heapq
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from broker.errors import InvalidConfigError
from streams.config_checks import check_kafka_keys, kafka_number
from streams.errors import TopologyError, deserialization_handler, processing_handler, production_handler
from streams.record import Record
from streams.stores import DictBacking
from streams.task import NodeContext, Task
from streams.topology import SubTopology, Topology, changelog_topic

log = logging.getLogger(__name__)

EXACTLY_ONCE_V2, AT_LEAST_ONCE = "exactly_once_v2", "at_least_once"
OPTIMIZATIONS = ("none", "all", "reuse.ktable.source.topics", "merge.repartition.topics", "single.store.self.join")
CACHE_MAX_BYTES_DEFAULT = 10 * 1024 * 1024
COMMIT_INTERVAL_MS_DEFAULT = 100


def streams_config(config: dict) -> dict:
    """The keys both the test driver and ``StreamsApp`` read, checked by Kafka's ``StreamsConfig``
    validators (a ConfigException there, an InvalidConfigError naming the key here) and given their
    defaults. Kafka's TopologyTestDriver builds a StreamsConfig too, so a value Kafka refuses is
    refused by both."""
    check_kafka_keys(config)
    c = dict(config)
    guarantee = c.setdefault("processing.guarantee", EXACTLY_ONCE_V2)
    if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE_V2):
        hint = "; exactly_once and exactly_once_beta were removed in Kafka 4.0" if guarantee in (
            "exactly_once", "exactly_once_beta") else ""
        raise InvalidConfigError(f"Invalid value {guarantee} for configuration processing.guarantee: String must be "
                                 f"one of: {AT_LEAST_ONCE}, {EXACTLY_ONCE_V2}{hint}", config="processing.guarantee")
    c["commit.interval.ms"] = at_least(c, "commit.interval.ms", COMMIT_INTERVAL_MS_DEFAULT)
    # Kafka reads the deprecated cache.max.bytes.buffering only when the new name is not set.
    name = "statestore.cache.max.bytes" if "statestore.cache.max.bytes" in c or \
        "cache.max.bytes.buffering" not in c else "cache.max.bytes.buffering"
    c["statestore.cache.max.bytes"] = at_least(c, name, CACHE_MAX_BYTES_DEFAULT)
    c["max.task.idle.ms"] = at_least(c, "max.task.idle.ms", 0, -1)   # -1: never wait; Kafka takes less unchecked
    c["topology.optimization"] = optimization(c.get("topology.optimization", "none"))
    task_policy(c)
    production_handler(c)
    return c


def optimization(value) -> str:
    """Kafka's ``StreamsConfig.verifyTopologyOptimizationConfigs``: ``none``, ``all`` or a list of
    the single optimizations. Riverlog's topology is the unoptimized one: any other value is logged
    as not applied (the internal topics keep their unoptimized names, as Kafka's with ``none``)."""
    text = str(value)
    parts = [p.strip() for p in text.split(",")]
    if ("none" in parts or "all" in parts) and len(parts) > 1 or any(p not in OPTIMIZATIONS for p in parts):
        raise InvalidConfigError(f"Invalid value {text} for configuration topology.optimization: \"{text}\" is not a "
                                 f"valid optimization config. Acceptable inputs are {list(OPTIMIZATIONS)}",
                                 config="topology.optimization")
    if parts != ["none"]:
        log.warning("topology.optimization=%s is not applied: Riverlog builds the unoptimized topology "
                    "(as topology.optimization=none)", text)
    return text


def at_least(c: dict, name: str, default: int, minimum: int = 0) -> int:
    """``c[name]`` (else ``default``) as Kafka's ``LONG`` with its ``atLeast(minimum)`` validator:
    a float, a bool or a number below ``minimum`` is refused with Kafka's message, naming the key."""
    given = c.get(name)
    if given is None:
        return default
    value = kafka_number(name, given, "LONG")
    if value < minimum:
        raise InvalidConfigError(f"Invalid value {given} for configuration {name}: Value must be at least {minimum}",
                                 config=name)
    return value


@dataclass(frozen=True)
class TaskPolicy:
    """What a task takes from the config beyond serdes: ``default.timestamp.extractor``, the
    deserialization and processing exception handlers, the bootstrap servers (picklable: Spark
    ships it to executors)."""
    timestamp_extractor: Any
    deserialization: Any
    processing: Any
    bootstrap_servers: str | None = None    # where a task on Spark asks an output topic's partition count


def task_policy(config: dict) -> TaskPolicy:
    from streams.parameters import timestamp_extractor
    return TaskPolicy(timestamp_extractor(config.get("default.timestamp.extractor")),
                      deserialization_handler(config), processing_handler(config), config.get("bootstrap.servers"))


def merged(queues: list, prepare: Callable[[Any], Any]) -> Iterator[tuple[Any, Any]]:
    """Kafka's ``PartitionGroup.nextRecord`` over one task's input partitions: ``queues`` are each
    partition's raw records in offset order (in tie-break order: topic name, then partition);
    ``prepare`` is ``RecordQueue.updateHead`` for one (deserialized and timestamped record, or None
    to skip it). The partition whose head has the lowest *extracted* timestamp goes next; its next
    head is prepared before the record is processed, as Kafka polls it. Yields (raw, prepared)."""
    heap: list = []
    iters = [iter(q) for q in queues]

    def advance(i: int) -> None:
        for raw in iters[i]:
            record = prepare(raw)
            if record is not None:
                heapq.heappush(heap, (record.timestamp, i, raw, record))
                return

    for i in range(len(iters)):
        advance(i)
    while heap:
        _, i, raw, record = heapq.heappop(heap)
        advance(i)
        yield raw, record


def default_serdes(config: dict) -> tuple:
    from streams.serdes import serde_of
    out = []
    for name in ("default.key.serde", "default.value.serde"):
        v = config.get(name)
        out.append(serde_of(v) if v is not None else None)
    return tuple(out)


def check_serdes(topology: Topology, defaults: tuple) -> None:
    """Every topic a topology reads or writes needs serdes: fail at build, naming the node."""
    for n in topology.nodes:
        if n.kind not in ("source", "sink") or n.op == "repartition" and n.kind == "source":
            continue
        for which, serde, default in (("key", n.key_serde, defaults[0]), ("value", n.value_serde, defaults[1])):
            if serde is None and default is None:
                where = {"stream": "Consumed", "table": "Consumed", "to": "Produced",
                         "repartition": "Grouped or Repartitioned"}.get(n.op, "its parameters")
                raise TopologyError(f"{n.name} ({n.op} {', '.join(n.topics) or ''}) has no {which} serde: pass one "
                                    f"with {where}.with_(...) or set default.{which}.serde")


def murmur2_partition(key: bytes | None, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record; a null key goes to partition 0 here (Kafka
    picks one at random), so the interpreter is deterministic."""
    if key is None or partitions == 1:
        return 0
    from broker.client import murmur2
    return murmur2(key, partitions)


class Interpreter:
    """``cache_bytes``: tasks hold Kafka's record cache of that size and forward it only at
    :meth:`commit` or eviction (the default 0 forwards every update, as the test driver, which
    commits after every record)."""

    def __init__(self, topology: Topology, config: dict, partitions: dict[str, int] | None = None,
                 cache_bytes: int = 0):
        if "application.id" not in config:
            raise TopologyError("config 'application.id' is required")
        self.topology, self.config = topology, streams_config(config)
        self.policy = task_policy(self.config)
        self.app = config["application.id"]
        self.defaults = default_serdes(self.config)
        check_serdes(topology, self.defaults)
        self.given_partitions = dict(partitions or {})
        self.topics: dict[str, list[list[tuple]]] = {}
        self.readers: dict[str, SubTopology] = {}
        for sub in topology.subtopologies:
            for t in topology.source_topics(self.app, sub):
                self.readers[t] = sub
        from streams.joins import copartition
        self.given_partitions.update(copartition(topology, self.app, lambda t: self.given_partitions.get(t, 1)))
        self.tasks: dict[tuple[int, int], tuple[Task, dict]] = {}
        self.backings: dict[tuple[int, int], dict[str, DictBacking]] = {}   # per task, per store
        self.pending: deque[tuple[str, int, int]] = deque()
        # max.task.idle.ms > 0: each task's input partitions wait, as Kafka's PartitionGroup, until
        # all have data or an empty one's idle deadline (wall-clock time) has passed
        self.idle_ms, self.wall_clock = self.config["max.task.idle.ms"], 0
        if self.idle_ms > 0:     # Kafka's TopologyTestDriver.logIfTaskIdleEnabled
            log.info("Detected %s config in use with TopologyTestDriver (set to %sms). This means you might need "
                     "to use TopologyTestDriver#advanceWallClockTime() or enqueue records on all partitions to "
                     "allow proper processing.", "max.task.idle.ms", self.idle_ms)
        self.groups: dict[tuple[int, int], _PartitionGroup] = {}
        self.changelogs: dict[str, list[tuple]] = {}
        self.cache_bytes = cache_bytes
        # caching rules stay on unless the cache is switched off (0): Kafka then disables caching
        # on every store (InternalTopologyBuilder.rewriteTopology)
        self.caching = cache_bytes > 0 or self.config["statestore.cache.max.bytes"] > 0

    # ------------------------------------------------------------------ topics
    def partitions(self, topic: str) -> int:
        if topic in self.given_partitions:
            return self.given_partitions[topic]
        n = self.topology.repartition_partitions(self.app, topic, self.partitions)
        return 1 if n is None else n

    def append(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers=(),
               partition: int | None = None) -> None:
        parts = self.topics.setdefault(topic, [[] for _ in range(self.partitions(topic))])
        if partition is None:
            partition = murmur2_partition(key, len(parts))
        if not 0 <= partition < len(parts):
            raise TopologyError(f"partition {partition} of topic {topic!r} does not exist ({len(parts)} partitions)")
        parts[partition].append((key, value, timestamp, tuple(headers)))
        if self.reads(topic):
            self.pending.append((topic, partition, len(parts[partition]) - 1))

    def reads(self, topic: str) -> bool:
        """Whether the topology reads ``topic``: named by a source, or matched by a pattern source."""
        if topic not in self.readers:
            from streams.pattern_sources import match
            node = match(self.topology, topic)
            if node is None:
                return False
            self.readers[topic] = next(s for s in self.topology.subtopologies if node in s.nodes)
        return True

    def pipe(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers=(),
             partition: int | None = None) -> None:
        """Append a record to an input topic and process everything it causes."""
        self.append(topic, key, value, timestamp, headers, partition)
        self.run()

    def run(self) -> None:
        if self.idle_ms <= 0:
            while self.pending:
                topic, partition, offset = self.pending.popleft()
                self.process(topic, partition, offset)
            return
        progressed = True
        while progressed:
            while self.pending:
                self._enqueue(*self.pending.popleft())
            progressed = False
            for group in list(self.groups.values()):
                if group.ready(self.wall_clock, self.idle_ms):
                    self._process_head(group)
                    progressed = True

    def advance_wall_clock(self, ms: int) -> None:
        """Kafka's ``TopologyTestDriver.advanceWallClockTime``: idle deadlines that pass let their
        tasks process what waits."""
        self.wall_clock += int(ms)
        self.run()

    def _enqueue(self, topic: str, partition: int, offset: int) -> None:
        from streams.global_table import is_global
        sub = self.readers[topic]
        if is_global(sub):      # Kafka's global thread does not idle
            self.process(topic, partition, offset)
            return
        group = self.groups.get((sub.id, partition))
        if group is None:
            inputs = [(t, partition) for t in sorted(self.topology.source_topics(self.app, sub))
                      if partition < self.partitions(t)]
            group = self.groups[(sub.id, partition)] = _PartitionGroup(self.task(sub, partition), inputs, self.topics)
        group.add(topic, partition, offset)

    def _process_head(self, group: "_PartitionGroup") -> None:
        (topic, partition, offset), record = group.next()
        task, sources = group.task
        task.source = (topic, partition, offset)
        sources[topic].forward(record)
        self._publish(task)

    def process(self, topic: str, partition: int, offset: int) -> None:
        sub = self.readers[topic]
        task, sources = self.task(sub, partition)
        key, value, ts, headers = self.topics[topic][partition][offset]
        task.source = (topic, partition, offset)
        sources[topic].process(Record(key, value, ts, headers))
        self._publish(task)

    def _publish(self, task: Task) -> None:
        outputs, task.outputs = task.outputs, []
        for (t, k, v, timestamp, hdrs, p) in outputs:
            self.append(t, k, v, timestamp, hdrs, p)

    def commit(self) -> None:
        """Every task commits: what its record cache holds is forwarded (and what that writes is
        appended; :meth:`run` processes it)."""
        for task, _ in list(self.tasks.values()):
            task.commit()
            self._publish(task)

    # ------------------------------------------------------------------ tasks
    def task(self, sub: SubTopology, partition: int) -> tuple[Task, dict]:
        from streams.global_table import share_global_stores, task_key
        partition = task_key(sub, partition)
        entry = self.tasks.get((sub.id, partition))
        if entry is None:
            backings = self.backings[(sub.id, partition)] = {}
            entry = self.tasks[(sub.id, partition)] = build_task(
                self.topology, sub, self.app, partition, defaults=self.defaults, policy=self.policy,
                partition_count=self.partitions, backing=lambda name: backings.setdefault(name, DictBacking()))
            entry[0].use_cache(self.cache_bytes, self.caching)
            share_global_stores(self, entry[0])
        return entry

    def logged_stores(self) -> set[str]:
        """The stores a write has gone to, so their changelogs have records: a global table's
        store is restored from its source topic, which is its changelog (Kafka logs it nowhere
        else), and the processors' metadata is Riverlog's own."""
        from streams.global_table import is_global
        return {name for (sub_id, _), backings in self.backings.items()
                if not is_global(self.topology.subtopologies[sub_id])
                for name, backing in backings.items() if backing.changes and name != "__meta"}

    def stores(self, name: str) -> list[Any]:
        """The store ``name`` in every task that has one (a store is partitioned like its input)."""
        out = []
        for (sub_id, p), (task, _) in sorted(self.tasks.items()):
            if name in task.specs:
                out.append(task.store(name))
        if not out and name not in self.topology.stores():
            raise KeyError(name)
        return out


class _PartitionGroup:
    """Kafka's ``PartitionGroup`` of one driver task under ``max.task.idle.ms``: each input
    partition's queue keeps its head deserialized and timestamped (``RecordQueue.updateHead``,
    skipping what the source drops); the task is ready when every partition has a head, or an
    empty one's idle deadline (set when it is first found empty) has passed
    (``PartitionGroup.readyToProcess``); the lowest extracted head goes next."""

    def __init__(self, task: tuple, inputs: list[tuple[str, int]], topics: dict):
        self.task, self.topics = task, topics
        self.queues: dict[tuple[str, int], deque] = {tp: deque() for tp in inputs}
        self.heads: dict[tuple[str, int], tuple] = {}
        self.deadlines: dict[tuple[str, int], int] = {}

    def add(self, topic: str, partition: int, offset: int) -> None:
        self.queues.setdefault((topic, partition), deque()).append(offset)
        if (topic, partition) not in self.heads:
            self._update_head((topic, partition))

    def _update_head(self, tp: tuple[str, int]) -> None:
        task, sources = self.task
        queue = self.queues[tp]
        while queue:
            key, value, ts, headers = self.topics[tp[0]][tp[1]][queue[0]]
            record = sources[tp[0]].prepare(Record(key, value, ts, headers), (*tp, queue[0]))
            if record is not None:
                self.heads[tp] = (queue[0], record)
                return
            queue.popleft()
        self.heads.pop(tp, None)

    def ready(self, wall_clock: int, idle_ms: int) -> bool:
        if not self.heads:
            return False
        for tp in self.queues:
            if tp in self.heads:
                self.deadlines.pop(tp, None)
            elif wall_clock < self.deadlines.setdefault(tp, wall_clock + idle_ms):
                return False
        return True

    def next(self) -> tuple[tuple[str, int, int], Record]:
        tp = min(self.heads, key=lambda tp: (self.heads[tp][1].timestamp, tp))
        offset, record = self.heads.pop(tp)
        self.queues[tp].popleft()
        self._update_head(tp)
        return (*tp, offset), record


def build_task(topology: Topology, sub: SubTopology, app: str, partition: int, backing=None,
               defaults: tuple = (None, None), policy: TaskPolicy | None = None,
               partition_count: Callable[[str], int] | None = None) -> tuple[Task, dict]:
    """A task's processors, wired as the sub-topology's nodes are; returns the task and its source
    processor per (resolved) topic. ``policy`` (the application's or the driver's, from its config)
    configures the sources and, with a processing handler that continues, every processor between
    them and the sinks; without one the sources apply records as given (their own timestamps, a
    failed deserialization failing), as the tests of single steps want them. ``partition_count``
    (topic -> its number of partitions) reaches the sinks, whose windowed keys need it."""
    from streams.stateless import Sink, Source
    kwargs = {"backing": backing} if backing is not None else {}
    task = Task(app, partition, sub.stores, defaults=defaults, **kwargs)
    members = set(id(n) for n in sub.nodes)
    procs = {n.name: n.factory() for n in sub.nodes}
    for n in sub.nodes:
        children = [procs[c.name] for c in n.children if id(c) in members]
        procs[n.name].init(NodeContext(task, n.name, children))
        p = procs[n.name]
        if isinstance(p, Sink) and partition_count is not None:
            p.configure(partition_count)
        if policy is None:
            continue
        if isinstance(p, Source):
            p.configure(None if n.internal else policy.timestamp_extractor, policy.deserialization)
        elif not isinstance(p, Sink) and policy.processing.CONTINUE:
            p.process = _handled(p.process, n.name, task, policy.processing)
    task.processors = procs
    from streams.pattern_sources import SourcesByTopic
    sources = SourcesByTopic(topology, procs)
    for n in sub.sources:
        for t in n.topics:
            sources[Topology.topic(app, n, t)] = procs[n.name]
    return task, sources


def _handled(process: Callable, node: str, task: Task, handler) -> Callable:
    """Kafka's ``ProcessorNode.process``: an exception the processor (or a sink below it) raises
    goes to the processing exception handler, which drops the record here when it continues."""
    def run(record) -> None:
        try:
            process(record)
        except Exception as e:
            if not handler.handle(node, task.task, task.source, e):
                raise
    return run
