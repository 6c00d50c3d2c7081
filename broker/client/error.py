"""confluent-kafka's ``confluent_kafka.error``: the errors the serializing clients raise.

    try:
        msg = consumer.poll(1.0)                 # a DeserializingConsumer
    except KeyDeserializationError as e:
        print(e.code == KafkaError._KEY_DESERIALIZATION, e.kafka_message.offset(), e.exception)

Each is a :class:`~broker.errors.KafkaException` (Riverlog's ``RiverlogError``) whose ``args[0]``
is the :class:`KafkaError`; ``exception`` is the error that caused it (a serializer's exception)
and ``kafka_message`` the message concerned. They are raised in the client, never sent by a broker,
so they have no wire code of their own.
"""
from __future__ import annotations

from broker.client.message import Message
from broker.errors import KafkaError, KafkaException

__all__ = ["ConcurrentModificationException", "ConsumeError", "IllegalStateException", "KafkaError", "KafkaException",
           "KeyDeserializationError", "KeySerializationError", "Message", "ProduceError", "SerializationError",
           "ValueDeserializationError", "ValueSerializationError"]


class IllegalStateException(RuntimeError):
    """confluent-kafka's ShareConsumer raises it for a call in the wrong state. Riverlog has no
    share groups (KIP-932), so nothing raises it; it is here so ``except`` clauses naming it import."""


class ConcurrentModificationException(RuntimeError):
    """confluent-kafka's ShareConsumer raises it when used from two threads at once; as
    :class:`IllegalStateException`, nothing in Riverlog raises it."""


class SerializationError(KafkaException):
    """A serializer or deserializer failed (``confluent_kafka.serialization.SerializationError``)."""


class _KafkaClientError(KafkaException):
    _default_code = KafkaError._FAIL

    def __new__(cls, *args, **kwargs):
        # Not the typed error the KafkaError stands for (KafkaException's rule): this class itself.
        return Exception.__new__(cls)

    def __init__(self, kafka_error: KafkaError | str | None = None, exception: BaseException | None = None,
                 kafka_message=None, **details):
        if not isinstance(kafka_error, KafkaError):
            reason = kafka_error or (str(exception) if exception is not None else None)
            kafka_error = KafkaError(self._default_code, reason)
        super().__init__(kafka_error.str(), **details)
        self.args = (kafka_error,)
        self.exception = exception
        self.kafka_message = kafka_message

    @property
    def name(self) -> str:
        return self.args[0].name()

    def __reduce__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("message", "details")}
        return _rebuild, (type(self), self.args[0], self.details), state


def _rebuild(cls, kafka_error, details):
    return cls(kafka_error, **details)


class _Code:
    """confluent's ``e.code``: the KafkaError's code (on the class: the code its errors default to).
    Set after the class exists, so the error registry, which keys classes by a ``code`` in their
    body, does not take it for a wire code."""

    def __get__(self, instance, owner):
        return owner._default_code if instance is None else instance.args[0].code()


_KafkaClientError.code = _Code()


class ConsumeError(_KafkaClientError):
    """Consuming a message failed."""


class ProduceError(_KafkaClientError):
    """Producing a message failed."""


class KeyDeserializationError(ConsumeError, SerializationError):
    _default_code = KafkaError._KEY_DESERIALIZATION


class ValueDeserializationError(ConsumeError, SerializationError):
    _default_code = KafkaError._VALUE_DESERIALIZATION


class KeySerializationError(ProduceError, SerializationError):
    _default_code = KafkaError._KEY_SERIALIZATION


class ValueSerializationError(ProduceError, SerializationError):
    _default_code = KafkaError._VALUE_SERIALIZATION
