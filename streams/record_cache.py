"""Kafka Streams' record cache (``statestore.cache.max.bytes``) for one task: the latest update
per key of each cached store, forwarded when the task commits or when the cache is full.

Kafka puts a caching layer in front of every materialized table and aggregation store (windowed
and session ones too) so that downstream (and the output topics) see one update per key per commit
instead of one per record. The rules kept here are those of Kafka's caching stores and
``TimestampedCacheFlushListener``:

- a key's entry holds its latest value, timestamp and record context (the record that wrote it,
  and the input position it came from), and the value (and its timestamp) the store held when the
  key became dirty — the last value forwarded, which is the ``old`` of the flushed ``Change``;
- on flush, a key that was absent when it became dirty and is deleted again is not forwarded
  (nothing downstream ever saw it);
- when the cache holds more than its size, the least recently written entry of the store being
  written is flushed first (Kafka's ``NamedCache.evict``), then of the others;
- a commit flushes everything, stores in the order they first became dirty, and keeps flushing
  while forwarding fills caches further downstream.

Sizes are estimates: Python's shallow size of the key and the value plus a fixed overhead per
entry (Kafka counts serialized bytes, which the object-level stores here never build).
"""
from __future__ import annotations

import sys
from typing import Any, Callable

ENTRY_OVERHEAD = 64


class CacheEntry:
    """One dirty key: what to forward at flush, and how."""
    __slots__ = ("new", "old", "timestamp", "record", "source", "forward", "size", "old_timestamp")

    def __init__(self, new, old, timestamp: int, record, source, forward: Callable[["CacheEntry"], None], size: int,
                 old_timestamp: int | None = None):
        self.new, self.old, self.timestamp, self.record = new, old, timestamp, record
        self.source, self.forward, self.size = source, forward, size
        self.old_timestamp = old_timestamp


class RecordCache:
    """A task's caches, one per store, sharing ``max_bytes``.

    >>> cache = RecordCache(10_485_760)
    >>> cache.dirty("counts", "ann")    # None: not dirty, read the store for the old value
    """

    def __init__(self, max_bytes: int, set_source: Callable[[Any], None] = lambda s: None):
        self.max_bytes = max_bytes
        self.bytes = 0
        self.stores: dict[str, dict[Any, CacheEntry]] = {}
        self._set_source = set_source

    def dirty(self, store: str, key) -> CacheEntry | None:
        named = self.stores.get(store)
        return None if named is None else named.get(key)

    def put(self, store: str, key, new, old, timestamp: int, record, source,
            forward: Callable[[CacheEntry], None], old_timestamp: int | None = None) -> None:
        """Make ``key`` dirty with ``new``; ``old`` (written at ``old_timestamp``) is the store's
        value when the key was clean (ignored if it is dirty already: the first one is what
        downstream saw last)."""
        named = self.stores.setdefault(store, {})
        prev = named.pop(key, None)
        if prev is not None:
            old, old_timestamp = prev.old, prev.old_timestamp
            self.bytes -= prev.size
        size = sys.getsizeof(key) + sys.getsizeof(new) + ENTRY_OVERHEAD
        named[key] = CacheEntry(new, old, timestamp, record, source, forward, size, old_timestamp)
        self.bytes += size
        while self.bytes > self.max_bytes and self._evict(store):
            pass

    def reorder(self, store: str, rank: Callable[[Any], Any]) -> None:
        """Re-sort ``store``'s dirty entries by ``rank(key)``: the order a flush forwards them in
        (least recently written first), for a caller that wrote them out of record order."""
        named = self.stores.get(store)
        if named:
            self.stores[store] = dict(sorted(named.items(), key=lambda kv: rank(kv[0])))

    def _evict(self, store: str) -> bool:
        named = self.stores.get(store)
        if not named:
            named = next((n for n in self.stores.values() if n), None)
            if named is None:
                return False
        key = next(iter(named))
        self._emit(named.pop(key))
        return True

    def _emit(self, entry: CacheEntry) -> None:
        """Forward ``entry`` with the position of the record that put it, then put back the
        current one (an eviction happens while another record is processed, whose other
        children still see their own record's position, as Kafka's ``setRecordContext``)."""
        self.bytes -= entry.size
        previous = self._set_source(entry.source)
        try:
            entry.forward(entry)
        finally:
            if previous is not None:
                self._set_source(previous)

    def flush(self) -> None:
        """Forward every dirty entry (a commit)."""
        while any(self.stores.values()):
            for named in list(self.stores.values()):
                while named:
                    key = next(iter(named))
                    self._emit(named.pop(key))
