"""``batch.num.messages`` as librdkafka's: default 10000, the most records one batch holds, and a
buffer holding that many is sent without waiting for ``linger.ms``. Driven through the sender's
drain and the accumulator with a manual clock: no thread, no broker."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.client.accumulator import RecordAccumulator, TopicBuffer
from broker.client.config import PRODUCER_CONFIG, client_config
from broker.client.send_policy import SendLimits
from broker.client.sender import Sender
from broker.clock import ManualClock

pytestmark = pytest.mark.unit


class _Cluster:
    timeout = 30.0

    def topic(self, name, refresh_if_missing=True, timeout=None):
        return SimpleNamespace(partitions={0: SimpleNamespace(leader=0)})

    def leader(self, topic, partition):
        return 0


def _sender(**config) -> Sender:
    cfg = client_config(PRODUCER_CONFIG, {"bootstrap.servers": "127.0.0.1:1", "enable.idempotence": False,
                                          **config}, {})
    clock = ManualClock()
    accumulator = RecordAccumulator(cfg["linger.ms"] / 1000.0, cfg["batch.size"], cfg["buffer.memory"], clock,
                                    batch_records=cfg["batch.num.messages"])   # as the Producer makes it
    return Sender(cfg, SendLimits.from_config(cfg, idempotent=False), -1, _Cluster(), accumulator,
                  lambda *a: None, clock=clock)


def test_the_default_is_librdkafkas():
    assert client_config(PRODUCER_CONFIG, {}, {})["batch.num.messages"] == 10_000


def test_a_batch_holds_at_most_the_default_number_of_records():
    sender = _sender()
    buf = TopicBuffer(0.0)
    for i in range(25_000):
        buf.append_row(None, b"v", 1, partition=0, size=33)
    sender._enqueue("t", buf)
    counts = [b.count for b in sender.policy.partitions[("t", 0)].queue]
    assert sum(counts) == 25_000 and max(counts) == 10_000, counts


def test_a_buffer_of_batch_num_messages_records_does_not_wait_for_linger():
    sender = _sender(**{"linger.ms": 60_000, "batch.num.messages": 100})
    acc = sender.accumulator
    now = acc.clock.monotonic()
    for _ in range(99):
        acc.append("t", None, b"v", 1, None, -1, None, 33)
    with acc.cond:
        assert acc.wait_time(now) > 0 and acc.take_ready(now) == {}, "99 records wait for linger.ms"
    acc.append("t", None, b"v", 1, None, -1, None, 33)
    with acc.cond:
        assert acc.wait_time(now) == 0
        assert list(acc.take_ready(now)) == ["t"], "100 records are a batch's worth: due now"
