"""``TopologyTestDriver``: Kafka Streams' test driver, backed by the reference interpreter, so a
topology is unit-tested in milliseconds with no Spark and no broker.

    driver = TopologyTestDriver(builder.build(), {"application.id": "app"})
    orders = driver.createInputTopic("orders", Serdes.String(), Serdes.Json(schema))
    out = driver.createOutputTopic("per-user", Serdes.String(), Serdes.Long())
    orders.pipeInput("o1", {"user": "ann", "amount": 120.0}, 1_000)
    assert out.readKeyValue() == KeyValue("ann", 1)

The driver's store getters answer with the read-only views of :mod:`streams.read_only_stores`.
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any

from streams.errors import TopologyError
from streams.interpreter import Interpreter
from streams.read_only_stores import INVALID_RANGE_WARNING, ReadOnlyStore, ReadOnlyVersionedStore, _ms  # noqa: F401
from streams.record import Windowed
from streams.topology import Topology

KeyValue = namedtuple("KeyValue", ["key", "value"])


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
        if not self._interp.reads(topic):
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
