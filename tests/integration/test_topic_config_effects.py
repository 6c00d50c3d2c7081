"""Topic configs have Kafka's effect on a real broker process."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

WEEK = 604_800_000


def _produce(bootstrap: str, topic: str, count: int, timestamp: int) -> None:
    errors = []
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                   "on_delivery": lambda err, msg: err and errors.append(err)}) as p:
        for i in range(count):
            p.produce(topic, key=b"k%d" % i, value=b"v", partition=0, timestamp=timestamp)
            p.flush(30)
    assert not errors, errors


def test_records_without_timestamps_are_kept_for_retention_ms(broker_factory):
    """Records produced with NO_TIMESTAMP (-1) age by their segment file's last-modified time
    (Kafka's ``LogSegment.largestTimestamp``), not as if written in 1970: with retention.ms of a
    week they survive retention passes that remove another topic's week-old segments."""
    broker = broker_factory({"log.retention.check.interval.ms": 100})
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        for name in ("untimed", "expired"):
            admin.create_topics([NewTopic(name, 1, 1, {"segment.bytes": "1000", "retention.ms": str(WEEK)})])[name].result(30)
    _produce(broker.bootstrap, "untimed", 3, -1)

    with Consumer({"bootstrap.servers": broker.bootstrap}) as consumer:
        def low(topic):
            return consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[0]
        # Two passes of the retention thread over every partition, each seen by a long-expired record
        # of another topic being removed.
        for passes in (1, 2):
            _produce(broker.bootstrap, "expired", 1, 1)
            wait_until(lambda: low("expired") == passes, 20, message="retention removed the expired record")
        assert consumer.get_watermark_offsets(TopicPartition("untimed", 0), 10) == (0, 3)
