"""``TopologyTestDriver``: Kafka Streams' test driver, backed by the reference interpreter, so a
topology is unit-tested in milliseconds with no Spark and no broker.

    driver = TopologyTestDriver(builder.build(), {"application.id": "app"})
    orders = driver.createInputTopic("orders", Serdes.String(), Serdes.Json(schema))
    out = driver.createOutputTopic("per-user", Serdes.String(), Serdes.Long())
    orders.pipeInput("o1", {"user": "ann", "amount": 120.0}, 1_000)
    assert out.readKeyValue() == KeyValue("ann", 1)

The driver's store getters answer with the read-only views of :mod:`streams.read_only_stores`;
its records, time conversion and read error are :mod:`streams.testing_record`'s.
"""
from __future__ import annotations

import logging

from streams.errors import IllegalStateError, TopologyError
from streams.interpreter import Interpreter
from streams.read_only_stores import INVALID_RANGE_WARNING, ReadOnlyStore, ReadOnlyVersionedStore  # noqa: F401
from streams.record import Windowed  # noqa: F401  (re-exported)
from streams.testing_record import _UNSET, KeyValue, NoSuchElementError, TestRecord, is_time, millis
from streams.topology import Topology

log = logging.getLogger("streams.testing")

__all__ = ["TopologyTestDriver", "TestInputTopic", "TestOutputTopic", "TestRecord", "KeyValue", "NoSuchElementError"]


def _non_negative(what: str, duration) -> int:
    ms = millis(duration)
    if ms < 0:
        raise ValueError(f"{what} must not be negative (got {ms} ms): an input topic's clock only moves forward")
    return ms


class TestInputTopic:
    """Kafka's ``TestInputTopic``. A record piped without a timestamp takes the topic's clock
    (``start``), which then moves on by ``auto_advance``. Its ``pipeInput`` overloads, told apart
    by the arguments given::

        pipeInput(value)                  pipeInput(value, datetime)
        pipeInput(key, value)             pipeInput(key, value, timestamp_ms_or_datetime)
        pipeInput(TestRecord(...))        pipeInput(key=..., value=..., timestamp=..., headers=...)
    """
    __test__ = False

    def __init__(self, driver: "TopologyTestDriver", topic: str, key_serde, value_serde, start=0, auto_advance=0):
        self._d, self.topic, self._ks, self._vs = driver, topic, key_serde, value_serde
        self._next, self._advance = millis(start), _non_negative("autoAdvance", auto_advance)

    def advanceTime(self, duration) -> None:
        self._next += _non_negative("advance", duration)

    def pipeInput(self, *args, key=_UNSET, value=_UNSET, timestamp=None, headers=()) -> None:
        if args and isinstance(args[0], TestRecord):
            if len(args) > 1 or key is not _UNSET or value is not _UNSET or timestamp is not None or headers:
                raise TypeError("pipeInput(TestRecord) takes the record alone: its timestamp and headers are its own")
            record = args[0]
        else:
            if len(args) == 4:       # (key, value, timestamp, headers)
                args, headers = args[:3], args[3]
            record = TestRecord(*_overload(args, key, value, timestamp), headers)
        ts = record.timestamp
        if ts is None:
            ts, self._next = self._next, self._next + self._advance
        TestRecord(record.key, record.value, ts)      # Kafka's TestRecord refuses a negative timestamp
        kb = self._ks.serialize(record.key) if self._ks is not None else record.key
        vb = self._vs.serialize(record.value) if self._vs is not None else record.value
        self._d._pipe(self.topic, kb, vb, ts, record.headers)

    def pipeValueList(self, values, start=None, advance=None) -> None:
        """Each value with a null key: at ``start`` and then every ``advance``, or on the topic's clock."""
        self.pipeKeyValueList([(None, v) for v in values], start, advance)

    def pipeKeyValueList(self, pairs, start=None, advance=None) -> None:
        t = millis(start) if start is not None else None
        step = _non_negative("advance", advance or 0)
        for k, v in pairs:
            if t is None:
                self.pipeInput(k, v)
            else:
                self.pipeInput(k, v, t)
                t += step

    def pipeRecordList(self, records) -> None:
        for r in records:
            self.pipeInput(r)

    def __repr__(self):
        return f"TestInputTopic({self.topic!r})"


def _overload(args: tuple, key, value, timestamp) -> tuple:
    """(key, value, timestamp) from ``pipeInput``'s positional arguments, as Kafka's overloads:
    one is a value, two a key and a value (or a value and a datetime), three add the timestamp."""
    if len(args) > 3:
        raise TypeError(f"pipeInput takes (key, value, timestamp, headers) at most, got {len(args)} arguments")
    if args and (key is not _UNSET or value is not _UNSET):
        raise TypeError("pipeInput: give the key and value positionally or by keyword, not both")
    if len(args) == 1:
        return None, args[0], timestamp
    if len(args) == 2:
        if is_time(args[1]) and timestamp is None:
            return None, args[0], args[1]
        return args[0], args[1], timestamp
    if len(args) == 3:
        if timestamp is not None:
            raise TypeError("pipeInput: the timestamp is given twice")
        return args
    return (None if key is _UNSET else key), (None if value is _UNSET else value), timestamp


class TestOutputTopic:
    """Kafka's ``TestOutputTopic``: reads a topic's records in write order (across partitions).
    The read position is the driver's, per topic, as Kafka's queue: a second ``TestOutputTopic``
    of the same topic reads on where the first stopped."""
    __test__ = False

    def __init__(self, driver: "TopologyTestDriver", topic: str, key_serde, value_serde):
        self._d, self.topic, self._ks, self._vs = driver, topic, key_serde, value_serde

    def _record(self, raw: tuple) -> TestRecord:
        kb, vb, ts, headers = raw
        k = self._ks.deserialize(kb) if self._ks is not None else kb
        v = self._vs.deserialize(vb) if self._vs is not None else vb
        return TestRecord(k, v, ts, headers)

    def readRecord(self) -> TestRecord:
        return self._record(self._d._read_next(self.topic))

    def readValue(self):
        return self.readRecord().value

    def readKeyValue(self) -> KeyValue:
        r = self.readRecord()
        return KeyValue(r.key, r.value)

    def readRecordsToList(self) -> list[TestRecord]:
        return [self.readRecord() for _ in range(self.getQueueSize())]

    def readValuesToList(self) -> list:
        return [r.value for r in self.readRecordsToList()]

    def readKeyValuesToList(self) -> list[KeyValue]:
        return [KeyValue(r.key, r.value) for r in self.readRecordsToList()]

    def readKeyValuesToMap(self) -> dict:
        """Each key's last value, as Kafka's: a key whose last update is a tombstone stays, with None.
        A null key is Kafka's ``IllegalStateException`` (the records before it are read)."""
        out = {}
        while not self.isEmpty():
            r = self.readRecord()
            if r.key is None:
                raise IllegalStateError(f"Null keys not allowed with readKeyValuesToMap method (topic "
                                        f"{self.topic!r}); read it with readKeyValuesToList()")
            out[r.key] = r.value
        return out

    def getQueueSize(self) -> int:
        return self._d._written_count(self.topic) - self._d._positions.get(self.topic, 0)

    def isEmpty(self) -> bool:
        return self.getQueueSize() == 0

    def __repr__(self):
        return f"TestOutputTopic({self.topic!r}, size={self.getQueueSize()})"


class TopologyTestDriver:
    def __init__(self, topology: Topology, config: dict | None = None, initial_wall_clock=None,
                 partitions: dict[str, int] | None = None):
        if not isinstance(topology, Topology):
            raise TopologyError("TopologyTestDriver takes builder.build() (a Topology)")
        config = dict(config or {})
        config.setdefault("application.id", "test-driver")
        self._interp = Interpreter(topology, config, partitions)
        self._written: dict[str, list[tuple]] = {}
        self._positions: dict[str, int] = {}      # each output topic's next record to read
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

    def _written_count(self, topic: str) -> int:
        return len(self._written.get(topic, ()))

    def _read_next(self, topic: str) -> tuple:
        """The next unread record the topology wrote to ``topic``, or Kafka's ``NoSuchElementException``."""
        n = self._positions.get(topic, 0)
        if topic not in self._written:
            raise NoSuchElementError(f"Uninitialized topic: {topic!r}: the topology has written nothing to it yet"
                                     + self._sink_hint(topic))
        if n >= len(self._written[topic]):
            raise NoSuchElementError(f"Empty topic: {topic!r}: all {len(self._written[topic])} records written to "
                                     f"it have been read; check isEmpty() before reading")
        self._positions[topic] = n + 1
        return self._written[topic][n]

    def _sink_hint(self, topic: str) -> str:
        """Kafka's driver warns of an output topic no sink names (a typo, unless a
        ``TopicNameExtractor`` routes to it)."""
        app, top = self._interp.app, self._interp.topology
        sinks = sorted({Topology.topic(app, n, n.topics[0]) for n in top.nodes if n.kind == "sink" and n.topics})
        if topic in sinks:
            return ""
        dynamic = any(n.kind == "sink" and not n.topics for n in top.nodes)
        return (f"; no sink writes to it (the sinks write to {sinks}"
                + (", and a TopicNameExtractor chooses others" if dynamic else "") + ")")

    @property
    def topology(self) -> Topology:
        return self._interp.topology

    def createInputTopic(self, topic: str, key_serde=None, value_serde=None, start=0, auto_advance=0):
        if not self._interp.reads(topic):
            raise TopologyError(f"topic {topic!r} is not read by the topology; it reads "
                                f"{sorted(t for t in self._interp.readers)}")
        return TestInputTopic(self, topic, key_serde, value_serde, start, auto_advance)

    def createOutputTopic(self, topic: str, key_serde=None, value_serde=None) -> TestOutputTopic:
        return TestOutputTopic(self, topic, key_serde, value_serde)

    def producedTopicNames(self) -> set[str]:
        """Every topic the topology wrote to, internal ones included, as Kafka's: sinks,
        repartition and subscription topics, and the changelog of each store a write went to."""
        from streams.topology import changelog_topic
        return set(self._written) | {changelog_topic(self._interp.app, s) for s in self._interp.logged_stores()}

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
        self._interp.advance_wall_clock(_non_negative("advance", duration))

    def close(self) -> None:
        """Warns, as Kafka's, of piped records still waiting under ``max.task.idle.ms`` (they never
        reach the topology: advance the wall clock or pipe into the empty partitions first)."""
        if any(group.heads for group in self._interp.groups.values()):
            log.warning("Found some records that cannot be processed due to the %s configuration during "
                        "TopologyTestDriver#close().", "max.task.idle.ms")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
