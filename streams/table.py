"""KTable processors: a table read from a topic, its stateless transformations, its changelog as a
stream, and the re-keying that precedes a table aggregation.

A table's records carry ``Change(new, old)``. Whether ``old`` is filled in is each processor's
``send_old_values`` flag, set by whoever builds the topology, as Kafka's
``KTableImpl.enableSendingOldValues`` does: a downstream aggregation needs it (the repartition map
requires it), a downstream materialized filter asks for it, otherwise it stays off. Processors
given a store are materialized; they write and forward through
:func:`streams.table_store.put_and_forward` (see there for the caching rule).

Mirrors ``org.apache.kafka.streams.kstream.internals.{KTableSource, KTableFilter,
KTableMapValues, KTableRepartitionMap}`` and ``KTableImpl.toStream``. Below a versioned table
(KIP-914) an out-of-order update arrives as ``Change(..., is_latest=False)``: un-materialized
filters and mapValues pass the flag on, and a re-grouping ignores such updates, so they never
reach an aggregate; a materialized step's store is timestamped, so what it forwards is latest.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from streams.errors import StreamsError, TopologyError
from streams.processor import Processor
from streams.record import Change, Record
from streams.table_store import TimestampedKeyValueStore, put_and_forward, value_or_none

log = logging.getLogger(__name__)


class _MaterializedTable(Processor):
    """A table processor that may keep its rows in a timestamped store."""
    store_name: str | None = None

    def init(self, context) -> None:
        super().init(context)
        self.table = TimestampedKeyValueStore(context.store(self.store_name)) if self.store_name else None


class KTableSource(_MaterializedTable):
    """``builder.table(topic)``: the latest value per key in offset order; a None value deletes.

    A None key is dropped (Kafka logs and meters it). An update older than the stored row is
    still applied, only logged, as ``KTableSource`` does over a timestamped store; there is no
    emit-on-change (KIP-557 is disabled in Kafka, KAFKA-12508), so an identical value is forwarded
    again. Without a store the table forwards ``Change(value, None)`` and cannot send old values.

    >>> chain(task, KTableSource("t", send_old_values=True), out)
    """

    def __init__(self, store: str | None, send_old_values: bool = False, caching: bool = True):
        if send_old_values and store is None:
            raise TopologyError("a source table sends old values only when it is materialized: "
                                "give KTableSource a store")
        self.store_name, self.send_old_values, self.caching = store, send_old_values, caching

    def process(self, record: Record) -> None:
        if record.key is None:
            topic, partition, offset = self.context.source()
            log.warning("Skipping record due to null key. topic=[%s] partition=[%s] offset=[%s]",
                        topic, partition, offset)
            return
        if self.table is None:
            self.forward(record.with_(value=Change(record.value, None)))
            return
        old = self.table.get(record.key)
        if old is not None and record.timestamp < old.timestamp:
            topic, partition, offset = self.context.source()
            log.warning("Detected out-of-order KTable update for %s, old timestamp=[%d] new timestamp=[%d]. "
                        "topic=[%s] partition=[%s] offset=[%s].", self.table.name, old.timestamp,
                        record.timestamp, topic, partition, offset)
        put_and_forward(self, self.table, record, record.value, value_or_none(old), record.timestamp,
                        self.send_old_values, self.caching)


class KTableFilter(_MaterializedTable):
    """``table.filter(predicate)`` / ``filterNot``: rows that fail become deletes.

    Without old values the filter cannot tell whether a failing row passed before, so it forwards
    a tombstone ``Change(None, None)`` for every failing update. With old values (``old`` filtered
    too, or read from its own store when materialized) it drops updates that neither pass now nor
    passed before, so a tombstone is forwarded only for a row that stops passing.
    ``predicate(key, value)``.
    """

    def __init__(self, predicate: Callable[[Any, Any], bool], filter_not: bool = False, store: str | None = None,
                 send_old_values: bool = False, caching: bool = True, versioned_upstream: bool = False):
        self.predicate, self.filter_not = predicate, filter_not
        self.store_name, self.send_old_values, self.caching = store, send_old_values, caching
        self.versioned_upstream = versioned_upstream

    def _compute(self, key, value):
        if value is not None and (self.filter_not ^ bool(self.predicate(key, value))):
            return value
        return None

    def process(self, record: Record) -> None:
        key, change = record.key, record.value
        new = self._compute(key, change.new)
        old = None
        if self.send_old_values:
            old = value_or_none(self.table.get(key)) if self.table is not None else self._compute(key, change.old)
            if old is None and new is None and not self.versioned_upstream:
                return      # Kafka forwards these under versioned semantics (KTableFilter.process)
        if self.table is not None:
            put_and_forward(self, self.table, record, new, old, record.timestamp, self.send_old_values, self.caching)
        else:
            self.forward(record.with_(value=Change(new, old, change.is_latest)))


class KTableMapValues(_MaterializedTable):
    """``table.mapValues(mapper)``: ``mapper(key, value)``, never called on a None (deleted) value."""

    def __init__(self, mapper: Callable[[Any, Any], Any], store: str | None = None, send_old_values: bool = False,
                 caching: bool = True):
        self.mapper = mapper
        self.store_name, self.send_old_values, self.caching = store, send_old_values, caching

    def _compute(self, key, value):
        return None if value is None else self.mapper(key, value)

    def process(self, record: Record) -> None:
        key, change = record.key, record.value
        new = self._compute(key, change.new)
        old = None
        if self.send_old_values:
            old = value_or_none(self.table.get(key)) if self.table is not None else self._compute(key, change.old)
        if self.table is not None:
            put_and_forward(self, self.table, record, new, old, record.timestamp, self.send_old_values, self.caching)
        else:
            self.forward(record.with_(value=Change(new, old, change.is_latest)))


class KTableToStream(Processor):
    """``table.toStream()``: each change's new value as a stream record, None for a delete
    (Kafka maps ``change -> change.newValue``; nothing is filtered, the timestamp is kept)."""

    def process(self, record: Record) -> None:
        self.forward(record.with_(value=record.value.new))


class KTableRepartitionMap(Processor):
    """The first half of ``table.groupBy(selector)``: re-key each change for the aggregation.

    ``selector(key, value)`` returns ``(group_key, group_value)`` or None. For ``Change(new, old)``
    both are mapped; a pair that is None or has a None key or value is skipped. When both pairs
    land in the same group a single ``Change(new_value, old_value)`` goes to it, so the
    aggregation subtracts and adds in one step with no transient state (KIP-904, Kafka 3.5+);
    otherwise ``Change(None, old_value)`` goes to the old group first, then
    ``Change(new_value, None)`` to the new one. The parent table must send old values.
    """

    def __init__(self, selector: Callable[[Any, Any], tuple | None]):
        self.selector = selector

    def process(self, record: Record) -> None:
        if record.key is None:
            raise StreamsError("Record key for the grouping KTable should not be null.")
        change = record.value
        if not change.is_latest:
            return      # an out-of-order update of a versioned table changes no group (KTableRepartitionMap)
        new_pair = None if change.new is None else self.selector(record.key, change.new)
        old_pair = None if change.old is None else self.selector(record.key, change.old)
        old_ok = old_pair is not None and old_pair[0] is not None and old_pair[1] is not None
        new_ok = new_pair is not None and new_pair[0] is not None and new_pair[1] is not None
        if old_ok and new_ok and old_pair[0] == new_pair[0]:
            self.forward(record.with_(key=old_pair[0], value=Change(new_pair[1], old_pair[1])))
            return
        if old_ok:
            self.forward(record.with_(key=old_pair[0], value=Change(None, old_pair[1])))
        if new_ok:
            self.forward(record.with_(key=new_pair[0], value=Change(new_pair[1], None)))
