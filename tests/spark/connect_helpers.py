"""Small helpers the Connect Spark tests share: produce, read back with ``read_committed``."""
from __future__ import annotations

import time

from broker.client import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def produce(bootstrap: str, topic: str, values: list[bytes], keys: list[bytes | None] | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=None if keys is None else keys[i])
    assert p.flush(30) == 0
    p.close(1)


def read_committed(bootstrap: str, topic: str, timeout: float = 5.0) -> list:
    """Every committed record of ``topic`` (all partitions), in (partition, offset) order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        meta = c.list_topics(topic, timeout=30).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            return []
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)]
        ends = {tp.partition: c.get_watermark_offsets(TopicPartition(topic, tp.partition), 30)[1] for tp in tps}
        c.assign(tps)
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            positions = {p.partition: p.offset for p in c.position([TopicPartition(topic, q) for q in ends])}
            if all(positions[q] >= ends[q] for q in ends):
                break
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg)
        return sorted(out, key=lambda m: (m.partition(), m.offset()))
    finally:
        c.close()


def values(bootstrap: str, topic: str) -> list[bytes]:
    return [m.value() for m in read_committed(bootstrap, topic)]
