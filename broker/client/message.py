"""Messages and topic-partitions, shaped as confluent-kafka's so code ports without change."""
from __future__ import annotations

from broker.errors.kafka_error import KafkaError

OFFSET_BEGINNING = -2
OFFSET_END = -1
OFFSET_STORED = -1000
OFFSET_INVALID = -1001

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2


class TopicPartition:
    """A topic, a partition and (optionally) an offset."""

    __slots__ = ("topic", "partition", "offset", "metadata", "leader_epoch", "error")

    def __init__(self, topic: str, partition: int = -1, offset: int = OFFSET_INVALID,
                 metadata: str | None = None, leader_epoch: int | None = None):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error = None

    def _key(self):
        return self.topic, self.partition

    def __eq__(self, other):
        return isinstance(other, TopicPartition) and (self.topic, self.partition, self.offset) == (
            other.topic, other.partition, other.offset)

    def __hash__(self):
        return hash((self.topic, self.partition))

    def __lt__(self, other):
        return (self.topic, self.partition) < (other.topic, other.partition)

    def __repr__(self):
        return f"TopicPartition{{topic={self.topic},partition={self.partition},offset={self.offset},error={self.error}}}"


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
        """(timestamp type, ms since the epoch) as confluent-kafka returns it."""
        if self._timestamp < 0:
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

    def __len__(self):
        return 0 if self._value is None else len(self._value)

    def __repr__(self):
        if self._error is not None:
            return f"Message(error={self._error!r})"
        return f"Message({self._topic}[{self._partition}]@{self._offset}, key={self._key!r})"
