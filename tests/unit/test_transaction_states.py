"""The transaction coordinator's state machine: its table is Kafka's, every change goes through
it, and records written with plain string states (before the enum) still load."""
from __future__ import annotations

import itertools
import json

import pytest

from broker.state_machine import IllegalStateTransition
from broker.transaction.coordinator import (TRANSITIONS, TransactionMetadata, TransactionShard,
                                            TransactionState as S)

pytestmark = pytest.mark.unit

# Kafka's TransactionState.validPreviousStates (transaction-coordinator module), for the states
# Riverlog has and as of transaction version 1 (Riverlog's protocol), written the way Kafka writes
# it: target <- allowed previous states. The table in the coordinator is its inverse.
KAFKA_VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
}
# In a fixed order (the sets' order changes with the hash seed): pytest-xdist's workers must collect alike.
ALLOWED = [(a, b) for b, previous in KAFKA_VALID_PREVIOUS.items() for a in sorted(previous, key=lambda s: s.value)]
REFUSED = [(a, b) for a in S for b in S if (a, b) not in ALLOWED]


def test_the_table_is_kafkas_valid_previous_states_turned_round():
    assert {(a, b) for a in S for b in S if TRANSITIONS.can_move(a, b)} == set(ALLOWED)
    assert TRANSITIONS.finals() == {S.DEAD}


def test_the_state_names_are_kafkas_and_what_records_and_the_cli_show():
    assert [s.value for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                    "CompleteAbort", "Dead"]
    assert S.ONGOING == "Ongoing" and f"{S.PREPARE_ABORT}" == "PrepareAbort" and str(S.EMPTY) == "Empty"


def meta_in(state: S) -> TransactionMetadata:
    return TransactionMetadata("app", 1000, 0, 10_000, state)


@pytest.mark.parametrize("current, target", ALLOWED, ids=lambda s: s.value)
def test_every_allowed_move_is_made(current, target):
    meta = meta_in(current)
    meta.move(target)
    assert meta.state is target


@pytest.mark.parametrize("current, target", REFUSED, ids=lambda s: s.value)
def test_every_move_not_in_the_table_raises_and_changes_nothing(current, target):
    meta = meta_in(current)
    with pytest.raises(IllegalStateTransition, match=f"{current.name} -> {target.name}"):
        meta.move(target)
    assert meta.state is current


# Bytes exactly as the coordinator wrote them before its states were an enum.
OLD_KEY = b'{"id":"app","type":"txn"}'
OLD_VALUE = (b'{"groups":["g"],"last_epoch":-1,"last_producer_id":-1,"last_update_ms":6,"partitions":[["t",0]],'
             b'"producer_epoch":3,"producer_id":1000,"start_ms":5,"state":"Ongoing","timeout_ms":10000}')


def test_a_record_written_with_a_string_state_replays_into_the_enum_and_is_written_back_unchanged():
    shard = TransactionShard(0)
    shard.load([(OLD_KEY, OLD_VALUE)], now_ms=7)
    meta = shard.txns["app"]
    assert meta.state is S.ONGOING and (meta.partitions, meta.groups) == ({("t", 0)}, {"g"})
    assert meta.to_value() == OLD_VALUE
    _, records, markers = shard.end("app", 1000, 3, True, 8)   # and it carries on from where it was
    assert markers and json.loads(records[0][1])["state"] == "PrepareCommit"


def test_every_stored_state_replays():
    for state in S:
        raw = json.dumps({**json.loads(OLD_VALUE), "state": state.value}).encode()
        assert TransactionMetadata.from_value("app", raw).state is state


def test_an_unknown_stored_state_is_refused_on_load():
    with pytest.raises(ValueError):
        TransactionMetadata.from_value("app", json.dumps({**json.loads(OLD_VALUE), "state": "Pending"}).encode())


def test_ending_a_transaction_with_nothing_in_it_passes_through_prepare_in_one_record():
    ids = itertools.count(1000)
    shard = TransactionShard(0)
    meta, _, _ = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))
    shard.add_partitions("app", meta.producer_id, 0, [], 1)    # an empty AddPartitionsToTxn opens it
    assert meta.state is S.ONGOING
    _, records, markers = shard.end("app", meta.producer_id, 0, False, 2)
    assert not markers and len(records) == 1 and meta.state is S.COMPLETE_ABORT


def test_a_forgotten_transactional_id_is_dead_and_can_never_move_again():
    ids = itertools.count(1000)
    shard = TransactionShard(0, expiration_ms=100)
    meta, _, _ = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))
    assert shard.expire(100) == [(OLD_KEY, None)] and "app" not in shard.txns
    assert meta.state is S.DEAD
    with pytest.raises(IllegalStateTransition):
        meta.move(S.ONGOING)


def test_a_coordinator_that_tried_an_illegal_move_would_fail_before_writing():
    """A prepared transaction is never reopened: ``_begin`` on it is refused by the table (the
    request checks answer ConcurrentTransactions before it gets there)."""
    meta = meta_in(S.PREPARE_COMMIT)
    with pytest.raises(IllegalStateTransition, match="PREPARE_COMMIT -> ONGOING"):
        TransactionShard._begin(meta, 5)
    assert meta.state is S.PREPARE_COMMIT and meta.start_ms == -1
