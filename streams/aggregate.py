"""Aggregations of grouped streams and grouped tables into a table (one row per group key).

A grouped table's updates arrive as ``Change(new, old)`` from
:class:`streams.table.KTableRepartitionMap`; the aggregation first takes ``old`` out of the
group (subtractor), then puts ``new`` in (adder), so a row that moves between groups leaves the
old one and a row updated within its group is replaced in one step. A grouped stream's records
are plain values, each added to its group's aggregate.

The result row's timestamp is the largest timestamp of the inputs that made it: the record's
timestamp when the group has no row yet, else the maximum of it and the row's.

Mirrors ``org.apache.kafka.streams.kstream.internals.{KTableAggregate, KTableReduce,
KStreamAggregate, KStreamReduce}``; count is ``aggregate`` with Kafka's count functions
(``KGroupedTableImpl``, ``GroupedStreamAggregateBuilder``). Functions take Kafka's arguments:
``initializer()``, ``adder(key, value, aggregate)``, ``reducer(aggregate, value)``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from streams.errors import StreamsError
from streams.processor import Processor
from streams.record import Record
from streams.table_store import TimestampedKeyValueStore, put_and_forward

log = logging.getLogger(__name__)


class _Aggregation(Processor):
    """An aggregation over its timestamped store; the result table may send old values."""

    def __init__(self, store: str, send_old_values: bool, caching: bool):
        self.store_name, self.send_old_values, self.caching = store, send_old_values, caching

    def init(self, context) -> None:
        super().init(context)
        self.table = TimestampedKeyValueStore(context.store(self.store_name))

    def _emit(self, record: Record, new, old, timestamp: int) -> None:
        put_and_forward(self, self.table, record, new, old, timestamp, self.send_old_values, self.caching)


class KTableAggregate(_Aggregation):
    """``groupedTable.aggregate(initializer, adder, subtractor)``.

    The subtractor runs only when the change has an old value and the group has a row; the adder
    starts from ``initializer()`` when the group has no row. An aggregate that becomes None is
    deleted. A None group key is an error: the repartition map never forwards one.

    >>> chain(task, KTableSource("t", send_old_values=True), KTableRepartitionMap(sel),
    ...       KTableAggregate("agg", lambda: 0, lambda k, v, a: a + v, lambda k, v, a: a - v), out)
    """

    def __init__(self, store: str, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                 subtractor: Callable[[Any, Any, Any], Any], send_old_values: bool = False, caching: bool = True):
        super().__init__(store, send_old_values, caching)
        self.initializer, self.adder, self.subtractor = initializer, adder, subtractor

    def process(self, record: Record) -> None:
        key, change = record.key, record.value
        if key is None:
            raise StreamsError(f"Record key for KTable aggregate operator with state {self.store_name} "
                               "should not be null.")
        row = self.table.get(key)
        old_agg = None if row is None else row.value
        timestamp = record.timestamp
        if change.old is not None and old_agg is not None:
            agg = self.subtractor(key, change.old, old_agg)
            timestamp = max(record.timestamp, row.timestamp)
        else:
            agg = old_agg
        if change.new is not None:
            agg = self.adder(key, change.new, self.initializer() if agg is None else agg)
            if row is not None:
                timestamp = max(record.timestamp, row.timestamp)
        self._emit(record, agg, old_agg, timestamp)

    def add_changes(self, key, added: int, subtracted: int, lead_subtracted: int, ts: int, ts_all: int,
                    headers=()) -> None:
        """A batch's changes of one group at once, for a count (:mod:`streams.count_combine`): with a
        row, every change subtracts and adds, at the largest timestamp (``ts_all``) and the row's;
        without one, those up to the first that adds subtract nothing, and the row starts at that
        record (``ts``, the largest from it on). None of them adding, the group stays without a row."""
        if key is None:
            raise StreamsError(f"Record key for KTable aggregate operator with state {self.store_name} "
                               "should not be null.")
        row = self.table.get(key)
        if row is not None:
            agg, timestamp = row.value - subtracted + added, max(ts_all, row.timestamp)
        elif added:
            agg, timestamp = self.initializer() + added - (subtracted - lead_subtracted), ts
        else:
            agg, timestamp = None, ts_all
        self._emit(Record(key, None, timestamp, tuple(headers)), agg, None if row is None else row.value, timestamp)


class KTableReduce(_Aggregation):
    """``groupedTable.reduce(adder, subtractor)``: like :class:`KTableAggregate` where the first
    value of a group is its aggregate (no initializer)."""

    def __init__(self, store: str, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
                 send_old_values: bool = False, caching: bool = True):
        super().__init__(store, send_old_values, caching)
        self.adder, self.subtractor = adder, subtractor

    def process(self, record: Record) -> None:
        key, change = record.key, record.value
        if key is None:
            raise StreamsError(f"Record key for KTable reduce operator with state {self.store_name} "
                               "should not be null.")
        row = self.table.get(key)
        old_agg = None if row is None else row.value
        if change.old is not None and old_agg is not None:
            agg = self.subtractor(old_agg, change.old)
            timestamp = max(record.timestamp, row.timestamp)
        else:
            agg, timestamp = old_agg, record.timestamp
        if change.new is not None:
            if agg is None:
                agg = change.new
            else:
                agg = self.adder(agg, change.new)
                timestamp = max(record.timestamp, row.timestamp)
        self._emit(record, agg, old_agg, timestamp)


class KStreamAggregate(_Aggregation):
    """``groupedStream.aggregate(initializer, aggregator)``; records with a None key or value are
    dropped (logged, as Kafka logs and meters them).

    With old values and caching off, a group's first result carries ``initializer()`` as its old
    value, as Kafka's processor forwards it; with caching on, the old value is the stored row (None).
    """

    def __init__(self, store: str, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                 send_old_values: bool = False, caching: bool = True):
        super().__init__(store, send_old_values, caching)
        self.initializer, self.aggregator = initializer, aggregator

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            _log_skip(self)
            return
        row = self.table.get(record.key)
        if row is None:
            old_agg, timestamp = self.initializer(), record.timestamp
        else:
            old_agg, timestamp = row.value, max(record.timestamp, row.timestamp)
        self._emit(record, self.aggregator(record.key, record.value, old_agg), old_agg, timestamp)

    def add_count(self, key, count: int, ts: int, headers=()) -> None:
        """``count`` records of one key at once, for a count (:mod:`streams.count_combine`), ``ts``
        the largest of their timestamps."""
        row = self.table.get(key)
        old, timestamp = (self.initializer(), ts) if row is None else (row.value, max(ts, row.timestamp))
        self._emit(Record(key, None, timestamp, tuple(headers)), old + count, old, timestamp)


class KStreamReduce(_Aggregation):
    """``groupedStream.reduce(reducer)``: the first value of a group is its aggregate; records with
    a None key or value are dropped."""

    def __init__(self, store: str, reducer: Callable[[Any, Any], Any], send_old_values: bool = False,
                 caching: bool = True):
        super().__init__(store, send_old_values, caching)
        self.reducer = reducer

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            _log_skip(self)
            return
        row = self.table.get(record.key)
        if row is None:
            old_agg, agg, timestamp = None, record.value, record.timestamp
        else:
            old_agg = row.value
            agg, timestamp = self.reducer(old_agg, record.value), max(record.timestamp, row.timestamp)
        self._emit(record, agg, old_agg, timestamp)


def _log_skip(processor: Processor) -> None:
    topic, partition, offset = processor.context.source()
    log.warning("Skipping record due to null key or value. topic=[%s] partition=[%s] offset=[%s]",
                topic, partition, offset)


def count_initializer() -> int:
    return 0


def count_adder(key, value, aggregate: int) -> int:
    return aggregate + 1


def count_subtractor(key, value, aggregate: int) -> int:
    return aggregate - 1


def table_count(store: str, send_old_values: bool = False, caching: bool = True) -> KTableAggregate:
    """``groupedTable.count()``: an aggregate that adds one per row in the group and takes one
    away per row leaving it (a group emptied keeps its row, with count 0)."""
    return KTableAggregate(store, count_initializer, count_adder, count_subtractor, send_old_values, caching)


def stream_count(store: str, send_old_values: bool = False, caching: bool = True) -> KStreamAggregate:
    """``groupedStream.count()``: the number of records with a value per key."""
    return KStreamAggregate(store, count_initializer, count_adder, send_old_values, caching)
