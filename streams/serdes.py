"""Kafka Streams' ``Serdes``, byte for byte, with a Python side and a Spark side.

A topic written here must read in a Java Kafka Streams application and the other way round, so
the formats are Kafka's (``org.apache.kafka.common.serialization``):

=========  ===============================================================  ===================
serde      bytes                                                            Spark type
=========  ===============================================================  ===================
String     UTF-8 (malformed input decodes to U+FFFD, as Java's ``String``)  STRING
Long       8 bytes, big-endian two's complement                             BIGINT
Integer    4 bytes, big-endian two's complement                             INT
Short      2 bytes, big-endian two's complement                             SMALLINT
Double     8 bytes, IEEE-754 big-endian (``doubleToLongBits``: one NaN)     DOUBLE
Float      4 bytes, IEEE-754 big-endian (NaN written as 7fc00000)           FLOAT
Boolean    1 byte, 0x00 or 0x01 (Kafka 3.x; any other byte is an error)     BOOLEAN
UUID       the 36-character text, UTF-8 (Python value: ``uuid.UUID``)       STRING
Void       always null                                                      VOID (NullType)
Bytes      the bytes as they are (``ByteArray``, ``ByteBuffer`` too)        BINARY
Json       UTF-8 JSON text (:mod:`streams.serdes_json`)                     a struct, or STRING
Struct     an Arrow IPC stream of one row (:mod:`streams.serdes_struct`)    the struct
=========  ===============================================================  ===================

``WindowedSerdes`` (:mod:`streams.serdes_windowed`) writes windowed keys as Kafka's
``WindowKeySchema``/``SessionKeySchema`` do, and ``Serdes.ListSerde(inner)`` Kafka's
``ListSerializer`` bytes (:mod:`streams.serdes_list`).

Null stays null both ways (tombstones, null keys). The Python side raises
:class:`SerializationError` for input of the wrong size or content; the Spark side compiles to
built-in SQL functions (no Python per record, except ``Struct`` and ``ListSerde``) and, by default, fails the query
with Spark's ``raise_error`` carrying the same message; ``decode(col, on_error="null")`` makes a
bad record null instead, for a DSL that skips it (Kafka's ``LogAndContinueExceptionHandler``).

    serde = Serdes.Long()
    serde.serialize(1)                 # b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01"
    df.select(serde.decode(df.value))  # BIGINT column with the same values
"""
from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass

from pyspark.sql import types as T

from broker.errors import InvalidConfigError
from streams.serde_base import ON_ERROR, Serde, SerializationError, _check_on_error, _short  # noqa: F401
from streams.serdes_fixed_width import (BooleanSerde, DoubleSerde, FloatSerde, IntegerSerde,  # noqa: F401
                                        LongSerde, ShortSerde)


# -------------------------------------------------------------------------------------- others
@dataclass(frozen=True, repr=False)
class StringSerde(Serde):
    """UTF-8. Malformed bytes decode to U+FFFD, as Java's ``new String(bytes, UTF_8)`` does, on both
    sides (Spark: ``make_valid_utf8``). A str with lone surrogates cannot be written (Java would
    write '?')."""
    kafka_name = "String"

    def _serialize(self, obj) -> bytes:
        if not isinstance(obj, str):
            raise TypeError("not a str")
        return obj.encode("utf-8")

    def _deserialize(self, data: bytes, topic):
        return data.decode("utf-8", errors="replace")

    def spark_type(self):
        return T.StringType()

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        return F.make_valid_utf8(col.cast("string"))

    def _encode(self, col):
        return col.cast("binary")


_UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


@dataclass(frozen=True, repr=False)
class UUIDSerde(Serde):
    """Kafka's: the UUID's 36-character text. Python values are ``uuid.UUID`` (a str is accepted
    when serializing); Spark has no UUID type, so its values are the lower-case text. Only the
    canonical 8-4-4-4-12 form is read (Java's ``UUID.fromString`` also takes shortened groups)."""
    kafka_name = "UUID"

    def _serialize(self, obj) -> bytes:
        if isinstance(obj, str):
            obj = self._parse(obj, None)
        if not isinstance(obj, _uuid.UUID):
            raise TypeError("not a uuid.UUID")
        return str(obj).encode("ascii")

    def _deserialize(self, data: bytes, topic):
        return self._parse(data.decode("utf-8", errors="replace"), topic)

    def _parse(self, text: str, topic):
        import re
        if not re.fullmatch(_UUID_PATTERN[1:-1], text):
            raise self.error(f"{_short(text)} is not a UUID (8-4-4-4-12 hex digits)", topic, length=len(text))
        return _uuid.UUID(text)

    def spark_type(self):
        return T.StringType()

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        text = F.make_valid_utf8(col.cast("string"))
        bad = self._bad(on_error, F.concat(F.lit("'"), F.substring(text, 1, 60),
                                           F.lit("' is not a UUID (8-4-4-4-12 hex digits)")), topic)
        return F.when(text.rlike(_UUID_PATTERN), F.lower(text)).otherwise(bad)

    def _encode(self, col):
        return self._decode(col.cast("binary"), "fail", None).cast("binary")


@dataclass(frozen=True, repr=False)
class VoidSerde(Serde):
    """Kafka's: the only value is null; non-null bytes are an error."""
    kafka_name = "Void"

    def serialize(self, obj, topic: str | None = None):
        if obj is not None:
            raise self.error(f"only None can be written, not {_short(obj)}", topic)
        return None

    def _deserialize(self, data: bytes, topic):
        raise self.error(f"expected null, got {len(data)} bytes", topic, length=len(data))

    def spark_type(self):
        return T.NullType()

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        return self._bad(on_error, F.concat(F.lit("expected null, got "), F.octet_length(col).cast("string"),
                                            F.lit(" bytes")), topic)

    def _encode(self, col):
        from pyspark.sql import functions as F
        return F.raise_error(F.lit("Void serde: only null can be written"))


@dataclass(frozen=True, repr=False)
class BytesSerde(Serde):
    """The bytes as they are (Kafka's ``Bytes``; ``ByteArray`` is the same on the wire)."""
    kafka_name = "Bytes"

    def _serialize(self, obj) -> bytes:
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            raise TypeError("not bytes")
        return bytes(obj)

    def _deserialize(self, data: bytes, topic):
        return data

    def spark_type(self):
        return T.BinaryType()

    def _decode(self, col, on_error, topic):
        return col

    def _encode(self, col):
        return col


@dataclass(frozen=True, repr=False)
class ByteArraySerde(BytesSerde):
    kafka_name = "ByteArray"


@dataclass(frozen=True, repr=False)
class ByteBufferSerde(BytesSerde):
    """Kafka's ``Serdes.ByteBuffer()``: the buffer's remaining bytes, as they are."""
    kafka_name = "ByteBuffer"


# ------------------------------------------------------------------------------------ factories
class Serdes:
    """Kafka's factory names: ``Serdes.String()``, ``Serdes.Long()``, ``Serdes.Json(schema)``, ..."""

    @staticmethod
    def Bytes() -> Serde: return BytesSerde()            # noqa: E704
    @staticmethod
    def ByteArray() -> Serde: return ByteArraySerde()    # noqa: E704
    @staticmethod
    def ByteBuffer() -> Serde: return ByteBufferSerde()  # noqa: E704
    @staticmethod
    def String() -> Serde: return StringSerde()          # noqa: E704
    @staticmethod
    def Long() -> Serde: return LongSerde()              # noqa: E704
    @staticmethod
    def Integer() -> Serde: return IntegerSerde()        # noqa: E704
    @staticmethod
    def Short() -> Serde: return ShortSerde()            # noqa: E704
    @staticmethod
    def Double() -> Serde: return DoubleSerde()          # noqa: E704
    @staticmethod
    def Float() -> Serde: return FloatSerde()            # noqa: E704
    @staticmethod
    def Boolean() -> Serde: return BooleanSerde()        # noqa: E704
    @staticmethod
    def UUID() -> Serde: return UUIDSerde()              # noqa: E704
    @staticmethod
    def Void() -> Serde: return VoidSerde()              # noqa: E704

    @staticmethod
    def Json(schema=None) -> Serde:
        """JSON text; with ``schema`` (a StructType or DDL string) values are coerced as Spark's
        ``from_json`` does, without one any JSON value is accepted (Spark side: the JSON text)."""
        from streams.serdes_json import JsonSerde
        return JsonSerde.of(schema)

    @staticmethod
    def ListSerde(*args) -> Serde:
        """Kafka's ``Serdes.ListSerde(listClass, innerSerde)``; the list class may be left out."""
        if not args or len(args) > 2:
            raise InvalidConfigError("ListSerde(innerSerde) or ListSerde(listClass, innerSerde)")
        return ListSerde(serde_of(args[-1], "ListSerde inner serde"))

    @staticmethod
    def Struct(schema) -> Serde:
        """Riverlog's columnar serde: an Arrow IPC stream of one row of ``schema``."""
        from streams.serdes_struct import StructSerde
        return StructSerde.of(schema)


_BY_NAME = {cls.kafka_name: cls for cls in (BytesSerde, ByteArraySerde, ByteBufferSerde, StringSerde, LongSerde,
                                            IntegerSerde, ShortSerde, DoubleSerde, FloatSerde, BooleanSerde, UUIDSerde,
                                            VoidSerde)}
_KAFKA_PREFIXES = ("org.apache.kafka.common.serialization.Serdes$", "org.apache.kafka.common.serialization.Serdes.",
                   "Serdes$", "Serdes.")


def serde_of(x, what: str = "serde") -> Serde:
    """A :class:`Serde` from an instance, a factory (``Serdes.String``) or a class name as Kafka's
    ``default.key.serde`` / ``default.value.serde`` configs hold it
    (``"org.apache.kafka.common.serialization.Serdes$StringSerde"``, ``"StringSerde"``, ``"String"``;
    ``"Json"`` is the schema-less JSON serde)."""
    if isinstance(x, Serde):
        return x
    if callable(x) and not isinstance(x, type):
        made = x()
        if isinstance(made, Serde):
            return made
    if isinstance(x, type) and issubclass(x, Serde) and x.kafka_name in _BY_NAME:
        return x()
    if isinstance(x, str):
        name = x.strip()
        for prefix in _KAFKA_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        if name.endswith("Serde") and name != "Serde":
            name = name[:-len("Serde")]
        if name in _BY_NAME:
            return _BY_NAME[name]()
        if name == "Json":
            return Serdes.Json()
    known = ", ".join(sorted(_BY_NAME)) + ", Json"
    raise InvalidConfigError(f"{what} {x!r} is not a known serde; use a Serde instance or one of: {known} "
                             "(also as 'org.apache.kafka.common.serialization.Serdes$<Name>Serde')")


from streams.serdes_json import JsonSerde  # noqa: E402  (they build on Serde above)
from streams.serdes_struct import StructSerde  # noqa: E402

__all__ = ["Serde", "Serdes", "SerializationError", "serde_of", "JsonSerde", "StructSerde", "BytesSerde",
           "ByteArraySerde", "ByteBufferSerde", "ListSerde", "WindowedSerdes", "TimeWindowedSerde",
           "SessionWindowedSerde", "StringSerde", "LongSerde", "IntegerSerde", "ShortSerde", "DoubleSerde",
           "FloatSerde", "BooleanSerde", "UUIDSerde", "VoidSerde"]
from streams.serdes_windowed import SessionWindowedSerde, TimeWindowedSerde, WindowedSerdes  # noqa: E402, F401
from streams.serdes_list import ListSerde  # noqa: E402, F401
