"""Grouped streams and tables and their aggregations: ``KGroupedStream``, ``TimeWindowedKStream``,
``SessionWindowedKStream``, ``KGroupedTable``. Every aggregation owns a store with a changelog;
a grouping after a key change goes through a repartition topic first, as in Kafka Streams.

Aggregation arguments are SQL or callables: in SQL the record is ``key``/``value`` and the
aggregate so far is ``agg`` (``agg1``/``agg2`` for a session merger); callables take Kafka's
arguments (``Initializer()``, ``Aggregator(key, value, agg)``, ``Reducer(agg, value)``,
``Merger(key, agg1, agg2)``).
"""
from __future__ import annotations

from streams.errors import TopologyError
from streams.functions import Fn
from streams.parameters import Grouped, Materialized, Named, split_materialized


class EmitStrategy:
    """KIP-825: emit every update of a window (Kafka's default) or only its final result."""
    ON_WINDOW_UPDATE, ON_WINDOW_CLOSE = "onWindowUpdate", "onWindowClose"

    def __init__(self, kind: str):
        self.kind = kind

    @staticmethod
    def onWindowUpdate() -> "EmitStrategy":
        return EmitStrategy(EmitStrategy.ON_WINDOW_UPDATE)

    @staticmethod
    def onWindowClose() -> "EmitStrategy":
        return EmitStrategy(EmitStrategy.ON_WINDOW_CLOSE)


# ---------------------------------------------------------------------- argument adapters
def initializer(f: Fn):
    return (lambda: f.evaluate({})) if f.is_sql else f.fn


def aggregator(f: Fn):
    return (lambda k, v, agg: f.evaluate({"key": k, "value": v, "agg": agg})) if f.is_sql else f.fn


def reducer(f: Fn):
    return (lambda agg, v: f.evaluate({"agg": agg, "value": v})) if f.is_sql else f.fn


def merger(f: Fn):
    return (lambda k, a1, a2: f.evaluate({"key": k, "agg1": a1, "agg2": a2})) if f.is_sql else f.fn


def _named(named) -> str | None:
    from streams.kstream import _named as n
    return n(named)


def _burn_count_name(builder, materialized: Materialized | None) -> None:
    """Kafka's ``count(Materialized)`` on a grouped, time- or session-windowed stream draws one
    store name it does not use when the Materialized names no store (kept for topology
    compatibility); drawing it too keeps the later generated names equal to Kafka's."""
    if materialized is not None and materialized.store_name is None:
        builder.next_name("KSTREAM-AGGREGATE-STATE-STORE-")


def old_values_factory(make, store: str, opts: dict | None = None):
    """The factory and node args of a key-value aggregation whose result sends old values when a
    downstream step asks (a re-grouping must subtract the old value): Kafka's
    ``KStreamAggProcessorSupplier.enableSendingOldValues`` always succeeds on an aggregation."""
    opts = {} if opts is None else opts

    def factory():
        processor = make(store)
        processor.send_old_values = opts.get("send_old_values", False)
        return processor
    return factory, {"store": store, "opts": opts}


def _long_serde():
    from streams.serdes import Serdes
    return Serdes.Long()


class KGroupedStream:
    def __init__(self, stream, grouped: Grouped, repartition_required: bool):
        self._stream, self._grouped, self._repartition_required = stream, grouped, repartition_required
        self._b = stream._b
        self._shared = None     # the repartitioned stream, when Grouped.as_ names the topic

    @property
    def key_serde(self):
        return self._grouped.key_serde or self._stream.key_serde

    @property
    def value_serde(self):
        return self._grouped.value_serde or self._stream.value_serde

    def _input(self, store_name: str):
        """The stream the aggregation reads: repartitioned by key first when the key changed. A
        grouping named with ``Grouped.as_`` has one repartition topic shared by all its aggregations
        (Kafka's ``GroupedStreamAggregateBuilder`` re-uses the node); unnamed, each aggregation
        gets its own, named after its store."""
        s = self._stream
        if self._repartition_required:
            if self._grouped.name is not None and self._shared is not None:
                from streams.kstream import repartition_names
                repartition_names(self._b)
                return self._shared
            name = self._grouped.name or store_name
            s = s._through_repartition(name, self.key_serde, self.value_serde)
            if self._grouped.name is not None:
                self._shared = s
        return s

    def _aggregate(self, op: str, prefix: str, make, materialized, named, value_serde, store_kind="keyValue",
                   retention=None, windowed=None):
        from streams.ktable import KTable
        spec = self._b.store(materialized, store_kind, f"{prefix}STATE-STORE-", retention=retention,
                             key_serde=self.key_serde, value_serde=value_serde)
        if windowed is not None:    # checked once the store is named, as Kafka's materializers check it
            spec.retention = window_retention(windowed, materialized, spec.name)
        if store_kind == "window":
            from streams.unlimited_windows import store_window_size
            spec.window_size = store_window_size(windowed)
        name = self._b.name(_named(named), prefix)     # Kafka names the aggregation before its repartition
        src = self._input(spec.name)
        factory, args = old_values_factory(make, spec.name) if store_kind == "keyValue" else (
            lambda s=spec.name: make(s), {"store": spec.name})
        node = self._b.add(name, "processor", op, factory, [src._node], (spec,),
                           args=args, key_serde=spec.key_serde, value_serde=spec.value_serde)
        return KTable(self._b, node, spec.key_serde, spec.value_serde, spec.name, windowed=windowed)

    def count(self, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.aggregate import stream_count
        _burn_count_name(self._b, materialized)
        return self._aggregate("count", "KSTREAM-AGGREGATE-", stream_count,
                               materialized, named, _long_serde())

    def reduce(self, reducer_, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.aggregate import KStreamReduce
        r = reducer(Fn(reducer_, "reduce reducer", (2,)))
        return self._aggregate("reduce", "KSTREAM-REDUCE-", lambda s: KStreamReduce(s, r), materialized, named,
                               self.value_serde)

    def aggregate(self, initializer_, aggregator_, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.aggregate import KStreamAggregate
        i = initializer(Fn(initializer_, "aggregate initializer", (0,)))
        a = aggregator(Fn(aggregator_, "aggregate aggregator", (3,)))
        m = materialized or Materialized()
        return self._aggregate("aggregate", "KSTREAM-AGGREGATE-", lambda s: KStreamAggregate(s, i, a), m, named,
                               m.value_serde)

    def cogroup(self, aggregator_):
        """Kafka's ``cogroup(aggregator)``: start a :class:`~streams.cogroup.CogroupedKStream`."""
        from streams.cogroup import CogroupedKStream
        return CogroupedKStream([(self, aggregator(Fn(aggregator_, "cogroup aggregator", (3,))))])

    def windowedBy(self, windows):
        from streams.windows import SessionWindows
        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        return TimeWindowedKStream(self, windows)


class _Windowed:
    def __init__(self, grouped: KGroupedStream, windows):
        self._g, self._windows = grouped, windows
        self._emit = EmitStrategy.onWindowUpdate()

    def emitStrategy(self, strategy: EmitStrategy):
        if not isinstance(strategy, EmitStrategy):
            raise TopologyError("emitStrategy(): expected EmitStrategy.onWindowUpdate() or onWindowClose()")
        out = type(self)(self._g, self._windows)
        out._emit = strategy
        return out


def window_retention(windows, materialized: Materialized | None, store_name: str | None = None) -> int:
    """The window or session store's retention: ``Materialized.withRetention``, else the windows'
    own; one too short for the windows to close is refused when the aggregation is defined, as
    Kafka's windowed streams (and windowed cogroups) refuse it in their store materializers, in
    their words (``store_name``: the store's, when the Materialized does not name it)."""
    natural = windows.retentionMs()      # size + grace; 2 * time difference + grace; gap + grace
    given = materialized.retention if materialized is not None else None
    if given is not None and given < natural:
        raise TopologyError(_too_short(windows, store_name or materialized.store_name, given), argument="retention")
    return given if given is not None else natural


def _too_short(windows, store: str | None, retention: int) -> str:
    """``WindowStoreMaterializer``, ``SlidingWindowStoreMaterializer``, ``SessionStoreMaterializer``."""
    from streams.windows import SessionWindows, SlidingWindows
    prefix, grace = f"The retention period of the {{}} store {store} must be no smaller than", windows.gracePeriodMs()
    if isinstance(windows, SessionWindows):
        return (f"{prefix.format('session')} the session inactivity gap plus the grace period. "
                f"Got gap=[{windows.inactivityGap()}], grace=[{grace}], retention=[{retention}]")
    if isinstance(windows, SlidingWindows):
        return (f"{prefix.format('window')} 2 * time difference plus the grace period. "
                f"Got time difference=[{windows.timeDifferenceMs()}], grace=[{grace}], retention=[{retention}]")
    return (f"{prefix.format('window')} its window size plus the grace period. "
            f"Got size=[{windows.size()}], grace=[{grace}], retention=[{retention}]")


class TimeWindowedKStream(_Windowed):
    """Tumbling, hopping (``TimeWindows``) and sliding (``SlidingWindows``) aggregations."""

    def _make(self, store, init, agg):
        from streams.windows import SlidingWindows
        from streams.window_aggregate import SlidingWindowAggregate, TimeWindowAggregate
        from streams.unlimited_windows import UnlimitedWindowAggregate, UnlimitedWindows
        cls = (SlidingWindowAggregate if isinstance(self._windows, SlidingWindows) else
               UnlimitedWindowAggregate if isinstance(self._windows, UnlimitedWindows) else TimeWindowAggregate)
        return cls(store, self._windows, init, agg, emit=self._emit.kind)

    def _agg(self, op, init, agg, materialized, named, value_serde):
        from streams.unlimited_windows import check_emit
        check_emit(self._windows, self._emit.kind)      # refused when defined, as Kafka's
        return self._g._aggregate(op, "KSTREAM-AGGREGATE-", lambda s: self._make(s, init, agg), materialized,
                                  named, value_serde, "window", None, self._windows)

    def count(self, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.window_aggregate import count_functions
        from streams.windows import SlidingWindows
        if not isinstance(self._windows, SlidingWindows):
            _burn_count_name(self._g._b, materialized)
        f = count_functions()
        return self._agg("count", f.initializer, f.aggregator, materialized, named, _long_serde())

    def reduce(self, reducer_, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.window_aggregate import reduce_functions
        f = reduce_functions(reducer(Fn(reducer_, "reduce reducer", (2,))))
        return self._agg("reduce", f.initializer, f.aggregator, materialized, named, self._g.value_serde)

    def aggregate(self, initializer_, aggregator_, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        i = initializer(Fn(initializer_, "aggregate initializer", (0,)))
        a = aggregator(Fn(aggregator_, "aggregate aggregator", (3,)))
        return self._agg("aggregate", i, a, materialized, named, (materialized or Materialized()).value_serde)


class SessionWindowedKStream(_Windowed):
    def _agg(self, op, init, agg, merge, materialized, named, value_serde):
        from streams.window_aggregate import SessionWindowAggregate
        return self._g._aggregate(op, "KSTREAM-AGGREGATE-",
                                  lambda s: SessionWindowAggregate(s, self._windows, init, agg, merge,
                                                                   emit=self._emit.kind),
                                  materialized, named, value_serde, "session", None, self._windows)

    def count(self, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.window_aggregate import count_functions
        _burn_count_name(self._g._b, materialized)
        f = count_functions()
        return self._agg("count", f.initializer, f.aggregator, f.merger, materialized, named, _long_serde())

    def reduce(self, reducer_, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.window_aggregate import reduce_functions
        f = reduce_functions(reducer(Fn(reducer_, "reduce reducer", (2,))))
        return self._agg("reduce", f.initializer, f.aggregator, f.merger, materialized, named,
                         self._g.value_serde)

    def aggregate(self, initializer_, aggregator_, merger_, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        i = initializer(Fn(initializer_, "aggregate initializer", (0,)))
        a = aggregator(Fn(aggregator_, "aggregate aggregator", (3,)))
        m = merger(Fn(merger_, "session merger", (3,)))
        return self._agg("aggregate", i, a, m, materialized, named, (materialized or Materialized()).value_serde)


class KGroupedTable:
    """A table re-grouped by a new key: aggregations take an adder and a subtractor, so a row that
    moves to another group is taken out of its old one."""
    def __init__(self, table, selected, grouped: Grouped):
        self._table, self._selected, self._grouped = table, selected, grouped
        self._b = table._b
        self._shared = None     # the repartition source, when Grouped.as_ names the topic

    def _aggregate(self, op, prefix, make, materialized, named, value_serde):
        from streams.ktable import KTable
        from streams.stateless import Sink, Source
        spec = self._b.store(materialized, "keyValue", f"{prefix}STATE-STORE-",
                             key_serde=self._grouped.key_serde, value_serde=value_serde)
        ks, vs = self._grouped.key_serde, self._grouped.value_serde
        topic = f"{self._grouped.name or spec.name}-repartition"
        given = _named(named)
        # KGroupedTableImpl.doAggregate: the sink's, source's and aggregation's names, in that
        # order; a grouping named with Grouped.as_ keeps one repartition topic for all of them
        sink_name = self._b.suffixed(given, "-sink", "KSTREAM-SINK-")
        source_name = self._b.suffixed(given, "-source", "KSTREAM-SOURCE-")
        name = self._b.name(given, prefix)
        src = self._shared if self._grouped.name is not None else None
        if src is None:
            sink = self._b.add(sink_name, "sink", "repartition",
                               lambda: Sink(topic, None, ks, vs, changes=True, internal=True), [self._selected],
                               topics=(topic,), internal=True, key_serde=ks, value_serde=vs)
            src = self._b.add(source_name, "source", "repartition",
                              lambda: Source(ks, vs, changes=True), [], topics=(topic,), internal=True,
                              key_serde=ks, value_serde=vs)
            sink.args["pair"] = src.name
            if self._grouped.name is not None:
                self._shared = src
        factory, args = old_values_factory(make, spec.name)
        node = self._b.add(name, "processor", op, factory, [src], (spec,),
                           args=args, key_serde=spec.key_serde, value_serde=spec.value_serde)
        return KTable(self._b, node, spec.key_serde, spec.value_serde, spec.name)

    def count(self, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.aggregate import table_count
        return self._aggregate("count", "KTABLE-AGGREGATE-", table_count,
                               materialized, named, _long_serde())

    def reduce(self, adder, subtractor, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.aggregate import KTableReduce
        add = reducer(Fn(adder, "reduce adder", (2,)))
        sub = reducer(Fn(subtractor, "reduce subtractor", (2,)))
        return self._aggregate("reduce", "KTABLE-REDUCE-", lambda s: KTableReduce(s, add, sub), materialized, named,
                               self._grouped.value_serde)

    def aggregate(self, initializer_, adder, subtractor, named=None, materialized: Materialized | None = None):
        named, materialized = split_materialized(named, materialized)
        from streams.aggregate import KTableAggregate
        i = initializer(Fn(initializer_, "aggregate initializer", (0,)))
        add = aggregator(Fn(adder, "aggregate adder", (3,)))
        sub = aggregator(Fn(subtractor, "aggregate subtractor", (3,)))
        m = materialized or Materialized()
        return self._aggregate("aggregate", "KTABLE-AGGREGATE-", lambda s: KTableAggregate(s, i, add, sub), m,
                               named, m.value_serde)
