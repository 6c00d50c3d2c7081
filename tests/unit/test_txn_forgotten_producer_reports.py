"""A transactional producer's records refused with ``INVALID_PRODUCER_ID_MAPPING`` (its
transactional.id was forgotten by the coordinator) only make the transaction abortable, as in
Kafka's ``TransactionManager.abortableErrorIfPossible`` and librdkafka: the delivery report is not
``fatal()`` and no error event goes to ``error_cb``. Fencing still does both."""
from __future__ import annotations

import pytest

from broker.client import Producer
from broker.client.producer_batch import ProducerBatch
from broker.errors import InvalidProducerEpochError, InvalidProducerIdMappingError
from broker.records.arrow_body import record_batch

pytestmark = pytest.mark.unit


def _settle(config: dict, error) -> tuple[list, list]:
    """(delivery report errors, error_cb errors) of one record that failed with ``error``."""
    reports, events = [], []
    with Producer({"bootstrap.servers": "127.0.0.1:1", "error_cb": events.append, **config}) as p:
        batch = ProducerBatch("orders", 0, b"", record_batch([b"k"], [b"v"], [1]),
                              [lambda err, msg: reports.append(err)], 0.0)
        p._report(batch, error)
        p.poll(0)
        p.purge()
    return reports, events


def test_a_forgotten_transactional_producer_s_record_is_abortable_not_fatal():
    reports, events = _settle({"transactional.id": "app"}, InvalidProducerIdMappingError("unknown transactional.id"))
    assert [(type(e.exception()), e.fatal()) for e in reports] == [(InvalidProducerIdMappingError, False)]
    assert events == []


def test_a_fenced_record_is_still_fatal_and_an_error_event():
    # guard (already matched): fencing stays fatal, with an error event.
    reports, events = _settle({"transactional.id": "app"}, InvalidProducerEpochError("epoch 4 took over"))
    assert [e.fatal() for e in reports] == [True]
    assert [e.code() for e in events] == [reports[0].code()]
