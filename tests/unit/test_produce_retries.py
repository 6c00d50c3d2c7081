"""What counts against ``retries`` and what a record that runs out of ``delivery.timeout.ms`` while
being retried reports, as librdkafka's ``rd_kafka_handle_Produce_error`` decides: a refusal that
only says the metadata was stale (the broker wrote nothing: NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PART) is retried without counting, so ``retries=0`` still
follows a leader that moved; a broken connection or any other retriable error counts; a record whose
message.timeout.ms passed is reported ``_MSG_TIMED_OUT``. Driven directly: no thread, no broker."""
from __future__ import annotations

import pytest

from broker.client.delivery_report import delivery_error
from broker.client.producer_batch import ProducerBatch
from broker.client.send_policy import SendLimits, SendPolicy
from broker.clock import ManualClock
from broker.errors import (KafkaTimeoutError, LeaderNotAvailableError, NetworkError, NotEnoughReplicasError,
                           NotLeaderOrFollowerError)
from broker.errors.kafka_error import KafkaError
from tests.simulation.producer_sim import _Records

pytestmark = pytest.mark.unit
KEY = ("t", 0)
# SendPolicy.failed still counts every retry and reports the last error at delivery.timeout.ms
# (Kafka's Java client's way); the change to librdkafka's is proposed, not applied yet.


def _policy(**limits) -> SendPolicy:
    p = SendPolicy(SendLimits(**{"idempotent": False, "backoff": 0.0, "settle_time": 0.0, **limits}), ManualClock())
    p.enqueue(ProducerBatch("t", 0, b"", _Records([0]), None, 0.0, size=100))
    return p


def _fail(p: SendPolicy, error, now: float = 0.0):
    sent, _ = p.take([KEY], now)
    assert sent, "the batch should have been sendable"
    p.dispatched(0, sent)
    p.answered(0, [sent])
    return p.failed(KEY, sent[0][1], error, now)


@pytest.mark.parametrize("error", [NotLeaderOrFollowerError("moved"), LeaderNotAvailableError("electing")])
def test_retries_0_still_follows_a_leader_that_moved(error):
    p = _policy(retries=0)
    for _ in range(3):
        given_up, _ = _fail(p, error)
        assert given_up == [], "a stale-metadata refusal wrote nothing: retried without counting"
    given_up, reported = _fail(p, NotEnoughReplicasError("1 of 3 in sync"))
    assert len(given_up) == 1 and isinstance(reported, NotEnoughReplicasError)


def test_a_broken_connection_counts_as_a_retry():
    p = _policy(retries=1)
    assert _fail(p, NetworkError("broken"))[0] == []
    given_up, reported = _fail(p, NetworkError("broken again"))
    assert len(given_up) == 1 and isinstance(reported, NetworkError)


def test_a_record_out_of_delivery_timeout_while_retried_reports_msg_timed_out():
    p = _policy(delivery_timeout=1.0)
    assert _fail(p, NotEnoughReplicasError("1 of 3 in sync"), now=0.5)[0] == []
    given_up, reported = _fail(p, NotEnoughReplicasError("1 of 3 in sync"), now=1.5)
    assert len(given_up) == 1 and isinstance(reported, KafkaTimeoutError)
    assert delivery_error(reported).code() == KafkaError._MSG_TIMED_OUT
    assert "NOT_ENOUGH_REPLICAS" in str(reported) or "1 of 3 in sync" in str(reported)
