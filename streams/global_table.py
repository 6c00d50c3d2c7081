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
    def __init__(self, builder, node, store_name: str, key_serde=None, value_serde=None, queryable: bool = True):
        self._b, self._node, self._store_name = builder, node, store_name
        self.key_serde, self.value_serde, self._queryable = key_serde, value_serde, queryable

    def queryableStoreName(self) -> str | None:
        """The store's name when it was given (``Materialized.as_(name)``), else None, as Kafka's
        ``GlobalKTableImpl``: a generated name is no public contract (it shifts with the topology)."""
        return self._store_name if self._queryable else None

    def _getter(self):
        from streams.table_join import ValueGetter
        return ValueGetter(self._store_name, [])


def global_table(builder, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None):
    from streams.stateless import Source
    from streams.table import KTableSource
    from streams.builder import table_serdes
    if not isinstance(topic, str) or not topic:
        raise TopologyError(f"globalTable(): expected a topic name, got {topic!r}")
    consumed, m = table_serdes(consumed, materialized)
    if m.history_retention is not None:
        # InternalStreamsBuilder.globalTable: a global table is read as of now, never as of a time
        raise TopologyError("GlobalTables cannot be versioned.")
    store = m.store_name or builder.next_name(f"{topic}-STATE-STORE-")   # as table(): store, source, processor
    spec = StoreSpec(store, "keyValue", key_serde=consumed.key_serde, value_serde=consumed.value_serde)
    src_name = builder.suffixed(consumed.name, "-source", "KSTREAM-SOURCE-")
    name = builder.name(consumed.name, "KTABLE-SOURCE-")
    src = builder.add(src_name, "source", "globalTable",
                      lambda c=consumed: Source(c.key_serde, c.value_serde, c.timestamp_extractor),
                      topics=(topic,), args={"consumed": consumed, "global": True},
                      key_serde=consumed.key_serde, value_serde=consumed.value_serde)
    node = builder.add(name, "processor", "table-source",
                       lambda: KTableSource(spec.name, False), [src], (spec,), args={"global": True},
                       key_serde=consumed.key_serde, value_serde=consumed.value_serde)
    return GlobalKTable(builder, node, spec.name, consumed.key_serde, consumed.value_serde,
                        queryable=m.store_name is not None)


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


class GlobalTableSharedError(TopologyError):
    """On Spark every task of the joining sub-topology holds a copy of the global store, logged to
    the store's changelog partition of that task; two sub-topologies joining one GlobalKTable
    would write two such sets of copies to one changelog."""
    code, name, retriable, grpc_status = 1260, "GLOBAL_TABLE_SHARED", False, "UNIMPLEMENTED"


def global_topics(topology, sub) -> set[str]:
    """The global tables' topics a (merged) sub-topology reads."""
    return {t for n in sub.sources if n.args.get("global") for t in n.topics}


def with_global_stores(topology, sub):
    """The sub-topology as Spark runs it: its nodes plus those of every global sub-topology whose
    store it reads, so each task applies the global topic's records to its own copy of the store
    (Kafka's one global thread per instance becomes one copy per task)."""
    if is_global(sub):
        return sub
    from streams.topology import SubTopology
    used = {n.args["global_store"] for n in sub.nodes if n.args.get("global_store")}
    nodes = list(sub.nodes)
    for g in topology.subtopologies:
        if is_global(g) and used & {s.name for s in g.stores}:
            nodes = list(g.nodes) + nodes
    return sub if len(nodes) == len(sub.nodes) else SubTopology(sub.id, nodes)


def check_global_on_spark(topology) -> None:
    users: dict[str, list[int]] = {}
    for sub in topology.subtopologies:
        for n in sub.nodes:
            if n.args.get("global_store") and not is_global(sub):
                users.setdefault(n.args["global_store"], []).append(sub.id)
    for store, subs in users.items():
        if len(set(subs)) > 1:
            raise GlobalTableSharedError(
                f"GlobalKTable store {store!r} is joined from sub-topologies {sorted(set(subs))}; on Spark one "
                f"sub-topology may join a given GlobalKTable: merge the streams before the join so one sub-topology joins it")
