"""The exactly-once protocol's pure decisions (broker.client.exactly_once): which attempts commit,
how a replayed batch is recognised, which open transactions are aborted, and the record format."""
from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.client import TopicPartition, TransactionHandle
from broker.client.exactly_once import (SKIP, WRITE, Decision, OwnerReusedError, batch_prefix, decide, group_offsets,
                                        in_batch, offsets_transactional_id, on_abort, strays, transactional_id,
                                        write_action)
from broker.errors import InvalidConfigError

pytestmark = pytest.mark.unit

A = TransactionHandle("app-3-0-0", 7, 0)
B = TransactionHandle("app-3-1-1", 8, 2)
DECIDED = Decision("app", 3, [A, B])


def test_each_attempt_has_its_own_transactional_id():
    assert transactional_id("app", 3, 1, 2) == "app-3-1-2"
    ids = {transactional_id("app", b, t, a) for b in range(3) for t in range(3) for a in range(3)}
    assert len(ids) == 27
    assert not transactional_id("app", 10, 0, 0).startswith(batch_prefix("app", 1))


def test_a_new_batch_commits_exactly_the_attempts_reported_and_must_be_recorded():
    decision, new = decide(Decision("app", 2, [A]), "app", 3, [B, A])
    assert new and decision == Decision("app", 3, [A, B])      # sorted: the record is deterministic
    first, new = decide(None, "app", 0, [])
    assert new and first.attempts == []


def test_a_replayed_batch_is_recognised_and_carries_out_the_recorded_decision():
    assert write_action(None, 0) == WRITE
    assert write_action(Decision("app", 2, []), 3) == WRITE
    assert write_action(DECIDED, 3) == SKIP                    # the replay's tasks write nothing
    replay, new = decide(DECIDED, "app", 3, [TransactionHandle("app-3-0-1", 9, 0)])
    assert replay is DECIDED and not new                       # what the replay's tasks report is ignored


def test_an_older_batch_than_the_recorded_one_is_refused_naming_both():
    for ask in (lambda: write_action(DECIDED, 2), lambda: decide(DECIDED, "app", 2, [A])):
        with pytest.raises(OwnerReusedError) as caught:
            ask()
        assert isinstance(caught.value, InvalidConfigError)
        assert caught.value.details == {"config": "owner", "owner": "app", "batch_id": 2, "decided_batch_id": 3}


def test_every_open_attempt_of_the_batch_or_an_earlier_one_outside_its_decision_is_aborted():
    open_ids = ["app-3-0-0", "app-3-0-1", "app-3-1-1", "app-30-0-0", "app-2-0-0", "other-3-0-0", "app-3-2-0"]
    assert strays(open_ids, "app", 3, DECIDED.transactional_ids()) == ["app-2-0-0", "app-3-0-1", "app-3-2-0"]
    assert strays(open_ids, "app", 3, set()) == ["app-2-0-0", "app-3-0-0", "app-3-0-1", "app-3-1-1", "app-3-2-0"]
    # a later batch (app-30) and another owner are never touched
    assert strays(open_ids, "app", 2, set()) == ["app-2-0-0"]


def test_an_owner_whose_name_extends_another_is_never_taken_for_it():
    # Owner "a" batch 1 and owner "a-1" batch 2 share the prefix "a-1-".
    theirs = [transactional_id("a-1", 2, 0, 0), transactional_id("a-1", 2, 3, 1)]
    mine = [transactional_id("a", 1, 2, 0)]
    assert strays(theirs + mine, "a", 1, set()) == mine
    assert strays(theirs + mine, "a-1", 2, set()) == sorted(theirs)


@given(st.tuples(st.from_regex(r"[a-z0-9][a-z0-9-]{0,8}", fullmatch=True), st.integers(0, 120),
                 st.integers(0, 40), st.integers(0, 5)),
       st.tuples(st.from_regex(r"[a-z0-9][a-z0-9-]{0,8}", fullmatch=True), st.integers(0, 120)))
def test_an_attempt_belongs_to_exactly_its_own_owner_and_batch(attempt, batch):
    owner, batch_id, task, n = attempt
    assert in_batch(transactional_id(owner, batch_id, task, n), *batch) == ((owner, batch_id) == batch)


def test_a_failed_batch_aborts_what_was_reported_unless_it_was_decided():
    stray = TransactionHandle("app-3-1-2", 11, 0)
    # Decided already (the driver died while committing): its replay commits it, never abort it.
    decision, doomed = on_abort(DECIDED, 3, [A, B, stray])
    assert decision is DECIDED and doomed == [stray]
    # Not decided: everything reported goes.
    decision, doomed = on_abort(Decision("app", 2, [A]), 3, [A, B])
    assert decision is None and doomed == [A, B]
    assert on_abort(None, 3, []) == (None, [])


def test_the_decision_record_keeps_its_format():
    """Decisions recorded by earlier versions (keyed by owner, "sink_id" in the value) must still read."""
    assert DECIDED.key() == b"app"
    assert DECIDED.to_value() == (
        b'{"attempts":[{"producer_epoch":0,"producer_id":7,"transactional_id":"app-3-0-0"},'
        b'{"producer_epoch":2,"producer_id":8,"transactional_id":"app-3-1-1"}],"batch_id":3,"sink_id":"app"}')
    assert Decision.from_value(DECIDED.to_value()) == DECIDED
    assert DECIDED.transactional_ids() == {"app-3-0-0", "app-3-1-1"}


def test_handles_travel_between_processes():
    assert pickle.loads(pickle.dumps(A)) == A and hash(A) == hash(TransactionHandle("app-3-0-0", 7, 0))
    with pytest.raises(AttributeError):
        A.producer_epoch = 1                                   # frozen: a handle names one transaction


# ------------------------------------------------------------------------------ input progress in the batch
def test_the_offsets_attempt_is_one_per_batch_and_belongs_to_it():
    assert offsets_transactional_id("app", 3) == "app-3-offsets"
    assert in_batch("app-3-offsets", "app", 3)
    assert not in_batch("app-3-offsets", "app", 30) and not in_batch("app-30-offsets", "app", 3)
    # Owner "a" batch 1 and owner "a-1" batch 2 still never mistake each other's attempts.
    assert not in_batch(offsets_transactional_id("a-1", 2), "a", 1)
    assert not in_batch(offsets_transactional_id("a", 1), "a-1", 2)
    assert not in_batch("a-1-offsets-2-0-0", "a", 1)             # an owner named "a-1-offsets"
    # Outside the decision, it is aborted like any other attempt of the batch.
    open_ids = ["app-3-offsets", "app-3-0-0", "app-2-offsets", "app-3-1-1", "app-4-offsets"]
    assert strays(open_ids, "app", 3, DECIDED.transactional_ids()) == ["app-2-offsets", "app-3-offsets"]
    with_offsets = Decision("app", 3, [A, B, TransactionHandle("app-3-offsets", 12, 1)])
    assert strays(open_ids, "app", 3, with_offsets.transactional_ids()) == ["app-2-offsets"]


@given(st.tuples(st.from_regex(r"[a-z0-9][a-z0-9-]{0,8}", fullmatch=True), st.integers(0, 120)),
       st.tuples(st.from_regex(r"[a-z0-9][a-z0-9-]{0,8}", fullmatch=True), st.integers(0, 120)))
def test_an_offsets_attempt_belongs_to_exactly_its_own_owner_and_batch(mine, batch):
    assert in_batch(offsets_transactional_id(*mine), *batch) == (mine == batch)


def test_a_decided_batchs_offsets_attempt_is_never_aborted_by_a_failure():
    offsets = TransactionHandle("app-3-offsets", 12, 1)
    decided = Decision("app", 3, [A, offsets])
    assert on_abort(decided, 3, [A, offsets]) == (decided, [])
    assert on_abort(None, 3, [A, offsets]) == (None, [A, offsets])


def test_group_offsets_are_checked_and_sorted():
    assert group_offsets(None, None) is None
    assert group_offsets("g", []) == []
    got = group_offsets("g", [TopicPartition("b", 0, 4), TopicPartition("a", 1, 0), TopicPartition("a", 0, 9)])
    assert [(tp.topic, tp.partition, tp.offset) for tp in got] == [("a", 0, 9), ("a", 1, 0), ("b", 0, 4)]
    for group, offsets, named in [
            (None, [TopicPartition("a", 0, 1)], "group_id"),            # whose offsets?
            ("", [TopicPartition("a", 0, 1)], "group_id"),
            ("g", None, "offsets"),
            ("g", [TopicPartition("a", 0, -1)], "offsets"),             # not a next offset to read
            ("g", [TopicPartition("a", -1, 3)], "offsets"),
            ("g", [TopicPartition("a", 0, 1), TopicPartition("a", 0, 2)], "offsets")]:  # twice
        with pytest.raises(InvalidConfigError) as caught:
            group_offsets(group, offsets)
        assert caught.value.details["config"] == named, (group, offsets)


def test_the_decision_record_format_is_unchanged_by_an_offsets_attempt():
    decided = Decision("app", 3, [TransactionHandle("app-3-offsets", 12, 1)])
    assert decided.to_value() == (b'{"attempts":[{"producer_epoch":1,"producer_id":12,'
                                  b'"transactional_id":"app-3-offsets"}],"batch_id":3,"sink_id":"app"}')
    assert Decision.from_value(decided.to_value()) == decided


def test_a_listing_missing_a_coordinator_aborts_nothing_and_does_not_fail_the_committed_batch():
    """The listing fails while a broker is away (Kafka's ``ListTransactionsResult.all()``); the batch's
    decision is already committed, so its strays wait for the next batch's listing."""
    from concurrent.futures import Future

    from broker.client.exactly_once import ExactlyOnce
    from broker.errors import CoordinatorNotAvailableError

    class Admin:
        aborted: list = []

        def list_transactions(self, *a, **k):
            f = Future()
            f.set_exception(CoordinatorNotAvailableError("broker 2 did not answer"))
            return f

        def abort_transaction(self, txn_id, timeout):
            self.aborted.append(txn_id)

    eo = ExactlyOnce({"bootstrap.servers": "127.0.0.1:1"}, "app")
    eo._admin = Admin()
    assert eo.abort_strays(3, DECIDED) == []
    assert Admin.aborted == []
