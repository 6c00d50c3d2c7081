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
    """One record as the consumer returns it, or a delivery report, or an error event.

    ``error()`` is a :class:`~broker.kafka_error.KafkaError` (``code()``, ``name()``...) or None;
    ``error().exception()`` is Riverlog's typed error behind it.
    """

    __slots__ = ("_topic", "_partition", "_offset", "_key", "_value", "_headers", "_timestamp",
                 "_timestamp_type", "_error", "_latency", "_leader_epoch")

    def __init__(self, topic=None, partition=-1, offset=-1, key=None, value=None, headers=None,
                 timestamp=-1, timestamp_type=TIMESTAMP_CREATE_TIME, error=None, latency=None,
                 leader_epoch=None):
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        if isinstance(timestamp, tuple):  # confluent's (type, ms)
            timestamp_type, timestamp = timestamp
        self._timestamp = -1 if timestamp is None else timestamp
        self._timestamp_type = timestamp_type
        self._error = KafkaError.of(error)
        self._latency = latency
        self._leader_epoch = leader_epoch

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

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
        (``TIMESTAMP_NOT_AVAILABLE``, -1) for none."""
        if self._timestamp == -1:
            return TIMESTAMP_NOT_AVAILABLE, -1
        return self._timestamp_type, self._timestamp

    def error(self):
        return self._error

    def latency(self):
        """Seconds from produce() to the delivery report (delivery reports only), else None."""
        return self._latency

    def leader_epoch(self):
        """The leader epoch of the record's partition when it was written, or None when unknown."""
        return self._leader_epoch

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
        self._error = KafkaError.of(error)

    def __len__(self):
        return 0 if self._value is None else len(self._value)

    def __repr__(self):
        if self._error is not None:
            return f"Message(error={self._error!r})"
        return f"Message({self._topic}[{self._partition}]@{self._offset}, key={self._key!r})"
