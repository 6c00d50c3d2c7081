"""``KStream``: a record stream, and ``BranchedKStream`` for ``split()``. Operations take SQL
(strings or Columns) or callables (:mod:`streams.functions`); each returns a new stream."""
from __future__ import annotations

import re
from typing import Any, Callable

from streams.errors import TopologyError
from streams.functions import Fn
from streams.parameters import Branched, Grouped, Materialized, Named, Produced, Repartitioned, check_name


_GENERATED_NAME = re.compile(r"KSTREAM.*-[0-9]{10}")


def repartition_names(builder) -> list[str]:
    """The sink, filter and source names Kafka draws for every repartition, used or not."""
    return [builder.next_name(prefix) for prefix in ("KSTREAM-SINK-", "KSTREAM-FILTER-", "KSTREAM-SOURCE-")]


def _named(named) -> str | None:
    if named is None:
        return None
    if isinstance(named, Named):
        return named.name
    if isinstance(named, str):
        return Named.as_(named).name
    raise TopologyError(f"expected Named or a name, got {type(named).__name__}")


class KStream:
    def __init__(self, builder, node, key_serde=None, value_serde=None, repartition_required: bool = False):
        self._b, self._node = builder, node
        self.key_serde, self.value_serde = key_serde, value_serde
        self._repartition_required = repartition_required
        self._repartitioned: dict[str, "KStream"] = {}   # repartitions under the stream's own name, reused

    def _then(self, prefix: str, op: str, factory, named=None, args=None, key_serde=..., value_serde=...,
              repartition_required=None, parents=None) -> "KStream":
        name = self._b.name(_named(named), prefix)
        ks = self.key_serde if key_serde is ... else key_serde
        vs = self.value_serde if value_serde is ... else value_serde
        node = self._b.add(name, "processor", op, factory, parents or [self._node], args=args,
                           key_serde=ks, value_serde=vs)
        rr = self._repartition_required if repartition_required is None else repartition_required
        return KStream(self._b, node, ks, vs, rr)

    def _column_types(self) -> tuple:
        """The Spark types of the keys and values, where known (a serde, or a vectorised step's
        returnType): the interpreter gives a vectorised function its one-row Series in them."""
        def of(serde):
            try:
                return serde.spark_type() if serde is not None else None
            except Exception:   # a serde with no Spark type
                return None
        key, value = of(self.key_serde), of(self.value_serde)
        f = next((v for v in self._node.args.values() if getattr(v, "is_vectorized", False)), None)
        if f is not None and f.op in ("selectKey", "map"):
            key = f.return_type["key"].dataType if f.op == "map" else f.return_type
        if f is not None and f.op in ("mapValues", "map", "flatMapValues"):
            value = {"mapValues": lambda t: t, "map": lambda t: t["value"].dataType,
                     "flatMapValues": lambda t: t.elementType}[f.op](f.return_type)
        return key, value

    # ------------------------------------------------------------------ stateless
    def filter(self, predicate, named=None) -> "KStream":
        from streams.stateless import Filter
        f = Fn(predicate, "filter predicate", (2,), vectorized="filter", types=self._column_types())
        return self._then("KSTREAM-FILTER-", "filter", lambda: Filter(f), named, {"predicate": f})

    def filterNot(self, predicate, named=None) -> "KStream":
        from streams.stateless import Filter
        f = Fn(predicate, "filterNot predicate", (2,), vectorized="filterNot", types=self._column_types())
        return self._then("KSTREAM-FILTER-", "filterNot", lambda: Filter(f, True), named,
                          {"predicate": f, "negate": True})

    def mapValues(self, mapper, named=None) -> "KStream":
        from streams.stateless import MapValues
        f = Fn(mapper, "mapValues mapper", (1, 2), vectorized="mapValues", types=self._column_types())
        return self._then("KSTREAM-MAPVALUES-", "mapValues", lambda: MapValues(f), named, {"mapper": f},
                          value_serde=None)

    def selectKey(self, selector, named=None) -> "KStream":
        from streams.stateless import SelectKey
        f = Fn(selector, "selectKey selector", (2,), vectorized="selectKey", types=self._column_types())
        return self._then("KSTREAM-KEY-SELECT-", "selectKey", lambda: SelectKey(f), named, {"selector": f},
                          key_serde=None, repartition_required=True)

    def map(self, mapper, value_mapper=None, named=None) -> "KStream":
        """``map(callable)`` as Kafka's; or ``map(key_sql, value_sql)`` with two SQL expressions."""
        from streams.stateless import Map
        if value_mapper is not None:
            k, v = Fn(mapper, "map key expression", (2,)), Fn(value_mapper, "map value expression", (2,))
            if not (k.is_sql and v.is_sql):
                raise TopologyError("map(key, value) takes two SQL expressions; pass one callable returning "
                                    "(key, value) instead")
            factory, args = (lambda: Map(None, k, v)), {"key": k, "value": v}
        else:
            f = Fn(mapper, "map mapper", (2,), vectorized="map", types=self._column_types())
            if f.is_sql:
                raise TopologyError("map(): one SQL expression cannot give both key and value; pass "
                                    "map(key_sql, value_sql) or a callable returning (key, value)")
            factory, args = (lambda: Map(f)), {"mapper": f}
        return self._then("KSTREAM-MAP-", "map", factory, named, args, key_serde=None, value_serde=None,
                          repartition_required=True)

    def flatMap(self, mapper, named=None) -> "KStream":
        from streams.stateless import FlatMap
        f = Fn(mapper, "flatMap mapper", (2,))
        return self._then("KSTREAM-FLATMAP-", "flatMap", lambda: FlatMap(f, False), named, {"mapper": f},
                          key_serde=None, value_serde=None, repartition_required=True)

    def flatMapValues(self, mapper, named=None) -> "KStream":
        from streams.stateless import FlatMap
        f = Fn(mapper, "flatMapValues mapper", (1, 2), vectorized="flatMapValues", types=self._column_types())
        return self._then("KSTREAM-FLATMAPVALUES-", "flatMapValues", lambda: FlatMap(f, True), named,
                          {"mapper": f}, value_serde=None)

    def peek(self, action: Callable, named=None) -> "KStream":
        from streams.stateless import Peek
        if not callable(action):
            raise TopologyError("peek(): the action must be a callable (key, value)")
        return self._then("KSTREAM-PEEK-", "peek", lambda: Peek(action), named)

    def foreach(self, action: Callable, named=None) -> None:
        from streams.stateless import Peek
        if not callable(action):
            raise TopologyError("foreach(): the action must be a callable (key, value)")
        self._then("KSTREAM-FOREACH-", "foreach", lambda: Peek(action), named)

    def print(self, printed) -> None:
        """Kafka's ``KStream.print``: each record as ``[label]: key, value`` (or the mapper's text) on
        standard output or to a file; the label defaults to the name of the processor printed from."""
        from streams.printed import Print, Printed
        if printed is None:
            raise TopologyError("printed can't be null")
        if not isinstance(printed, Printed):
            raise TopologyError(f"print(): expected Printed, got {type(printed).__name__}")
        label = printed.label if printed.label is not None else self._node.name
        self._then("KSTREAM-PRINTER-", "print", lambda: Print(label, printed.mapper, printed.file_path),
                   printed.name, {"label": label})

    def merge(self, other: "KStream", named=None) -> "KStream":
        from streams.stateless import PassThrough
        if not isinstance(other, KStream) or other._b is not self._b:
            raise TopologyError("merge(): the other stream must be a KStream of the same builder")
        # Kafka's merge drops both serdes ("we cannot safely use either one to represent both
        # streams"): what follows uses the defaults unless given its own
        return self._then("KSTREAM-MERGE-", "merge", PassThrough, named, key_serde=None, value_serde=None,
                          repartition_required=self._repartition_required or other._repartition_required,
                          parents=[self._node, other._node])

    def split(self, named=None) -> "BranchedKStream":
        return BranchedKStream(self, _named(named))

    # ------------------------------------------------------------------ topics
    def repartition(self, repartitioned: Repartitioned | None = None) -> "KStream":
        r = repartitioned or Repartitioned()
        name = r.name or self._b.next_name("KSTREAM-REPARTITION-")
        return self._through_repartition(name, r.key_serde, r.value_serde, r.partitions, r.partitioner)

    def _through_repartition(self, name: str, key_serde=None, value_serde=None,
                             partitions: int | None = None, partitioner=None) -> "KStream":
        """Write to ``<application.id>-<name>-repartition`` and read it back: a new sub-topology
        starts here, with the records partitioned by their new key. Named as Kafka's
        ``createRepartitionedSource``: a sink, filter and source name are drawn every time (so later
        generated names match Kafka's), kept when ``name`` is generated (``KSTREAM-…-0000000003``),
        else ``<topic>-sink``/``-filter``/``-source``. The same stream repartitioned again under
        its own name reuses the topic, as Kafka's ``repartitionForJoin``. The filter passes
        everything until ``build()`` decides whether it drops null keys
        (:mod:`streams.repartition_filter`)."""
        from streams.repartition_filter import filter_fn
        from streams.stateless import Filter, Sink, Source
        ks, vs = key_serde or self.key_serde, value_serde or self.value_serde
        topic = name if name.endswith("-repartition") else f"{name}-repartition"
        # a branch's name (Branched takes any string) can reach here: Kafka's InternalTopicConfig
        # runs Topic.validate on every repartition topic
        check_name(topic, "repartition topic")
        names = repartition_names(self._b)
        if name == self._node.name and name in self._repartitioned:
            return self._repartitioned[name]
        if not _GENERATED_NAME.fullmatch(name):
            names = [f"{topic}-{part}" for part in ("sink", "filter", "source")]
        sink_name, filter_name, source_name = names
        f = filter_fn(False)
        upstream = self._b.add(filter_name, "processor", "filter", lambda: Filter(f), [self._node],
                               args={"predicate": f, "repartition_filter": True},
                               key_serde=self.key_serde, value_serde=self.value_serde)
        sink = self._b.add(sink_name, "sink", "repartition",
                           lambda: Sink(topic, None, ks, vs, internal=True, stream_partitioner=partitioner), [upstream],
                           topics=(topic,), internal=True, args={"partitions": partitions, "partitioner": partitioner},
                           key_serde=ks, value_serde=vs)
        src = self._b.add(source_name, "source", "repartition",
                          lambda: Source(ks, vs), [], topics=(topic,), internal=True,
                          args={"partitions": partitions},
                          key_serde=ks, value_serde=vs)
        sink.args["pair"] = src.name
        out = KStream(self._b, src, ks, vs, False)
        if name == self._node.name:
            self._repartitioned[name] = out
        return out

    def to(self, topic, produced: Produced | None = None) -> None:
        from streams.stateless import Sink
        p = produced or Produced()
        ks, vs = p.key_serde or self.key_serde, p.value_serde or self.value_serde
        name = self._b.name(p.name, "KSTREAM-SINK-")
        if isinstance(topic, str):
            if not topic:
                raise TopologyError("to(): empty topic name")
            self._b.add(name, "sink", "to", lambda: Sink(topic, None, ks, vs, stream_partitioner=p.partitioner),
                        [self._node], topics=(topic,), args={"partitioner": p.partitioner}, key_serde=ks, value_serde=vs)
        elif callable(topic):
            f = Fn(topic, "to() topic extractor", (2, 3))
            self._b.add(name, "sink", "to", lambda: Sink(None, f, ks, vs, stream_partitioner=p.partitioner), [self._node],
                        args={"extractor": f, "partitioner": p.partitioner}, key_serde=ks, value_serde=vs)
        else:
            raise TopologyError(f"to(): expected a topic name or a callable choosing one, got {type(topic).__name__}")

    def toTable(self, named=None, materialized: Materialized | None = None):
        """As Kafka's ``KStreamImpl.toTable``: without a store name the table keeps no store (its
        ``KTableSource`` has no queryable name; ``StreamToTableNode`` adds the store only when
        materialized), so every record is forwarded as ``Change(value, None)``, with no record
        cache and no changelog. The store's name is drawn anyway and used if a downstream step
        needs the table's values or old values (a join, ``groupBy``, ``suppress``: Kafka's
        ``KTableSource.materialize``/``enableSendingOldValues``), see
        :func:`streams.ktable.materialize_source`."""
        from streams.ktable import KTable
        from streams.parameters import split_materialized
        from streams.table import KTableSource
        named, materialized = split_materialized(named, materialized)
        name = self._b.name(_named(named), "KSTREAM-TOTABLE-")      # Kafka: the name, the store, the topic
        spec = self._b.store(materialized, "keyValue", "KSTREAM-TOTABLE-STATE-STORE-",
                             key_serde=self.key_serde, value_serde=self.value_serde)
        queryable = materialized is not None and materialized.store_name is not None
        source = self
        if self._repartition_required:
            source = self._through_repartition(name, spec.key_serde, spec.value_serde)   # Materialized's serdes
        opts: dict = {"store": spec.name if queryable else None}
        args = {"opts": opts, "queryable": queryable}
        if not queryable:
            args["unmaterialized_store"] = spec
        node = self._b.add(name, "processor", "toTable",
                           lambda o=opts: KTableSource(o["store"], o.get("send_old_values", False)),
                           [source._node], (spec,) if queryable else (), args=args,
                           key_serde=spec.key_serde, value_serde=spec.value_serde)
        return KTable(self._b, node, spec.key_serde, spec.value_serde, spec.name if queryable else None)

    # ------------------------------------------------------------------ joins
    def join(self, other, joiner=None, windows=None, joined=None, *, key_selector=None, named=None) -> "KStream":
        """With a KStream: ``join(other, joiner, JoinWindows[, StreamJoined])``; a KTable:
        ``join(table, joiner[, Joined])``; a GlobalKTable: ``join(globalTable, keySelector, joiner)``.
        Joiners are SQL over ``left`` (also ``value``), ``right`` and ``key``, or callables."""
        from streams.join_dsl import kstream_join
        return kstream_join(self, "inner", other, joiner, windows, joined, key_selector, named)

    def leftJoin(self, other, joiner=None, windows=None, joined=None, *, key_selector=None, named=None) -> "KStream":
        from streams.join_dsl import kstream_join
        return kstream_join(self, "left", other, joiner, windows, joined, key_selector, named)

    def outerJoin(self, other, joiner=None, windows=None, joined=None) -> "KStream":
        from streams.join_dsl import kstream_join
        return kstream_join(self, "outer", other, joiner, windows, joined, None, None)

    # ------------------------------------------------------------------ grouping
    def groupByKey(self, grouped: Grouped | None = None):
        from streams.grouped import KGroupedStream
        return KGroupedStream(self, grouped or Grouped(), self._repartition_required)

    def groupBy(self, selector, grouped: Grouped | None = None):
        from streams.grouped import KGroupedStream
        from streams.stateless import SelectKey
        f = Fn(selector, "groupBy selector", (2,))
        g = grouped or Grouped()
        keyed = self._then("KSTREAM-KEY-SELECT-", "selectKey", lambda: SelectKey(f), g.name, {"selector": f},
                           key_serde=None, repartition_required=True)
        return KGroupedStream(keyed, g, True)


class BranchedKStream:
    """``split()``: each record goes to the first branch whose predicate holds, else the default.

    As Kafka's ``BranchedKStreamImpl``: ``split()`` adds the splitter processor (the split's name,
    given or ``KSTREAM-BRANCH-…``), and every ``branch()`` adds its branch at once (the splitter's
    next child, named the split's name + the branch's name or index) and runs its
    ``Branched`` chain or consumer. ``defaultBranch()``/``noDefaultBranch()`` only end the split
    and return the branches kept; a split left without either still routes every record::

        size = s.split(Named.as_("size-"))
        size.branch("value.amount >= 200", Branched.withConsumer(lambda big: big.to("large")))
        size.branch("value.amount >= 100", Branched.withConsumer(lambda mid: mid.to("medium")))
    """
    def __init__(self, stream: KStream, prefix: str | None):
        from streams.stateless import Split
        self._stream, self._b = stream, stream._b
        # NamedInternal.orElseGenerateWithPrefix: a given name burns an index too, so the names
        # generated after a named split (stores, changelog and repartition topics) stay Kafka's
        self._split_name = self._b.name(prefix, "KSTREAM-BRANCH-")
        self._predicates: list[Fn] = []     # shared with the splitter: branch() appends to it
        self._outputs: dict[str, KStream] = {}
        self._done = False
        preds = self._predicates
        self._splitter = self._b.add(self._split_name, "processor", "split", lambda: Split(preds), [stream._node],
                                     args={"predicates": preds}, key_serde=stream.key_serde,
                                     value_serde=stream.value_serde)

    def _name(self, branched: Branched, index: int) -> str:
        """Kafka's ``BranchedKStreamImpl``: the split's name (given or generated) + the branch's
        name, or its index (1, 2, ... and 0 for the default branch)."""
        if branched.name is not None:
            return f"{self._split_name}{branched.name}"
        return f"{self._split_name}{index}"

    def branch(self, predicate, branched: Branched | None = None) -> "BranchedKStream":
        if self._done:
            raise TopologyError("split(): branch() after defaultBranch()/noDefaultBranch()")
        f = Fn(predicate, "branch predicate", (2,))
        self._predicates.append(f)
        self._create(branched or Branched(), len(self._predicates))
        return self

    def defaultBranch(self, branched: Branched | None = None) -> dict[str, KStream]:
        if self._done:
            raise TopologyError("split(): defaultBranch() after defaultBranch()/noDefaultBranch()")
        self._create(branched or Branched(), 0)
        self._done = True
        return self._outputs

    def noDefaultBranch(self) -> dict[str, KStream]:
        self._done = True
        return self._outputs

    def _create(self, branched: Branched, index: int) -> None:
        from streams.stateless import PassThrough
        name = self._name(branched, index)
        # InternalStreamsBuilder.newProcessorName(branchChildName): an index is burnt and the name is
        # not checked (Branched rejects only null): a branch is a processor, not a topic
        self._b.next_name(name)
        src = self._stream
        node = self._b.add(name, "processor", "branch", PassThrough, [self._splitter],
                           key_serde=src.key_serde, value_serde=src.value_serde)
        branch = KStream(self._b, node, src.key_serde, src.value_serde, src._repartition_required)
        if branched.chain is not None:
            result = branched.chain(branch)
            if result is not None:
                self._outputs[name] = result
        elif branched.consumer is not None:
            branched.consumer(branch)
        else:
            self._outputs[name] = branch
