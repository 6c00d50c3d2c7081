"""How a materialized KTable keeps its rows and forwards its changes: Kafka's
``TimestampedKeyValueStore`` (a value and its timestamp per key) and the forwarding rule of
``TimestampedTupleForwarder`` with or without the caching layer in front of the store.

Every materialized table processor (source, filter, mapValues, the aggregations) writes and
forwards through :func:`put_and_forward`, so they agree on one rule:

- ``send_old_values`` off: the forwarded change carries no old value (Kafka's
  ``TimestampedTupleForwarder.maybeForward``), even though the processor knew it.
- ``caching`` on (Kafka's default, ``Materialized.withCachingEnabled``): with a task record cache
  (:mod:`streams.record_cache`, on Spark) the change waits there and only a key's latest one is
  forwarded at commit; without one (the test driver, ``statestore.cache.max.bytes=0``) it is
  flushed after every record. Either way ``CachingKeyValueStore.putAndMaybeForward`` neither writes
  nor forwards a delete of a key the store does not hold; a delete is forwarded at the record's
  timestamp (``TimestampedCacheFlushListener``: ``ValueAndTimestamp.make(null, ts)`` is null).
- ``caching`` off (``statestore.cache.max.bytes=0`` or ``withCachingDisabled``): every put is
  forwarded, deletes of absent keys included, at the timestamp the processor chose.

The backing entry for a key is the pair ``(value, timestamp)``; a None value is never stored.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from streams.record import Change, Record


class ValueAndTimestamp(NamedTuple):
    """Kafka's ``ValueAndTimestamp``: a stored row and the timestamp it was written with."""
    value: Any
    timestamp: int


class TimestampedKeyValueStore:
    """Kafka's ``TimestampedKeyValueStore`` over a :class:`~streams.stores.KeyValueStore`.

    >>> store.put("A", 1, 10); store.get("A")
    ValueAndTimestamp(value=1, timestamp=10)
    """

    def __init__(self, kv):
        self.kv = kv
        self.name = kv.name

    def get(self, key) -> ValueAndTimestamp | None:
        entry = self.kv.get(key)
        return None if entry is None else ValueAndTimestamp(entry[0], entry[1])

    def put(self, key, value, timestamp: int) -> None:
        """A None value deletes the key, as putting ``ValueAndTimestamp.make(null, ts)`` does."""
        if value is None:
            self.kv.delete(key)
        else:
            self.kv.put(key, (value, timestamp))

    def all(self) -> list[tuple[Any, ValueAndTimestamp]]:
        return [(k, ValueAndTimestamp(v[0], v[1])) for k, v in self.kv.all()]


def value_or_none(entry: ValueAndTimestamp | None):
    """Kafka's ``ValueAndTimestamp.getValueOrNull``."""
    return None if entry is None else entry.value


def put_and_forward(processor, store: TimestampedKeyValueStore, record: Record, new, old, timestamp: int,
                    send_old_values: bool, caching: bool) -> None:
    """Write ``new`` under the record's key at ``timestamp`` and forward ``Change(new, old)`` by
    the module's rule; ``old`` is what the processor computed (sent only with ``send_old_values``)."""
    key = record.key
    if caching and processor.context.caching(store.name):
        cache = processor.context.record_cache(store.name)
        if cache is not None:
            _put_cached(cache, processor, store, record, new, timestamp, send_old_values)
            return
        stored = store.get(key)
        if new is None and stored is None:
            return
        store.put(key, new, timestamp)
        change = Change(new, value_or_none(stored) if send_old_values else None)
        processor.forward(record.with_(value=change, timestamp=timestamp if new is not None else record.timestamp))
        return
    store.put(key, new, timestamp)
    processor.forward(record.with_(value=Change(new, old if send_old_values else None), timestamp=timestamp))


def _put_cached(cache, processor, store: TimestampedKeyValueStore, record: Record, new, timestamp: int,
                send_old_values: bool) -> None:
    """The store is written now (reads see it); the change waits in the task's record cache and is
    forwarded at commit or eviction as ``Change(latest, value at the last flush)``."""
    key = record.key
    entry = cache.dirty(store.name, key)
    stored = None if entry is not None else store.get(key)    # a dirty key keeps its first old

    def forward(e, processor=processor, send_old=send_old_values):
        if e.new is None and e.old is None:
            return
        processor.forward(e.record.with_(value=Change(e.new, e.old if send_old else None),
                                         timestamp=e.timestamp if e.new is not None else e.record.timestamp))

    store.put(key, new, timestamp)   # first: an entry evicted at once is forwarded over the store's new state
    cache.put(store.name, key, new, value_or_none(stored), timestamp, record, processor.context.source(), forward,
              None if stored is None else stored.timestamp)


def forwarded(context, store: TimestampedKeyValueStore, key) -> ValueAndTimestamp | None:
    """The row under ``key`` as the table's changes have shown it downstream: the store's row, or,
    while its latest change waits in the task's record cache, the row at the last flush (the
    entry's ``old``; a key absent then and deleted again is never forwarded, so it stays absent).

    A reader that answers a processor fed by the table's forwarded changes (the foreign-key join's
    ``SubscriptionJoin`` beside ``ForeignTableJoin``) reads this, not the cache: the change still
    waiting reaches it at the flush, whereas a waiting value read early may be retracted by a
    change the flush never forwards."""
    cache = context.record_cache(store.name) if context.caching(store.name) else None
    entry = None if cache is None else cache.dirty(store.name, key)
    if entry is None:
        return store.get(key)
    return None if entry.old is None else ValueAndTimestamp(entry.old, entry.old_timestamp)
