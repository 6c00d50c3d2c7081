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

A key whose latest version is a tombstone is listed under ``("d", end)`` (``("o", "expiry")``
the sorted ends), by its tombstone's time rounded up to a bucket of history/64: once stream time
minus the history passes ``end`` the key's versions are deleted, as Kafka drops expired segments
— nothing can read them then (every ``asOf`` still answered is at or after the tombstone), and a
table whose keys come and go keeps no trace of the gone ones.
"""
from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

from streams.errors import TopologyError
from streams.processor import Processor
from streams.record import Change, Record
from streams.stores import _hashable
from streams.table_store import ValueAndTimestamp

log = logging.getLogger(__name__)

_MIN = -(2 ** 63)
PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1     # Kafka's: the put is the key's latest version
PUT_RETURN_CODE_IS_LATEST = PUT_RETURN_CODE_VALID_TO_UNDEFINED
PUT_RETURN_CODE_NOT_PUT = _MIN               # Kafka's Long.MIN_VALUE: older than the history retention


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
        if name is None:
            raise TopologyError("name cannot be null", argument="name")
        ms = duration_ms(historyRetention, "historyRetention")
        if ms < 0:
            raise TopologyError("historyRetention cannot be negative", argument="historyRetention")
        if segmentInterval is not None and duration_ms(segmentInterval, "segmentInterval") <= 0:
            # accepted for Kafka's signature; the versions of a key are kept together, not in segments
            raise TopologyError("segmentInterval cannot be zero or negative", argument="segmentInterval")
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
        """Kafka's ``VersionedKeyValueStore.put``: the new version's ``validTo`` (the next
        version's timestamp, a tombstone's included), ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` when
        it is the latest, ``PUT_RETURN_CODE_NOT_PUT`` when older than the history retention."""
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
        valid_to = versions[i + 1][0] if i + 1 < len(versions) else PUT_RETURN_CODE_VALID_TO_UNDEFINED
        horizon = observed - self.history
        while len(versions) > 1 and versions[1][0] <= horizon:
            versions.pop(0)               # a version wholly older than the history is never read again
        self.backing.put(("v", hk), tuple(versions))
        latest_ts, latest = versions[-1]
        if latest is None:
            self.backing.delete(("k", hk))
            self._list_deleted(hk, latest_ts)
        else:
            self.backing.put(("k", hk), (latest, latest_ts))
        self._expire(horizon)
        return valid_to

    def _list_deleted(self, hk, ts: int) -> None:
        width = max(1, self.history // 64)
        end = (ts // width + 1) * width - 1
        ends = self.backing.get(("o", "expiry")) or ()
        if end not in ends:
            self.backing.put(("o", "expiry"), tuple(sorted(ends + (end,))))
        keys = self.backing.get(("d", end)) or ()
        if hk not in keys:
            self.backing.put(("d", end), keys + (hk,))

    def _expire(self, horizon: int) -> None:
        """Delete the versions of the keys listed as deleted up to ``horizon`` (a key put again
        since has only its unreadable versions dropped)."""
        ends = self.backing.get(("o", "expiry")) or ()
        n = bisect.bisect_right(ends, horizon)
        if n == 0:
            return
        for end in ends[:n]:
            for hk in self.backing.get(("d", end)) or ():
                versions = list(self.backing.get(("v", hk)) or ())
                kept = list(versions)
                while len(kept) > 1 and kept[1][0] <= horizon:
                    kept.pop(0)
                if len(kept) == 1 and kept[0][1] is None and kept[0][0] <= horizon:
                    self.backing.delete(("v", hk))
                elif kept != versions:
                    self.backing.put(("v", hk), tuple(kept))
            self.backing.delete(("d", end))
        if ends[n:]:
            self.backing.put(("o", "expiry"), ends[n:])
        else:
            self.backing.delete(("o", "expiry"))

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
            log.warning("Skipping record due to null key. topic=[%s] partition=[%s] offset=[%s]",
                        *self.context.source())
            return
        latest = self.table.get(record.key)
        old = None if latest is None else latest.value
        code = self.table.put(record.key, record.value, record.timestamp)
        if code == PUT_RETURN_CODE_NOT_PUT:
            log.warning("Skipping record for expired put. store=[%s] timestamp=[%d]", self.store_name, record.timestamp)
            return
        self.forward(record.with_(value=Change(record.value, old if self.send_old_values else None,
                                               code == PUT_RETURN_CODE_IS_LATEST)))
