"""Exactly-once as a client capability, against a real broker: transactions ended by their handles
from another client than the producer's, and the decide → record → commit/abort protocol
(broker.client.exactly_once) through a replay, strays and a lost transaction."""
from __future__ import annotations

import pytest

from broker.client import (OFFSET_BEGINNING, OFFSET_INVALID, AdminClient, Consumer, ExactlyOnce, NewTopic, Producer,
                           TopicPartition)
from broker.client.exactly_once import (SKIP, WRITE, Decision, DecisionLog, OwnerReusedError, TransactionLostError,
                                        offsets_transactional_id)
from broker.errors import ApplicationRecoverableError, InvalidConfigError, InvalidTxnStateError, UnknownMemberIdError
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def topic(shared_broker, topic_name):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(30)
    return topic_name


@pytest.fixture
def input_topic(shared_broker, topic):
    """The consumed topic whose offsets a batch commits: a group's offsets name partitions that exist."""
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(f"{topic}-in", 2)])[f"{topic}-in"].result(30)
    return f"{topic}-in"


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


# ------------------------------------------------------------------------------ input progress in the batch
def committed(servers: str, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The group's committed offset of each partition named in ``offsets``."""
    c = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})   # also while a batch's transaction is open
    try:
        return {(tp.topic, tp.partition): tp.offset
                for tp in c.committed([TopicPartition(t, p) for t, p in offsets], 30)}
    finally:
        c.close()


def progress(topic: str, *offsets: int) -> list[TopicPartition]:
    return [TopicPartition(f"{topic}-in", p, o) for p, o in enumerate(offsets)]


def as_dict(tps: list[TopicPartition]) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): tp.offset for tp in tps}


class CommitterKilled(Exception):
    """Stands for the committer's process dying right after its decision was recorded."""


def test_a_batch_commits_its_groups_offsets_with_its_output(shared_broker, topic, input_topic):
    servers, group = shared_broker.bootstrap, f"{topic}-app"
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        out = write_open(servers, topic, eo.transactional_id(0, 0, 0), range(10))
        # Nothing of the batch is visible before the commit: neither its output nor its offsets.
        assert values(servers, topic) == []
        assert committed(servers, group, as_dict(progress(topic, 7, 3))) == {
            (f"{topic}-in", 0): OFFSET_INVALID, (f"{topic}-in", 1): OFFSET_INVALID}
        decision = eo.commit(0, [out], offsets=progress(topic, 7, 3), group_id=group)
        offsets_attempt = decision.attempts[-1]
        assert [a.transactional_id for a in decision.attempts] == [out.transactional_id, f"{topic}-0-offsets"]
        assert DecisionLog({"bootstrap.servers": servers}).latest(topic) == decision
        visible(servers, topic, list(range(10)))
        assert committed(servers, group, as_dict(progress(topic, 7, 3))) == as_dict(progress(topic, 7, 3))
        # A batch with no output still commits its input progress (e.g. a filter dropped every row).
        decision = eo.commit(1, [], offsets=progress(topic, 9, 3), group_id=group)
        assert [a.transactional_id for a in decision.attempts] == [offsets_transactional_id(topic, 1)]
        assert committed(servers, group, as_dict(progress(topic, 9, 3))) == as_dict(progress(topic, 9, 3))
        assert offsets_attempt.transactional_id not in {t.transactional_id for t in _ongoing(servers, topic)}
    assert values(servers, topic) == list(range(10))


def test_a_committer_killed_after_recording_is_finished_by_its_replay_and_offsets_commit_once(
        shared_broker, topic, input_topic, monkeypatch):
    servers, group = shared_broker.bootstrap, f"{topic}-app"
    eo = ExactlyOnce({"bootstrap.servers": servers}, owner=topic, transaction_timeout_ms=120_000)
    try:
        attempts = [write_open(servers, topic, eo.transactional_id(4, 0, 0), range(0, 10)),
                    write_open(servers, topic, eo.transactional_id(4, 1, 0), range(10, 20))]

        def killed(*args, **kwargs):
            raise CommitterKilled()

        monkeypatch.setattr(eo.admin, "commit_transactions", killed)
        with pytest.raises(CommitterKilled):
            eo.commit(4, attempts, offsets=progress(topic, 10, 10), group_id=group)
        recorded = DecisionLog({"bootstrap.servers": servers}).latest(topic)
        assert offsets_transactional_id(topic, 4) in recorded.transactional_ids()
        assert values(servers, topic) == []
        assert set(committed(servers, group, as_dict(progress(topic, 0, 0))).values()) == {OFFSET_INVALID}
    finally:
        eo.close()
    # The restarted committer: its tasks skip, and its commit finishes the recorded decision. The
    # offsets it is handed now (different on purpose) are not sent: the recorded ones commit, once.
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as again:
        assert again.write_action(4) == SKIP
        assert again.commit(4, [], offsets=progress(topic, 99, 99), group_id=group) == recorded
        visible(servers, topic, list(range(20)))
        assert committed(servers, group, as_dict(progress(topic, 0, 0))) == as_dict(progress(topic, 10, 10))
        # Once more, as another restart would: nothing changes.
        assert again.commit(4, [], offsets=progress(topic, 99, 99), group_id=group) == recorded
        assert committed(servers, group, as_dict(progress(topic, 0, 0))) == as_dict(progress(topic, 10, 10))
        assert _ongoing(servers, topic) == []
    assert values(servers, topic, "read_uncommitted") == list(range(20))


def test_a_batch_writes_its_committer_records_once_with_its_output(shared_broker, topic, monkeypatch):
    """Records only the committer knows (Connect's source offsets) commit with the batch's output;
    a replay of a recorded decision commits them without asking for them again."""
    servers = shared_broker.bootstrap
    calls: list[int] = []

    def records(value):
        def make():
            calls.append(value)
            return [(topic, 0, b"k", str(value).encode())]
        return make

    eo = ExactlyOnce({"bootstrap.servers": servers}, owner=topic, transaction_timeout_ms=120_000)
    try:
        out = write_open(servers, topic, eo.transactional_id(0, 0, 0), range(3))
        decision = eo.commit(0, [out], records=records(100))
        assert [a.transactional_id for a in decision.attempts] == [out.transactional_id, f"{topic}-0-offsets"]
        visible(servers, topic, [0, 1, 2, 100])
        # A batch with no output still writes its records; an empty list adds no attempt.
        assert [a.transactional_id for a in eo.commit(1, [], records=records(101)).attempts] == [
            offsets_transactional_id(topic, 1)]
        assert eo.commit(2, [], records=lambda: []).attempts == []
        visible(servers, topic, [0, 1, 2, 100, 101])

        def killed(*args, **kwargs):
            raise CommitterKilled()

        attempt = write_open(servers, topic, eo.transactional_id(3, 0, 0), range(5, 7))
        monkeypatch.setattr(eo.admin, "commit_transactions", killed)
        with pytest.raises(CommitterKilled):
            eo.commit(3, [attempt], records=records(103))
        monkeypatch.undo()
    finally:
        eo.close()
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as again:
        again.commit(3, [], records=records(999))  # the replay finishes the recorded attempt
        visible(servers, topic, [0, 1, 2, 5, 6, 100, 101, 103])
    assert calls == [100, 101, 103]
    with pytest.raises(InvalidConfigError, match="record=True"):
        ExactlyOnce({"bootstrap.servers": servers}, owner=topic).commit(9, [], record=False, records=records(1))


def test_a_committer_killed_before_recording_leaves_nothing_its_replay_does_not_replace(
        shared_broker, topic, input_topic, monkeypatch):
    """Not recorded, not decided: the replay re-runs the batch, its offsets attempt takes the id over
    (fencing and aborting the dead committer's), and the dead run's task attempts are strays."""
    servers, group = shared_broker.bootstrap, f"{topic}-app"
    eo = ExactlyOnce({"bootstrap.servers": servers}, owner=topic)
    try:
        first = write_open(servers, topic, eo.transactional_id(0, 0, 0), range(0, 5))

        def killed(*args, **kwargs):
            raise CommitterKilled()

        monkeypatch.setattr(eo.log, "record", killed)
        with pytest.raises(CommitterKilled):
            eo.commit(0, [first], offsets=progress(topic, 50), group_id=group)
        assert offsets_transactional_id(topic, 0) in {t.transactional_id for t in _ongoing(servers, topic)}
    finally:
        eo.close()
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as again:
        assert again.write_action(0) == WRITE
        rerun = write_open(servers, topic, again.transactional_id(0, 0, 1), range(5, 10))
        again.commit(0, [rerun], offsets=progress(topic, 5), group_id=group)
        visible(servers, topic, list(range(5, 10)))
        assert committed(servers, group, as_dict(progress(topic, 0))) == as_dict(progress(topic, 5))
        assert _ongoing(servers, topic) == []


def test_a_replayed_older_batch_does_not_move_the_offsets_back(shared_broker, topic, input_topic):
    servers, group = shared_broker.bootstrap, f"{topic}-app"
    with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
        eo.commit(1, [write_open(servers, topic, eo.transactional_id(1, 0, 0), range(5))],
                  offsets=progress(topic, 5), group_id=group)
        eo.commit(2, [write_open(servers, topic, eo.transactional_id(2, 0, 0), range(5, 10))],
                  offsets=progress(topic, 10), group_id=group)
        with pytest.raises(OwnerReusedError):
            eo.commit(1, [], offsets=progress(topic, 5), group_id=group)
        assert committed(servers, group, as_dict(progress(topic, 0))) == as_dict(progress(topic, 10))
        # Nothing was opened for the refused batch either.
        assert offsets_transactional_id(topic, 1) not in {t.transactional_id for t in _ongoing(servers, topic)}
    visible(servers, topic, list(range(10)))


def test_offsets_go_only_to_a_group_without_active_members(shared_broker, topic):
    """As Kafka's TxnOffsetCommit without a generation: a group whose members commit for themselves
    is refused, and the batch's output stays uncommitted (the caller aborts it)."""
    servers, group = shared_broker.bootstrap, f"{topic}-app"
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(f"{topic}-in", 1)])[f"{topic}-in"].result(30)
    member = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
    try:
        member.subscribe([f"{topic}-in"])
        wait_until(lambda: member.poll(0.1) is None and member.assignment(), 30, 0, "an assignment")
        with ExactlyOnce({"bootstrap.servers": servers}, owner=topic) as eo:
            out = write_open(servers, topic, eo.transactional_id(0, 0, 0), range(3))
            with pytest.raises(UnknownMemberIdError):   # Kafka's validateOffsetCommit for an outsider
                eo.commit(0, [out], offsets=progress(topic, 3), group_id=group)
            assert DecisionLog({"bootstrap.servers": servers}).latest(topic) is None
            eo.abort(0, [out])
    finally:
        member.close()
    assert values(servers, topic, "read_committed") == []


def _ongoing(servers: str, topic: str):
    with AdminClient({"bootstrap.servers": servers}) as admin:
        return admin.list_transactions(30, states=["Ongoing"], prefix=f"{topic}-").result(30)


def test_the_decision_scan_waits_for_records_up_to_the_end_instead_of_stopping_at_a_quiet_fetch(shared_broker,
                                                                                             topic):
    """A fetch that returns nothing before ``end`` is a slow broker, not the end of the log: the scan
    keeps reading (here the last two records arrive 4 s late, longer than any one quiet poll) and
    finds the last value of the key; it gives up with a retriable error only at its deadline."""
    import threading

    from broker.client.exactly_once import _last_with_key
    from broker.errors import KafkaTimeoutError
    servers = shared_broker.bootstrap

    def produce(pairs):
        with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
            for k, v in pairs:
                p.produce(topic, key=k, value=v, partition=0)
            p.flush(30)

    produce([(b"owner", b"1"), (b"other", b"x"), (b"owner", b"2")])
    late = threading.Timer(4.0, produce, [[(b"other", b"y"), (b"owner", b"3")]])
    late.start()
    c = Consumer({"bootstrap.servers": servers, "group.id": "", "enable.auto.commit": False})
    try:
        assert _last_with_key(c, TopicPartition(topic, 0), 0, 5, b"owner", 30.0) == b"3"
        with pytest.raises(KafkaTimeoutError, match="retry"):
            _last_with_key(c, TopicPartition(topic, 0), 0, 7, b"owner", 1.0)
    finally:
        late.join()
        c.close()
