"""Kafka's fixed-width serdes: ``Long``, ``Integer``, ``Short``, ``Double``, ``Float``, ``Boolean``.

They share one rule, a payload of exactly ``width`` bytes (else Kafka's "Size of data received by
... is not N" error), and on the Spark side decode from the bytes' hex with built-in functions, so
no Python runs per record. The byte layouts are tabled in :mod:`streams.serdes`, which re-exports
these classes.
"""
from __future__ import annotations

import math
import operator
import struct
from dataclasses import dataclass
from typing import ClassVar

from pyspark.sql import types as T

from streams.serde_base import Serde


@dataclass(frozen=True, repr=False)
class _FixedWidth(Serde):
    width: ClassVar[int] = 0
    deserializer: ClassVar[str] = ""   # the name Kafka's size message gives (Double's and Float's: "Deserializer")

    def _size_message(self) -> str:
        return f"Size of data received by {self.deserializer} is not {self.width}"

    def _deserialize(self, data: bytes, topic):
        if len(data) != self.width:
            raise self.error(f"{self._size_message()} (got {len(data)} bytes)", topic, length=len(data))
        return self._unpack(data)

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        n = F.octet_length(col)
        bad = self._bad(on_error, F.concat(F.lit(f"{self._size_message()} (got "), n.cast("string"), F.lit(" bytes)")),
                        topic)
        return F.when(n == self.width, self._decode_exact(col)).otherwise(bad)


@dataclass(frozen=True, repr=False)
class _Integral(_FixedWidth):
    spark: ClassVar[type] = T.LongType

    def _serialize(self, obj) -> bytes:
        if isinstance(obj, bool):
            raise TypeError("a bool is not an integer here")
        return operator.index(obj).to_bytes(self.width, "big", signed=True)

    def _unpack(self, data: bytes) -> int:
        return int.from_bytes(data, "big", signed=True)

    def spark_type(self):
        return self.spark()

    def _decode_exact(self, col):
        from pyspark.sql import functions as F
        if self.width == 8:
            return F.conv(F.hex(col), 16, -10).cast("bigint")   # a negative base reads two's complement
        unsigned = F.conv(F.hex(col), 16, 10).cast("bigint")
        half = 1 << (8 * self.width - 1)
        return F.when(unsigned >= half, unsigned - 2 * half).otherwise(unsigned)

    def _encode(self, col):
        from pyspark.sql import functions as F
        bits = col.cast("bigint")
        if self.width < 8:
            bits = bits.bitwiseAND(F.lit((1 << (8 * self.width)) - 1))
        return F.unhex(F.lpad(F.hex(bits), 2 * self.width, "0"))


@dataclass(frozen=True, repr=False)
class LongSerde(_Integral):
    kafka_name, width, spark, deserializer = "Long", 8, T.LongType, "LongDeserializer"


@dataclass(frozen=True, repr=False)
class IntegerSerde(_Integral):
    kafka_name, width, spark, deserializer = "Integer", 4, T.IntegerType, "IntegerDeserializer"


@dataclass(frozen=True, repr=False)
class ShortSerde(_Integral):
    kafka_name, width, spark, deserializer = "Short", 2, T.ShortType, "ShortDeserializer"


@dataclass(frozen=True, repr=False)
class DoubleSerde(_FixedWidth):
    """IEEE-754 binary64. Spark has no function reinterpreting bits as a double (``reflect`` with
    ``Double.longBitsToDouble`` works but runs ~4x slower and is non-deterministic to the
    optimizer), so :mod:`streams.serdes_ieee` computes the value from sign, exponent and mantissa
    with exact power-of-two arithmetic."""
    kafka_name, width, deserializer = "Double", 8, "Deserializer"
    fmt: ClassVar[str] = ">d"
    nan: ClassVar[bytes] = bytes.fromhex("7ff8000000000000")

    def _serialize(self, obj) -> bytes:
        if isinstance(obj, (bool, str, bytes)):
            raise TypeError("not a number")
        x = float(obj)
        if math.isnan(x):
            return self.nan     # Java's doubleToLongBits / floatToRawIntBits of Java's NaN constant
        try:
            return struct.pack(self.fmt, x)
        except OverflowError:   # beyond Float's range: Java's (float) cast gives infinity
            return struct.pack(self.fmt, math.copysign(math.inf, x))

    def _unpack(self, data: bytes) -> float:
        return struct.unpack(self.fmt, data)[0]

    def spark_type(self):
        return T.DoubleType()

    def _decode_exact(self, col):
        from streams.serdes_ieee import bits_to_float, DOUBLE
        return bits_to_float(col, DOUBLE)

    def _encode(self, col):
        from streams.serdes_ieee import float_to_bytes, DOUBLE
        return float_to_bytes(col, DOUBLE)


@dataclass(frozen=True, repr=False)
class FloatSerde(DoubleSerde):
    """IEEE-754 binary32. Python floats are doubles: serializing rounds to the nearest float (as
    Java's ``(float)`` cast) and deserializing widens exactly."""
    kafka_name, width, deserializer = "Float", 4, "Deserializer"
    fmt: ClassVar[str] = ">f"
    nan: ClassVar[bytes] = bytes.fromhex("7fc00000")

    def spark_type(self):
        return T.FloatType()

    def _decode_exact(self, col):
        from streams.serdes_ieee import bits_to_float, FLOAT
        return bits_to_float(col, FLOAT)

    def _encode(self, col):
        from streams.serdes_ieee import float_to_bytes, FLOAT
        return float_to_bytes(col, FLOAT)


@dataclass(frozen=True, repr=False)
class BooleanSerde(_FixedWidth):
    """Kafka 3.x's: one byte, 0x01 for true and 0x00 for false; any other byte is an error."""
    kafka_name, width, deserializer = "Boolean", 1, "BooleanDeserializer"

    def _serialize(self, obj) -> bytes:
        if not isinstance(obj, bool):
            raise TypeError("not a bool")
        return b"\x01" if obj else b"\x00"

    def _deserialize(self, data: bytes, topic):
        if len(data) == 1 and data[0] > 1:
            signed = data[0] - 256 if data[0] > 127 else data[0]   # Java's byte
            raise self.error(f"Unexpected byte received by BooleanDeserializer: {signed}", topic, length=1)
        return super()._deserialize(data, topic)

    def _unpack(self, data: bytes) -> bool:
        return data == b"\x01"

    def spark_type(self):
        return T.BooleanType()

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        n = F.octet_length(col)
        size = F.concat(F.lit(f"{self._size_message()} (got "), n.cast("string"), F.lit(" bytes)"))
        unsigned = F.conv(F.hex(col), 16, 10).cast("int")
        signed = F.when(unsigned > 127, unsigned - 256).otherwise(unsigned)   # Java's byte
        byte = F.concat(F.lit("Unexpected byte received by BooleanDeserializer: "), signed.cast("string"))
        return (F.when(col == F.lit(b"\x01"), F.lit(True)).when(col == F.lit(b"\x00"), F.lit(False))
                .when(n != 1, self._bad(on_error, size, topic)).otherwise(self._bad(on_error, byte, topic)))

    def _encode(self, col):
        from pyspark.sql import functions as F
        return F.when(col, F.lit(b"\x01")).otherwise(F.lit(b"\x00"))
