"""A record that fails inside a transaction makes it abortable *before* the record counts as settled.

``commit_transaction()`` flushes, then checks that the transaction is still committable. The sender
thread settles a failed batch: if it released the records (``flush()`` sees nothing outstanding) or
queued their reports (``poll()`` inside ``flush()`` serves them) before moving the transaction to
abortable, the application's commit could pass its check in between and commit a transaction that
lost a record. Kafka's ``Sender.failBatch`` calls ``TransactionManager.handleFailedBatch`` before it
completes the batch, and librdkafka sets the abortable error before the delivery reports are queued.
The interleaving is forced by looking at what the application could see at the moment the
transaction's state moves."""
from __future__ import annotations

import pytest

from broker.client import Producer
from broker.client.producer_batch import ProducerBatch
from broker.client.transactions import TxnState
from broker.errors import KafkaTimeoutError
from broker.records.arrow_body import record_batch

pytestmark = pytest.mark.unit


def test_the_transaction_is_abortable_before_flush_can_see_the_failed_records_settled():
    reports = []
    with Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "app"}) as p:
        m = p._manager
        m.new_epoch(7, 0)
        m.move(TxnState.READY)
        m.begin()
        p._acc.outstanding = 2  # as if produce() had queued the batch's two records
        seen = []
        failed = m.failed

        def watched(error):  # what flush()/poll() on the application's thread could see right now
            seen.append((p._acc.outstanding, len(p._reports)))
            return failed(error)

        m.failed = watched
        batch = ProducerBatch("orders", 0, b"", record_batch([b"k1", b"k2"], [b"v1", b"v2"], [1, 2]),
                              [None, lambda err, msg: reports.append(err)], 0.0)
        p._report(batch, KafkaTimeoutError("expired"))  # the sender thread's verdict
        assert seen == [(2, 0)]  # nothing settled yet: a concurrent commit's flush is still waiting
        with pytest.raises(KafkaTimeoutError) as raised:
            p.commit_transaction(1)
        assert raised.value.txn_requires_abort and m.state is TxnState.ABORTABLE_ERROR
        p.poll(0)
        assert [type(e.exception()) for e in reports] == [KafkaTimeoutError]
