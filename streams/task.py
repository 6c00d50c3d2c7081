"""A task: one input partition number of a sub-topology, its processors, stores and progress.

The same class runs in the reference interpreter (dict backings) and inside Spark's stateful
processor (``MapState`` backings whose writes also go to the changelogs), so both apply records
through identical code. Forwarding is depth-first, as in Kafka Streams: a record reaches every
descendant before the next sibling is visited.
"""
from __future__ import annotations

from typing import Any, Callable

from streams.processor import Processor
from streams.record import Record
from streams.stores import Backing, DictBacking, StoreSpec


class Task:
    def __init__(self, application_id: str, task: int, stores: list[StoreSpec] = (),
                 backing: Callable[[str], Backing] = lambda name: DictBacking(), defaults: tuple = (None, None)):
        self.application_id, self.task = application_id, task
        self.defaults = defaults     # default.key.serde, default.value.serde
        self._backing = backing
        self.specs = {s.name: s for s in stores}
        self.stores: dict[str, Any] = {}
        self.meta_backing = backing("__meta")
        self.source: tuple[str | None, int | None, int | None] = (None, task, None)
        # (topic, key bytes, value bytes, timestamp ms, headers, partition or None) per record written
        self.outputs: list[tuple] = []
        self.cache = None   # a RecordCache when changes wait for the commit; None: forwarded per record
        self.caching = True  # False: no store forwards through the caching rules

    def use_cache(self, max_bytes: int, caching: bool | None = None) -> None:
        """Give the task Kafka's record cache of ``max_bytes`` (0: none), flushed by :meth:`commit`.
        ``caching`` (default: ``max_bytes > 0``) keeps the caching stores' forwarding rules without a
        cache, as a test driver committing after every record sees them; off, every store forwards
        as with ``withCachingDisabled`` (Kafka's ``statestore.cache.max.bytes=0``)."""
        from streams.record_cache import RecordCache
        self.cache = RecordCache(max_bytes, self._restore_source) if max_bytes > 0 else None
        self.caching = max_bytes > 0 if caching is None else caching

    def _restore_source(self, source):
        """Set the position the processors see; the one it replaces, to put back after."""
        previous, self.source = self.source, source
        return previous

    def commit(self) -> None:
        """Forward what the record cache holds, as Kafka's commit flushes it."""
        if self.cache is not None:
            self.cache.flush()

    def store(self, name: str):
        st = self.stores.get(name)
        if st is None:
            spec = self.specs.get(name)
            if spec is None:
                raise KeyError(f"store {name!r} is not connected to this task; known: {sorted(self.specs)}")
            st = self.stores[name] = spec.open(self._backing(name))
        return st

    def meta(self, name: str):
        return self.meta_backing.get(("m", name))

    def set_meta(self, name: str, value) -> None:
        self.meta_backing.put(("m", name), value)


class NodeContext:
    """What one processor sees: its task's stores and meta, and its own children."""
    def __init__(self, task: Task, name: str, children: list[Processor]):
        self._task, self.name, self.children = task, name, children
        self.application_id, self.task = task.application_id, task.task

    def forward(self, record: Record) -> None:
        for child in self.children:
            child.process(record)

    def store(self, name: str):
        return self._task.store(name)

    def caching(self, store: str) -> bool:
        """Whether ``store`` forwards through Kafka's caching rules: not with
        ``Materialized.withCachingDisabled``, nor with no record cache at all
        (``statestore.cache.max.bytes=0``, which Kafka's ``rewriteTopology`` turns into caching
        disabled on every store)."""
        return self._task.specs[store].caching and self._task.caching

    def record_cache(self, store: str):
        """The task's record cache when ``store`` is cached; None when its changes are forwarded per record."""
        return self._task.cache if self._task.specs[store].caching else None

    def meta(self, name: str):
        return self._task.meta(f"{self.name}.{name}")

    def set_meta(self, name: str, value) -> None:
        self._task.set_meta(f"{self.name}.{name}", value)

    def source(self):
        return self._task.source

    def swap_source(self, source):
        """Make ``source`` (topic, partition, offset) the position the steps below see, returning
        the one it replaces: Kafka's ``setRecordContext`` around forwarding a record that waited
        in a buffer, so a topic name extractor or a SQL step reads the held record's position."""
        return self._task._restore_source(source)

    def default_serde(self, which: str):
        return self._task.defaults[0 if which == "key" else 1]

    def store_key_serde(self, store: str):
        """The serde of ``store``'s keys (its own, else ``default.key.serde``; None: neither)."""
        spec = self._task.specs.get(store)
        return (spec.key_serde if spec is not None else None) or self.default_serde("key")

    def emit(self, topic: str, key, value, timestamp: int, headers=(), partition: int | None = None) -> None:
        self._task.outputs.append((topic, key, value, timestamp, tuple(headers), partition))


class Collect(Processor):
    """A terminal processor that keeps what reaches it (tests, and sinks that gather a batch)."""
    def __init__(self):
        self.records: list[Record] = []

    def process(self, record: Record) -> None:
        self.records.append(record)


def chain(task: Task, *processors: Processor, names: list[str] | None = None) -> Processor:
    """Wire processors in a line (for tests and simple pipelines); returns the head."""
    names = names or [f"p{i}" for i in range(len(processors))]
    for i, p in enumerate(processors):
        children = [processors[i + 1]] if i + 1 < len(processors) else []
        p.init(NodeContext(task, names[i], children))
    return processors[0]
