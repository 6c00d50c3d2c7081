"""``sticky.partitioning.linger.ms`` as librdkafka's sticky partitioner (``rd_kafka_msg_sticky_partition``):
unkeyed records stick to one random partition that long (default twice ``linger.ms``), then a new
random one is picked; 0 sends each unkeyed record to a random partition; a kept partition that
loses its leader is left at once. Driven through the sender's drain with a manual clock: no
thread, no broker."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.client.accumulator import RecordAccumulator, TopicBuffer
from broker.client.config import PRODUCER_CONFIG, client_config
from broker.client.send_policy import SendLimits
from broker.client.sender import Sender
from broker.clock import ManualClock
from broker.errors import InvalidConfigError

pytestmark = pytest.mark.unit
PARTITIONS = 6


class _Cluster:
    """A topic of ``PARTITIONS`` partitions whose leaders a test sets (-1: none)."""
    timeout = 30.0

    def __init__(self):
        self.leaders = dict.fromkeys(range(PARTITIONS), 0)

    def topic(self, name, refresh_if_missing=True, timeout=None):
        return SimpleNamespace(partitions={p: SimpleNamespace(leader=l) for p, l in self.leaders.items()})

    def leader(self, topic, partition):
        return self.leaders[partition]


def _sender(**config):
    cfg = client_config(PRODUCER_CONFIG, {"bootstrap.servers": "127.0.0.1:1", "enable.idempotence": False,
                                          **config}, {})
    clock = ManualClock()
    sender = Sender(cfg, SendLimits.from_config(cfg, idempotent=False), -1, _Cluster(),
                    RecordAccumulator(0.0, cfg["batch.size"], cfg["buffer.memory"]), lambda *a: None, clock=clock)
    return sender, clock


def _drain(sender, records: int = 1) -> set[int]:
    """Drain ``records`` small unkeyed records; the partitions they were queued for."""
    before = {key: len(p.queue) for key, p in sender.policy.partitions.items()}
    buf = TopicBuffer(sender.clock.monotonic())
    for _ in range(records):
        buf.append_row(None, b"v", 1, size=33)
    sender._enqueue("t", buf)
    return {key[1] for key, p in sender.policy.partitions.items() if len(p.queue) > before.get(key, 0)}


def test_the_default_is_twice_linger_ms_as_librdkafkas():
    from broker.client.config import sticky_linger_s
    assert sticky_linger_s(client_config(PRODUCER_CONFIG, {}, {})) == pytest.approx(0.010)
    assert sticky_linger_s(client_config(PRODUCER_CONFIG, {"linger.ms": 100}, {})) == pytest.approx(0.2)
    assert sticky_linger_s(client_config(PRODUCER_CONFIG, {"linger.ms": 800_000}, {})) == pytest.approx(900.0)
    cfg = client_config(PRODUCER_CONFIG, {"linger.ms": 100, "sticky.partitioning.linger.ms": 0}, {})
    assert sticky_linger_s(cfg) == 0


def test_out_of_range_is_refused_by_name():
    with pytest.raises(InvalidConfigError, match="sticky.partitioning.linger.ms"):
        client_config(PRODUCER_CONFIG, {"sticky.partitioning.linger.ms": 900_001}, {})


def test_zero_sends_each_unkeyed_record_to_a_random_partition():
    sender, _ = _sender(**{"sticky.partitioning.linger.ms": 0})
    assert len(_drain(sender, 60)) > 1, "60 records of one drain all went to one partition"


def test_a_partition_is_kept_for_the_linger_then_another_is_picked_at_random():
    sender, clock = _sender(**{"sticky.partitioning.linger.ms": 1000})
    first = _drain(sender)
    for _ in range(4):
        clock.advance(240)
        assert _drain(sender) == first, "drains within sticky.partitioning.linger.ms moved on"
    picked = set()
    for _ in range(30):
        clock.advance(1000)
        picked |= _drain(sender)
    assert len(picked) > 1, "a new sticky partition is picked once the linger passed"


def test_a_kept_partition_without_a_leader_is_left_at_once():
    sender, clock = _sender(**{"sticky.partitioning.linger.ms": 60_000})
    (kept,) = _drain(sender)
    sender.cluster.leaders[kept] = -1
    clock.advance(1)
    (moved,) = _drain(sender)
    assert moved != kept
    sender.cluster.leaders[kept] = 0
    clock.advance(1)
    assert _drain(sender) == {moved}, "the new partition is kept for its own linger"
