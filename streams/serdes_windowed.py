"""Kafka's ``WindowedSerdes``: a windowed aggregation's :class:`~streams.record.Windowed` keys as
Kafka writes them, so ``toStream().to(...)`` of a windowed table reads in a Java application: the
inner serde's bytes then the 8-byte big-endian window start (``WindowKeySchema.toBinary``), for a
session the inner bytes, the end, then the start (``SessionKeySchema.toBinary``). Spark side:
``struct<key, start, end>`` with timestamps."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from pyspark.sql import types as T

from broker.errors import InvalidConfigError
from streams.record import Windowed
from streams.serde_base import Serde, _short
from streams.serdes import serde_of
from streams.serdes_fixed_width import LongSerde


_TS = 8                 # WindowKeySchema.TIMESTAMP_SIZE
_SEQNUM = 4             # WindowKeySchema.SEQNUM_SIZE (store and changelog keys only)
_LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, repr=False)
class TimeWindowedSerde(Serde):
    """Kafka's ``WindowedSerdes.TimeWindowedSerde``: a :class:`~streams.record.Windowed` key as
    the inner serde's bytes then the window start, 8 bytes big-endian
    (``WindowKeySchema.toBinary``), as ``toStream().to(...)`` of a time or sliding windowed
    aggregation writes it in Kafka. Reading needs the window size: ``end = start + size``
    (Long.MAX_VALUE on overflow, ``WindowKeySchema.timeWindowForSize``); empty bytes read as null
    (``TimeWindowedDeserializer``). ``forChangelog(True)`` reads a Kafka window store's
    changelog keys, which carry a 4-byte sequence number after the start
    (``WindowKeySchema.fromStoreKey``). Spark type: ``struct<key, start, end>`` with timestamps,
    as a windowed key is in SQL.

        serde = WindowedSerdes.timeWindowedSerdeFrom(Serdes.String(), 60_000)
        stream.to("totals", Produced.with_(serde, Serdes.Long()))
    """
    inner: Serde = None
    window_size: int | None = None
    changelog: bool = False
    kafka_name = "TimeWindowed"

    def __post_init__(self):
        if not isinstance(self.inner, Serde):
            raise InvalidConfigError(f"{type(self).__name__}: the inner serde must be a Serde, not {self.inner!r}")
        if self.window_size is not None and (isinstance(self.window_size, bool) or not isinstance(self.window_size, int)
                                             or self.window_size <= 0):
            raise InvalidConfigError(f"windowSize {self.window_size!r}: expected a window size > 0 ms")

    @property
    def name(self) -> str:
        return f"{self.kafka_name}<{self.inner.name}>"

    def __repr__(self) -> str:
        changelog = ".forChangelog(True)" if self.changelog else ""
        return f"WindowedSerdes.timeWindowedSerdeFrom({self.inner!r}, {self.window_size}){changelog}"

    def forChangelog(self, is_changelog_topic: bool) -> "TimeWindowedSerde":
        from dataclasses import replace
        return replace(self, changelog=bool(is_changelog_topic))

    def _trailer(self) -> int:
        return _TS + (_SEQNUM if self.changelog else 0)

    def serialize(self, obj, topic: str | None = None) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, Windowed):
            raise self.error(f"cannot serialize {type(obj).__name__} {_short(obj)}: not a Windowed key", topic)
        key = self.inner.serialize(obj.key, topic)
        if key is None:
            raise self.error(f"the key of {_short(obj)} serializes to null; a windowed key needs its bytes", topic)
        return key + self._window_bytes(obj)

    def serialize_base_key(self, obj: Windowed, topic: str | None = None) -> bytes | None:
        """Kafka's ``WindowedSerializer.serializeBaseKey``: the inner key's bytes alone, what
        :func:`windowed_partition` hashes."""
        return self.inner.serialize(obj.key, topic)

    def _window_bytes(self, w: Windowed) -> bytes:
        return w.start.to_bytes(_TS, "big", signed=True)

    def _deserialize(self, data: bytes, topic):
        if not data:
            return None
        if self.window_size is None:
            raise InvalidConfigError("Window size needs to be set either through the time windowed deserializer "
                                     "constructor or the window.size.ms config but not both")
        n = self._trailer()
        if len(data) < n:
            raise self.error(f"expected at least {n} bytes (the key's, then the window), got {len(data)}", topic,
                             length=len(data))
        start = int.from_bytes(data[len(data) - n:len(data) - n + _TS], "big", signed=True)
        end = start + self.window_size
        return Windowed(self.inner.deserialize(data[:len(data) - n], topic), start, min(end, _LONG_MAX))

    def spark_type(self):
        return T.StructType([T.StructField("key", self.inner.spark_type()),
                             T.StructField("start", T.TimestampType()), T.StructField("end", T.TimestampType())])

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        n, trailer = F.octet_length(col), self._trailer()
        # null, not a slice, when too short: a Python UDF inner serde sees every row, whatever the branch
        key_bytes = F.when(n >= trailer, col.substr(F.lit(1), n - trailer))
        key = self.inner.decode(key_bytes, on_error=on_error, topic=topic)
        start, end = self._decode_window(col, n - trailer)
        value = F.struct(key.alias("key"), F.timestamp_millis(start).alias("start"),
                         F.timestamp_millis(end).alias("end"))
        if on_error == "null" and not isinstance(self.inner, VoidSerde):
            value = F.when(key.isNotNull(), value)
        bad = self._bad(on_error, F.concat(F.lit(f"expected at least {trailer} bytes (the key's, then the window), "
                                                 "got "), n.cast("string")), topic)
        return F.when(n == 0, F.lit(None)).when(n < trailer, bad).otherwise(value)

    def _decode_window(self, col, at):
        from pyspark.sql import functions as F
        if self.window_size is None:
            raise InvalidConfigError("Window size needs to be set either through the time windowed deserializer "
                                     "constructor or the window.size.ms config but not both")
        start = _long_at(col, at)
        return start, F.when(start > F.lit(_LONG_MAX - self.window_size), F.lit(_LONG_MAX)) \
            .otherwise(start + F.lit(self.window_size))

    def _encode(self, col):
        from pyspark.sql import functions as F
        key = self.inner.encode(col["key"])
        return F.when(key.isNull(), F.raise_error(F.lit(f"{self.name} serde: a windowed key's key serializes to "
                                                        "null; a windowed key needs its bytes"))) \
            .otherwise(F.concat(key, self._encode_window(col)))

    def _encode_window(self, col):
        return LongSerde().encode(_millis(col["start"]))


@dataclass(frozen=True, repr=False)
class SessionWindowedSerde(TimeWindowedSerde):
    """Kafka's ``WindowedSerdes.SessionWindowedSerde``: the inner serde's bytes, then the session's
    end, then its start, 8 bytes each big-endian (``SessionKeySchema.toBinary``); empty bytes read
    as null (``SessionWindowedDeserializer``).

        serde = WindowedSerdes.sessionWindowedSerdeFrom(Serdes.String())
    """
    kafka_name = "SessionWindowed"

    def __repr__(self) -> str:
        return f"WindowedSerdes.sessionWindowedSerdeFrom({self.inner!r})"

    def forChangelog(self, is_changelog_topic: bool):
        raise TypeError("forChangelog is TimeWindowedSerde's: a session store's changelog keys are this format")

    def _trailer(self) -> int:
        return 2 * _TS

    def _window_bytes(self, w: Windowed) -> bytes:
        return w.end.to_bytes(_TS, "big", signed=True) + w.start.to_bytes(_TS, "big", signed=True)

    def _deserialize(self, data: bytes, topic):
        if not data:
            return None
        if len(data) < 2 * _TS:
            raise self.error(f"expected at least {2 * _TS} bytes (the key's, then the window), got {len(data)}",
                             topic, length=len(data))
        end = int.from_bytes(data[-2 * _TS:-_TS], "big", signed=True)
        start = int.from_bytes(data[-_TS:], "big", signed=True)
        return Windowed(self.inner.deserialize(data[:-2 * _TS], topic), start, end)

    def _decode_window(self, col, at):
        from pyspark.sql import functions as F
        return _long_at(col, at + F.lit(_TS)), _long_at(col, at)

    def _encode_window(self, col):
        from pyspark.sql import functions as F
        return F.concat(LongSerde().encode(_millis(col["end"])), LongSerde().encode(_millis(col["start"])))


def _long_at(col, at):
    """The 8 bytes of BINARY ``col`` after 0-based position ``at`` (a column) as a BIGINT."""
    from pyspark.sql import functions as F
    return F.conv(F.hex(col.substr(at + F.lit(1), F.lit(_TS))), 16, -10).cast("bigint")


def _millis(col):
    from pyspark.sql import functions as F
    return F.unix_millis(col)


def windowed_key_serde(inner: Serde, windows) -> TimeWindowedSerde:
    """The key serde Kafka gives a windowed aggregation's table (``TimeWindowedKStreamImpl``,
    ``SlidingWindowedKStreamImpl``: ``FullTimeWindowedSerde(keySerde, size)``, the time difference
    for sliding windows; ``SessionWindowedKStreamImpl``: ``SessionWindowedSerde(keySerde)``)."""
    from streams.windows import SessionWindows
    if isinstance(windows, SessionWindows):
        return SessionWindowedSerde(inner)
    return TimeWindowedSerde(inner, windows.size())


def windowed_partition(serde: TimeWindowedSerde, key: Windowed, topic: str, partitions: int) -> int:
    """Kafka's ``WindowedStreamPartitioner``, which ``StreamSinkNode`` gives a sink whose key serde
    is windowed: the partition the default partitioner picks for the *inner* key's bytes
    (``toPositive(murmur2(bytes)) % partitions``), so every window of a key lands in one
    partition, co-partitioned with the key itself."""
    from broker.client import murmur2
    data = serde.serialize_base_key(key, topic)
    if data is None:
        raise serde.error(f"the key of {_short(key)} serializes to null; a windowed key needs its bytes", topic)
    return murmur2(data, partitions)


class WindowedSerdes:
    """Kafka's ``WindowedSerdes`` factories, taking the inner serde (an instance, a factory or a
    class name, as ``serde_of`` reads them) where Kafka takes its class."""

    TimeWindowedSerde = TimeWindowedSerde
    SessionWindowedSerde = SessionWindowedSerde

    @staticmethod
    def timeWindowedSerdeFrom(inner, window_size) -> TimeWindowedSerde:
        from streams.windows import duration_ms
        return TimeWindowedSerde(serde_of(inner, "inner serde"), duration_ms(window_size, "windowSize"))

    @staticmethod
    def sessionWindowedSerdeFrom(inner) -> SessionWindowedSerde:
        return SessionWindowedSerde(serde_of(inner, "inner serde"))
