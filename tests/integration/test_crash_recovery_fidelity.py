"""kill -9 of a broker process, then damage under its data directory outside the unflushed tail:
recovery repairs what is damaged and keeps every fsynced segment after it, as Kafka's ``LogLoader``
does (a segment repaired below the recovery point is cut alone)."""
from __future__ import annotations

import os
import time

import pytest

from broker.client import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from broker.storage.log_loader import RECOVERY_POINT_FILE
from tests.conftest import wait_until
from tests.integration.test_produce_consume import create

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def produce(servers: str, topic: str, count: int, start: int = 0) -> dict[int, bytes]:
    """offset -> value of ``count`` acknowledged records, one per batch."""
    acked: dict[int, bytes] = {}

    def on_delivery(err, msg):
        assert err is None, err
        acked[msg.offset()] = msg.value()

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0, "on_delivery": on_delivery})
    for i in range(start, start + count):
        producer.produce(topic, value=b"%06d:" % i + b"x" * 300, key=b"k%d" % i,
                         timestamp=1_700_000_000_000 + i)
        producer.flush(30)
    producer.close()
    assert len(acked) == count
    return acked


def consume_all(servers: str, topic: str) -> dict[int, bytes]:
    consumer = Consumer({"bootstrap.servers": servers, "check.crcs": True})
    tp = TopicPartition(topic, 0)
    end = consumer.get_watermark_offsets(tp, 10)[1]
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    stored: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    try:
        while (not stored or max(stored) < end - 1) and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 1.0):
                assert m.error() is None, m.error()
                stored[m.offset()] = m.value()
    finally:
        consumer.close()
    return stored


def test_garbage_after_a_rolled_segment_loses_nothing_after_kill9(broker_factory, topic_name):
    broker = broker_factory()
    create(broker.bootstrap, topic_name, 1, segment_bytes=4096)
    acked = produce(broker.bootstrap, topic_name, 60)
    partition_dir = os.path.join(broker.data_dir, f"{topic_name}-0")
    logs = sorted(n for n in os.listdir(partition_dir) if n.endswith(".log"))
    assert len(logs) >= 4, logs
    broker.kill9()

    recovery_point = int(open(os.path.join(partition_dir, RECOVERY_POINT_FILE)).read())
    victim = os.path.join(partition_dir, logs[1])
    assert int(logs[2][:-4]) <= recovery_point  # the victim was rolled, hence fsynced
    size = os.path.getsize(victim)
    with open(victim, "ab") as f:
        f.write(os.urandom(150))  # damage past its last batch: no record is touched
    broker.restart()

    stored = consume_all(broker.bootstrap, topic_name)
    missing = sorted(o for o, v in acked.items() if stored.get(o) != v)
    assert not missing, f"{len(missing)} acknowledged records lost after recovery, from offset {missing[0]}"
    assert os.path.getsize(victim) == size
    assert sorted(n for n in os.listdir(partition_dir) if n.endswith(".log"))[:len(logs)] == logs

    more = produce(broker.bootstrap, topic_name, 3, start=60)
    assert min(more) == max(acked) + 1
    wait_until(lambda: len(consume_all(broker.bootstrap, topic_name)) == 63, timeout=30,
               message="the records written after recovery")
