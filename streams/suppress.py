"""``suppress()``: Kafka's ``Suppressed`` and its ``KTableSuppressProcessor``, buffering a KTable's
updates and forwarding each key's latest change once its time is up.

The buffer keeps one entry per key: the latest ``Change`` (its ``old`` is the old value of that
latest update, which is what Kafka's buffer forwards; the value before the first buffered update is
kept too, as Kafka's ``priorValue``). A key re-buffered keeps its place in time order (Kafka's
non-resetting semantics). After each record, with stream time = the largest timestamp seen:

- entries whose buffer time ≤ stream time − wait are forwarded, oldest first (buffer time: window
  end for ``untilWindowCloses``, wait = the windows' grace; record time for ``untilTimeLimit``);
- then, if over ``maxRecords``/``maxBytes``: ``emitEarlyWhenFull`` forwards oldest first until
  within bounds; ``shutDownWhenFull`` raises :class:`SuppressionBufferFullError`.

``untilWindowCloses`` forwards final results only, so tombstones (``new`` None, e.g. a merged-away
session) are dropped there, as Kafka's ``safeToDropTombstones``.

Store layout (one KeyValueStore): ``("b", k)`` → the entry, ``("t", time)`` → keys buffered at that
time, ``("times",)`` → the buffered times sorted, ``("n",)`` → (records, bytes). Eviction reads the
index instead of scanning. Entries leave in Kafka's ``BufferKey`` order: by buffer time, then by
the serialized key (the table's key serde; a windowed key as its ``TimeWindowedSerde`` — key then
start — or ``SessionWindowedSerde`` — key, end, start — bytes, compared unsigned).

``maxBytes`` counts what ``InMemoryTimeOrderedKeyValueChangeBuffer.computeRecordSize`` counts: 8
(buffer time) + the serialized key + the serialized prior, old (unless it is the prior) and new
values + the record context (8 + 8 + 4 + the source topic's characters + each header's key
characters and value bytes). Without a serde (none given and no default), ``repr`` stands in for
the serialized form.

    SuppressProcessor("final", Suppressed.untilWindowCloses(BufferConfig.unbounded()), windows)
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from streams.errors import StreamsError, TopologyError
from streams.processor import Processor
from streams.record import Change, Record, Windowed
from streams.serdes_windowed import TimeWindowedSerde
from streams.stores import StoreSpec, _hashable
from streams.topology import changelog_topic
from streams.windows import SessionWindows, duration_ms

_UNBOUNDED = 2 ** 63 - 1
EMIT, SHUT_DOWN = "emitEarlyWhenFull", "shutDownWhenFull"


class SuppressionBufferFullError(StreamsError):
    """A ``shutDownWhenFull`` buffer went over its bound: raise the bound, or emit early."""


@dataclass(frozen=True, slots=True)
class BufferConfig:
    """Bounds of a suppression buffer and what to do when they are passed."""
    maxRecords_: int = _UNBOUNDED
    maxBytes_: int = _UNBOUNDED
    whenFull: str = SHUT_DOWN
    logConfig: tuple = ()       # the buffer changelog's topic configs, as sorted (name, value) pairs

    def __post_init__(self):
        for name, v in (("recordLimit", self.maxRecords_), ("byteLimit", self.maxBytes_)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TopologyError(f"buffer {name} must be a non-negative int, got {v!r}", argument=name)

    @staticmethod
    def maxRecords(recordLimit: int) -> "BufferConfig":
        return BufferConfig(recordLimit, _UNBOUNDED, EMIT)

    @staticmethod
    def maxBytes(byteLimit: int) -> "BufferConfig":
        return BufferConfig(_UNBOUNDED, byteLimit, EMIT)

    @staticmethod
    def unbounded() -> "BufferConfig":
        return BufferConfig(_UNBOUNDED, _UNBOUNDED, SHUT_DOWN)

    def withMaxRecords(self, recordLimit: int) -> "BufferConfig":
        return replace(self, maxRecords_=recordLimit)

    def withMaxBytes(self, byteLimit: int) -> "BufferConfig":
        return replace(self, maxBytes_=byteLimit)

    def withNoBound(self) -> "BufferConfig":
        return replace(self, maxRecords_=_UNBOUNDED, maxBytes_=_UNBOUNDED, whenFull=SHUT_DOWN)

    def withLoggingEnabled(self, config: dict | None = None) -> "BufferConfig":
        """Topic configs for the buffer's changelog, checked and applied as
        ``Materialized.withLoggingEnabled``'s are for a store's."""
        from streams.parameters import Materialized
        return replace(self, logConfig=Materialized().withLoggingEnabled(config).log_config)

    def withLoggingDisabled(self) -> "BufferConfig":
        raise TopologyError("withLoggingDisabled: Riverlog stores are always logged, because the changelog "
                            "is what lets an application restart from the broker alone")

    def shutDownWhenFull(self) -> "BufferConfig":
        return replace(self, whenFull=SHUT_DOWN)

    def emitEarlyWhenFull(self) -> "BufferConfig":
        return replace(self, whenFull=EMIT)

    def isStrict(self) -> bool:
        """Strict buffers never emit early: what final results need."""
        return self.whenFull == SHUT_DOWN


@dataclass(frozen=True, slots=True)
class Suppressed:
    """What to hold back and for how long; ``untilWindowCloses`` or ``untilTimeLimit`` make one."""
    untilClose: bool
    waitMs: int
    bufferConfig: BufferConfig
    name: str | None = None

    @staticmethod
    def untilWindowCloses(bufferConfig: BufferConfig) -> "Suppressed":
        if not bufferConfig.isStrict():
            raise TopologyError("untilWindowCloses needs a strict buffer (unbounded() or shutDownWhenFull()): "
                                "emitting early would break its final-results-only promise", argument="bufferConfig")
        return Suppressed(True, 0, bufferConfig)

    @staticmethod
    def untilTimeLimit(timeToWaitForMoreEvents, bufferConfig: BufferConfig) -> "Suppressed":
        wait = duration_ms(timeToWaitForMoreEvents, "timeToWaitForMoreEvents")
        if wait < 0:
            raise TopologyError(f"timeToWaitForMoreEvents must not be negative, got {wait} ms",
                                argument="timeToWaitForMoreEvents")
        return Suppressed(False, wait, bufferConfig)

    def withName(self, name: str) -> "Suppressed":
        return replace(self, name=name)


def _buffer_key(key):
    if isinstance(key, Windowed):
        return ("W", _hashable(key.key), key.start, key.end)
    return _hashable(key)


def _context_size(topic, headers) -> int:
    """``ProcessorRecordContext.residentMemorySizeEstimate``: timestamp, offset, partition, the
    topic's characters and each header's key characters and value bytes."""
    size = 8 + 8 + 4 + (len(topic) if topic is not None else 0)
    for k, v in headers:
        size += len(k) + (len(v) if v is not None else 0)
    return size


def prior_value_for_buffered(store, key):
    """Kafka's ``TimeOrderedKeyValueBuffer.priorValueForBuffered`` over a buffer's store:
    (True, the value before the key's first buffered update) for a buffered key, else (False, None)."""
    entry = store.get(("b", _buffer_key(key)))
    return (False, None) if entry is None else (True, entry[4])


class SuppressProcessor(Processor):
    """Kafka's ``KTableSuppressProcessor``. ``windows`` is the upstream windowed aggregation's
    definition: ``untilWindowCloses`` waits its ``closeGraceMs()`` after each window's end."""

    def __init__(self, store_name: str, suppressed: Suppressed, windows=None, key_serde=None, value_serde=None):
        if suppressed.untilClose and windows is None:
            raise TopologyError("suppress(untilWindowCloses) is only defined for windowed KTables: pass the "
                                "windows of the aggregation it follows", argument="windows")
        self.store_name, self.suppressed = store_name, suppressed
        self.wait = windows.closeGraceMs() if suppressed.untilClose else suppressed.waitMs
        self.max_records = suppressed.bufferConfig.maxRecords_
        self.max_bytes = suppressed.bufferConfig.maxBytes_
        self.key_serde, self.value_serde = key_serde, value_serde
        self.session = isinstance(windows, SessionWindows)

    def store_spec(self) -> StoreSpec:
        return StoreSpec(self.store_name, "keyValue")

    def init(self, context) -> None:
        super().init(context)
        self.store = context.store(self.store_name)
        self._ks = self.key_serde or context.default_serde("key")
        self._vs = self.value_serde or context.default_serde("value")
        self._changelog = changelog_topic(context.application_id, self.store_name)

    def _bytes(self, serde, obj) -> bytes | None:
        if obj is None:
            return None
        if serde is None:
            return repr(obj).encode()
        return serde.serialize(obj, self._changelog)

    def _key_bytes(self, key) -> bytes:
        """The key as the buffer's key serde writes it (a windowed key with its window's times)."""
        if not isinstance(key, Windowed):
            return self._bytes(self._ks, key) or b""
        if isinstance(self._ks, TimeWindowedSerde):    # a table of a windowed stream (toStream().toTable())
            return self._bytes(self._ks, key) or b""
        times = (key.end, key.start) if self.session else (key.start,)
        return (self._bytes(self._ks, key.key) or b"") + b"".join(t.to_bytes(8, "big", signed=True) for t in times)

    def _record_size(self, key_bytes: bytes, new, old, prior, headers) -> int:
        """``computeRecordSize``: buffer time, key, ``BufferValue.residentMemorySizeEstimate``
        (a prior value with the old value's bytes is counted once, as ``BufferValue`` shares them)."""
        new_b, old_b, prior_b = (self._bytes(self._vs, v) or b"" for v in (new, old, prior))
        size = 8 + len(key_bytes) + len(new_b) + len(prior_b) + (0 if old_b == prior_b else len(old_b))
        return size + _context_size(self.context.source()[0], headers)

    def process(self, record: Record) -> None:
        if not isinstance(record.value, Change):
            raise StreamsError(f"suppress() follows a KTable: expected a Change value, got {record.value!r}")
        stream_time = self.observe_stream_time("streamTime", record.timestamp)
        if self.suppressed.untilClose:
            if not isinstance(record.key, Windowed):
                raise StreamsError(f"suppress(untilWindowCloses) got a non-windowed key {record.key!r}")
            buffer_time = record.key.end
        else:
            buffer_time = record.timestamp
        self._put(buffer_time, record)
        expiry = stream_time - self.wait
        while (t := self._min_time()) is not None and t <= expiry:
            self._evict_oldest()
        if self._over_capacity():
            if self.suppressed.bufferConfig.whenFull == EMIT:
                while self._over_capacity():
                    self._evict_oldest()
            else:
                n, size = self.store.get(("n",))
                raise SuppressionBufferFullError(
                    f"suppress buffer {self.suppressed.name or self.store_name!r} exceeded its max capacity: "
                    f"[{n}/{self.max_records}] records and [{size}/{self.max_bytes}] bytes; raise the bound or "
                    "use emitEarlyWhenFull()", store=self.store_name)

    def prior_value_for_buffered(self, key):
        """(True, value before the first buffered update) for a buffered key, else (False, None)."""
        return prior_value_for_buffered(self.store, key)

    def _put(self, time: int, record: Record) -> None:
        bk = _buffer_key(record.key)
        entry = self.store.get(("b", bk))
        n, size = self.store.get(("n",)) or (0, 0)
        kb = self._key_bytes(record.key)
        if entry is None:
            prior = record.value.old
        else:
            time, prior = entry[0], entry[4]
            size -= entry[7]
        grown = self._record_size(kb, record.value.new, record.value.old, prior, record.headers)
        self.store.put(("b", bk), (time, record.key, record.value.new, record.value.old, prior,
                                   record.timestamp, record.headers, grown, kb, self.context.source()))
        if entry is None:
            keys = self.store.get(("t", time))
            if keys is None:
                times = list(self.store.get(("times",)) or ())
                bisect.insort(times, time)
                self.store.put(("times",), tuple(times))
                keys = ()
            keys = list(keys)
            bisect.insort(keys, bk, key=self._stored_key_bytes)     # BufferKey: time, then key bytes
            self.store.put(("t", time), tuple(keys))
            n += 1
        self.store.put(("n",), (n, size + grown))

    def _stored_key_bytes(self, bk) -> bytes:
        entry = self.store.get(("b", bk))
        return entry[8] if len(entry) > 8 else self._key_bytes(entry[1])   # a buffer written before key bytes

    def _min_time(self):
        times = self.store.get(("times",))
        return times[0] if times else None

    def _over_capacity(self) -> bool:
        n, size = self.store.get(("n",)) or (0, 0)
        return n > self.max_records or size > self.max_bytes

    def _evict_oldest(self) -> None:
        time = self._min_time()
        keys = self.store.get(("t", time))
        bk, rest = keys[0], keys[1:]
        if rest:
            self.store.put(("t", time), rest)
        else:
            self.store.delete(("t", time))
            times = self.store.get(("times",))[1:]
            if times:
                self.store.put(("times",), times)
            else:
                self.store.delete(("times",))
        entry = self.store.get(("b", bk))
        _, key, new, old, _prior, ts, headers, grown = entry[:8]
        self.store.delete(("b", bk))
        n, size = self.store.get(("n",))
        self.store.put(("n",), (n - 1, size - grown))
        if new is not None or not self.suppressed.untilClose:
            # the buffered record's position (Kafka's eviction restores its record context); an
            # entry buffered before positions were kept forwards under the current one
            previous = self.context.swap_source(tuple(entry[9])) if len(entry) > 9 and entry[9] is not None else None
            try:
                self.forward(Record(key, Change(new, old), ts, headers))
            finally:
                if previous is not None:
                    self.context.swap_source(previous)
