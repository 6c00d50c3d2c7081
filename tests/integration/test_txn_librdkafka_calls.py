"""The transactional producer's calls as librdkafka's tests drive them (tests/0103-transactions.c,
tests/0105-transactions_mock.c), against a real broker process: a commit whose flush times out is
retriable and resumable, and ``init_transactions`` is called once."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, NewTopic, Producer
from broker.errors import ConflictError, KafkaError, KafkaTimeoutError, StateError
from tests.integration.test_transactions import _raised, read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """No topic is created by producing to it, so a record can wait for its topic as long as a test needs."""
    from tests.conftest import BrokerProcess
    b = BrokerProcess(str(tmp_path_factory.mktemp("txn-librdkafka")), {"auto.create.topics.enable": "false"}).start()
    yield b
    b.kill9()


def _create(bootstrap: str, topic: str) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def test_a_commit_whose_flush_times_out_is_retriable_and_resumes(broker, topic_name):
    """librdkafka's ``rd_kafka_commit_transaction``: a flush that does not deliver every record within
    the call's timeout is ``_TIMED_OUT`` with ``retriable()`` true, and the call is resumable (0105's
    ``do_test_txn_flush_timeout``): until ``commit_transaction`` is called again, records are refused
    (``_STATE``) and ``abort_transaction``/``send_offsets_to_transaction`` are ``_CONFLICT``; called
    again once the records can be delivered, the commit completes."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-flush",
                  "linger.ms": 0, "message.timeout.ms": 120_000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"waits-for-its-topic", partition=0)   # the topic does not exist yet
    error = _raised(lambda: p.commit_transaction(0.5))
    assert isinstance(error, KafkaTimeoutError), error
    err = error.args[0]
    assert err.code() == KafkaError._TIMED_OUT and err.retriable(), err
    assert not err.txn_requires_abort() and not err.fatal()
    refused = _raised(lambda: p.produce(topic_name, value=b"late", partition=0))
    assert isinstance(refused, StateError) and refused.args[0].code() == KafkaError._STATE, refused
    conflict = _raised(lambda: p.abort_transaction(5))
    assert isinstance(conflict, ConflictError) and conflict.args[0].code() == KafkaError._CONFLICT, conflict
    _create(broker.bootstrap, topic_name)
    p.commit_transaction(60)                                     # resumed: flushes, then commits
    assert read(broker.bootstrap, topic_name, "read_committed", partitions=1) == [b"waits-for-its-topic"]
    p.begin_transaction()                                        # and the producer goes on
    p.produce(topic_name, value=b"next", partition=0)
    p.commit_transaction(30)
    p.close()
    assert read(broker.bootstrap, topic_name, "read_committed", partitions=1, settle=0.5) == [
        b"waits-for-its-topic", b"next"]


def test_init_transactions_a_second_time_is_local_state(broker, topic_name):
    """0103's ``do_test_misuse_txn``: once ``init_transactions`` succeeded, calling it again is
    ``_STATE`` (before and inside a transaction), and the producer carries on under its epoch."""
    _create(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-init"})
    p.init_transactions(30)
    epoch = p._manager.producer_epoch
    for _ in range(2):
        error = _raised(lambda: p.init_transactions(5))
        assert isinstance(error, StateError) and error.args[0].code() == KafkaError._STATE, error
        assert not error.args[0].retriable() and not error.args[0].fatal()
        if not p._manager.in_transaction:
            p.begin_transaction()
    assert p._manager.producer_epoch == epoch                   # no epoch was taken by the refused calls
    p.produce(topic_name, value=b"v", partition=0)
    p.commit_transaction(30)
    p.close()
    assert read(broker.bootstrap, topic_name, "read_committed", partitions=1, settle=0.5) == [b"v"]


def test_end_txn_answered_invalid_txn_state_is_fatal(broker, topic_name):
    """librdkafka's ``rd_kafka_txn_handle_EndTxn`` (and Kafka's ``EndTxnHandler``): ``INVALID_TXN_STATE``
    is fatal. Here the transaction was aborted by its handle from outside (AdminClient), so the
    coordinator refuses the producer's own commit; every later call raises the same fatal error."""
    from broker.errors import InvalidTxnStateError
    _create(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-ended", "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"aborted-outside", partition=0)
    assert p.flush(30) == 0
    handle = p.transaction_handle()
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.abort_transactions([handle])[handle.transactional_id].result(30)
    error = _raised(lambda: p.commit_transaction(30))
    assert isinstance(error, InvalidTxnStateError) and not isinstance(error, StateError), error
    assert error.args[0].fatal() and not error.args[0].retriable(), error
    for call in (lambda: p.abort_transaction(5), p.begin_transaction):
        assert _raised(call) is error
    p.close()
    assert read(broker.bootstrap, topic_name, "read_committed", partitions=1, settle=0.5) == []


def test_after_init_transactions_timed_out_the_other_calls_are_a_conflict():
    """0103's ``do_test_misuse_txn`` ("hysterical amounts"): an ``init_transactions`` that failed
    retriably is unfinished; ``begin_transaction`` (and the other calls) are ``_CONFLICT`` until it
    is called again."""
    p = Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "nobody-answers"})
    try:
        error = _raised(lambda: p.init_transactions(1))
        assert error.args[0].retriable() and not error.args[0].fatal(), error
        for call in (p.begin_transaction, lambda: p.commit_transaction(1), lambda: p.abort_transaction(1)):
            conflict = _raised(call)
            assert isinstance(conflict, ConflictError) and conflict.args[0].code() == KafkaError._CONFLICT, conflict
            assert conflict.args[0].retriable() and "init_transactions" in str(conflict)
        again = _raised(lambda: p.init_transactions(1))   # the same call may be made again
        assert again.args[0].retriable(), again
    finally:
        p.close(0)


def test_a_record_that_fails_while_a_commit_is_unfinished_makes_the_commit_abortable(broker, topic_name):
    """Resuming the commit after a record of it failed (``message.timeout.ms``) raises that error with
    ``txn_requires_abort()``; the commit is then over, so ``abort_transaction`` ends the transaction."""
    from tests.conftest import wait_until
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-expires",
                  "linger.ms": 0, "message.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    reports = []
    p.produce(topic_name, value=b"never", partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert isinstance(_raised(lambda: p.commit_transaction(0.2)), KafkaTimeoutError)
    wait_until(lambda: p.poll(0.1) is not None and reports, 60, message="the record's delivery report")
    assert reports[0] is not None
    error = _raised(lambda: p.commit_transaction(30))
    assert error.args[0].txn_requires_abort() and not error.args[0].retriable(), error
    p.abort_transaction(30)
    _create(broker.bootstrap, topic_name)
    p.begin_transaction()
    p.produce(topic_name, value=b"next", partition=0)
    p.commit_transaction(30)
    p.close()
    assert read(broker.bootstrap, topic_name, "read_committed", partitions=1, settle=0.5) == [b"next"]
