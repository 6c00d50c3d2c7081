"""``cogroup``: several grouped streams aggregated into one table, each with its own aggregator,
all writing one store (Kafka's ``CogroupedKStream``, KIP-150).

Each stream (repartitioned first when its key changed) gets a ``COGROUPKSTREAM-AGGREGATE-``
processor over the shared store (``<Named>-cogroup-agg-<i>``); their results meet in
``COGROUPKSTREAM-MERGE-`` (``<Named>-cogroup-merge``). Names are drawn in Kafka's order: the
store, every repartition, then the aggregators and the merge. Windowed
cogroups share one window (or session) store; each processor keeps its own stream time, as each
of Kafka's does.

    totals = (clicks.groupByKey().cogroup(lambda k, v, agg: agg + 1)
              .cogroup(buys.groupByKey(), lambda k, v, agg: agg + 100)
              .aggregate(lambda: 0))
"""
from __future__ import annotations

from streams.errors import TopologyError
from streams.functions import Fn
from streams.parameters import Materialized


class CogroupedKStream:
    def __init__(self, groups: list, inputs: dict | None = None):
        self._groups = groups          # [(KGroupedStream, aggregator)]
        self._b = groups[0][0]._b
        # each grouped stream's input once repartitioned, shared by every aggregation of this
        # cogroup (and of its further cogroups and windowings), as Kafka's one aggregate builder
        # per CogroupedKStreamImpl keeps it: {id(grouped): (grouped, stream)}
        self._inputs = {} if inputs is None else inputs

    def cogroup(self, grouped, aggregator_) -> "CogroupedKStream":
        from streams.grouped import KGroupedStream, aggregator
        if not isinstance(grouped, KGroupedStream) or grouped._b is not self._b:
            raise TopologyError("cogroup(): expected a KGroupedStream of the same builder")
        if any(g is grouped for g, _ in self._groups):
            raise TopologyError("cogroup(): this grouped stream is already part of the cogroup")
        return CogroupedKStream(self._groups + [(grouped, aggregator(Fn(aggregator_, "cogroup aggregator", (3,))))],
                                self._inputs)

    def windowedBy(self, windows) -> "CogroupedKStream":
        out = CogroupedKStream(self._groups, self._inputs)
        out._windows = windows
        return out

    _windows = None

    def aggregate(self, initializer_, *args, named=None, materialized: Materialized | None = None, merger_=None):
        """Kafka's ``aggregate(initializer[, named][, materialized])``; session windows take the
        merger second, ``aggregate(initializer, sessionMerger[, named][, materialized])`` (or
        ``merger_=``)."""
        from streams.grouped import initializer, merger, old_values_factory, window_retention
        from streams.kstream import _named
        from streams.ktable import KTable
        from streams.parameters import Named
        from streams.stateless import PassThrough
        from streams.windows import SessionWindows, SlidingWindows
        rest = list(args)
        if isinstance(self._windows, SessionWindows) and merger_ is None and rest and \
                not isinstance(rest[0], (Named, Materialized)):
            merger_ = rest.pop(0)
        for arg in rest:
            if isinstance(arg, Materialized):
                materialized = arg
            elif arg is not None:
                named = arg
        init = initializer(Fn(initializer_, "cogroup initializer", (0,)))
        w = self._windows
        kind = "keyValue" if w is None else ("session" if isinstance(w, SessionWindows) else "window")
        if kind == "session" and merger_ is None:
            raise TopologyError("a session-windowed cogroup needs a merger: aggregate(initializer, merger)")
        merge_fn = merger(Fn(merger_, "session merger", (3,))) if merger_ is not None else None
        spec = self._b.store(materialized, kind, "COGROUPKSTREAM-AGGREGATE-STATE-STORE-", retention=None,
                             key_serde=self._groups[0][0].key_serde,
                             value_serde=materialized.value_serde if materialized else None)
        if w is not None:   # checked once the store is named, as Kafka's materializers check it
            spec.retention = window_retention(w, materialized, spec.name)
        if kind == "window":    # the store's windows end at start + size (sliding: + time difference)
            from streams.unlimited_windows import store_window_size
            spec.window_size = store_window_size(w)
        inputs = self._repartitions(spec.name)
        parents, opts, given = [], {}, _named(named)
        for i, ((grouped, agg), src) in enumerate(zip(self._groups, inputs)):
            name = self._b.suffixed(given, f"-cogroup-agg-{i}", "COGROUPKSTREAM-AGGREGATE-")
            make = self._factory(kind, w, spec.name, init, agg, merge_fn)
            args = {"store": spec.name}
            if kind == "keyValue":      # one result table: every stream's aggregation sends old values or none
                make, args = old_values_factory(lambda _s, m=make: m(), spec.name, opts)
            parents.append(self._b.add(name, "processor", "cogroup-aggregate", make, [src._node], (spec,),
                                       args=args))
        merge = self._b.suffixed(given, "-cogroup-merge", "COGROUPKSTREAM-MERGE-")
        sources = tuple(p.parents[0] for p in parents)
        node = self._b.add(merge, "processor", "cogroup-merge", PassThrough, parents,
                           args={"store": spec.name, "copartition": sources,
                                 **({"opts": opts} if kind == "keyValue" else {})},
                           key_serde=spec.key_serde, value_serde=spec.value_serde)
        return KTable(self._b, node, spec.key_serde, spec.value_serde, spec.name, windowed=w)

    def _repartitions(self, store: str) -> list:
        """Kafka's ``CogroupedStreamAggregateBuilder.processRepartitions``, run before any
        aggregator is named: each key-changed stream is repartitioned through
        ``<Grouped name or store name>-repartition``. Two unnamed key-changed streams in one
        cogroup would both get ``<store>-repartition``, which Kafka refuses (the processor names
        repeat); here the later ones get ``<store>-<position>-repartition`` instead. A cogroup
        aggregated again reads the repartition topic its first aggregation made (the names are
        drawn again, unused), as Kafka's aggregate builder keeps one node per grouped stream."""
        from streams.kstream import repartition_names
        inputs, topics = [], set()
        for i, (grouped, _) in enumerate(self._groups):
            made = self._inputs.get(id(grouped))
            if made is not None:
                if grouped._repartition_required:
                    repartition_names(self._b)
                inputs.append(made[1])
                continue
            prefix = store
            if grouped._repartition_required and grouped._grouped.name is None:
                prefix = store if store not in topics else f"{store}-{i}"
                topics.add(store)
            stream = grouped._input(prefix)
            self._inputs[id(grouped)] = (grouped, stream)
            inputs.append(stream)
        return inputs

    @staticmethod
    def _factory(kind, w, store, init, agg, merge_fn):
        from streams.aggregate import KStreamAggregate
        from streams.window_aggregate import SessionWindowAggregate, SlidingWindowAggregate, TimeWindowAggregate
        from streams.windows import SlidingWindows
        if kind == "keyValue":
            return lambda: KStreamAggregate(store, init, agg)
        if kind == "session":
            return lambda: SessionWindowAggregate(store, w, init, agg, merge_fn)
        from streams.unlimited_windows import UnlimitedWindowAggregate, UnlimitedWindows
        cls = (SlidingWindowAggregate if isinstance(w, SlidingWindows) else
               UnlimitedWindowAggregate if isinstance(w, UnlimitedWindows) else TimeWindowAggregate)
        return lambda: cls(store, w, init, agg)
