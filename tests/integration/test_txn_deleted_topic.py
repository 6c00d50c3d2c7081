"""A topic deleted while a transactional producer still has it in its metadata: the coordinator
refuses AddPartitionsToTxn for it (``UNKNOWN_TOPIC_OR_PARTITION``, nothing of the request added, as
Kafka's ``handleAddPartitionsToTxnRequest``), the records fail after ``delivery.timeout.ms``, the
transaction is abortable, and the abort needs no EndTxn: the coordinator never opened it (Kafka's
``transactionStarted``), so the producer carries on instead of being answered ``INVALID_TXN_STATE``."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, NewTopic, Producer
from tests.conftest import wait_until
from tests.integration.test_transactions import read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_topic_deleted_mid_transaction_makes_it_abortable_and_the_producer_carries_on(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    kept, gone = f"{topic_name}-kept", f"{topic_name}-gone"
    with AdminClient({"bootstrap.servers": servers}) as admin:
        for name in (kept, gone):
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
        p = Producer({"bootstrap.servers": servers, "transactional.id": f"{topic_name}-txn", "linger.ms": 0,
                      "delivery.timeout.ms": 1500, "request.timeout.ms": 500})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(gone, value=b"g0")            # the producer's metadata now holds the topic
        p.produce(kept, value=b"k0")
        p.commit_transaction(30)
        admin.delete_topics([gone])[gone].result(30)
        wait_until(lambda: gone not in admin.list_topics(timeout=10).topics, 30, 0.05, "the topic deleted")
    p.begin_transaction()
    reports = []
    p.produce(gone, value=b"g1", on_delivery=lambda err, msg: reports.append(err))
    p.produce(kept, value=b"k1", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0
    assert len(reports) == 2 and all(e is not None for e in reports)  # neither partition was registered
    with pytest.raises(Exception) as committing:
        p.commit_transaction(30)
    err = committing.value.args[0]
    assert err.txn_requires_abort() and not err.fatal()
    p.abort_transaction(30)                    # nothing was opened: no EndTxn, no INVALID_TXN_STATE
    p.begin_transaction()
    p.produce(kept, value=b"k2")
    p.commit_transaction(30)
    p.close()
    assert read(servers, kept, "read_committed", partitions=1, settle=0.5) == [b"k0", b"k2"]
