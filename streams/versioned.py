"""Versioned tables (KIP-914): a table store that keeps each key's history for
``historyRetention``, so a stream–table join reads the table *as of the stream record's
timestamp*, and a late table update (an older timestamp than the key's latest) lands in history
instead of overwriting the present.

    prices = builder.table("prices", consumed,
                           Materialized.as_(Stores.persistentVersionedKeyValueStore("prices", "10 minutes")))

Backing layout (over the task's flat backing, so the changelog replays it): ``("k", key)`` the
latest ``(value, ts)`` — what a timestamped store holds, so ``getKeyValueStore`` and interactive
queries read the present — ``("v", key)`` the versions ``((ts, value or None), ...)`` ascending
(None: a delete), ``("o", "observed")`` the store's stream time. Kafka's rules: a put older than
``stream time - historyRetention`` is refused; ``get(key, asOf)`` answers None for an ``asOf``
older than that; a tombstone is a version too.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, NamedTuple

from streams.errors import TopologyError
from streams.processor import Processor
from streams.record import Change, Record
from streams.stores import _hashable
from streams.table_store import ValueAndTimestamp

PUT_RETURN_CODE_NOT_PUT = -1
PUT_RETURN_CODE_IS_LATEST = -2     # Kafka: VersionedKeyValueStore.PUT_RETURN_CODE_VALID_TO_UNDEFINED
_MIN = -(2 ** 63)


class VersionedRecord(NamedTuple):
    """Kafka's ``VersionedRecord``: a version's value, its timestamp, and ``validTo`` — the
    timestamp of the next version (a tombstone's included), None for the latest."""
    value: Any
    timestamp: int
    validTo: int | None = None


@dataclass(frozen=True)
class VersionedBytesStoreSupplier:
    name: str
    historyRetentionMs: int


class Stores:
    """Kafka's ``Stores`` factory, for the store kind the DSL cannot infer: versioned tables."""

    @staticmethod
    def persistentVersionedKeyValueStore(name: str, historyRetention, segmentInterval=None):
        from streams.parameters import check_name
        from streams.windows import duration_ms
        ms = duration_ms(historyRetention, "historyRetention")
        if ms < 0:
            raise TopologyError("historyRetention must not be negative", argument="historyRetention")
        return VersionedBytesStoreSupplier(check_name(name, "store name"), ms)


class VersionedKeyValueStore:
    def __init__(self, kv, history_ms: int | None = None):
        self.backing, self.name, self._history = kv.backing, kv.name, history_ms

    @property
    def history(self) -> int:
        """The writer knows it; a reader (a join's getter) reads what the writer recorded."""
        if self._history is not None:
            return self._history
        return self.backing.get(("o", "history")) or 0

    def _observed(self) -> int:
        v = self.backing.get(("o", "observed"))
        return _MIN if v is None else v

    def put(self, key, value, ts: int) -> int:
        observed = max(self._observed(), ts)
        if observed != self._observed():
            self.backing.put(("o", "observed"), observed)
        if self.backing.get(("o", "history")) != self.history:
            self.backing.put(("o", "history"), self.history)
        if ts < observed - self.history:
            return PUT_RETURN_CODE_NOT_PUT
        hk = _hashable(key)
        versions = list(self.backing.get(("v", hk)) or ())
        times = [t for t, _ in versions]
        i = bisect.bisect_left(times, ts)
        if i < len(times) and times[i] == ts:
            versions[i] = (ts, value)
        else:
            versions.insert(i, (ts, value))
        horizon = observed - self.history
        while len(versions) > 1 and versions[1][0] <= horizon:
            versions.pop(0)               # a version wholly older than the history is never read again
        self.backing.put(("v", hk), tuple(versions))
        latest_ts, latest = versions[-1]
        if latest is None:
            self.backing.delete(("k", hk))
        else:
            self.backing.put(("k", hk), (latest, latest_ts))
        return PUT_RETURN_CODE_IS_LATEST if latest_ts == ts else ts

    def get(self, key, as_of: int | None = None) -> ValueAndTimestamp | None:
        hk = _hashable(key)
        entry = self.backing.get(("k", hk))
        if as_of is None or (entry is not None and entry[1] <= as_of):
            # the latest version never expires (Kafka's RocksDBVersionedStore.get reads it first)
            return None if entry is None else ValueAndTimestamp(entry[0], entry[1])
        if as_of < self._observed() - self.history:
            return None
        versions = self.backing.get(("v", hk)) or ()
        i = bisect.bisect_right([t for t, _ in versions], as_of)
        if i == 0 or versions[i - 1][1] is None:
            return None
        ts, value = versions[i - 1]
        return ValueAndTimestamp(value, ts)

    def get_record(self, key, as_of: int | None = None) -> VersionedRecord | None:
        """:meth:`get` as Kafka's ``VersionedKeyValueStore.get`` answers it: a
        :class:`VersionedRecord` whose ``validTo`` is the next version's timestamp."""
        found = self.get(key, as_of)
        if found is None:
            return None
        versions = self.backing.get(("v", _hashable(key))) or ()
        later = [t for t, _ in versions if t > found.timestamp]
        return VersionedRecord(found.value, found.timestamp, min(later) if later else None)


class VersionedKTableSource(Processor):
    """``KTableSource`` over a versioned store: an update older than the key's latest goes into
    history and is forwarded marked not-latest (table–table and foreign-key joins skip it); an
    update older than the history retention is dropped and not forwarded."""

    def __init__(self, store: str, history_ms: int, send_old_values: bool = False):
        self.store_name, self.history_ms, self.send_old_values = store, history_ms, send_old_values

    def init(self, context) -> None:
        super().init(context)
        self.table = VersionedKeyValueStore(context.store(self.store_name), self.history_ms)

    def process(self, record: Record) -> None:
        if record.key is None:
            return
        latest = self.table.get(record.key)
        old = None if latest is None else latest.value
        code = self.table.put(record.key, record.value, record.timestamp)
        if code == PUT_RETURN_CODE_NOT_PUT:
            return
        self.forward(record.with_(value=Change(record.value, old if self.send_old_values else None,
                                               code == PUT_RETURN_CODE_IS_LATEST)))
