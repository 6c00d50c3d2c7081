"""Exactly-once as a client capability, against a real broker: transactions ended by their handles
from another client than the producer's, and the decide → record → commit/abort protocol
(broker.client.exactly_once) through a replay, strays and a lost transaction."""
from __future__ import annotations

import pytest

from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, ExactlyOnce, NewTopic, Producer, TopicPartition
from broker.client.exactly_once import SKIP, WRITE, Decision, DecisionLog, OwnerReusedError, TransactionLostError
from broker.errors import ApplicationRecoverableError, InvalidConfigError, InvalidTxnStateError
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def topic(shared_broker, topic_name):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(30)
    return topic_name


def values(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[int]:
    """Every value readable now with ``isolation`` (read until a poll returns nothing)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "", "enable.auto.commit": False,
                  "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        while msgs := c.consume(1000, 0.3):
            out += [int(m.value()) for m in msgs if m.error() is None]
        return sorted(out)
    finally:
        c.close()


def visible(bootstrap: str, topic: str, expected: list[int], isolation: str = "read_committed") -> None:
    """Wait until a reader sees exactly ``expected`` (markers are written just after EndTxn answers)."""
    wait_until(lambda: values(bootstrap, topic, isolation) == sorted(expected), 30, 0.05, f"{topic} == {expected}")


def write_open(bootstrap: str, topic: str, txn_id: str, rows: range):
    """Produce ``rows`` in a transaction and leave it open: the handle, with the producer closed."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        for i in rows:
            p.produce(topic, value=str(i).encode())
        assert p.flush(30) == 0
        return p.transaction_handle()
    finally:
        p.close(1)


# ------------------------------------------------------------------------------ handles and the admin calls
def test_a_transaction_is_committed_by_its_handle_after_its_producer_is_gone(shared_broker, topic):
    servers = shared_broker.bootstrap
    handle = write_open(servers, topic, f"{topic}-w", range(10))
    assert handle.transactional_id == f"{topic}-w" and handle.producer_id >= 0
    with AdminClient({"bootstrap.servers": servers}) as admin:
        assert admin.commit_transactions([handle])[handle.transactional_id].result(30) is None
        visible(servers, topic, list(range(10)))
        # Again, as a restarted committer would: harmless.
        assert admin.commit_transactions([handle])[handle.transactional_id].result(30) is None
    visible(servers, topic, list(range(10)), "read_uncommitted")


def test_a_transaction_is_aborted_by_its_handle_and_a_newer_epoch_is_left_alone(shared_broker, topic):
    servers = shared_broker.bootstrap
    old = write_open(servers, topic, f"{topic}-w", range(0, 5))
    other = write_open(servers, topic, f"{topic}-x", range(5, 10))
    with AdminClient({"bootstrap.servers": servers}) as admin:
        futures = admin.abort_transactions([old, other])
        assert [f.result(30) for f in futures.values()] == [None, None]
        # A new instance of the same id takes a newer epoch; the old handle cannot end its transaction.
        newer = write_open(servers, topic, f"{topic}-w", range(10, 15))
        assert newer.producer_epoch > old.producer_epoch
        with pytest.raises(ApplicationRecoverableError):
            admin.abort_transactions([old])[old.transactional_id].result(30)
        with pytest.raises(ApplicationRecoverableError):
            admin.commit_transactions([old])[old.transactional_id].result(30)
        admin.commit_transactions([newer])[newer.transactional_id].result(30)
    visible(servers, topic, list(range(10, 15)))
    assert values(servers, topic, "read_uncommitted") == list(range(15))


def test_only_an_open_transaction_has_a_handle(shared_broker, topic):
    servers = shared_broker.bootstrap
    with Producer({"bootstrap.servers": servers}) as plain:
        with pytest.raises(InvalidConfigError):
            plain.transaction_handle()
    p = Producer({"bootstrap.servers": servers, "transactional.id": f"{topic}-w"})
    try:
        p.init_transactions(30)
        with pytest.raises(InvalidTxnStateError):
            p.transaction_handle()
        p.begin_transaction()
        assert p.transaction_handle().transactional_id == f"{topic}-w"
        p.commit_transaction(30)
        with pytest.raises(InvalidTxnStateError):
            p.transaction_handle()
    finally:
        p.close(1)


# ------------------------------------------------------------------------------ the protocol
def test_decide_record_commit_then_a_replay_writes_nothing_and_finishes_the_decision(shared_broker, topic):
    servers = shared_broker.bootstrap
    eo = ExactlyOnce({"bootstrap.servers": servers}, owner=topic)
    try:
        assert eo.write_action(0) == WRITE
        t0 = write_open(servers, topic, eo.transactional_id(0, 0, 0), range(0, 10))
        t1 = write_open(servers, topic, eo.transactional_id(0, 1, 0), range(10, 20))
        stray = write_open(servers, topic, eo.transactional_id(0, 1, 1), range(100, 105))  # speculative
        decision = eo.commit(0, [t1, t0])
        assert decision == Decision(topic, 0, [t0, t1])
        assert DecisionLog({"bootstrap.servers": servers}).latest(topic) == decision
        visible(servers, topic, list(range(20)))
        assert eo.abort_strays(0, decision) == []                   # the stray was aborted by commit()
        # The committer "restarts": batch 0 is recognised, its tasks skip, commit finishes the record.
        assert eo.write_action(0) == SKIP
        assert eo.commit(0, []) == decision
        assert values(servers, topic) == list(range(20))
        # An older batch under this owner is a reused owner id.
        eo.commit(1, [write_open(servers, topic, eo.transactional_id(1, 0, 0), range(20, 25))])
        with pytest.raises(OwnerReusedError):
            eo.write_action(0)
        visible(servers, topic, list(range(25)))
    finally:
        eo.close()
    assert values(servers, topic, "read_uncommitted") == list(range(25)) + list(range(100, 105))


def test_a_failed_batch_is_aborted_except_a_recorded_decision(shared_broker, topic):
    servers = shared_broker.bootstrap
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        # Batch 0 failed before any decision: every attempt goes, reported or not.
        reported = write_open(servers, topic, eo.transactional_id(0, 0, 0), range(0, 5))
        unreported = write_open(servers, topic, eo.transactional_id(0, 1, 0), range(5, 10))
        eo.abort(0, [reported])
        # Batch 1 was decided (recorded) before the failure: abort() leaves the decided attempt to the
        # replay and removes only the other one.
        kept = write_open(servers, topic, eo.transactional_id(1, 0, 0), range(10, 15))
        extra = write_open(servers, topic, eo.transactional_id(1, 0, 1), range(15, 20))
        eo.log.record(Decision(topic, 1, [kept]))
        eo.abort(1, [kept, extra])
        eo.commit(1, [])                                            # the replay
        visible(servers, topic, list(range(10, 15)))
    assert unreported.transactional_id not in {t.transactional_id for t in _ongoing(servers, topic)}


def test_a_decided_transaction_that_can_no_longer_commit_stops_its_owner(shared_broker, topic):
    servers = shared_broker.bootstrap
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        handle = write_open(servers, topic, eo.transactional_id(0, 0, 0), range(5))
        eo.log.record(Decision(topic, 0, [handle]))
        eo.admin.abort_transaction(handle.transactional_id).result(30)  # e.g. its timeout ran out
        with pytest.raises(TransactionLostError, match=handle.transactional_id):
            eo.commit(0, [])
    assert values(servers, topic) == []


def _ongoing(servers: str, topic: str):
    with AdminClient({"bootstrap.servers": servers}) as admin:
        return admin.list_transactions(30, states=["Ongoing"], prefix=f"{topic}-").result(30)
