"""How the DSL's joins become nodes, named as Kafka Streams names them (``KStreamImplJoin``,
``KStreamImpl.doStreamTableJoin``/``globalTableJoin``, ``KTableImpl.doJoin``), so ``describe()``
reads like Kafka's. The processors are in :mod:`streams.stream_join` and
:mod:`streams.table_join`; the foreign-key join in :mod:`streams.fk_join`.
"""
from __future__ import annotations

from streams.errors import TopologyError
from streams.joins import Joined, StreamJoined, joiner as make_joiner, reverse
from streams.stores import StoreSpec
from streams.windows import JoinWindows


def _named(named):
    from streams.kstream import _named as n
    return n(named)


def _repartitioned(stream, name: str, key_serde=None, value_serde=None):
    """A stream whose key changed goes through ``<name>-repartition`` before a join, as Kafka's
    ``repartitionForJoin`` does (serdes from StreamJoined/Joined). Its null keys are dropped
    unless the join (or one further down) is left/outer (:mod:`streams.repartition_filter`)."""
    if not stream._repartition_required:
        return stream
    return stream._through_repartition(name, key_serde, value_serde)


def kstream_join(stream, kind: str, other, joiner_arg, windows, joined, key_selector, named):
    """``KStream.join/leftJoin/outerJoin`` by the other side's type, with Kafka's argument order:
    ``(stream, joiner, JoinWindows[, StreamJoined])``, ``(table, joiner[, Joined])``,
    ``(globalTable, keySelector, joiner[, Named])`` (or ``key_selector=``, ``joiner=``)."""
    from streams.global_table import GlobalKTable
    from streams.kstream import KStream
    from streams.ktable import KTable
    if isinstance(other, KStream):
        if other._b is not stream._b:
            raise TopologyError("join(): the other stream belongs to another StreamsBuilder")
        return stream_stream(stream, other, kind, joiner_arg, windows, joined)
    if isinstance(other, KTable):
        if kind == "outer":
            raise TopologyError("KStream–KTable joins are inner or left; there is no outer join (Kafka has none)")
        if joined is None and isinstance(windows, Joined):
            joined = windows
        elif windows is not None and not isinstance(windows, Joined):
            raise TopologyError("a stream–table join takes (table, joiner[, Joined]); JoinWindows are for "
                                "stream–stream joins")
        return stream_table(stream, other, kind, joiner_arg, joined)
    if isinstance(other, GlobalKTable):
        if key_selector is None:
            key_selector, joiner_arg, windows = joiner_arg, windows, None
        given = named or joined or windows
        return stream_global(stream, other, kind, key_selector, joiner_arg,
                             given.name if isinstance(given, Joined) else given)
    raise TopologyError(f"join(): cannot join a KStream with {type(other).__name__}")


# ---------------------------------------------------------------------- stream–stream
def stream_stream(this, other, kind: str, joiner_arg, windows: JoinWindows, params: StreamJoined | None):
    from streams.kstream import KStream
    from streams.stateless import PassThrough
    from streams.stream_join import LEFT, RIGHT, JoinWindow, StreamStreamJoin
    if not isinstance(windows, JoinWindows):
        raise TopologyError(f"a stream–stream {kind} join needs JoinWindows, got {type(windows).__name__}")
    p = params or StreamJoined()
    if p.name is not None and not isinstance(p, StreamJoined):
        raise TopologyError("stream–stream joins take StreamJoined")
    j = make_joiner(joiner_arg, f"{kind} joiner")
    b = this._b
    left_outer, right_outer = kind in ("left", "outer"), kind == "outer"
    this = _repartitioned(this, f"{p.name}-left" if p.name else this._node.name, p.key_serde, p.value_serde)
    other = _repartitioned(other, f"{p.name}-right" if p.name else other._node.name, p.key_serde,
                           p.other_value_serde)

    def name(suffix, prefix):       # Kafka draws the generated name even when the join is named
        return b.suffixed(p.name, suffix, prefix)

    # KStreamImplJoin's names: the generated join names are drawn even for a named join, and
    # stores follow the generated names unless StreamJoined names a base store name
    this_windowed = name("-this-windowed", "KSTREAM-WINDOWED-")
    other_windowed = name("-other-windowed", "KSTREAM-WINDOWED-")
    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    this_generated = b.next_name("KSTREAM-OUTERTHIS-" if right_outer else "KSTREAM-JOINTHIS-")
    other_generated = b.next_name("KSTREAM-OUTEROTHER-" if left_outer else "KSTREAM-JOINOTHER-")
    join_this = f"{p.name}{this_suffix}" if p.name else this_generated
    join_other = f"{p.name}{other_suffix}" if p.name else other_generated
    merge = name("-merge", "KSTREAM-MERGE-")
    retention = windows.retentionMs()
    base = p.store_name
    this_store = f"{base}{this_suffix}-store" if base else f"{this_generated}-store"
    other_store = f"{base}{other_suffix}-store" if base else f"{other_generated}-store"
    logged = dict(p.log_config)
    this_spec = StoreSpec(this_store, "window", retention, log_config=logged)
    other_spec = StoreSpec(other_store, "window", retention, log_config=logged)
    shared = ()
    if left_outer:
        if base:
            outer_name = f"{base}{'-outer-shared-join' if right_outer else '-left-shared-join'}-store"
        else:
            outer_name = "KSTREAM-OUTERSHARED-" + this_generated.rsplit("-", 1)[1] + "-store"
        shared = (StoreSpec(outer_name, "window", retention, log_config=logged),)
    outer_store = shared[0].name if shared else None
    args = {"windows": windows, "joiner": joiner_arg, "kind": kind}
    tw = b.add(this_windowed, "processor", "join-windowed", lambda: JoinWindow(this_store, windows), [this._node],
               (this_spec,), args=args)
    ow = b.add(other_windowed, "processor", "join-windowed", lambda: JoinWindow(other_store, windows), [other._node],
               (other_spec,), args=args)
    jt = b.add(join_this, "processor", "stream-join",
               lambda: StreamStreamJoin(LEFT, other_store, windows, j, left_outer, outer_store), [tw],
               (other_spec,) + shared, args={**args, "side": "left"})
    jo = b.add(join_other, "processor", "stream-join",
               lambda: StreamStreamJoin(RIGHT, this_store, windows, reverse(j), right_outer, outer_store), [ow],
               (this_spec,) + shared, args={**args, "side": "right"})
    m = b.add(merge, "processor", "merge", PassThrough, [jt, jo],
              args={"copartition": (this._node, other._node), "null_key_relaxed": left_outer})
    return KStream(b, m, p.key_serde, None, False)      # Kafka: StreamJoined's key serde, else none


# ---------------------------------------------------------------------- stream–table, stream–global
def stream_table(stream, table, kind: str, joiner_arg, joined: Joined | None):
    from streams.kstream import KStream
    from streams.table_join import StreamTableJoin, value_getter
    if kind == "outer":
        raise TopologyError("KStream–KTable joins are inner or left; there is no outer join (Kafka has none)")
    p = joined or Joined()
    if not isinstance(p, Joined):
        raise TopologyError(f"a stream–table join takes Joined, got {type(p).__name__}")
    j = make_joiner(joiner_arg, f"{kind} joiner")
    b = stream._b
    stream = _repartitioned(stream, p.name or stream._node.name, p.key_serde, p.value_serde)   # Kafka: no "-left"
    getter = value_getter(table)
    if p.grace_ms is not None and not getter.versioned:
        raise TopologyError("KTable must be versioned to use a grace period in a stream table join. "
                            "(Materialized.as_(Stores.persistentVersionedKeyValueStore(...)): only a "
                            "versioned table can be read as of an earlier time)")
    if p.grace_ms is not None and p.grace_ms > getter.history_retention:
        # StreamTableJoinNode: a record waiting longer than the history would find nothing to join
        raise TopologyError("History retention must be at least grace period.")
    name = b.name(p.name, "KSTREAM-LEFTJOIN-" if kind == "left" else "KSTREAM-JOIN-")
    specs = tuple(s for s in _specs(b, getter.names))
    buffer = None
    if p.grace_ms is not None:
        buffer = f"{name}-Buffer"
        specs += (StoreSpec(buffer, "keyValue"),)
    node = b.add(name, "processor", "stream-table-join",
                 lambda: StreamTableJoin(getter, j, kind == "left", None, p.grace_ms, buffer),
                 [stream._node], specs, args={"joiner": joiner_arg, "kind": kind,
                                              "copartition": (stream._node, table._node),
                                              "null_key_relaxed": kind == "left"})
    # doStreamTableJoin: the result's key serde is Joined's, else the stream's; no value serde
    return KStream(b, node, p.key_serde or stream.key_serde, None, False)


def stream_global(stream, table, kind: str, key_selector, joiner_arg, named=None):
    from streams.functions import Fn
    from streams.kstream import KStream
    from streams.table_join import StreamTableJoin
    if kind == "outer":
        raise TopologyError("KStream–GlobalKTable joins are inner or left")
    if key_selector is None:
        raise TopologyError("a GlobalKTable join needs a key selector: join(globalTable, keySelector, joiner)")
    sel = Fn(key_selector, "GlobalKTable key selector", (2,))
    mapper = sel if sel.is_sql else sel.fn     # SQL sees the record's columns (StreamTableJoin._map)
    j = make_joiner(joiner_arg, f"{kind} joiner")
    b = stream._b
    name = b.name(_named(named), "KSTREAM-LEFTJOIN-" if kind == "left" else "KSTREAM-JOIN-")
    getter = table._getter()
    node = b.add(name, "processor", "stream-global-join",
                 lambda: StreamTableJoin(getter, j, kind == "left", mapper), [stream._node],
                 args={"joiner": joiner_arg, "kind": kind, "key_selector": sel, "global_store": getter.store,
                       "null_key_relaxed": kind == "left"})
    return KStream(b, node, stream.key_serde, None, stream._repartition_required)


def _specs(builder, names):
    for n in builder._nodes:
        for s in n.stores:
            if s.name in names:
                yield s
                names = tuple(x for x in names if x != s.name)


# ---------------------------------------------------------------------- table–table
class _MergeOpts(dict):
    """The join result's ``opts``: asking it for old values turns them on in both joined tables,
    as ``KTableKTableJoinMerger.enableSendingOldValues`` does."""
    def __init__(self, tables):
        super().__init__()
        self._tables = tables

    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        if k == "send_old_values" and v:
            for t in self._tables:
                t._enable_old_values()


def _keys_windowed(table) -> bool:
    """A windowed aggregation's table, or a table of its stream (``toStream().toTable()``, whose key
    serde is the windowed one): its keys are ``Windowed``."""
    from streams.serdes_windowed import TimeWindowedSerde
    return table._windowed is not None or isinstance(table.key_serde, TimeWindowedSerde)


def table_table(this, other, kind: str, joiner_arg, named=None, materialized=None):
    from streams.ktable import KTable
    from streams.table_join import JoinResultGetter, TableJoinMerger, TableTableJoin, value_getter
    if _keys_windowed(this) != _keys_windowed(other):
        raise TopologyError("a windowed table joins another windowed table (their keys are Windowed): "
                            "window both, or join the tables before windowing")
    j = make_joiner(joiner_arg, f"{kind} joiner")
    b = this._b
    given = _named(named)
    spec = None
    if materialized is not None:       # Kafka names the store before the join's processors
        spec = b.store(materialized, "keyValue", "KTABLE-MERGE-STATE-STORE-", key_serde=this.key_serde,
                       value_serde=materialized.value_serde)
    merge = b.name(given, "KTABLE-MERGE-")
    left_outer, right_outer = kind in ("left", "outer"), kind == "outer"
    if left_outer:
        this._enable_old_values()
    if right_outer:
        other._enable_old_values()
    this_get, other_get = value_getter(this), value_getter(other)
    join_this = b.suffixed(given, "-join-this", "KTABLE-JOINTHIS-")
    join_other = b.suffixed(given, "-join-other", "KTABLE-JOINOTHER-")
    opts = _MergeOpts((this, other))
    send_old = lambda: opts.get("send_old_values", False)
    this_kind, other_kind = {"inner": ("inner", "inner"), "left": ("left", "right"), "outer": ("outer", "outer")}[kind]
    jt = b.add(join_this, "processor", "join-this",
               lambda: TableTableJoin(this_kind, other_get, j, send_old), [this._node],
               tuple(_specs(b, other_get.names)), args={"joiner": joiner_arg, "kind": kind})
    jo = b.add(join_other, "processor", "join-other",
               lambda: TableTableJoin(other_kind, this_get, reverse(j), send_old), [other._node],
               tuple(_specs(b, this_get.names)), args={"joiner": joiner_arg, "kind": kind})
    m = b.add(merge, "processor", "join-merge",
              lambda: TableJoinMerger(spec.name if spec else None, send_old), [jt, jo],
              (spec,) if spec else (), args={"opts": opts, "copartition": (this._node, other._node),
                                             "getter": JoinResultGetter(kind, this_get, other_get, j)},
              key_serde=this.key_serde, value_serde=spec.value_serde if spec else None)
    # GraphGraceSearchUtil: a suppress(untilWindowCloses) after the join waits the larger grace
    # (a table of a windowed stream knows no windows of its own: the search walks up to them)
    windowed = None if this._windowed is None or other._windowed is None else max(
        (this._windowed, other._windowed), key=lambda w: w.closeGraceMs())
    return KTable(b, m, this.key_serde, m.value_serde, spec.name if spec else None, windowed)


# ---------------------------------------------------------------------- foreign key (KIP-213)
def foreign_key(this, other, kind: str, extractor_arg, joiner_arg, table_joined=None, materialized=None):
    from streams.fk_join import (ForeignTableJoin, ResponseJoin, SubscriptionJoin, SubscriptionReceive,
                                 SubscriptionSend, WrapperSerde, response_partition)
    from streams.functions import Fn
    from streams.ktable import KTable
    from streams.stateless import Sink, Source
    from streams.table import KTableSource
    from streams.table_join import value_getter
    if kind == "outer":
        raise TopologyError("foreign-key joins are inner or left (Kafka has no outer foreign-key join)")
    f = Fn(extractor_arg, "foreign key extractor", (1, 2))
    if f.is_sql:
        extract = lambda k, v: f.evaluate({"key": k, "value": v})
    else:
        extract = (lambda k, v: f.fn(v)) if f.arity == 1 else f.fn
    j = make_joiner(joiner_arg, f"{kind} joiner")
    b = this._b
    given = getattr(table_joined, "name", None)
    left_join = kind == "left"
    other._enable_old_values()
    this._enable_old_values()
    this_get, other_get = value_getter(this), value_getter(other)

    def name(suffix, prefix):
        return b.suffixed(given, suffix, prefix)

    registration = name("-subscription-registration", "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-") + "-topic"
    wrappers = WrapperSerde()
    left_serde = this.value_serde       # the left value's hash falls back to its bytes under this serde
    send = b.add(name("-subscription-registration-processor", "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-"),
                 "processor", "fk-subscription-send", lambda: SubscriptionSend(extract, left_join, left_serde),
                 [this._node], args={"foreign_key": f, "kind": kind})
    fk_serde = other.key_serde
    reg_sink = b.add(name("-subscription-registration-sink", "KTABLE-SINK-"), "sink", "fk-subscription",
                     lambda: Sink(registration, None, fk_serde, wrappers, internal=True), [send],
                     topics=(registration,), internal=True, key_serde=fk_serde, value_serde=wrappers)
    reg_source = b.add(name("-subscription-registration-source", "KTABLE-SOURCE-"), "source", "fk-subscription",
                       lambda: Source(fk_serde, wrappers), [], topics=(registration,), internal=True,
                       key_serde=fk_serde, value_serde=wrappers)
    reg_sink.args["pair"] = reg_source.name
    sub_store = StoreSpec(name("-subscription-store", "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-"), "keyValue")
    receive = b.add(name("-subscription-receive", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-"), "processor",
                    "fk-subscription-receive", lambda: SubscriptionReceive(sub_store.name), [reg_source], (sub_store,),
                    args={"copartition": (reg_source, other._node)})
    join_foreign = b.add(name("-subscription-join-foreign", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-"), "processor",
                         "fk-subscription-join", lambda: SubscriptionJoin(other_get), [receive],
                         tuple(_specs(b, other_get.names)))
    foreign_join = b.add(name("-foreign-join-subscription", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-"), "processor",
                         "fk-foreign-join", lambda: ForeignTableJoin(sub_store.name, this.key_serde),
                         [other._node], (sub_store,))
    response = name("-subscription-response", "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-") + "-topic"
    pk_serde = this.key_serde
    resp_sink = b.add(name("-subscription-response-sink", "KTABLE-SINK-"), "sink", "fk-response",
                      lambda: Sink(response, None, pk_serde, wrappers, partitioner=response_partition, internal=True),
                      [join_foreign, foreign_join], topics=(response,), internal=True,
                      key_serde=pk_serde, value_serde=wrappers)
    resp_source = b.add(name("-subscription-response-source", "KTABLE-SOURCE-"), "source", "fk-response",
                        lambda: Source(pk_serde, wrappers), [], topics=(response,), internal=True,
                        key_serde=pk_serde, value_serde=wrappers)
    resp_sink.args["pair"] = resp_source.name
    resolver = b.add(name("-subscription-response-resolver", "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-"),
                     "processor", "fk-response-join", lambda: ResponseJoin(this_get, j, left_join, left_serde),
                     [resp_source],
                     tuple(_specs(b, this_get.names)), args={"joiner": joiner_arg,
                                                            "copartition": (resp_source, this._node)})
    result = name("-result", "KTABLE-FK-JOIN-OUTPUT-")
    # Kafka's result is a KTableSource: its store name is drawn either way, but it keeps the store
    # only when Materialized.as_ names it or a downstream step reads its values or old values (a
    # join, groupBy, suppress: KTableSource.materialize), see streams.ktable.materialize_source
    spec = b.store(materialized, "keyValue", "KTABLE-FK-JOIN-OUTPUT-STATE-STORE-", key_serde=pk_serde,
                   value_serde=materialized.value_serde if materialized is not None else None)
    queryable = materialized is not None and materialized.store_name is not None
    opts: dict = {"store": spec.name if queryable else None}
    args = {"opts": opts, "queryable": queryable}
    if not queryable:
        args["unmaterialized_store"] = spec
    out = b.add(result, "processor", "fk-output",
                lambda o=opts: KTableSource(o["store"], o.get("send_old_values", False) and o["store"] is not None),
                [resolver], (spec,) if queryable else (), args=args, key_serde=pk_serde,
                value_serde=spec.value_serde)
    return KTable(b, out, pk_serde, out.value_serde, spec.name if queryable else None)
