"""Kafka Streams' read-only store views (``ReadOnlyKeyValueStore``, ``ReadOnlyWindowStore``,
``ReadOnlySessionStore``, ``VersionedKeyValueStore``'s read side) over the stores of the tasks that
hold a store's partitions: what ``TopologyTestDriver``'s store getters, interactive queries
(``StreamsApp.store``) and ``riverlog streams query`` answer with.

    view = ReadOnlyStore("counts", stores, key_serde=Serdes.String())
    view.get("ann"); view.range("a", "m"); view.all()
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

log = logging.getLogger(__name__)


def _ms(t) -> int:
    if isinstance(t, datetime):
        return int(t.timestamp() * 1000)
    if isinstance(t, timedelta):
        return int(t.total_seconds() * 1000)
    return int(t)


def _order(key):
    """A total order over store keys when their serde is not known: numbers, then strings, then
    bytes, then the rest by repr."""
    if isinstance(key, bool) or not isinstance(key, (int, float, str, bytes)):
        return (3, repr(key))
    if isinstance(key, (int, float)):
        return (0, key)
    return (1, key) if isinstance(key, str) else (2, key)


_TYPES = {"keyValue": "ReadOnlyKeyValueStore", "window": "ReadOnlyWindowStore", "session": "ReadOnlySessionStore"}

INVALID_RANGE_WARNING = ("Returning empty iterator for fetch with invalid key range: from > to. This may be due "
                         "to range arguments set in the wrong order, or serdes that don't preserve ordering when "
                         "lexicographically comparing the serialized bytes. Note that the built-in numerical serdes "
                         "do not follow this for negative numbers")


class ReadOnlyStore:
    """A store read across the tasks that hold its partitions (an interactive query's view).
    Key-value and window stores keep each value with its timestamp: a plain view shows the value,
    a ``timestamped`` one Kafka's ``ValueAndTimestamp``. Session stores keep the aggregate alone.

    Keys are ordered as Kafka's stores order them: by their bytes under ``key_serde``, compared
    unsigned (``Bytes.BYTES_LEXICO_COMPARATOR``), so a Long store's negative keys follow its
    positive ones. Without a key serde (``riverlog streams query``) they are ordered by value
    (:func:`_order`). A range whose lower bound orders after its upper bound is empty, with
    Kafka's warning."""
    def __init__(self, name: str, stores: list, timestamped: bool = False, kind: str = "keyValue",
                 key_serde=None):
        self.name, self._stores, self._ts, self._kind = name, stores, timestamped, kind
        self._key_serde = key_serde

    def _plain(self, v):
        if self._kind == "session" or v is None:
            return v
        from streams.table_store import ValueAndTimestamp
        return ValueAndTimestamp(*v) if self._ts else v[0]

    def _need(self, method: str, *kinds: str) -> None:
        """Refuse a method the store's read-only type does not have (``ReadOnlyWindowStore`` has no
        ``range``), which would otherwise answer from entries of another shape."""
        if self._kind not in kinds:
            readers = " or ".join(_TYPES[k] for k in kinds)
            raise TypeError(f"{method}() is a method of {readers}; {self.name} is a {self._kind} store "
                            f"({_TYPES[self._kind]})")

    @staticmethod
    def _key(key):
        if key is None:      # Kafka's Metered stores: NullPointerException("key cannot be null")
            raise ValueError("key cannot be null")
        return key

    def _ordered(self, entries: list, key_of, from_key=None, to_key=None, then=lambda e: ()) -> list:
        """``entries`` whose key (``key_of(entry)``) is in [from_key, to_key] (None: open), sorted
        by key, then by ``then(entry)``. Keys the serde cannot serialize fall back to value order."""
        from streams.serde_base import SerializationError
        orders = ([lambda k: self._key_serde.serialize(k)] if self._key_serde is not None else []) + [_order]
        for order in orders:
            try:
                lo = None if from_key is None else order(from_key)
                hi = None if to_key is None else order(to_key)
                if lo is not None and hi is not None and lo > hi:
                    log.warning(INVALID_RANGE_WARNING)
                    return []
                keyed = [(order(key_of(e)), e) for e in entries]
            except SerializationError:
                continue
            return [e for o, e in sorted(keyed, key=lambda oe: (oe[0],) + tuple(then(oe[1])))
                    if (lo is None or o >= lo) and (hi is None or o <= hi)]
        raise AssertionError("value order covers every key")

    def _entries(self) -> list:
        return [(k, self._plain(v)) for s in self._stores for k, v in s.all()]

    def get(self, key):
        self._need("get", "keyValue")
        key = self._key(key)
        for s in self._stores:
            v = s.get(key)
            if v is not None:
                return self._plain(v)
        return None

    def all(self) -> list:
        """Key-value stores: every entry by key (Kafka's ``all()`` iterates in key order); window
        stores: by start, then key; session stores: by start, then end, then key."""
        if self._kind == "keyValue":
            return self.range()
        by_key = self._ordered(self._entries(), lambda e: e[0].key)     # sorted() is stable: key breaks ties
        if self._kind == "window":
            return sorted(by_key, key=lambda e: e[0].start)
        return sorted(by_key, key=lambda e: (e[0].start, e[0].end))

    def range(self, from_key=None, to_key=None) -> list:
        """Key-value stores: entries with ``from_key <= key <= to_key`` by key (None: open bound)."""
        self._need("range", "keyValue")
        return self._ordered(self._entries(), lambda e: e[0], from_key, to_key)

    def reverseRange(self, from_key=None, to_key=None) -> list:
        self._need("reverseRange", "keyValue")
        return self.range(from_key, to_key)[::-1]

    def reverseAll(self) -> list:
        return self.all()[::-1]

    def prefixScan(self, prefix, prefixKeySerializer) -> list:
        """Key-value stores (KIP-614): the entries whose key's bytes start with ``prefix``
        serialized by ``prefixKeySerializer`` (a serde), in byte order: String keys ["1", "11",
        "2"] give ["1", "11"] for "1", Integer keys only 1 for 1. Keys are serialized with the
        store's key serde, else with ``prefixKeySerializer``; a key it cannot serialize is skipped."""
        from streams.serde_base import SerializationError
        if prefix is None:      # Kafka's MeteredKeyValueStore: NullPointerException
            raise ValueError("prefix cannot be null")
        if prefixKeySerializer is None:
            raise ValueError("prefixKeySerializer cannot be null")
        self._need("prefixScan", "keyValue")
        head = bytes(prefixKeySerializer.serialize(prefix))
        serde = self._key_serde or prefixKeySerializer
        found = []
        for key, value in self._entries():
            try:
                data = serde.serialize(key)
            except SerializationError:
                continue
            if data is not None and bytes(data).startswith(head):
                found.append((bytes(data), key, value))
        return [(k, v) for _, k, v in sorted(found, key=lambda e: e[0])]

    def approximateNumEntries(self) -> int:
        return sum(len(s.all()) for s in self._stores)

    def fetch(self, *args):
        """Window stores (``ReadOnlyWindowStore``): ``fetch(key, time)`` one window's value,
        ``fetch(key, timeFrom, timeTo)`` ``(start, value)`` pairs, ``fetch(keyFrom, keyTo, timeFrom,
        timeTo)`` ``(Windowed, value)`` pairs by key, then start (None: an open key bound).
        Session stores (``ReadOnlySessionStore``): ``fetch(key)`` every session of the key,
        ``fetch(keyFrom, keyTo)`` those of the keys in the range, by key, then end."""
        self._need("fetch", "window", "session")
        if self._kind == "session":
            if len(args) == 1:
                return self.findSessions(args[0], -(2 ** 63), 2 ** 63 - 1)
            if len(args) == 2:
                return self.findSessions(args[0], args[1], -(2 ** 63), 2 ** 63 - 1)
            raise TypeError(f"session store fetch takes (key) or (keyFrom, keyTo), got {len(args)} arguments")
        if len(args) == 2:
            key, time = self._key(args[0]), _ms(args[1])
            for s in self._stores:
                v = s.fetch(key, time)
                if v is not None:
                    return self._plain(v)
            return None
        if len(args) == 3:
            key, lo, hi = self._key(args[0]), _ms(args[1]), _ms(args[2])
            return [(t, self._plain(v)) for s in self._stores for t, v in s.fetch_range(key, lo, hi)]
        if len(args) == 4:
            lo, hi = _ms(args[2]), _ms(args[3])
            return self._ordered([(w, v) for w, v in self._entries() if lo <= w.start <= hi], lambda e: e[0].key,
                                 args[0], args[1], then=lambda e: (e[0].start,))
        raise TypeError(f"window store fetch takes (key, time), (key, timeFrom, timeTo) or "
                        f"(keyFrom, keyTo, timeFrom, timeTo), got {len(args)} arguments")

    def backwardFetch(self, *args) -> list:
        """``fetch`` in reverse; a window store has no ``backwardFetch(key, time)`` (one value)."""
        if self._kind == "window" and len(args) == 2:
            raise TypeError("window store backwardFetch takes (key, timeFrom, timeTo) or "
                            "(keyFrom, keyTo, timeFrom, timeTo), got 2 arguments")
        return self.fetch(*args)[::-1]

    def backwardAll(self) -> list:
        """Window stores: ``all()`` in reverse (Kafka's ``ReadOnlyWindowStore.backwardAll``)."""
        self._need("backwardAll", "window")
        return self.all()[::-1]

    def fetchAll(self, time_from, time_to) -> list:
        """Window stores: every key's windows that start in [time_from, time_to] as
        ``(Windowed, value)``, by start, then key (Kafka's ``fetchAll``)."""
        self._need("fetchAll", "window")
        lo, hi = _ms(time_from), _ms(time_to)
        return sorted(self._ordered([(w, v) for w, v in self._entries() if lo <= w.start <= hi], lambda e: e[0].key),
                      key=lambda e: e[0].start)

    def backwardFetchAll(self, time_from, time_to) -> list:
        return self.fetchAll(time_from, time_to)[::-1]

    def findSessions(self, *args):
        """``findSessions(key, earliestSessionEndTime, latestSessionStartTime)``, or with a key
        range ``findSessions(keyFrom, keyTo, earliestSessionEndTime, latestSessionStartTime)``
        (by key, then end; None: an open key bound)."""
        self._need("findSessions", "session")
        if len(args) == 3:
            key, earliest, latest = self._key(args[0]), _ms(args[1]), _ms(args[2])
            return [e for s in self._stores for e in s.find_sessions(key, earliest, latest)]
        if len(args) != 4:
            raise TypeError(f"findSessions takes (key, earliestEnd, latestStart) or (keyFrom, keyTo, "
                            f"earliestEnd, latestStart), got {len(args)} arguments")
        earliest, latest = _ms(args[2]), _ms(args[3])
        return self._ordered([(w, v) for w, v in self._entries() if w.end >= earliest and w.start <= latest],
                             lambda e: e[0].key, args[0], args[1], then=lambda e: (e[0].end, e[0].start))

    def backwardFindSessions(self, *args) -> list:
        return self.findSessions(*args)[::-1]

    def fetchSession(self, key, session_start, session_end):
        """Session stores: the aggregate of ``key``'s session [start, end], or None."""
        self._need("fetchSession", "session")
        key = self._key(key)
        for s in self._stores:
            v = s.fetch_session(key, _ms(session_start), _ms(session_end))
            if v is not None:
                return v
        return None


class ReadOnlyVersionedStore:
    """Kafka's ``VersionedKeyValueStore``, read side, across the tasks holding its partitions:
    ``get(key)`` the latest :class:`~streams.versioned.VersionedRecord`, ``get(key,
    asOfTimestamp)`` the version valid at that time (None: no such version, a tombstone, or a time
    older than the history retention)."""
    def __init__(self, name: str, stores: list, history_ms: int):
        from streams.versioned import VersionedKeyValueStore
        self.name, self._stores = name, [VersionedKeyValueStore(s, history_ms) for s in stores]

    def get(self, key, asOfTimestamp=None):
        key = ReadOnlyStore._key(key)
        as_of = None if asOfTimestamp is None else _ms(asOfTimestamp)
        for s in self._stores:
            found = s.get_record(key, as_of)
            if found is not None:
                return found
        if as_of is not None and any(as_of < s._observed() - s.history for s in self._stores):
            log.warning("Returning null for expired get.")      # RocksDBVersionedStore.get's warning
        return None
