"""``error_cb`` runs from the ``poll()`` already waiting, as librdkafka's ``rd_kafka_poll`` returns once
it served an event: an error a background thread reports (all brokers down, a fatal producer error)
wakes it instead of waiting for the end of its timeout, and one queued before the call is served
without waiting. Each poll runs on its own thread, joined with a deadline far below its timeout."""
from __future__ import annotations

import threading

import pytest

from broker.client import Consumer, Producer
from broker.errors import KafkaError
from tests.conftest import wait_until

pytestmark = pytest.mark.unit

ERROR = KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down", retriable=True)


def _served_within(poll, report, deadline: float = 10.0) -> list:
    """Start ``poll`` (with a timeout of a minute) on a thread, ``report`` once it waits: what it returned."""
    out = []
    thread = threading.Thread(target=lambda: out.append(poll()), daemon=True)
    thread.start()
    report()
    thread.join(deadline)
    assert not thread.is_alive(), "poll() went on waiting with an error_cb event queued"
    return out


@pytest.mark.parametrize("queued_first", [True, False])
def test_producer_poll_serves_error_cb_at_once(queued_first):
    heard = []
    with Producer({"bootstrap.servers": "127.0.0.1:1", "error_cb": heard.append}) as p:
        if queued_first:
            p._events.error(ERROR)
        out = _served_within(lambda: p.poll(60), lambda: queued_first or p._events.error(ERROR))
        assert out == [1] and [e.code() for e in heard] == [KafkaError._ALL_BROKERS_DOWN]


def test_consumer_poll_serves_error_cb_while_it_waits():
    """A consumer's poll() goes on waiting for a record after running error_cb, as confluent-kafka's."""
    heard, ended = [], []
    c = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "error_cb": heard.append})

    def poll():
        try:
            c.poll(60)
        except RuntimeError as e:  # closed below, while it waits
            ended.append(e)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    c._events.error(ERROR)
    wait_until(lambda: heard, 10, message="error_cb served from the waiting poll()")
    assert [e.code() for e in heard] == [KafkaError._ALL_BROKERS_DOWN]
    c.close()
    thread.join(10)
    assert not thread.is_alive() and len(ended) == 1
