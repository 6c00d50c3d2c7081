"""The reference interpreter: a topology run in plain Python over in-memory topics.

It is the oracle the Spark compilation is tested against and the engine of
:class:`streams.testing.TopologyTestDriver`. Records are processed one at a time, to completion,
in the order they were appended to the topics the topology reads (records a sub-topology writes to
a repartition topic are processed after the record that caused them, as Kafka's test driver does).
Tasks are per sub-topology and partition, exactly as in the queries, so stream time, stores and
changelogs match.
"""
from __future__ import annotations

from collections import deque
from typing import Any

from streams.errors import TopologyError
from streams.record import Record
from streams.stores import DictBacking
from streams.task import NodeContext, Task
from streams.topology import SubTopology, Topology, changelog_topic


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
        self.topology, self.config = topology, dict(config)
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
        self.pending: deque[tuple[str, int, int]] = deque()
        self.changelogs: dict[str, list[tuple]] = {}
        self.cache_bytes = cache_bytes
        given = self.config.get("statestore.cache.max.bytes", self.config.get("cache.max.bytes.buffering"))
        # caching rules stay on unless the cache is switched off (0): Kafka then disables caching
        # on every store (InternalTopologyBuilder.rewriteTopology)
        self.caching = cache_bytes > 0 or given is None or int(given) > 0

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
        if topic in self.readers:
            self.pending.append((topic, partition, len(parts[partition]) - 1))

    def pipe(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers=(),
             partition: int | None = None) -> None:
        """Append a record to an input topic and process everything it causes."""
        self.append(topic, key, value, timestamp, headers, partition)
        self.run()

    def run(self) -> None:
        while self.pending:
            topic, partition, offset = self.pending.popleft()
            self.process(topic, partition, offset)

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
            entry = self.tasks[(sub.id, partition)] = build_task(self.topology, sub, self.app, partition,
                                                                 defaults=self.defaults)
            entry[0].use_cache(self.cache_bytes, self.caching)
            share_global_stores(self, entry[0])
        return entry

    def stores(self, name: str) -> list[Any]:
        """The store ``name`` in every task that has one (a store is partitioned like its input)."""
        out = []
        for (sub_id, p), (task, _) in sorted(self.tasks.items()):
            if name in task.specs:
                out.append(task.store(name))
        if not out and name not in self.topology.stores():
            raise KeyError(name)
        return out


def build_task(topology: Topology, sub: SubTopology, app: str, partition: int, backing=None,
               defaults: tuple = (None, None)) -> tuple[Task, dict]:
    """A task's processors, wired as the sub-topology's nodes are; returns the task and its source
    processor per (resolved) topic."""
    kwargs = {"backing": backing} if backing is not None else {}
    task = Task(app, partition, sub.stores, defaults=defaults, **kwargs)
    members = set(id(n) for n in sub.nodes)
    procs = {n.name: n.factory() for n in sub.nodes}
    for n in sub.nodes:
        children = [procs[c.name] for c in n.children if id(c) in members]
        procs[n.name].init(NodeContext(task, n.name, children))
    task.processors = procs
    sources = {}
    for n in sub.sources:
        for t in n.topics:
            sources[Topology.topic(app, n, t)] = procs[n.name]
    return task, sources
