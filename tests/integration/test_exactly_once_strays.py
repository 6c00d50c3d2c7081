"""Strays of earlier batches (broker.client.exactly_once): an attempt that opened its transaction
after its own batch was committed (a speculative duplicate killed once the other attempt won, a
task whose executor lost its driver) is aborted by the next batch's commit or abort, so the last
stable offset moves and ``read_committed`` readers see the committed batches at once instead of
after ``transaction.timeout.ms``. A decided attempt is never aborted, and later batches' and other
owners' open attempts are left alone."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, ExactlyOnce, NewTopic, Producer
from broker.client.exactly_once import ONGOING, Decision, DecisionLog, attempt_batch, strays
from broker.errors import ApplicationRecoverableError
from tests.conftest import wait_until
from tests.integration.test_exactly_once import values

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# Longer than any wait below: only an abort can end a stray within a test.
TXN_TIMEOUT_MS = 600_000


@pytest.fixture
def topic(shared_broker, topic_name):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(30)
    return topic_name


def visible(bootstrap: str, topic: str, expected, isolation: str = "read_committed", timeout: float = 20) -> None:
    """Well under TXN_TIMEOUT_MS: a stray left open would keep ``expected`` from showing."""
    wait_until(lambda: values(bootstrap, topic, isolation) == sorted(expected), timeout, 0.05,
               f"{isolation} {topic} == {sorted(expected)}")


def open_txn(bootstrap: str, topic: str, txn_id: str, rows: range, keep: bool = False):
    """Produce ``rows`` in a transaction left open; its handle, and the producer when ``keep``."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                  "transaction.timeout.ms": TXN_TIMEOUT_MS})
    p.init_transactions(30)
    p.begin_transaction()
    for i in rows:
        p.produce(topic, value=str(i).encode())
    assert p.flush(30) == 0
    handle = p.transaction_handle()
    if keep:
        return handle, p
    p.close(1)
    return handle


def ongoing(bootstrap: str, prefix: str) -> set[str]:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        return {t.transactional_id for t in admin.list_transactions(30, states=[ONGOING], prefix=prefix).result()}


# ------------------------------------------------------------------------------ pure
def test_strays_are_this_and_earlier_batches_of_the_owner_outside_the_decision():
    assert attempt_batch("q-3-0-7", "q") == 3 and attempt_batch("q-3-offsets", "q") == 3
    assert attempt_batch("q-1-2-0-0", "q") is None          # owner "q-1", batch 2
    assert attempt_batch("q-1-2-0", "q-1") is None          # owner "q", batch 1
    assert attempt_batch("q-x-0-0", "q") is None and attempt_batch("qq-1-0-0", "q") is None
    open_ids = ["q-1-0-5", "q-2-0-7", "q-2-0-8", "q-2-offsets", "q-3-0-9", "q-1-2-0-0", "r-1-0-0"]
    assert strays(open_ids, "q", 2, {"q-2-0-7", "q-2-offsets"}) == ["q-1-0-5", "q-2-0-8"]
    assert strays(open_ids, "q", 0, set()) == []
    assert strays(open_ids, "q-1", 5, set()) == ["q-1-2-0-0"]


# ------------------------------------------------------------------------------ against a broker
def test_an_attempt_opened_after_its_batch_committed_is_aborted_by_the_next_commit(shared_broker, topic):
    servers = shared_broker.bootstrap
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        eo.commit(0, [open_txn(servers, topic, eo.transactional_id(0, 0, 100), range(0, 3))])
        # The losing speculative attempt of batch 0 opens its transaction after batch 0 ended; its
        # producer is still alive (Spark's kill has not reached the Python worker).
        zombie, producer = open_txn(servers, topic, eo.transactional_id(0, 0, 101), range(50, 55), keep=True)
        try:
            eo.commit(1, [open_txn(servers, topic, eo.transactional_id(1, 0, 102), range(3, 6))])
            visible(servers, topic, range(6))
            assert ongoing(servers, f"{topic}-") == set()
            visible(servers, topic, [*range(6), *range(50, 55)], "read_uncommitted")
            # Aborted by id: the epoch moved on, so the zombie can no longer commit what it wrote.
            with pytest.raises(ApplicationRecoverableError):
                producer.commit_transaction(10)
        finally:
            producer.close(1)
        visible(servers, topic, range(6))


def test_a_replay_commits_its_recorded_decision_and_aborts_earlier_strays(shared_broker, topic):
    """The log decides: a recorded attempt is committed by the replay, not taken for a stray."""
    servers = shared_broker.bootstrap
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        eo.commit(0, [open_txn(servers, topic, eo.transactional_id(0, 0, 1), range(0, 3))])
        open_txn(servers, topic, eo.transactional_id(0, 0, 2), range(50, 53))          # late, batch 0
        decided = open_txn(servers, topic, eo.transactional_id(1, 0, 3), range(3, 6))
        open_txn(servers, topic, eo.transactional_id(1, 0, 4), range(60, 63))          # lost, batch 1
        DecisionLog({"bootstrap.servers": servers}).record(Decision(topic, 1, [decided]))  # then the committer died
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as again:
        assert again.commit(1, []) == Decision(topic, 1, [decided])
        visible(servers, topic, range(6))
        assert ongoing(servers, f"{topic}-") == set()


def test_a_failed_batch_aborts_earlier_strays_and_keeps_a_recorded_decision(shared_broker, topic):
    servers = shared_broker.bootstrap
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        eo.commit(0, [open_txn(servers, topic, eo.transactional_id(0, 0, 1), range(0, 3))])
        open_txn(servers, topic, eo.transactional_id(0, 1, 2), range(50, 53))          # late, batch 0
        failed = open_txn(servers, topic, eo.transactional_id(1, 0, 3), range(60, 63))
        eo.abort(1, [failed])
        visible(servers, topic, range(3))
        assert ongoing(servers, f"{topic}-") == set()
        # A batch whose decision is recorded is not aborted by a later abort() of it: its replay commits it.
        decided = open_txn(servers, topic, eo.transactional_id(1, 0, 4), range(3, 6))
        DecisionLog({"bootstrap.servers": servers}).record(Decision(topic, 1, [decided]))
        eo.abort(1, [decided])
        assert ongoing(servers, f"{topic}-") == {decided.transactional_id}
        eo.commit(1, [])
        visible(servers, topic, range(6))


def test_later_batches_and_other_owners_are_left_alone(shared_broker, topic):
    servers = shared_broker.bootstrap
    other = f"{topic}-1"                                   # its ids start like this owner's
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        live = open_txn(servers, topic, eo.transactional_id(2, 0, 9), range(70, 72))   # a later batch, running
        foreign = open_txn(servers, topic, f"{other}-0-0-0", range(80, 82))          # owner topic-1, batch 0
        eo.commit(1, [open_txn(servers, topic, eo.transactional_id(1, 0, 1), range(0, 3))])
        assert ongoing(servers, f"{topic}-") == {live.transactional_id, foreign.transactional_id}
        with AdminClient({"bootstrap.servers": servers}) as admin:
            for h in (live, foreign):
                admin.commit_transactions([h])[h.transactional_id].result(30)
    visible(servers, topic, [0, 1, 2, 70, 71, 80, 81])


def test_a_new_generation_ends_every_earlier_stray_of_the_last_one(shared_broker, topic):
    """What a Streams generation does before it rebuilds its state (``streams.generations``): commit
    the last decision without recording it again, then abort the open attempts from the next batch
    down, the stray of an earlier batch among them."""
    servers = shared_broker.bootstrap
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        eo.commit(0, [open_txn(servers, topic, eo.transactional_id(0, 0, 1), range(0, 3))])
        open_txn(servers, topic, eo.transactional_id(0, 0, 2), range(50, 53))          # late, batch 0
        decided = open_txn(servers, topic, eo.transactional_id(1, 0, 3), range(3, 6))
        DecisionLog({"bootstrap.servers": servers}).record(Decision(topic, 1, [decided]))
        open_txn(servers, topic, eo.transactional_id(2, 0, 4), range(60, 63))          # written, not decided
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as again:
        decision = again.log.latest(topic)
        again.commit(decision.batch_id, decision.attempts, record=False)
        again.abort_strays(decision.batch_id + 1, None)
        visible(servers, topic, range(6))
        assert ongoing(servers, f"{topic}-") == set()
