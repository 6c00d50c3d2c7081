"""Joins against tables on the primary key: stream–table and stream–GlobalKTable
(``KStreamKTableJoin``: only the stream side triggers) and table–table
(``KTableKTableInnerJoin``/``LeftJoin``/``RightJoin``/``OuterJoin`` and ``KTableKTableJoinMerger``:
either side triggers).

A join reads the other side through a *value getter*, as Kafka's ``KTableValueGetterSupplier``:
the nearest materialized store up the table's chain, with the chain's stateless steps (filter,
mapValues) applied on read, so ``table.filter(...)`` joins without a store of its own.

A table–table join reads the other side's row as that table has forwarded it
(:class:`ForwardedGetter`), not a change still waiting in the record cache: see
:class:`TableTableJoin`.
"""
from __future__ import annotations

import bisect
import logging
from typing import Any, Callable

from streams.errors import TopologyError
from streams.processor import Processor
from streams.record import Change, Record
from streams.table_store import TimestampedKeyValueStore, ValueAndTimestamp, forwarded, put_and_forward, value_or_none

log = logging.getLogger(__name__)

_STATELESS = {"filter", "filterNot", "mapValues"}


class ValueGetter:
    """``names``: the stores read; ``open(context)`` gives ``get(key) -> ValueAndTimestamp|None``
    (and ``get(key, as_of)`` for a versioned store: the value as of that time)."""

    def __init__(self, store: str, steps: list[tuple[str, Callable]], versioned: bool = False,
                 history_retention: int | None = None):
        self.store, self.steps, self.versioned = store, steps, versioned
        self.history_retention = history_retention     # a versioned store's history (ms), else None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.store,)

    def with_steps(self, steps: list) -> "ValueGetter":
        return ValueGetter(self.store, steps, self.versioned, self.history_retention)

    def _read(self, context) -> Callable:
        """The store is looked up on first read: a global store joins the task after its
        processors are initialised."""
        opened = []

        def read(key, as_of):
            if not opened:
                if self.versioned:
                    from streams.versioned import VersionedKeyValueStore
                    opened.append(VersionedKeyValueStore(context.store(self.store)).get)
                else:
                    opened.append(TimestampedKeyValueStore(context.store(self.store)).get)
            return opened[0](key, as_of) if self.versioned else opened[0](key)
        return read

    def open(self, context) -> Callable:
        steps, read = self.steps, self._read(context)

        def get(key, as_of: int | None = None):
            entry = read(key, as_of)
            if entry is None:
                return None
            value = entry.value
            for kind, fn in steps:
                if value is None:
                    return None
                if kind == "filter":
                    value = value if fn(key, value) else None
                elif kind == "filterNot":
                    value = None if fn(key, value) else value
                else:
                    value = fn(key, value)
            return None if value is None else ValueAndTimestamp(value, entry.timestamp)
        return get


class JoinResultGetter(ValueGetter):
    """The getter of an unmaterialized table–table join: both sides' getters joined on read, as
    Kafka's ``KTableKTable*JoinValueGetter`` (the larger timestamp of the two rows)."""

    def __init__(self, kind: str, this: ValueGetter, other: ValueGetter, joiner: Callable, steps=()):
        super().__init__(None, list(steps))
        self.kind, self.this, self.other, self.joiner = kind, this, other, joiner

    @property
    def names(self) -> tuple[str, ...]:
        return self.this.names + tuple(n for n in self.other.names if n not in self.this.names)

    def with_steps(self, steps: list) -> "ValueGetter":
        return JoinResultGetter(self.kind, self.this, self.other, self.joiner, steps)

    def _read(self, context) -> Callable:
        this, other = self.this.open(context), self.other.open(context)

        def read(key, as_of):
            lt, rt = this(key), other(key)
            if lt is None and rt is None or self.kind == "inner" and (lt is None or rt is None) \
                    or self.kind == "left" and lt is None:
                return None
            ts = max(e.timestamp for e in (lt, rt) if e is not None)
            return ValueAndTimestamp(self.joiner(key, value_or_none(lt), value_or_none(rt)), ts)
        return read


class SuppressedGetter(ValueGetter):
    """The getter of a suppressed table, as ``KTableSuppressProcessorSupplier.view()``: a key held
    in the suppress buffer reads as the value it had before it was buffered (what downstream has
    seen; its timestamp is unknown, -1, as Kafka's ``priorValueForBuffered``), any other key reads
    through to the parent's getter. Reading the buffer puts the join in the suppress's task."""

    def __init__(self, buffer: str, parent: ValueGetter, steps=()):
        super().__init__(None, list(steps))
        self.buffer, self.parent = buffer, parent

    @property
    def names(self) -> tuple[str, ...]:
        return (self.buffer,) + tuple(n for n in self.parent.names if n != self.buffer)

    def with_steps(self, steps: list) -> "ValueGetter":
        return SuppressedGetter(self.buffer, self.parent, steps)

    def _read(self, context) -> Callable:
        from streams.suppress import prior_value_for_buffered
        parent, buffer = self.parent.open(context), context.store(self.buffer)

        def read(key, as_of):
            buffered, prior = prior_value_for_buffered(buffer, key)
            if not buffered:
                return parent(key)
            return None if prior is None else ValueAndTimestamp(prior, -1)
        return read


class WindowedGetter(ValueGetter):
    """The getter of a windowed aggregation's table: ``get(Windowed(key, start, end))`` is the
    window store's entry for ``key`` at ``start`` (``KStreamWindowAggregateValueGetter``, and the
    sliding one's), or the session store's session, timestamped with its end
    (``KTableSessionWindowValueGetter``)."""

    def __init__(self, store: str, steps=(), session: bool = False):
        super().__init__(store, list(steps))
        self.session = session

    def with_steps(self, steps: list) -> "ValueGetter":
        return WindowedGetter(self.store, steps, self.session)

    def _read(self, context) -> Callable:
        opened = []

        def read(key, as_of):
            if not opened:
                opened.append(context.store(self.store))
            if self.session:
                agg = opened[0].fetch_session(key.key, key.start, key.end)
                return None if agg is None else ValueAndTimestamp(agg, key.end)
            entry = opened[0].fetch(key.key, key.start)
            return None if entry is None else ValueAndTimestamp(*entry)
        return read


class ForwardedGetter(ValueGetter):
    """A table's getter reading each row as the table has forwarded it
    (:func:`streams.table_store.forwarded`), with the chain's stateless steps applied."""

    def with_steps(self, steps: list) -> "ValueGetter":
        return ForwardedGetter(self.store, steps)

    def _read(self, context) -> Callable:
        opened: list[TimestampedKeyValueStore] = []

        def read(key, as_of):
            if not opened:
                opened.append(TimestampedKeyValueStore(context.store(self.store)))
            return forwarded(context, opened[0], key)
        return read


def forwarded_getter(getter: ValueGetter) -> ValueGetter:
    """``getter`` made to read rows as forwarded: a plain key-value store's, and an unmaterialized
    join's sides (its result is forwarded as soon as either side's change is). Other getters (a
    versioned store, which Kafka never caches; a windowed store; a suppression) are kept."""
    if type(getter) is JoinResultGetter:
        return JoinResultGetter(getter.kind, forwarded_getter(getter.this), forwarded_getter(getter.other),
                                getter.joiner, getter.steps)
    if type(getter) is not ValueGetter or getter.versioned:
        return getter
    return ForwardedGetter(getter.store, getter.steps)


def value_getter(table) -> ValueGetter:
    """The getter of a :class:`~streams.ktable.KTable`: its store, or its parent's getter with the
    stateless steps in between."""
    return _node_getter(table._node)


def _node_getter(node) -> ValueGetter:
    from streams.ktable import _mapper, _predicate, materialize_source
    steps: list[tuple[str, Callable]] = []
    while True:
        windowed = _window_store(node)
        if windowed is not None:
            return WindowedGetter(windowed.name, list(reversed(steps)), windowed.kind == "session")
        if node.op == "cogroup-merge" and node.args.get("store"):
            return ValueGetter(node.args["store"], list(reversed(steps)))
        if node.op == "join-merge" and not node.stores:
            return node.args["getter"].with_steps(list(reversed(steps)))
        materialize_source(node)        # KTableImpl.valueGetterSupplier materializes a source table
        kv = [s for s in node.stores if s.kind in ("keyValue", "versioned")]
        if node.op not in ("join-this", "join-other", "suppress") and kv and node.args.get("materialized", True):
            own = node.args.get("store", kv[-1].name)
            spec = next(s for s in kv if s.name == own)
            return ValueGetter(spec.name, list(reversed(steps)), node.args.get("versioned", False),
                               node.args.get("history_retention"))
        if node.op in _STATELESS and len(node.parents) == 1:
            f = node.args["predicate"] if node.op != "mapValues" else node.args["mapper"]
            steps.append((node.op, _predicate(f) if node.op != "mapValues" else _mapper(f)))
            node = node.parents[0]
            continue
        if node.op == "suppress":
            return SuppressedGetter(node.stores[0].name, _node_getter(node.parents[0]), list(reversed(steps)))
        raise TopologyError(f"cannot read table {node.name} ({node.op}) for a join: materialize it with "
                            f"Materialized.as_(...) at that step")


def _window_store(node):
    """The window or session store a windowed aggregation (or cogroup) node keeps its table in."""
    name = node.args.get("store")
    if name is None:
        return None
    return next((s for n in (node, *node.parents) for s in n.stores
                 if s.name == name and s.kind in ("window", "session")), None)


class StreamTableJoin(Processor):
    """``KSTREAM-JOIN-``/``KSTREAM-LEFTJOIN-``: a stream record looks up the table's current value
    (as of its timestamp, for a versioned table) under ``key_mapper(key, value)`` (the record's
    key for a KTable, a selector for a GlobalKTable). A record with a null value is dropped; so is
    one with a null join key in an inner join, where a left join joins it with None (KIP-962 for a
    null record key; KAFKA-19208 for a GlobalKTable selector that answers null: "no match", not
    "no record"). Table updates never trigger and are never joined backwards.

    With a grace period (``Joined.withGracePeriod``, KIP-923) stream records wait in a
    time-ordered buffer until stream time passes ``ts + grace``, then join in timestamp order, so a
    table update up to ``grace`` late still counts; a record already older than that joins at once.
    """

    def __init__(self, getter: ValueGetter, joiner: Callable, left: bool, key_mapper: Callable | None = None,
                 grace_ms: int | None = None, buffer: str | None = None):
        self.getter, self.joiner, self.left, self.key_mapper = getter, joiner, left, key_mapper
        self.grace_ms, self.buffer_name = grace_ms, buffer

    def init(self, context) -> None:
        super().init(context)
        self.get = self.getter.open(context)
        self.buffer = context.store(self.buffer_name).backing if self.buffer_name else None

    def _map(self, record: Record):
        """The join key: the record's, or the GlobalKTable selector's (``key_mapper`` a callable of
        (key, value), or a SQL :class:`~streams.functions.Fn`, which sees every column of the
        record, as every SQL argument)."""
        m = self.key_mapper
        if m is None:
            return record.key
        if getattr(m, "is_sql", False):
            return m.evaluate(record.row(*self.context.source()))
        return m(record.key, record.value)

    def process(self, record: Record) -> None:
        mapped = self._map(record)
        if record.value is None or (mapped is None and not self.left):
            log.warning("Skipping record due to null join key or value. topic=[%s] partition=[%s] offset=[%s]",
                        *self.context.source())
            return
        if self.buffer is None:
            return self._join(record, mapped)
        b = self.buffer
        observed = max(b.get(("o", "observed")) if b.get(("o", "observed")) is not None else record.timestamp,
                       record.timestamp)
        b.put(("o", "observed"), observed)
        if record.timestamp < observed - self.grace_ms:
            return self._join(record, mapped)
        index = list(b.get(("o", "index")) or ())
        seq = (b.get(("o", "seq")) or 0) + 1
        b.put(("o", "seq"), seq)
        b.put(("b", record.timestamp, seq), (record, mapped, self.context.source()))
        index.insert(bisect.bisect_right(index, (record.timestamp, seq)), (record.timestamp, seq))
        while index and index[0][0] <= observed - self.grace_ms:
            ts, s = index.pop(0)
            held = b.get(("b", ts, s))
            b.delete(("b", ts, s))
            b.put(("o", "index"), tuple(index))
            # joined under the held record's position, as Kafka's setRecordContext(toEmit.recordContext())
            previous = self.context.swap_source(tuple(held[2])) if len(held) > 2 and held[2] is not None else None
            try:
                self._join(held[0], held[1])
            finally:
                if previous is not None:
                    self.context.swap_source(previous)
        b.put(("o", "index"), tuple(index))

    def _join(self, record: Record, mapped) -> None:
        entry = None
        if mapped is not None:
            entry = self.get(mapped, record.timestamp) if self.getter.versioned else self.get(mapped)
        other = value_or_none(entry)
        if self.left or other is not None:
            self.forward(record.with_(value=self.joiner(record.key, record.value, other)))


class TableTableJoin(Processor):
    """One side of a table–table join: ``KTABLE-JOINTHIS-``/``-JOINOTHER-``. ``kind`` is Kafka's
    processor for this side — ``inner``, ``left`` (this side's rows are kept), ``right`` (the
    other side's are), ``outer``. Emits ``Change(new, old)`` at the larger of the two rows'
    timestamps; ``old`` only when ``send_old`` (set when a downstream step needs old values).

    The other side's row is read as that table has forwarded it (:func:`forwarded_getter`), where
    Kafka's ``KTableKTable*JoinProcessor`` reads it through the caching store, a change still
    waiting in the record cache included. The flush drops some changes: a key created and deleted
    between two flushes (``CachingKeyValueStore.putAndMaybeForward``), a change that a filter
    below the cache turns into none. A waiting row read early could then never be retracted:
    right ``k`` put, left ``k`` forwarded (by an eviction) and joined with it, right ``k`` deleted
    before the flush, and the join keeps a result for a row the right table no longer holds. Read
    as forwarded, every result is the join of the two sides as forwarded so far, and the waiting
    change joins when its own flush forwards it, so the last result per key is the join of the
    tables as they end. (Within one flush both sides' changes thus join in turn: a left join may
    show ``left - null`` before ``left - right`` where Kafka shows ``left - right`` twice.)"""

    def __init__(self, kind: str, getter: ValueGetter, joiner: Callable, send_old: Callable[[], bool]):
        self.kind, self.getter, self.joiner, self.send_old = kind, getter, joiner, send_old

    def init(self, context) -> None:
        super().init(context)
        self.get = forwarded_getter(self.getter).open(context)
        self.send_old_values = self.send_old()

    def process(self, record: Record) -> None:
        if record.key is None:
            log.warning("Skipping record due to null key. topic=[%s] partition=[%s] offset=[%s]", *self.context.source())
            return
        change: Change = record.value
        if not change.is_latest:
            log.info("Skipping out-of-order record from versioned table while performing table-table join.")
            return
        entry = self.get(record.key)
        other = value_or_none(entry)
        j, old_in = self.joiner, change.old if self.send_old_values else None
        if self.kind in ("inner", "right"):
            if other is None:
                return
            ts = max(record.timestamp, entry.timestamp)
            if self.kind == "inner":
                new = None if change.new is None else j(record.key, change.new, other)
                old = None if old_in is None else j(record.key, old_in, other)
            else:
                new = j(record.key, change.new, other)
                old = j(record.key, change.old, other) if self.send_old_values else None
        else:
            if other is None and change.new is None and change.old is None:
                return
            ts = record.timestamp if other is None else max(record.timestamp, entry.timestamp)
            if self.kind == "left":
                new = None if change.new is None else j(record.key, change.new, other)
                old = None if old_in is None else j(record.key, old_in, other)
            else:
                new = j(record.key, change.new, other) if (other is not None or change.new is not None) else None
                old = (j(record.key, change.old, other)
                       if self.send_old_values and (other is not None or change.old is not None) else None)
        self.forward(record.with_(value=Change(new, old), timestamp=ts))


class TableJoinMerger(Processor):
    """``KTABLE-MERGE-``: the join's result table; with a store, it keeps the rows and forwards
    through the caching rule of :func:`streams.table_store.put_and_forward`."""

    def __init__(self, store: str | None, send_old: Callable[[], bool]):
        self.store_name, self.send_old = store, send_old

    def init(self, context) -> None:
        super().init(context)
        self.table = TimestampedKeyValueStore(context.store(self.store_name)) if self.store_name else None
        self.send_old_values = self.send_old()

    def process(self, record: Record) -> None:
        change: Change = record.value
        if self.table is None:
            self.forward(record if self.send_old_values else record.with_(value=Change(change.new, None)))
            return
        old = value_or_none(self.table.get(record.key))
        put_and_forward(self, self.table, record, change.new, old, record.timestamp, self.send_old_values, True)
