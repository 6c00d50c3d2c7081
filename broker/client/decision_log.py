"""The decisions topic: where exactly-once committers record each batch's :class:`Decision` durably
(``acks=all``) before ending any of its transactions, and where a replay finds it again.

**Decision records** (the format this module owns): key = the owner id in UTF-8; value = compact
JSON ``{"attempts": [{"producer_epoch": E, "producer_id": P, "transactional_id": T}, ...],
"batch_id": B, "sink_id": OWNER}`` with sorted keys. The ``sink_id`` name predates Streams and
Connect; it stays so that decisions recorded earlier still read. Only an owner's latest decision
matters (the replay is of the last batch at most, and batch ids only grow), so the topic is
compacted and a lookup reads the partition backwards from its end in windows: it costs the same
however long the topic is.
"""
from __future__ import annotations

import threading
import time

from broker.client.admin import AdminClient, NewTopic
from broker.client.batch_decision import Decision, decision_key
from broker.client.consumer import Consumer
from broker.client.message import TopicPartition
from broker.client.producer import Producer
from broker.errors import KafkaTimeoutError, RiverlogError, TopicAlreadyExistsError, UnknownTopicOrPartitionError

DECISION_LOG_REPLICAS = 3

DECISIONS_TOPIC = "riverlog-sink-commits"

_WINDOW = 256
_created: set[tuple[str, str]] = set()
_created_lock = threading.Lock()


class DecisionLog:
    """The compacted topic where committers record their decisions (format: the module's docstring).

    ``config`` holds connection settings only (``bootstrap.servers``, ``request.timeout.ms``, ...)."""

    def __init__(self, config: dict, topic: str = DECISIONS_TOPIC):
        self.config = config
        self.topic = topic

    def ensure_topic(self) -> None:
        """Create the topic once per process (a no-op when it exists), replicated as Kafka's own
        transaction log is (``transaction.state.log.replication.factor`` 3 and ``.min.isr`` 2),
        capped by the brokers there are: on ``default.replication.factor`` (1) a single broker
        down would stop every exactly-once writer."""
        with _created_lock:
            if (self.config["bootstrap.servers"], self.topic) in _created:
                return
        admin = AdminClient(self.config)
        try:
            replicas = min(DECISION_LOG_REPLICAS, max(1, len(admin.list_topics(timeout=30).brokers)))
            admin.create_topics([NewTopic(self.topic, 1, replicas, config={
                "cleanup.policy": "compact", "min.insync.replicas": str(min(2, replicas))})])[self.topic].result()
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
            raise errors[0].exception()
        if left:
            raise RiverlogError(f"the decision of batch {decision.batch_id} was not acknowledged in {timeout}s")

    def latest(self, owner: str, timeout: float = 30.0) -> Decision | None:
        """The last decision recorded for ``owner``, or None."""
        key = decision_key(owner)
        consumer = Consumer({**self.config, "group.id": "", "enable.auto.commit": False,
                             "isolation.level": "read_uncommitted", "auto.offset.reset": "earliest"})
        try:
            tp = TopicPartition(self.topic, 0)
            info = consumer.list_topics(self.topic, timeout).topics.get(self.topic)
            if info is None or isinstance(info.error, UnknownTopicOrPartitionError):
                return None  # nothing was ever decided on this cluster (offsets would wait for the topic)
            if info.error is not None:
                raise info.error
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


def _last_with_key(consumer: Consumer, tp: TopicPartition, start: int, end: int, key: bytes, timeout: float):
    """The value of the last record with ``key`` in offsets [start, end) (compaction leaves gaps).

    Only reaching ``end`` ends the scan: a quiet fetch on a loaded machine is not the end of the
    log, and stopping there could miss a recorded decision and write a decided batch twice. The
    cleaner never removes a log's last record, so a record at or past ``end`` always arrives."""
    consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
    found = None
    deadline = time.monotonic() + timeout
    while True:
        messages = consumer.consume(1000, max(0.05, min(deadline - time.monotonic(), 1.0)))
        for m in messages:
            if m.error() is not None:
                raise RiverlogError(f"reading {tp.topic}: {m.error()}")
            if m.offset() >= end:
                return found
            if m.key() == key:
                found = m.value()
            if m.offset() == end - 1:
                return found
        if not messages:
            position = consumer.position([TopicPartition(tp.topic, tp.partition)])[0].offset
            if position >= end:
                return found
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"reading the decisions in {tp.topic}-{tp.partition}: offsets up to {end} "
                                        f"did not arrive within {timeout}s (at {position}); retry the batch")
