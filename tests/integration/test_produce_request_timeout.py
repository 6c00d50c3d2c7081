"""A broker that stops answering (frozen, or gone without closing the connection) must not hold a
producer's records forever: librdkafka fails a request unanswered past its timeout and retries it,
and reports ``_MSG_TIMED_OUT`` for a record out of ``message.timeout.ms``."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, KafkaError, NewTopic, Producer
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_frozen_broker_fails_in_flight_records_at_delivery_timeout_then_recovers(broker_factory, topic_name):
    node = broker_factory()
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    reports = []
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0, "request.timeout.ms": 500,
                         "delivery.timeout.ms": 3000, "on_delivery": lambda err, msg: reports.append((err, msg))})
    try:
        producer.produce(topic_name, value=b"before")
        assert producer.flush(30) == 0
        node.pause()
        try:
            producer.produce(topic_name, value=b"while frozen")
            wait_until(lambda: len(reports) == 2 or producer.poll(0.05) and len(reports) == 2, 20, 0.05,
                       "the in-flight record's delivery report")
        finally:
            node.resume()
        err, msg = reports[1]
        assert err is not None and err.code() == KafkaError._MSG_TIMED_OUT, err
        assert msg.value() == b"while frozen"
        producer.produce(topic_name, value=b"after")
        assert producer.flush(30) == 0
        assert [m.value() for e, m in reports[2:] if e is None] == [b"after"]
    finally:
        producer.close(10)
