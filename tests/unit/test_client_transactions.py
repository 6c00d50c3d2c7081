"""The client's transaction manager: its transition table, abortable and fatal states, its identity."""
from __future__ import annotations

import itertools

import pytest

from broker.client.transactions import TRANSITIONS, TransactionManager, TxnState
from broker.errors import (IllegalGenerationError, InvalidProducerEpochError, InvalidTxnStateError,
                           InvalidTxnTimeoutError, KafkaError, KafkaTimeoutError, ProducerFencedError, StateError)
from broker.records.batch import MAX_SEQUENCE
from broker.state_machine import IllegalStateTransition

pytestmark = pytest.mark.unit
S = TxnState
ALLOWED = {
    S.UNINITIALIZED: {S.READY, S.FATAL_ERROR},
    S.READY: {S.READY, S.IN_TRANSACTION, S.FATAL_ERROR},
    S.IN_TRANSACTION: {S.COMMITTING, S.ABORTING, S.ABORTABLE_ERROR, S.FATAL_ERROR},
    S.COMMITTING: {S.READY, S.IN_TRANSACTION, S.FATAL_ERROR},
    S.ABORTING: {S.READY, S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.FATAL_ERROR},
    S.ABORTABLE_ERROR: {S.ABORTING, S.FATAL_ERROR},
    S.FATAL_ERROR: set(),
}


@pytest.mark.parametrize("current, target", list(itertools.product(S, S)))
def test_every_move_is_allowed_exactly_as_the_table_says(current, target):
    m = TransactionManager("app-1")
    m.state = current
    if target in ALLOWED[current]:
        m.move(target)
        assert m.state is target
    elif current is S.FATAL_ERROR:
        m.fatal_error = ProducerFencedError("fenced")
        with pytest.raises(ProducerFencedError):
            m.move(target)
    else:
        with pytest.raises(IllegalStateTransition):
            m.move(target)
        assert m.state is current
    assert TRANSITIONS.finals() == {S.FATAL_ERROR}


def ready():
    m = TransactionManager("app-1")
    m.new_epoch(7, 3)
    m.move(S.READY)
    return m


def test_a_failed_record_makes_the_transaction_abortable_and_dooms_the_rest():
    m = ready()
    m.begin()
    m.failed(KafkaTimeoutError("expired"))
    assert m.state is S.ABORTABLE_ERROR and isinstance(m.doomed(), KafkaTimeoutError)
    with pytest.raises(StateError):
        m.check_can_produce()  # refused, as librdkafka's rd_kafka_txn_may_enq_msg (_STATE)
    with pytest.raises(KafkaTimeoutError):
        m.begin()
    m.move(S.ABORTING)
    m.move(S.READY)
    m.begin()
    assert m.error is None and m.doomed() is None


def test_fenced_is_final_and_every_later_call_raises_the_same_error():
    m = ready()
    m.begin()
    error = m.failed(InvalidProducerEpochError("epoch 4 took over"))
    assert isinstance(error, ProducerFencedError) and m.state is S.FATAL_ERROR
    assert "producer id 7, epoch 3" in str(error)
    for call in (m.begin, m.check_can_produce, lambda: m.require(S.READY)):
        with pytest.raises(ProducerFencedError) as raised:
            call()
        assert raised.value is error
    assert m.doomed() is error


def test_calls_in_the_abortable_state_raise_its_error_flagged_txn_requires_abort():
    # librdkafka's rd_kafka_txn_require_state: in ABORTABLE_ERROR the transaction's error, with
    # txn_requires_abort() set and retriable() clear (confluent's loop: retriable -> retry,
    # txn_requires_abort -> abort, else fatal).
    m = ready()
    m.begin()
    m.failed(KafkaTimeoutError("expired"))
    for call in (m.begin, lambda: m.require(S.IN_TRANSACTION)):
        with pytest.raises(KafkaTimeoutError) as raised:
            call()
        err = raised.value.args[0]
        assert err.txn_requires_abort() and not err.retriable() and not err.fatal()
        assert err.code() == KafkaError._TIMED_OUT and "expired" in str(raised.value)
    assert not m.error.args[0].txn_requires_abort()  # the delivery report's error is left alone
    refused = m.abortable(IllegalGenerationError("rebalanced"))  # a later error keeps the first
    assert isinstance(refused, KafkaTimeoutError) and refused.args[0].txn_requires_abort()


def test_client_side_state_errors_are_local_state_and_fencing_is_local_fenced():
    m = ready()
    for call in (lambda: m.require(S.IN_TRANSACTION), m.check_can_produce):
        with pytest.raises(InvalidTxnStateError) as raised:  # existing except clauses still catch it
            call()
        assert isinstance(raised.value, StateError) and raised.value.args[0].code() == KafkaError._STATE
    m.begin()
    with pytest.raises(StateError):
        m.begin()
    fenced = m.failed(InvalidProducerEpochError("epoch 4 took over"))
    err = fenced.args[0]
    assert isinstance(fenced, ProducerFencedError) and err.code() == KafkaError._FENCED and err.fatal()
    assert fenced.code == 90  # the wire code stays Kafka's PRODUCER_FENCED


def test_an_error_that_ends_init_for_good_is_fatal():
    m = TransactionManager("app-1")
    error = m.fatal(InvalidTxnTimeoutError("transaction.timeout.ms above the maximum"))
    assert m.state is S.FATAL_ERROR and error.args[0].fatal()
    with pytest.raises(InvalidTxnTimeoutError):
        m.require(S.UNINITIALIZED, S.READY)


def test_the_manager_owns_sequence_numbers_and_a_new_epoch_restarts_them():
    m = TransactionManager()
    m.new_epoch(5, 0)
    assert m.next_sequence(("t", 0), 10) == (5, 0, 0)
    assert m.next_sequence(("t", 0), 2) == (5, 0, 10)
    assert m.next_sequence(("t", 1), 1) == (5, 0, 0)
    m.gave_up(("t", 0), 10, 0)
    assert m.needs_producer_id() and m.awaiting_epoch() == [("t", 0)]
    m.new_epoch(5, 1)
    assert not m.needs_producer_id() and m.stale(("t", 0)) and m.stale(("t", 1))
    assert m.next_sequence(("t", 0), 1) == (5, 1, 0) and m.next_sequence(("t", 1), 1) == (5, 1, 0)
    assert not m.stale(("t", 0))


def test_sequence_numbers_wrap_to_zero_after_the_largest_int32():
    """As Kafka's producer: a partition's numbering goes on at 0 after 2**31 - 1."""
    m = TransactionManager()
    m.new_epoch(5, 0)
    assert m.next_sequence(("t", 0), MAX_SEQUENCE - 1) == (5, 0, 0)
    assert m.next_sequence(("t", 0), 3) == (5, 0, MAX_SEQUENCE - 1)  # MAX - 1, MAX, 0
    assert m.next_sequence(("t", 0), 1) == (5, 0, 1)


def test_a_batch_given_up_before_it_was_sent_leaves_the_numbering_alone():
    m = TransactionManager()
    m.new_epoch(5, 0)
    m.next_sequence(("t", 0), 3)
    m.gave_up(("t", 0), None, 0)
    assert not m.needs_producer_id() and m.next_sequence(("t", 0), 1) == (5, 0, 3)


def test_an_idempotent_only_manager_is_never_fatal():
    m = TransactionManager()
    assert m.failed(InvalidProducerEpochError("old")) is None and m.state is S.UNINITIALIZED
