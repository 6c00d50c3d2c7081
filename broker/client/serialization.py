"""confluent-kafka's ``confluent_kafka.serialization``: serializers for keys and values.

    s = IntegerSerializer()
    data = s(42, SerializationContext("orders", MessageField.KEY))      # b'\\x00\\x00\\x00*'
    IntegerDeserializer()(data, SerializationContext("orders", MessageField.KEY))   # 42

The byte formats are Kafka's own (Java's ``StringSerializer``, ``IntegerSerializer``,
``DoubleSerializer``: UTF-8, 4-byte and 8-byte big-endian), so a Java client reads them. ``None``
serializes to ``None`` (a null key or value) and back. Used by
:class:`~broker.client.serializing.SerializingProducer` and
:class:`~broker.client.serializing.DeserializingConsumer`.
"""
from __future__ import annotations

import json
import struct

from broker.client.error import SerializationError
from broker.errors import KafkaException

__all__ = ["Deserializer", "DoubleDeserializer", "DoubleSerializer", "IntegerDeserializer", "IntegerSerializer",
           "JSONDeserializer", "JSONSerializer", "KafkaException", "MessageField", "SerializationContext",
           "SerializationError", "Serializer", "StringDeserializer", "StringSerializer"]


class MessageField:
    """Which part of a message a serializer works on."""
    NONE = "none"
    KEY = "key"
    VALUE = "value"


class SerializationContext:
    """What a serializer is told about the data: its topic, whether it is the key or the value,
    and the message's headers."""

    __slots__ = ("topic", "field", "headers")

    def __init__(self, topic: str, field: str, headers=None):
        self.topic = topic
        self.field = field
        self.headers = headers


class Serializer:
    """Turns an object into bytes: ``serializer(obj, ctx)``."""

    __slots__ = ()

    def __call__(self, obj, ctx: SerializationContext | None = None) -> bytes | None:
        raise NotImplementedError


class Deserializer:
    """Turns bytes into an object: ``deserializer(data, ctx)``."""

    __slots__ = ()

    def __call__(self, value: bytes | None, ctx: SerializationContext | None = None):
        raise NotImplementedError


class StringSerializer(Serializer):
    __slots__ = ("codec",)

    def __init__(self, codec: str = "utf_8"):
        self.codec = codec

    def __call__(self, obj, ctx=None):
        if obj is None:
            return None
        if not isinstance(obj, str):
            raise SerializationError(f"StringSerializer takes str, got {type(obj).__name__}")
        try:
            return obj.encode(self.codec)
        except UnicodeError as e:
            raise SerializationError(str(e)) from e


class StringDeserializer(Deserializer):
    __slots__ = ("codec",)

    def __init__(self, codec: str = "utf_8"):
        self.codec = codec

    def __call__(self, value, ctx=None):
        if value is None:
            return None
        try:
            return value.decode(self.codec)
        except UnicodeError as e:
            raise SerializationError(str(e)) from e


class _Struct(Serializer):
    """A fixed-size big-endian number (Java's DataOutput layout)."""
    __slots__ = ()
    _format = ""
    _kinds: tuple = ()

    def __call__(self, obj, ctx=None):
        if obj is None:
            return None
        if isinstance(obj, bool) or not isinstance(obj, self._kinds):
            raise SerializationError(f"{type(self).__name__} takes {self._kinds[0].__name__}, got {type(obj).__name__}")
        try:
            return struct.pack(self._format, obj)
        except struct.error as e:
            raise SerializationError(f"{type(self).__name__}: {e}") from e


class _StructDeserializer(Deserializer):
    __slots__ = ()
    _format = ""

    def __call__(self, value, ctx=None):
        if value is None:
            return None
        try:
            return struct.unpack(self._format, value)[0]
        except struct.error as e:
            raise SerializationError(f"{type(self).__name__}: {len(value)} bytes are not a {self._format} ({e})") from e


class IntegerSerializer(_Struct):
    """A signed 32-bit integer, 4 bytes big-endian (Java's IntegerSerializer)."""
    __slots__ = ()
    _format, _kinds = ">i", (int,)


class IntegerDeserializer(_StructDeserializer):
    __slots__ = ()
    _format = ">i"


class DoubleSerializer(_Struct):
    """An IEEE 754 double, 8 bytes big-endian (Java's DoubleSerializer)."""
    __slots__ = ()
    _format, _kinds = ">d", (float, int)


class DoubleDeserializer(_StructDeserializer):
    __slots__ = ()
    _format = ">d"


class JSONSerializer(Serializer):
    """An object as UTF-8 JSON text, with no schema.

    Not confluent-kafka's ``confluent_kafka.schema_registry.json_schema.JSONSerializer``: that one
    needs a Schema Registry, validates against a JSON schema and frames the bytes with a magic byte
    and a schema id. This writes bare JSON (what Kafka Connect's JsonConverter writes with
    ``schemas.enable=false``); ``to_dict(obj, ctx)`` turns an object into something JSON can write.
    """
    __slots__ = ("to_dict",)

    def __init__(self, to_dict=None):
        self.to_dict = to_dict

    def __call__(self, obj, ctx=None):
        if obj is None:
            return None
        if self.to_dict is not None:
            obj = self.to_dict(obj, ctx)
        try:
            return json.dumps(obj, separators=(",", ":")).encode()
        except (TypeError, ValueError) as e:
            raise SerializationError(f"JSONSerializer: {e}") from e


class JSONDeserializer(Deserializer):
    """UTF-8 JSON text back to an object, with no schema and no Schema Registry (see
    :class:`JSONSerializer`); ``from_dict(data, ctx)`` builds an object from what JSON read."""
    __slots__ = ("from_dict",)

    def __init__(self, from_dict=None):
        self.from_dict = from_dict

    def __call__(self, value, ctx=None):
        if value is None:
            return None
        try:
            obj = json.loads(value)
        except (UnicodeError, ValueError) as e:
            raise SerializationError(f"JSONDeserializer: {e}") from e
        return self.from_dict(obj, ctx) if self.from_dict is not None else obj
