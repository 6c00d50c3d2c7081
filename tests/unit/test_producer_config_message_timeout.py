"""``message.timeout.ms=0`` (``delivery.timeout.ms``) is librdkafka's "never time out" (its
CONFIGURATION.md: "A time of 0 is infinite"): accepted, and the send policy then neither expires a
queued record nor gives up a retried one for its age. Driven directly: no thread, no broker."""
from __future__ import annotations

import math

import pytest

from broker.client.config import PRODUCER_CONFIG, client_config
from broker.client.producer_batch import ProducerBatch
from broker.client.send_policy import SendLimits, SendPolicy
from broker.clock import ManualClock
from broker.errors import InvalidConfigError, NotEnoughReplicasError
from tests.simulation.producer_sim import _Records

pytestmark = pytest.mark.unit
KEY = ("t", 0)
A_DAY = 86_400.0


@pytest.mark.parametrize("name", ["message.timeout.ms", "delivery.timeout.ms"])
def test_zero_is_accepted_and_means_never(name):
    cfg = client_config(PRODUCER_CONFIG, {name: 0}, {})
    assert cfg["delivery.timeout.ms"] == 0
    assert SendLimits.from_config(cfg, idempotent=False).delivery_timeout == math.inf


def test_a_negative_timeout_is_still_refused():
    with pytest.raises(InvalidConfigError):
        client_config(PRODUCER_CONFIG, {"message.timeout.ms": -1}, {})


def _policy() -> SendPolicy:
    cfg = client_config(PRODUCER_CONFIG, {"message.timeout.ms": 0, "retry.backoff.ms": 0}, {})
    p = SendPolicy(SendLimits.from_config(cfg, idempotent=False), ManualClock())
    p.enqueue(ProducerBatch("t", 0, b"", _Records([0, 1]), None, 0.0, size=100))
    return p


def test_a_queued_record_never_expires():
    p = _policy()
    assert p.expire(A_DAY) == []
    assert p.queued(), "the record waits for a leader however long it takes"


def test_a_retried_record_is_never_given_up_for_its_age():
    p = _policy()
    for attempt in range(3):
        now = A_DAY * (attempt + 1)
        sent, _ = p.take([KEY], now)
        assert sent, "the batch should be sendable again"
        p.dispatched(0, sent)
        p.answered(0, [sent])
        given_up, _ = p.failed(KEY, sent[0][1], NotEnoughReplicasError("1 of 3 in sync"), now)
        assert given_up == [], f"given up after {now} s with message.timeout.ms=0"
