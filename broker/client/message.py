"""Messages and topic-partitions, shaped as confluent-kafka's so code ports without change."""
from __future__ import annotations

import operator

from broker.errors.kafka_error import KafkaError

OFFSET_BEGINNING = -2
OFFSET_END = -1
OFFSET_STORED = -1000
OFFSET_INVALID = -1001

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2


class TopicPartition:
    """A topic, a partition and (optionally) an offset, committed metadata and leader epoch,
    behaving as confluent-kafka's C type does so code that sorts, hashes or prints them ports as is:

    - equal, hashed and ordered by (topic, partition) only: ``TopicPartition("t", 0, 5) ==
      TopicPartition("t", 0, 9)``, so a set of them holds each partition once whatever its offset;
    - comparing with anything that is not a TopicPartition raises ``NotImplementedError``;
    - ``topic``, ``metadata``, ``leader_epoch`` and ``error`` are read-only; ``partition`` and
      ``offset`` may be set; a negative ``leader_epoch`` reads as None;
    - ``repr`` and ``str``: ``TopicPartition{topic=t,partition=0,offset=-1001,leader_epoch=None,error=None}``.

        TopicPartition("orders", 3, OFFSET_BEGINNING)
    """

    __slots__ = ("_topic", "partition", "offset", "_metadata", "_leader_epoch", "_error")

    def __init__(self, topic: str, partition: int = -1, offset: int = OFFSET_INVALID,
                 metadata: str | None = None, leader_epoch: int | None = None):
        if not isinstance(topic, str):
            raise TypeError(f"TopicPartition's topic must be a str, not {type(topic).__name__}")
        if metadata is not None and not isinstance(metadata, str):
            raise TypeError(f"TopicPartition's metadata must be a str or None, not {type(metadata).__name__}")
        self._topic = topic
        self.partition = operator.index(partition)
        self.offset = operator.index(offset)
        self._metadata = metadata
        self._leader_epoch = None if leader_epoch is None or operator.index(leader_epoch) < 0 \
            else operator.index(leader_epoch)
        self._error = None

    topic = property(lambda self: self._topic, doc="The topic name.")
    metadata = property(lambda self: self._metadata, doc="Metadata committed with the offset, or None.")
    leader_epoch = property(lambda self: self._leader_epoch, doc="The offset's leader epoch, or None.")
    error = property(lambda self: self._error, doc="A KafkaError for this partition, or None.")

    def _key(self):
        return self._topic, self.partition

    def _other(self, other) -> "TopicPartition":
        if type(other) is not type(self):
            raise NotImplementedError(f"a TopicPartition compares only with a TopicPartition, not {type(other).__name__}")
        return other

    def __eq__(self, other):
        return self._key() == self._other(other)._key()

    def __ne__(self, other):
        return self._key() != self._other(other)._key()

    def __lt__(self, other):
        return self._key() < self._other(other)._key()

    def __le__(self, other):
        return self._key() <= self._other(other)._key()

    def __gt__(self, other):
        return self._key() > self._other(other)._key()

    def __ge__(self, other):
        return self._key() >= self._other(other)._key()

    def __hash__(self):
        return hash(self._topic) ^ self.partition

    def __repr__(self):
        epoch = "None" if self._leader_epoch is None else self._leader_epoch
        error = "None" if self._error is None else str(self._error)
        return (f"TopicPartition{{topic={self._topic},partition={self.partition},offset={self.offset},"
                f"leader_epoch={epoch},error={error}}}")

    __str__ = __repr__

    def __reduce__(self):
        return _rebuild_topic_partition, (self._topic, self.partition, self.offset, self._metadata,
                                          self._leader_epoch, self._error)


def _rebuild_topic_partition(topic, partition, offset, metadata, leader_epoch, error) -> TopicPartition:
    tp = TopicPartition(topic, partition, offset, metadata, leader_epoch)
    tp._error = error
    return tp


class Message:
    """One record as the consumer returns it, or a delivery report, or an error event, with
    confluent-kafka's constructor and accessors, so code (and tests) that build or read Messages port:

    - ``Message(topic, partition, offset, key, value, headers, error, timestamp, latency,
      leader_epoch, delivery_count)``, every argument optional, ``timestamp`` a (type, ms) tuple;
    - ``partition()``, ``offset()``, ``leader_epoch()``, ``latency()`` are None where there is none
      (partition -1, offset ``OFFSET_INVALID``, a negative epoch: a record that failed before reaching
      a partition, an error event, a Message built without them); ``timestamp()`` is
      (``TIMESTAMP_NOT_AVAILABLE``, 0) for a Message built without one;
    - equal when topic, partition, offset, key, value, headers, error, leader epoch and timestamp
      are (not latency), unhashable and unordered, as confluent's C type.

    ``error()`` is a :class:`~broker.kafka_error.KafkaError` (``code()``, ``name()``...) or None;
    ``error().exception()`` is Riverlog's typed error behind it (a typed error given as ``error``
    is wrapped; anything else is kept as given, as confluent-kafka keeps it).
    """

    __slots__ = ("_topic", "_partition", "_offset", "_key", "_value", "_headers", "_timestamp",
                 "_timestamp_type", "_error", "_latency", "_leader_epoch", "_delivery_count")

    def __init__(self, topic=None, partition: int = -1, offset: int = OFFSET_INVALID, key=None, value=None,
                 headers=None, error=None, timestamp=None, latency: float = -1.0, leader_epoch: int = -1,
                 delivery_count: int = -1):
        if timestamp is None:
            self._timestamp_type, self._timestamp = TIMESTAMP_NOT_AVAILABLE, 0
        elif isinstance(timestamp, tuple) and len(timestamp) == 2:
            self._timestamp_type, self._timestamp = operator.index(timestamp[0]), operator.index(timestamp[1])
        else:
            raise TypeError("timestamp must be a tuple of (int, int)")
        delivery_count = operator.index(delivery_count)
        if not -2**15 <= delivery_count < 2**15:
            raise OverflowError("delivery_count does not fit a signed 16-bit integer")
        partition, offset = operator.index(partition), operator.index(offset)
        leader_epoch = -1 if leader_epoch is None else operator.index(leader_epoch)
        latency = -1.0 if latency is None else float(latency)
        self._topic = topic
        self._partition = partition if partition >= 0 else -1
        self._offset = offset if offset >= 0 else OFFSET_INVALID
        self._key = key
        self._value = value
        self._headers = headers
        self._error = _as_error(error)
        self._latency = latency if latency >= 0 else None
        self._leader_epoch = leader_epoch if leader_epoch >= 0 else None
        self._delivery_count = delivery_count if delivery_count > 0 else None

    @classmethod
    def _record(cls, topic, partition, offset, key, value, headers, timestamp, timestamp_type, error=None,
                latency=None, leader_epoch=None) -> "Message":
        """The client's own constructor (the consumer's records and events, delivery reports): no
        argument parsing, once per record. A timestamp of -1 (Kafka's NO_TIMESTAMP) or None reads as
        (``TIMESTAMP_NOT_AVAILABLE``, -1), as librdkafka's ``rd_kafka_message_timestamp``."""
        m = cls.__new__(cls)
        m._topic, m._partition, m._offset = topic, partition, offset
        m._key, m._value, m._headers = key, value, headers
        if timestamp is None or timestamp == -1:
            m._timestamp_type, m._timestamp = TIMESTAMP_NOT_AVAILABLE, -1
        else:
            m._timestamp_type, m._timestamp = timestamp_type, timestamp
        m._error = None if error is None else KafkaError.of(error)
        m._latency, m._leader_epoch, m._delivery_count = latency, leader_epoch, None
        return m

    def topic(self):
        return self._topic

    def partition(self):
        """The partition, or None for librdkafka's "unassigned" (-1: the record failed before being
        partitioned); another negative one the application asked for is returned as it is."""
        return None if self._partition == -1 else self._partition

    def offset(self):
        """The record's offset; None for librdkafka's ``OFFSET_INVALID`` (an error event about no
        particular offset, a Message built without one). A delivery report without an offset
        (acks=0, a failed record) says -1, as Kafka's ``RecordMetadata``."""
        return None if self._offset == OFFSET_INVALID else self._offset

    def key(self):
        return self._key

    def value(self):
        return self._value

    def headers(self):
        """A list of (name, bytes) pairs, or None."""
        return self._headers

    def timestamp(self):
        """(timestamp type, ms since the epoch) as confluent-kafka returns it: a record's stored
        timestamp with its type, a negative one too (librdkafka's ``rd_kafka_message_timestamp``);
        (``TIMESTAMP_NOT_AVAILABLE``, -1) for a record without one."""
        return self._timestamp_type, self._timestamp

    def error(self):
        return self._error

    def latency(self):
        """Seconds from produce() to the delivery report (delivery reports only), else None."""
        return self._latency

    def leader_epoch(self):
        """The leader epoch of the record's partition when it was written, or None when unknown."""
        return self._leader_epoch

    def delivery_count(self):
        """A share group's delivery count: always None here (Riverlog has no share groups, KIP-932),
        unless given to the constructor."""
        return self._delivery_count

    def set_key(self, key):
        self._key = key

    def set_value(self, value):
        self._value = value

    def set_headers(self, headers):
        self._headers = headers

    def set_topic(self, topic):
        self._topic = topic

    def set_error(self, error):
        """Set the error (a KafkaError, a typed error or None), as confluent-kafka's Message does."""
        self._error = _as_error(error)

    def __len__(self):
        return 0 if self._value is None else len(self._value)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Message):
            return False
        return (self._topic == other._topic and self._value == other._value and self._key == other._key
                and self._headers == other._headers and self._error == other._error
                and self._partition == other._partition and self._offset == other._offset
                and self._leader_epoch == other._leader_epoch and self._timestamp == other._timestamp)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None  # equal by value and mutable (set_value...): unhashable, as confluent's

    def __reduce__(self):
        return Message, (self._topic, self._partition, self._offset, self._key, self._value, self._headers,
                         self._error, (self._timestamp_type, self._timestamp),
                         -1.0 if self._latency is None else self._latency,
                         -1 if self._leader_epoch is None else self._leader_epoch,
                         -1 if self._delivery_count is None else self._delivery_count)

    def __repr__(self):
        if self._error is not None:
            return f"Message(error={self._error!r})"
        return f"Message({self._topic}[{self._partition}]@{self._offset}, key={self._key!r})"


def _as_error(error):
    """A typed error (one with a ``kafka_code``) as its KafkaError; anything else as given."""
    if error is not None and not isinstance(error, KafkaError) and hasattr(error, "kafka_code"):
        return KafkaError.of(error)
    return error
