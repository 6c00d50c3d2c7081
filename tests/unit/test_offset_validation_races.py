"""KIP-320 validations in flight while leadership moves: each broker's fetch thread may ask its own
OffsetsForLeaderEpoch for the same partition, and an answer may come from a leader the partition has
since learned was replaced. Found by ``tests/simulation/test_consumer_validation_simulation.py``;
shrunk here. As Kafka's ``SubscriptionState.maybeCompleteValidation``, an answer counts only while
the leader epoch it was asked under is still the partition's, and is applied once."""
from __future__ import annotations

import pytest

from broker.client.fetch_phase import FetchPhase
from broker.client.message import TopicPartition
from broker.client.start_offsets import EARLIEST
from broker.client.offset_validation import LOG_TRUNCATION
from tests.unit.test_fetch_state import TP0, drain, make
from tests.unit.test_offset_validation import deliver

pytestmark = pytest.mark.unit


def leader(node: int):
    return lambda topic, partition: node


def validating_at(position: int, epoch: int, reset=EARLIEST):
    """A partition that took records up to ``position`` in leader epoch ``epoch`` on broker 1, whose
    leader epoch then grew to ``epoch + 1`` (still on broker 1): it awaits validation."""
    state = make(reset)
    state.assign([TopicPartition("orders", 0, 0)])
    state.note_leader_epochs({TP0: epoch})
    assert deliver(state, TP0, 0, position, epochs={position: epoch})
    assert drain(state)[-1] == position - 1
    state.note_leader_epochs({TP0: epoch + 1})
    assert state.partitions[TP0].phase is FetchPhase.VALIDATING
    return state


def test_an_answer_of_a_leader_replaced_meanwhile_does_not_end_the_validation():
    """Broker 1 (epoch 4) is asked; before it answers, an unclean election makes broker 2 the
    leader of epoch 5, which holds other records from offset 6 on. Broker 1's "valid" must not
    let the consumer fetch on from 10 on broker 2 (skipping broker 2's 6..9): it asks broker 2."""
    state = validating_at(10, 3)
    [(key, generation, position_epoch, asked_under)] = state.to_validate(1, leader(1))
    assert asked_under == 4
    state.note_leader_epochs({TP0: 5})                     # broker 2's thread sees the new metadata
    assert not state.on_validated(TP0, generation, 3, 12)  # broker 1's late answer: "valid"
    assert state.partitions[TP0].phase is FetchPhase.VALIDATING
    assert state.to_fetch(2, leader(2)) == ([], [])
    [(_, generation2, _, asked_under2)] = state.to_validate(2, leader(2))
    assert asked_under2 == 5
    assert not state.on_validated(TP0, generation2, 3, 6)
    assert state.position(TP0) == 6 and state.to_fetch(2, leader(2))[0][0][:2] == (TP0, 6)


def test_two_answers_of_one_truncation_give_one_event():
    """Two brokers' threads both asked (the leader moved between their rounds); both answers say
    the log was truncated. With ``auto.offset.reset=error`` that is one event, not two."""
    state = validating_at(10, 3, reset=None)
    first = state.to_validate(1, leader(1))
    second = state.to_validate(1, leader(1))
    assert first == second
    assert state.on_validated(TP0, first[0][1], 3, 6)
    assert not state.on_validated(TP0, second[0][1], 3, 6)
    events = [e for e in drain(state) if isinstance(e, tuple)]
    assert len(events) == 1 and events[0][1].error().str().endswith(LOG_TRUNCATION)
    state.seek(TP0, 6, 3)                                  # seek() restarts it: validated again
    assert state.partitions[TP0].phase is FetchPhase.VALIDATING and not state.partitions[TP0].paused
