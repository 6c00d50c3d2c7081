"""confluent-kafka's ``SerializingProducer`` and ``DeserializingConsumer``: clients that turn keys and
values into bytes and back with the serializers named in their configuration.

    p = SerializingProducer({"bootstrap.servers": servers, "key.serializer": StringSerializer(),
                             "value.serializer": JSONSerializer()})
    p.produce("orders", key="user-1", value={"total": 12})

    c = DeserializingConsumer({"bootstrap.servers": servers, "group.id": "billing",
                               "key.deserializer": StringDeserializer(), "value.deserializer": JSONDeserializer()})
    c.subscribe(["orders"])
    msg = c.poll(1.0)          # msg.value() == {"total": 12}; a message with an error raises ConsumeError

A serializer failing raises Key/ValueSerializationError (nothing is queued); a deserializer failing
raises Key/ValueDeserializationError carrying the message (its position already advanced past it).
"""
from __future__ import annotations

from broker.client.consumer import Consumer
from broker.client.error import (ConsumeError, KeyDeserializationError, KeySerializationError,
                                 ValueDeserializationError, ValueSerializationError)
from broker.client.producer import Producer
from broker.client.serialization import MessageField, SerializationContext

__all__ = ["DeserializingConsumer", "SerializingProducer"]


def _take(conf: dict | None, kwargs: dict, names: tuple[str, ...]):
    values = {**(conf or {}), **kwargs}
    return [values.pop(n, None) for n in names], values


class SerializingProducer(Producer):
    """A :class:`Producer` whose ``produce`` serializes ``key`` and ``value`` with ``key.serializer``
    and ``value.serializer`` (callables ``(obj, ctx) -> bytes``; without one, bytes or str pass as is)."""

    def __init__(self, conf: dict | None = None, **kwargs):
        (self._key_serializer, self._value_serializer), rest = _take(conf, kwargs,
                                                                     ("key.serializer", "value.serializer"))
        super().__init__(rest)

    def produce(self, topic, key=None, value=None, partition=-1, on_delivery=None, timestamp=0, headers=None):
        ctx = SerializationContext(topic, MessageField.KEY, headers)
        if self._key_serializer is not None:
            try:
                key = self._key_serializer(key, ctx)
            except Exception as e:  # noqa: BLE001 - confluent's contract: any serializer failure
                raise KeySerializationError(exception=e) from e
        ctx.field = MessageField.VALUE
        if self._value_serializer is not None:
            try:
                value = self._value_serializer(value, ctx)
            except Exception as e:  # noqa: BLE001
                raise ValueSerializationError(exception=e) from e
        super().produce(topic, value, key, partition, on_delivery=on_delivery, timestamp=timestamp,
                        headers=headers)

    def produce_batch(self, *args, **kwargs):
        raise NotImplementedError("SerializingProducer serializes one record at a time: use produce(), "
                                  "or a Producer's produce_batch with bytes")


class DeserializingConsumer(Consumer):
    """A :class:`Consumer` whose ``poll`` deserializes keys and values with ``key.deserializer`` and
    ``value.deserializer``, and raises :class:`ConsumeError` for a message carrying an error
    (``_PARTITION_EOF`` included), as confluent-kafka's does."""

    def __init__(self, conf: dict | None = None, **kwargs):
        (self._key_deserializer, self._value_deserializer), rest = _take(
            conf, kwargs, ("key.deserializer", "value.deserializer"))
        super().__init__(rest)

    def poll(self, timeout: float | None = -1):
        msg = super().poll(timeout)
        if msg is None:
            return None
        if msg.error() is not None:
            raise ConsumeError(msg.error(), kafka_message=msg)
        # Both deserialized before either is set, as confluent-kafka's: the message an error carries
        # keeps the raw key and value, so the application can log or dead-letter them.
        ctx = SerializationContext(msg.topic(), MessageField.VALUE, msg.headers())
        value, key = msg.value(), msg.key()
        if self._value_deserializer is not None:
            try:
                value = self._value_deserializer(value, ctx)
            except Exception as e:  # noqa: BLE001
                raise ValueDeserializationError(exception=e, kafka_message=msg) from e
        if self._key_deserializer is not None:
            ctx.field = MessageField.KEY
            try:
                key = self._key_deserializer(key, ctx)
            except Exception as e:  # noqa: BLE001
                raise KeyDeserializationError(exception=e, kafka_message=msg) from e
        msg.set_key(key)
        msg.set_value(value)
        return msg

    def consume(self, num_messages: int = 1, timeout: float | None = -1):
        raise NotImplementedError("DeserializingConsumer has no consume(): use poll(), as in confluent-kafka")

    def poll_batch(self, *args, **kwargs):
        raise NotImplementedError("DeserializingConsumer deserializes one message at a time: use poll()")
