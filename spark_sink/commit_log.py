"""Where the driver records its commit decisions: the compacted topic ``riverlog-sink-commits``.

One record per sink id (the latest decision; older ones are compacted away), written with
``acks=all`` before any transaction of the batch ends. The latest record of a sink is found by
reading the partition backwards from its end in windows, so a lookup costs the same however
long the topic is.
"""
from __future__ import annotations

import threading

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.errors import RiverlogError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from spark_sink.protocol import Decision, decision_key

TOPIC = "riverlog-sink-commits"
_WINDOW = 256
_created: set[str] = set()
_created_lock = threading.Lock()


class CommitLog:
    def __init__(self, config: dict, topic: str = TOPIC):
        self.config = config
        self.topic = topic

    def ensure_topic(self) -> None:
        """Create the topic once per process (a no-op when it exists)."""
        with _created_lock:
            if (self.config["bootstrap.servers"], self.topic) in _created:
                return
        admin = AdminClient(self.config)
        try:
            admin.create_topics([NewTopic(self.topic, 1, config={"cleanup.policy": "compact"})])[self.topic].result()
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
        with _created_lock:
            _created.add((self.config["bootstrap.servers"], self.topic))

    def record(self, decision: Decision, timeout: float = 30.0) -> None:
        """Write ``decision`` and wait until every in-sync replica has it."""
        self.ensure_topic()
        errors: list = []
        producer = Producer({**self.config, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
        try:
            producer.produce(self.topic, value=decision.to_value(), key=decision.key(), partition=0,
                             on_delivery=lambda err, msg: err is not None and errors.append(err))
            left = producer.flush(timeout)
        finally:
            producer.close(1)
        if errors:
            raise errors[0]
        if left:
            raise RiverlogError(f"the commit decision of batch {decision.batch_id} was not acknowledged in {timeout}s")

    def latest(self, sink_id: str, timeout: float = 30.0) -> Decision | None:
        """The last decision recorded for ``sink_id``, or None."""
        key = decision_key(sink_id)
        consumer = Consumer({**self.config, "group.id": "", "enable.auto.commit": False,
                             "isolation.level": "read_uncommitted", "auto.offset.reset": "earliest"})
        try:
            tp = TopicPartition(self.topic, 0)
            try:
                low, high = consumer.get_watermark_offsets(tp, timeout)
            except UnknownTopicOrPartitionError:
                return None  # nothing was ever decided on this cluster
            end = high
            while end > low:
                start = max(low, end - _WINDOW)
                found = _last_with_key(consumer, tp, start, end, key, timeout)
                if found is not None:
                    return Decision.from_value(found)
                end = start
            return None
        finally:
            consumer.close()


def _last_with_key(consumer, tp: TopicPartition, start: int, end: int, key: bytes, timeout: float):
    """The value of the last record with ``key`` in offsets [start, end) (compaction leaves gaps)."""
    consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
    found = None
    while True:
        messages = consumer.consume(1000, min(timeout, 2.0))
        if not messages:
            return found
        for m in messages:
            if m.error() is not None:
                raise RiverlogError(f"reading {tp.topic}: {m.error()}")
            if m.offset() >= end:
                return found
            if m.key() == key:
                found = m.value()
            if m.offset() == end - 1:
                return found
