"""``TopologyTestDriver``: Kafka Streams' test driver, backed by the reference interpreter, so a
topology is unit-tested in milliseconds with no Spark and no broker.

    driver = TopologyTestDriver(builder.build(), {"application.id": "app"})
    orders = driver.createInputTopic("orders", Serdes.String(), Serdes.Json(schema))
    out = driver.createOutputTopic("per-user", Serdes.String(), Serdes.Long())
    orders.pipeInput("o1", {"user": "ann", "amount": 120.0}, 1_000)
    assert out.readKeyValue() == KeyValue("ann", 1)
"""
from __future__ import annotations

import logging
from collections import namedtuple
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from streams.errors import TopologyError
from streams.interpreter import Interpreter
from streams.record import Windowed
from streams.topology import Topology

KeyValue = namedtuple("KeyValue", ["key", "value"])
log = logging.getLogger(__name__)


def _ms(t) -> int:
    if isinstance(t, datetime):
        return int(t.timestamp() * 1000)
    if isinstance(t, timedelta):
        return int(t.total_seconds() * 1000)
    return int(t)


@dataclass(frozen=True)
class TestRecord:
    __test__ = False   # not a pytest test class
    key: Any
    value: Any
    timestamp: int | None = None
    headers: tuple = field(default=())

    def __post_init__(self):
        if self.timestamp is not None and _ms(self.timestamp) < 0:
            raise ValueError(f"Invalid timestamp: {_ms(self.timestamp)}. Timestamp should always be non-negative "
                             f"or null.")    # Kafka's TestRecord

    def getKey(self):
        return self.key

    def getValue(self):
        return self.value

    def getRecordTime(self):
        return self.timestamp


class TestInputTopic:
    __test__ = False

    def __init__(self, driver: "TopologyTestDriver", topic: str, key_serde, value_serde, start=0, auto_advance=0):
        self._d, self.topic, self._ks, self._vs = driver, topic, key_serde, value_serde
        self._next, self._advance = _ms(start), _ms(auto_advance)

    def advanceTime(self, duration) -> None:
        self._next += _ms(duration)

    def pipeInput(self, key=None, value=None, timestamp=None, headers=()) -> None:
        if isinstance(key, TestRecord):
            key, value, timestamp, headers = key.key, key.value, key.timestamp, key.headers
        if timestamp is None:
            timestamp, self._next = self._next, self._next + self._advance
        TestRecord(key, value, timestamp)      # Kafka's TestRecord refuses a negative timestamp
        kb = self._ks.serialize(key) if self._ks is not None else key
        vb = self._vs.serialize(value) if self._vs is not None else value
        self._d._pipe(self.topic, kb, vb, _ms(timestamp), headers)

    def pipeValueList(self, values) -> None:
        for v in values:
            self.pipeInput(None, v)

    def pipeKeyValueList(self, pairs, start=None, advance=None) -> None:
        t = _ms(start) if start is not None else None
        for k, v in pairs:
            if t is None:
                self.pipeInput(k, v)
            else:
                self.pipeInput(k, v, t)
                t += _ms(advance or 0)

    def pipeRecordList(self, records) -> None:
        for r in records:
            self.pipeInput(r)

    def __repr__(self):
        return f"TestInputTopic({self.topic!r})"


class TestOutputTopic:
    """Reads a topic's records in the order they were written (across partitions, by write order)."""
    __test__ = False

    def __init__(self, driver: "TopologyTestDriver", topic: str, key_serde, value_serde):
        self._d, self.topic, self._ks, self._vs = driver, topic, key_serde, value_serde
        self._read = 0

    def _all(self) -> list[TestRecord]:
        recs = self._d._written.get(self.topic, [])
        out = []
        for kb, vb, ts, headers in recs:
            k = self._ks.deserialize(kb) if self._ks is not None else kb
            v = self._vs.deserialize(vb) if self._vs is not None else vb
            out.append(TestRecord(k, v, ts, headers))
        return out

    def readRecord(self) -> TestRecord:
        recs = self._all()
        if self._read >= len(recs):
            raise IndexError(f"no more records in topic {self.topic!r}")
        self._read += 1
        return recs[self._read - 1]

    def readValue(self):
        return self.readRecord().value

    def readKeyValue(self) -> KeyValue:
        r = self.readRecord()
        return KeyValue(r.key, r.value)

    def readRecordsToList(self) -> list[TestRecord]:
        recs = self._all()[self._read:]
        self._read += len(recs)
        return recs

    def readValuesToList(self) -> list:
        return [r.value for r in self.readRecordsToList()]

    def readKeyValuesToList(self) -> list[KeyValue]:
        return [KeyValue(r.key, r.value) for r in self.readRecordsToList()]

    def readKeyValuesToMap(self) -> dict:
        """Each key's last value, as Kafka's: a key whose last update is a tombstone stays, with None."""
        out = {}
        for r in self.readRecordsToList():
            if r.key is None:
                raise TopologyError("readKeyValuesToMap(): a record has a null key")
            out[r.key] = r.value
        return out

    def getQueueSize(self) -> int:
        return len(self._d._written.get(self.topic, [])) - self._read

    def isEmpty(self) -> bool:
        return self.getQueueSize() == 0


def _order(key):
    """A total order over store keys when their serde is not known: numbers, then strings, then
    bytes, then the rest by repr."""
    if isinstance(key, bool) or not isinstance(key, (int, float, str, bytes)):
        return (3, repr(key))
    if isinstance(key, (int, float)):
        return (0, key)
    return (1, key) if isinstance(key, str) else (2, key)


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
        return self._ordered(self._entries(), lambda e: e[0], from_key, to_key)

    def reverseRange(self, from_key=None, to_key=None) -> list:
        return self.range(from_key, to_key)[::-1]

    def reverseAll(self) -> list:
        return self.all()[::-1]

    def approximateNumEntries(self) -> int:
        return sum(len(s.all()) for s in self._stores)

    def fetch(self, *args):
        """Window stores (``ReadOnlyWindowStore``): ``fetch(key, time)`` one window's value,
        ``fetch(key, timeFrom, timeTo)`` ``(start, value)`` pairs, ``fetch(keyFrom, keyTo, timeFrom,
        timeTo)`` ``(Windowed, value)`` pairs by key, then start (None: an open key bound).
        Session stores (``ReadOnlySessionStore``): ``fetch(key)`` every session of the key,
        ``fetch(keyFrom, keyTo)`` those of the keys in the range, by key, then end."""
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
        return self.fetch(*args)[::-1]

    def fetchAll(self, time_from, time_to) -> list:
        """Window stores: every key's windows that start in [time_from, time_to] as
        ``(Windowed, value)``, by start, then key (Kafka's ``fetchAll``)."""
        lo, hi = _ms(time_from), _ms(time_to)
        return sorted(self._ordered([(w, v) for w, v in self._entries() if lo <= w.start <= hi], lambda e: e[0].key),
                      key=lambda e: e[0].start)

    def backwardFetchAll(self, time_from, time_to) -> list:
        return self.fetchAll(time_from, time_to)[::-1]

    def findSessions(self, *args):
        """``findSessions(key, earliestSessionEndTime, latestSessionStartTime)``, or with a key
        range ``findSessions(keyFrom, keyTo, earliestSessionEndTime, latestSessionStartTime)``
        (by key, then end; None: an open key bound)."""
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
        return None


class TopologyTestDriver:
    def __init__(self, topology: Topology, config: dict | None = None, initial_wall_clock=None,
                 partitions: dict[str, int] | None = None):
        if not isinstance(topology, Topology):
            raise TopologyError("TopologyTestDriver takes builder.build() (a Topology)")
        config = dict(config or {})
        config.setdefault("application.id", "test-driver")
        self._interp = Interpreter(topology, config, partitions)
        self._written: dict[str, list[tuple]] = {}
        original = self._append_input = self._interp.append

        def append(topic, key, value, timestamp, headers=(), partition=None):
            self._written.setdefault(topic, []).append((key, value, timestamp, tuple(headers)))
            original(topic, key, value, timestamp, headers, partition)
        self._interp.append = append

    def _pipe(self, topic: str, key, value, timestamp: int, headers=()) -> None:
        """A piped input is not a produced record (Kafka's ``producedTopicNames`` lists only what
        the topology wrote); what the topology writes, internal topics included, is."""
        self._append_input(topic, key, value, timestamp, headers)
        self._interp.run()

    @property
    def topology(self) -> Topology:
        return self._interp.topology

    def createInputTopic(self, topic: str, key_serde=None, value_serde=None, start=0, auto_advance=0):
        if topic not in self._interp.readers:
            raise TopologyError(f"topic {topic!r} is not read by the topology; it reads "
                                f"{sorted(t for t in self._interp.readers)}")
        return TestInputTopic(self, topic, key_serde, value_serde, start, auto_advance)

    def createOutputTopic(self, topic: str, key_serde=None, value_serde=None) -> TestOutputTopic:
        return TestOutputTopic(self, topic, key_serde, value_serde)

    def producedTopicNames(self) -> set[str]:
        return set(self._written)

    def _versioned_history(self, name: str) -> int | None:
        """The history retention of a versioned table's store ``name`` (None: not versioned)."""
        for node in self._interp.topology.nodes:
            if node.args.get("versioned") and any(s.name == name for s in node.stores):
                return node.args["history_retention"]
        return None

    def _store(self, name: str, kind: str | None = None, timestamped: bool = False):
        """The view of store ``name``, or None when there is none of ``kind`` (None: any kind), as
        Kafka's typed getters answer null for an unknown store or one of another type. A versioned
        store is not a key-value store (Kafka's ``VersionedKeyValueStore`` is not a ``KeyValueStore``)."""
        spec = self._interp.topology.stores().get(name)
        if spec is None or (kind is not None and spec.kind != kind):
            return None
        history = self._versioned_history(name)
        if history is not None:
            return ReadOnlyVersionedStore(name, self._interp.stores(name), history) if kind is None else None
        return ReadOnlyStore(name, self._interp.stores(name), timestamped, spec.kind,
                             key_serde=spec.key_serde or self._interp.defaults[0])

    def getKeyValueStore(self, name: str) -> ReadOnlyStore | None:
        return self._store(name, "keyValue")

    def getTimestampedKeyValueStore(self, name: str) -> ReadOnlyStore | None:
        return self._store(name, "keyValue", timestamped=True)

    def getVersionedKeyValueStore(self, name: str) -> ReadOnlyVersionedStore | None:
        """A versioned table's store (``Stores.persistentVersionedKeyValueStore``), or None."""
        spec, history = self._interp.topology.stores().get(name), self._versioned_history(name)
        return None if spec is None or history is None else ReadOnlyVersionedStore(name, self._interp.stores(name),
                                                                                    history)

    def getWindowStore(self, name: str) -> ReadOnlyStore | None:
        return self._store(name, "window")

    def getTimestampedWindowStore(self, name: str) -> ReadOnlyStore | None:
        return self._store(name, "window", timestamped=True)

    def getSessionStore(self, name: str) -> ReadOnlyStore | None:
        return self._store(name, "session")

    def getStateStore(self, name: str):
        """Any store's view, or None. Kafka's refuses its built-in stores (to be read through the
        typed getters); every Riverlog store is built in, so it answers the typed getter's view."""
        return self._store(name)

    def getAllStateStores(self) -> dict:
        return {n: self._store(n) for n in self._interp.topology.stores()}

    def advanceWallClockTime(self, duration) -> None:
        """Move the driver's wall clock: a task idling for ``max.task.idle.ms`` (a partition with
        no data yet) processes what its deadline now releases, as Kafka's driver. Nothing else
        reads the wall clock (no wall-clock punctuation: replays must not differ)."""
        self._interp.advance_wall_clock(_ms(duration))

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
