"""kill -9 during heavy produce: every acknowledged record survives, in order, and no partial batch
is ever served."""
from __future__ import annotations

import threading
import time

import pytest

from broker.client import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_produce_consume import create

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 3


class AckedLog:
    """What the producer was told: (partition, offset) -> value, from delivery reports."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0
        self.errors: list[str] = []

    def on_delivery(self, err, msg):
        with self.lock:
            if err is None:
                self.acked[(msg.partition(), msg.offset())] = msg.value()
            else:
                self.failed += 1
                if len(self.errors) < 5:
                    self.errors.append(f"{msg.partition()}: {err!r}")

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def produce_until(producer: Producer, topic: str, stop: threading.Event, counter: list) -> None:
    value = b"x" * 200
    while not stop.is_set():
        try:
            producer.produce(topic, value=b"%012d:" % counter[0] + value, key=b"k%d" % (counter[0] % 50))
            counter[0] += 1
        except BufferError:
            producer.poll(0.05)
        if counter[0] % 500 == 0:
            producer.poll(0)


@pytest.mark.parametrize("acks", ["1", "all"])
def test_kill9_during_heavy_produce_loses_nothing_acknowledged(broker_factory, topic_name, acks):
    broker = broker_factory({"log.segment.bytes": 256 * 1024})
    create(broker.bootstrap, topic_name, PARTITIONS)
    acked = AckedLog()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 2,
                         "batch.size": 64 * 1024, "retries": 1_000_000, "delivery.timeout.ms": 120_000,
                         "on_delivery": acked.on_delivery})
    stop, counter = threading.Event(), [0]
    writer = threading.Thread(target=produce_until, args=(producer, topic_name, stop, counter), daemon=True)
    writer.start()
    try:
        for round_ in range(3):
            target = acked.count() + 20_000
            wait_until(lambda: producer.poll(0.05) is not None and acked.count() >= target, timeout=60,
                       message=f"{target} acknowledged records before kill {round_ + 1}")
            broker.kill9()
            broker.restart()
    finally:
        stop.set()
        writer.join(30)
    assert producer.flush(120) == 0
    producer.close()
    assert acked.failed == 0, acked.errors

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "check.crcs": True})
    consumer.assign([TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    stored: dict[tuple[int, int], bytes] = {}
    ends = {}
    for p in range(PARTITIONS):
        ends[p] = consumer.get_watermark_offsets(TopicPartition(topic_name, p), 10)[1]
    deadline = time.monotonic() + 120
    while len(stored) < sum(ends.values()) and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            assert m.error() is None, m.error()
            stored[(m.partition(), m.offset())] = m.value()
    consumer.close()

    assert len(stored) == sum(ends.values()), "offsets below the log end could not all be read"
    missing = [k for k, v in acked.acked.items() if stored.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:3]}"
    for p in range(PARTITIONS):
        # Without idempotence a retry may write a batch twice (its first write landed but the answer
        # was lost in the kill): duplicates are allowed, reordering is not.
        sequence = [int(stored[(p, o)].split(b":")[0]) for o in range(ends[p])]
        seen, firsts = set(), []
        for n in sequence:
            if n not in seen:
                seen.add(n)
                firsts.append(n)
        wrong = [i for i in range(1, len(firsts)) if firsts[i] < firsts[i - 1]]
        assert not wrong, (f"partition {p} is out of produce order after recovery: "
                           f"{firsts[max(0, wrong[0] - 3): wrong[0] + 3]}")

