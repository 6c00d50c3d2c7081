"""``GlobalKTable``: a table whose store every task holds in full (Kafka's global state store),
so a stream joins it by any key extracted from its records, with no repartition and no
co-partitioning.

Its source and table processor form a *global* sub-topology, which Kafka describes as
``Sub-topology: N for global store (will not generate tasks)``: one global task reads every
partition of the topic, and the join processors of every task read its store. Records of the
global topic are applied as they arrive (Kafka's global thread also applies them ahead of the
stream tasks; the test driver processes each piped record at once, as here).
"""
from __future__ import annotations

from streams.errors import TopologyError
from streams.parameters import Consumed, Materialized
from streams.stores import StoreSpec


class GlobalKTable:
    def __init__(self, builder, node, store_name: str, key_serde=None, value_serde=None):
        self._b, self._node, self._store_name = builder, node, store_name
        self.key_serde, self.value_serde = key_serde, value_serde

    def queryableStoreName(self) -> str:
        return self._store_name

    def _getter(self):
        from streams.table_join import ValueGetter
        return ValueGetter(self._store_name, [])


def global_table(builder, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None):
    from streams.stateless import Source
    from streams.table import KTableSource
    consumed = consumed or Consumed()
    if not isinstance(topic, str) or not topic:
        raise TopologyError(f"globalTable(): expected a topic name, got {topic!r}")
    m = materialized or Materialized()
    store = m.store_name or f"{topic}-STATE-STORE-{builder._counter:010d}"
    builder._counter += 1
    spec = StoreSpec(store, "keyValue", key_serde=m.key_serde or consumed.key_serde,
                     value_serde=m.value_serde or consumed.value_serde)
    src = builder.add(builder.name(consumed.name, "KSTREAM-SOURCE-"), "source", "globalTable",
                      lambda c=consumed: Source(c.key_serde, c.value_serde, c.timestamp_extractor),
                      topics=(topic,), args={"consumed": consumed, "global": True},
                      key_serde=consumed.key_serde, value_serde=consumed.value_serde)
    node = builder.add(builder.next_name("KTABLE-SOURCE-"), "processor", "table-source",
                       lambda: KTableSource(spec.name, False), [src], (spec,), args={"global": True},
                       key_serde=consumed.key_serde, value_serde=consumed.value_serde)
    return GlobalKTable(builder, node, spec.name, consumed.key_serde, consumed.value_serde)


def is_global(sub) -> bool:
    return any(n.args.get("global") for n in sub.nodes)


def global_stores(topology) -> set[str]:
    return {s.name for sub in topology.subtopologies if is_global(sub) for s in sub.stores}


def task_key(sub, partition: int) -> int:
    """The one global task takes every partition of the global topics."""
    return 0 if is_global(sub) else partition


def share_global_stores(interpreter, task) -> None:
    """Give a stream task the global stores (held by the global task, built first)."""
    for sub in interpreter.topology.subtopologies:
        if is_global(sub) and task.specs.keys().isdisjoint(s.name for s in sub.stores):
            gtask, _ = interpreter.task(sub, 0)
            for s in sub.stores:
                task.stores[s.name] = gtask.store(s.name)
