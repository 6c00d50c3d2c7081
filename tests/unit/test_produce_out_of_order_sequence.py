"""``OUT_OF_ORDER_SEQUENCE_NUMBER`` for an idempotent producer without transactions, as librdkafka's
``rd_kafka_handle_idempotent_Produce_error`` decides: refused for the partition's oldest
unacknowledged batch (the broker expects a sequence the producer never sent: it lost acknowledged
records), the producer fails fatally, not retrying that sequence until delivery.timeout.ms; refused
for a batch behind an earlier one that failed, it is retried after that one. The send policy is
driven directly (ManualClock, no thread, no broker)."""
from __future__ import annotations

import pytest

from broker.client.delivery_report import delivery_error
from broker.client.producer_batch import ProducerBatch
from broker.client.send_policy import SendLimits, SendPolicy
from broker.client.transactions import TransactionManager
from broker.clock import ManualClock
from broker.errors import KafkaTimeoutError, NotLeaderOrFollowerError, OutOfOrderSequenceError
from broker.errors.kafka_error import KafkaError
from tests.simulation.producer_sim import _Records

pytestmark = pytest.mark.unit
KEY = ("t", 0)


def _policy(**limits) -> SendPolicy:
    manager = TransactionManager()
    manager.new_epoch(9, 0)
    return SendPolicy(SendLimits(**{"idempotent": True, "backoff": 0.0, "settle_time": 0.0, "max_request": 100,
                                    **limits}), ManualClock(), manager)


def _send(p: SendPolicy, node: int = 0, i: int = 0):
    """Queue one batch (record id ``i``) and send it alone in a request to ``node``."""
    p.enqueue(ProducerBatch("t", 0, b"", _Records([i]), None, 0.0, size=100))
    sent, _ = p.take([KEY], 0.0)
    assert sent, "the batch should have been sendable"
    p.dispatched(node, sent)
    return sent


def _answer(p: SendPolicy, sent, error=None, node: int = 0):
    p.answered(node, [sent])
    if error is None:
        p.delivered(KEY)
        return [], None
    return p.failed(KEY, sent[0][1], error, 0.0)


def test_a_gap_before_the_oldest_unacknowledged_batch_is_fatal():
    p = _policy()
    _answer(p, _send(p, i=0))
    sent = _send(p, i=1)
    given_up, reported = _answer(p, sent, OutOfOrderSequenceError("expects 7, got 1"))
    assert [b.records.ids for b in given_up] == [[1]], "retried the same sequence instead of failing"
    assert isinstance(reported, OutOfOrderSequenceError) and "desynchronization" in reported.message
    err = delivery_error(reported)
    assert err.code() == KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER and err.fatal() and not err.retriable()
    assert p.manager.doomed() is reported, "queued and later records fail with the fatal error"


def test_a_batch_refused_behind_a_failed_earlier_one_is_retried_after_it():
    """guard (already matched): librdkafka's r > 0 case."""
    p = _policy()
    first, second = _send(p, i=0), _send(p, i=1)
    assert _answer(p, first, NotLeaderOrFollowerError("moved"))[0] == []
    assert _answer(p, second, OutOfOrderSequenceError("expects 0, got 1"))[0] == []
    assert p.manager.doomed() is None
    assert [b.records.ids for b in p.partitions[KEY].queue] == [[0], [1]]


def test_a_batch_refused_while_an_earlier_one_is_unanswered_elsewhere_is_retried():
    """guard (already matched): the earlier batch, sent to the old leader, has no answer yet."""
    p = _policy()
    first, second = _send(p, node=0, i=0), _send(p, node=1, i=1)
    assert _answer(p, second, OutOfOrderSequenceError("expects 0, got 1"), node=1)[0] == []
    assert p.manager.doomed() is None
    assert _answer(p, first, NotLeaderOrFollowerError("moved"), node=0)[0] == []
    assert [b.records.ids for b in p.partitions[KEY].queue] == [[0], [1]]


def test_a_gap_left_by_a_batch_given_up_takes_a_new_epoch_not_a_fatal_error():
    """guard (already matched): the producer made that gap itself (KIP-360 epoch bump)."""
    p = _policy(delivery_timeout=1.0)
    first, second = _send(p, i=0), _send(p, i=1)
    p.answered(0, [first])
    given_up, reported = p.failed(KEY, first[0][1], NotLeaderOrFollowerError("moved"), 5.0)
    assert len(given_up) == 1 and isinstance(reported, KafkaTimeoutError)
    assert _answer(p, second, OutOfOrderSequenceError("expects 0, got 1"))[0] == []
    assert p.manager.doomed() is None and p.manager.awaiting_epoch() == [KEY]


def test_after_a_desynchronisation_produce_raises_fatal_and_error_cb_hears_it_once():
    """librdkafka's rd_kafka_set_fatal_error on an idempotent producer: the failed records' reports
    carry the sequence error, error_cb hears one ``_FATAL`` error and produce()/produce_batch()
    return ``_FATAL`` from then on."""
    import pyarrow as pa

    from broker.client import KafkaError, KafkaException, Producer
    from broker.records.arrow_body import record_batch
    reports, events = [], []
    with Producer({"bootstrap.servers": "127.0.0.1:1", "enable.idempotence": True,
                   "error_cb": events.append}) as p:
        p.produce("orders", b"before")   # taken while the producer is healthy
        error = p._manager.fatal(OutOfOrderSequenceError("sequence desynchronization"))
        for _ in range(2):
            p._report(ProducerBatch("orders", 0, b"", record_batch([b"k"], [b"v"], [1]),
                                    [lambda err, msg: reports.append(err)], 0.0), error)
        p.poll(0)
        with pytest.raises(KafkaException) as raised:
            p.produce("orders", b"after")
        assert raised.value.args[0].code() == KafkaError._FATAL and raised.value.args[0].fatal()
        with pytest.raises(KafkaException):
            p.produce_batch("orders", pa.table({"value": pa.array([b"a"], pa.binary())}))
        p.purge()
    assert [e.code() for e in reports] == [KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER] * 2
    # Nothing listens on port 1: the background thread may also report _ALL_BROKERS_DOWN, as
    # librdkafka does, before or after the fatal error; that report is never fatal.
    unreachable = [e for e in events if e.code() == KafkaError._ALL_BROKERS_DOWN]
    assert not any(e.fatal() for e in unreachable)
    assert [(e.code(), e.fatal()) for e in events if e not in unreachable] == \
        [(KafkaError._FATAL, True)]
