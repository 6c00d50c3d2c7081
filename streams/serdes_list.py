"""Kafka's ``Serdes.ListSerde``: a list of one inner serde's values in ``ListSerializer``'s bytes
(see :class:`ListSerde`); on Spark an array, decoded and encoded by a Python UDF."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import types as T

from broker.errors import InvalidConfigError
from streams.serde_base import Serde, SerializationError, _short
from streams.serdes import UUIDSerde, serde_of
from streams.serdes_fixed_width import DoubleSerde, FloatSerde, IntegerSerde, LongSerde, ShortSerde
from streams.serdes_json import JsonSerde
from streams.serdes_windowed import TimeWindowedSerde


_NULL_ENTRY = -1        # Serdes.ListSerde.NULL_ENTRY_VALUE
_CONSTANT, _VARIABLE = 0, 1     # ListSerde.SerializationStrategy ordinals


@dataclass(frozen=True, repr=False)
class ListSerde(Serde):
    """Kafka's ``Serdes.ListSerde(listClass, inner)``: a 1-byte strategy flag, then for an inner
    serde of constant size (Short, Integer, Float, Long, Double, UUID: ``CONSTANT_SIZE``, 0) the
    count and 4-byte indexes of the null entries, the entry count and the entries' bytes; for any
    other (``VARIABLE_SIZE``, 1) the entry count, then each entry as a 4-byte length (-1: null) and
    its bytes (``ListSerializer``/``ListDeserializer``, big-endian ints). Bytes after the last entry
    are ignored, as Kafka ignores them. Python values are lists; Spark's type is an array of the
    inner serde's type (decoded and encoded by a Python UDF)."""
    inner: Serde = None
    kafka_name = "List"

    def __post_init__(self):
        if not isinstance(self.inner, Serde) or isinstance(self.inner, (ListSerde, TimeWindowedSerde)):
            raise InvalidConfigError(f"ListSerde: the inner serde must be a plain Serde, not {self.inner!r}")

    @property
    def name(self) -> str:
        return f"List<{self.inner.name}>"

    def __repr__(self) -> str:
        return f"Serdes.ListSerde({self.inner!r})"

    def _entry_size(self) -> int | None:
        """``ListDeserializer.FIXED_LENGTH_DESERIALIZERS``: the inner serdes of constant size."""
        return {LongSerde: 8, IntegerSerde: 4, ShortSerde: 2, DoubleSerde: 8, FloatSerde: 4,
                UUIDSerde: 36}.get(type(self.inner))

    def serialize(self, obj, topic: str | None = None) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, (list, tuple)):
            raise self.error(f"cannot serialize {type(obj).__name__} {_short(obj)}: not a list", topic)
        constant = self._entry_size() is not None
        out = [bytes([_CONSTANT if constant else _VARIABLE])]
        if constant:
            nulls = [i for i, x in enumerate(obj) if x is None]
            out += [_int32(len(nulls))] + [_int32(i) for i in nulls]
        out.append(_int32(len(obj)))
        for x in obj:
            if x is None:
                if not constant:
                    out.append(_int32(_NULL_ENTRY))
                continue
            data = self.inner.serialize(x, topic)
            if data is None:
                raise self.error(f"entry {_short(x)} serializes to null", topic)
            if not constant:
                out.append(_int32(len(data)))
            out.append(data)
        return b"".join(out)

    def _deserialize(self, data: bytes, topic):
        def read_int(pos: int) -> int:
            if pos + 4 > len(data):
                raise self.error("Unable to deserialize into a List: end of the data", topic, length=len(data))
            return int.from_bytes(data[pos:pos + 4], "big", signed=True)
        if not data or data[0] not in (_CONSTANT, _VARIABLE):
            raise self.error("Invalid serialization strategy flag value", topic, length=len(data))
        size, pos, nulls = self._entry_size(), 1, set()
        if data[0] == _CONSTANT:
            if size is None:
                raise self.error(f"the data is CONSTANT_SIZE but the inner {self.inner.name} serde is not of "
                                 "constant size", topic, length=len(data))
            count, pos = read_int(pos), pos + 4
            for _ in range(count):
                nulls.add(read_int(pos))
                pos += 4
        else:
            size = None
        n, pos, out = read_int(pos), pos + 4, []
        for i in range(n):
            entry = size
            if entry is None:
                entry, pos = read_int(pos), pos + 4
            if entry == _NULL_ENTRY or i in nulls:
                out.append(None)
                continue
            if entry < 0 or pos + entry > len(data):
                raise self.error("End of the stream was reached prematurely", topic, length=len(data))
            out.append(self.inner.deserialize(data[pos:pos + entry], topic))
            pos += entry
        return out

    def spark_type(self):
        return T.ArrayType(self.inner.spark_type())

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        from streams.serde_base import topic_name
        return F.udf(_list_decoder(self, on_error, topic_name(topic)), self.spark_type())(col)

    def _encode(self, col):
        from pyspark.sql import functions as F
        return F.udf(_list_encoder(self), T.BinaryType())(col)


def _int32(x: int) -> bytes:
    return x.to_bytes(4, "big", signed=True)


def _list_decoder(serde: ListSerde, on_error: str, topic):
    def decode(data):           # Spark runs a Python UDF on every row, null ones too
        if data is None:
            return None
        try:
            values = serde.deserialize(bytes(data), topic)
        except SerializationError:
            if on_error == "null":
                return None
            raise
        return [_spark_value(serde.inner, v) for v in values]
    return decode


def _list_encoder(serde: ListSerde):
    def encode(values):
        if values is None:
            return None
        return serde.serialize([_python_value(serde.inner, v) for v in values])
    return encode


def _spark_value(inner: Serde, v):
    """An entry as its Spark value: UUIDs and schema-less JSON as their text."""
    if v is None:
        return None
    if isinstance(inner, UUIDSerde):
        return str(v)
    if isinstance(inner, JsonSerde) and inner.schema is None:
        return inner.serialize(v).decode("utf-8")
    return v


def _python_value(inner: Serde, v):
    """An entry's Spark value as ``inner.serialize`` takes it."""
    if v is None:
        return None
    if hasattr(v, "asDict"):
        return v.asDict(recursive=True)
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(inner, JsonSerde) and inner.schema is None:
        import json
        return json.loads(v)
    return v
