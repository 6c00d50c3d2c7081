"""``StreamsBuilder``: where a topology is defined. Every DSL call adds a :class:`Node` named as
Kafka Streams names it (``KSTREAM-FILTER-0000000001``, or the user's ``Named``)."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable

from streams.errors import TopologyError
from streams.joins import upstream_sources
from streams.parameters import Consumed, Materialized, check_name
from streams.processor import Processor
from streams.stores import StoreSpec
from streams.topology import Node, Topology


class StreamsBuilder:
    def __init__(self):
        self._nodes: list[Node] = []
        self._counter = 0
        self._names: set[str] = set()
        self.given_stores: set[str] = set()   # named by Materialized.as_: the only queryable names

    # ------------------------------------------------------------------ naming
    def next_name(self, prefix: str) -> str:
        name = f"{prefix}{self._counter:010d}"
        self._counter += 1
        return name

    def name(self, given: str | None, prefix: str) -> str:
        if given is None:
            return self.next_name(prefix)
        check_name(given, "name")
        self._counter += 1   # Kafka advances the index for named operations too, keeping generated names stable
        return given

    def suffixed(self, given: str | None, suffix: str, prefix: str) -> str:
        """Kafka's ``NamedInternal.suffixWithOrElseGet``: the user's name with ``suffix``, else a
        generated one; the index advances either way."""
        generated = self.next_name(prefix)
        return generated if given is None else check_name(given + suffix, "name")

    def add(self, name: str, kind: str, op: str, factory: Callable[[], Processor], parents: list[Node] = (),
            stores: tuple[StoreSpec, ...] = (), topics: tuple[str, ...] = (), internal: bool = False,
            args: dict | None = None, key_serde=None, value_serde=None) -> Node:
        if name in self._names:
            raise TopologyError(f"processor name {name!r} is used twice; names must be unique in a topology")
        if kind == "source" and not internal:
            from streams.pattern_sources import check_new_source
            check_new_source(self._nodes, topics, (args or {}).get("pattern"))
        self._names.add(name)
        node = Node(name, kind, op, factory, list(parents), [], tuple(stores), tuple(topics), internal,
                    dict(args or {}), key_serde, value_serde, len(self._nodes))
        for p in parents:
            p.children.append(node)
        self._nodes.append(node)
        return node

    def store(self, materialized: Materialized | None, kind: str, prefix: str, retention: int | None = None,
              key_serde=None, value_serde=None) -> StoreSpec:
        m = materialized or Materialized()
        if m.history_retention is not None:
            raise TopologyError(f"a versioned store ({m.store_name}) materializes builder.table(...) only; other "
                                f"tables and aggregations keep timestamped stores")
        _check_supplier(m, kind)
        name = m.store_name or self.next_name(prefix)
        if m.store_name:
            self.given_stores.add(name)
        return StoreSpec(name, kind, m.retention if m.retention is not None else retention,
                         m.key_serde or key_serde, m.value_serde or value_serde, log_config=dict(m.log_config),
                         caching=m.caching)

    # ------------------------------------------------------------------ sources
    def stream(self, topics: str | list[str] | re.Pattern, consumed: Consumed | None = None):
        """A topic, a list of them, or Kafka's ``stream(Pattern)``: a compiled regular expression
        reading every topic whose whole name it matches (:mod:`streams.pattern_sources`)."""
        from streams.kstream import KStream
        from streams.stateless import Source
        consumed = consumed or Consumed()
        if isinstance(topics, re.Pattern):
            node = self.add(self.name(consumed.name, "KSTREAM-SOURCE-"), "source", "stream",
                            lambda c=consumed: Source(c.key_serde, c.value_serde, c.timestamp_extractor),
                            args={"consumed": consumed, "pattern": topics},
                            key_serde=consumed.key_serde, value_serde=consumed.value_serde)
            return KStream(self, node, consumed.key_serde, consumed.value_serde)
        topics = [topics] if isinstance(topics, str) else list(topics)
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise TopologyError(f"stream(): expected a topic name or a list of them, got {topics!r}")
        name = self.name(consumed.name, "KSTREAM-SOURCE-")
        same = self._stream_source(topics, consumed)
        if same is not None:    # Kafka merges the source nodes of one subscription (KAFKA-6687)
            return KStream(self, same, consumed.key_serde, consumed.value_serde)
        node = self.add(name, "source", "stream",
                        lambda c=consumed: Source(c.key_serde, c.value_serde, c.timestamp_extractor),
                        topics=tuple(topics), args={"consumed": consumed},
                        key_serde=consumed.key_serde, value_serde=consumed.value_serde)
        return KStream(self, node, consumed.key_serde, consumed.value_serde)

    def _stream_source(self, topics: list[str], consumed: Consumed) -> Node | None:
        """The stream source already reading exactly ``topics``: a second ``stream()`` of them
        shares it (its name is drawn, unused), as Kafka's ``mergeDuplicateSourceNodes``. Kafka
        refuses another offset reset policy; another serde or extractor is refused here too (Kafka
        would decode the records with the first source's)."""
        for n in self._nodes:
            if n.kind == "source" and n.op == "stream" and not n.internal and set(n.topics) == set(topics):
                first: Consumed = n.args["consumed"]
                if first.offset_reset != consumed.offset_reset:
                    raise TopologyError("Can't configure different offset reset policies on the same input "
                                        "topic(s)")
                if (first.key_serde, first.value_serde, first.timestamp_extractor) != (
                        consumed.key_serde, consumed.value_serde, consumed.timestamp_extractor):
                    raise TopologyError(f"stream({sorted(topics)}) is read again with other serdes or another "
                                        f"timestamp extractor than {n.name}: read the topics once and use that "
                                        f"KStream twice")
                return n
        return None

    def table(self, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None):
        from streams.ktable import KTable
        from streams.stateless import Source
        from streams.table import KTableSource
        if not isinstance(topic, str) or not topic:
            raise TopologyError(f"table(): expected a topic name, got {topic!r}")
        consumed, materialized = table_serdes(consumed, materialized)
        # StreamsBuilder.table: the store's name comes first (when not given), then the source's
        # (``<Consumed name>-source``), then the table source's (the Consumed name)
        store_name = materialized.store_name or self.next_name(f"{topic}-STATE-STORE-")
        if materialized.store_name:
            self.given_stores.add(store_name)
        src_name = self.suffixed(consumed.name, "-source", "KSTREAM-SOURCE-")
        name = self.name(consumed.name, "KTABLE-SOURCE-")
        src = self.add(src_name, "source", "table", lambda c=consumed: Source(c.key_serde, c.value_serde,
                                                                               c.timestamp_extractor),
                       topics=(topic,), args={"consumed": consumed},
                       key_serde=consumed.key_serde, value_serde=consumed.value_serde)
        spec = StoreSpec(store_name, "keyValue", key_serde=consumed.key_serde, value_serde=consumed.value_serde,
                         log_config=dict(materialized.log_config), caching=materialized.caching)
        opts: dict = {}
        make = lambda s=spec.name, o=opts: KTableSource(s, o.get("send_old_values", False))
        if materialized.history_retention is not None:
            from streams.versioned import VersionedKTableSource
            make = lambda s=spec.name, o=opts, h=materialized.history_retention: VersionedKTableSource(
                s, h, o.get("send_old_values", False))
        node = self.add(name, "processor", "table-source", make, [src], (spec,),
                        args={"opts": opts, "versioned": materialized.history_retention is not None,
                              "history_retention": materialized.history_retention,
                              "queryable": materialized.store_name is not None},
                        key_serde=consumed.key_serde, value_serde=consumed.value_serde)
        return KTable(self, node, consumed.key_serde, consumed.value_serde, spec.name)

    def globalTable(self, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None):
        from streams.global_table import global_table
        return global_table(self, topic, consumed, materialized)

    # ------------------------------------------------------------------ build
    def build(self, spark=None, config: dict | None = None):
        """``build()`` gives the :class:`Topology` (for ``TopologyTestDriver`` and ``describe()``);
        ``build(spark, config)`` gives the application that runs it as streaming queries. Each
        repartition's filter is decided here, over the whole topology, as Kafka's
        ``rewriteRepartitionNodes`` does (:mod:`streams.repartition_filter`), and so are the joins'
        co-partition groups (:func:`close_copartition_groups`)."""
        from streams.repartition_filter import rewrite_repartition_filters
        rewrite_repartition_filters(self._nodes)
        close_copartition_groups(self._nodes)
        topology = Topology(list(self._nodes))
        if spark is None and config is None:
            return topology
        from streams.app import StreamsApp
        return StreamsApp(topology, spark, config or {})


def table_serdes(consumed, materialized) -> tuple[Consumed, Materialized]:
    """Kafka's ``StreamsBuilder.table``/``globalTable`` overloads: with a ``Consumed`` its serdes
    are the store's too ("always use the serdes from consumed": a ``Materialized``'s serdes are
    replaced, none given meaning the defaults); with a ``Materialized`` alone (second, as
    ``table(topic, materialized)``) the topic is read with its serdes."""
    if isinstance(consumed, Materialized):
        if materialized is not None:
            raise TopologyError("two Materialized given: pass table(topic, consumed, materialized)")
        consumed, materialized = None, consumed
    if consumed is not None and not isinstance(consumed, Consumed):
        raise TopologyError(f"expected Consumed, got {type(consumed).__name__}")
    materialized = materialized or Materialized()
    _check_supplier(materialized, "keyValue")
    if consumed is None:
        return Consumed(materialized.key_serde, materialized.value_serde), materialized
    return consumed, replace(materialized, key_serde=consumed.key_serde, value_serde=consumed.value_serde)


def _check_supplier(m: Materialized, kind: str) -> None:
    """A ``Stores`` supplier of another kind than the operation's store (Kafka fails with a
    ClassCastException when the topology is built)."""
    if getattr(m, "supplier_kind", None) not in (None, kind):
        raise TopologyError(f"Materialized.as_({m.supplier_kind} store supplier {m.store_name!r}): this operation "
                            f"materializes a {kind} store")


def close_copartition_groups(nodes: list[Node]) -> None:
    """Kafka's ``InternalTopologyBuilder.copartitionGroups``: joins whose inputs share a topic
    form one co-partition group (its transitive closure), so every topic in it gets one partition
    count. Each join's ``args["copartition"]`` (the nodes of its sides) becomes its group's
    sides: two joins of one stream with two tables of different counts are refused, as Kafka
    refuses them, instead of each join setting the shared repartition topic's count in turn
    (the last one winning, the other join then pairing partitions that hold different keys)."""
    joins = [n for n in nodes if n.args.get("copartition")]
    if len(joins) < 2:
        return

    group = list(range(len(joins)))

    def find(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    owner: dict[int, int] = {}
    for i, j in enumerate(joins):
        for side in j.args["copartition"]:
            for src in map(id, upstream_sources(side)):
                if src in owner:
                    group[find(i)] = find(owner[src])
                else:
                    owner[src] = i
    sides: dict[int, list[Node]] = {}
    for i, j in enumerate(joins):
        merged = sides.setdefault(find(i), [])
        merged.extend(s for s in j.args["copartition"] if all(s is not m for m in merged))
    for i, j in enumerate(joins):
        j.args["copartition"] = tuple(sides[find(i)])
