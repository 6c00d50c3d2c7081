"""The client's transaction manager: its transition table, abortable and fatal states, its identity."""
from __future__ import annotations

import itertools

import pytest

from broker.client.transactions import TRANSITIONS, TransactionManager, TxnState
from broker.errors import InvalidProducerEpochError, InvalidTxnStateError, KafkaTimeoutError, ProducerFencedError
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
    m.check_can_produce()  # accepted, and failed at once by the sender
    with pytest.raises(InvalidTxnStateError):
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
