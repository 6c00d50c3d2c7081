"""Transactions against real broker processes: exactly-once consume-transform-produce through crashes,
zombie fencing, timed-out transactions, and what read_committed and read_uncommitted readers see."""
from __future__ import annotations

import collections
import subprocess
import sys
import time

import pytest

from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, NewTopic, OffsetSpec, Producer, TopicPartition
from broker.client.consumer import ConsumerGroupMetadata
from broker.client.model import IsolationLevel
from broker.errors import (IllegalGenerationError, InvalidProducerIdMappingError, InvalidTxnStateError,
                           InvalidTxnTimeoutError, KafkaError, ProducerFencedError, StateError, UnknownMemberIdError)
from tests.conftest import ROOT, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CONFIG = {"group.min.session.timeout.ms": 300}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from tests.conftest import BrokerProcess
    b = BrokerProcess(str(tmp_path_factory.mktemp("txn")), CONFIG).start()
    yield b
    b.kill9()


def make_topics(bootstrap: str, *names: str, partitions: int = 2) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for name in names:
            admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def read(bootstrap: str, topic: str, level: str, partitions: int = 2, settle: float = 1.0) -> list[bytes]:
    """Every value a reader with isolation ``level`` gets, once nothing more arrives for ``settle`` s."""
    c = Consumer({"bootstrap.servers": bootstrap, "isolation.level": level})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < settle:
        got = [m.value() for m in c.consume(1000, 0.1) if m.error() is None]
        if got:
            out += got
            quiet_since = time.monotonic()
    c.close()
    return out


# A consume-transform-produce application that may crash (os._exit) at a point its seed picks.
_APP = r"""
import os, random, sys
from broker.client import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
bootstrap, src, dst, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "etl-" + dst, "enable.auto.commit": False,
              "isolation.level": "read_committed"})
parts = [TopicPartition(src, p) for p in range(2)]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "etl-" + dst, "linger.ms": 1})
p.init_transactions(30)   # first: it aborts what a crashed predecessor left open, whose offsets are unstable
c.assign([TopicPartition(src, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
          for tp in c.committed(parts, timeout=30)])
crash = rng.choice(["after_produce", "before_commit", "after_commit", "none"])
rounds = rng.randint(1, 3)
for n in range(rounds):
    msgs = [m for m in c.consume(rng.randint(5, 40), 3.0) if m.error() is None]
    if not msgs:
        break
    p.begin_transaction()
    for m in msgs:
        p.produce(dst, key=m.key(), value=m.value().upper(), partition=m.partition())
    last = n == rounds - 1
    if last and crash == "after_produce":
        p.flush(30)
        os._exit(3)
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata())
    if last and crash == "before_commit":
        os._exit(3)
    p.commit_transaction(30)
    print("committed", len(msgs), flush=True)
    if last and crash == "after_commit":
        os._exit(3)
p.close(); c.close()
"""


def test_a_crashing_consume_transform_produce_loop_writes_every_record_exactly_once(broker, topic_name):
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    make_topics(broker.bootstrap, src, dst)
    values = [b"record-%04d" % i for i in range(300)]
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for i, v in enumerate(values):
            p.produce(src, value=v, partition=i % 2)
        assert p.flush(30) == 0
    crashes, runs = 0, 0
    watcher = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "etl-" + dst,
                        "isolation.level": "read_uncommitted"})   # reads while a transaction is open
    parts = [TopicPartition(src, 0), TopicPartition(src, 1)]
    while sum(max(tp.offset, 0) for tp in watcher.committed(parts, timeout=30)) < len(values):
        runs += 1
        assert runs < 80, "the application made no progress"
        proc = subprocess.run([sys.executable, "-c", _APP, broker.bootstrap, src, dst, str(runs)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode in (0, 3), proc.stderr
        crashes += proc.returncode == 3
    watcher.close()
    assert crashes >= 3, f"only {crashes} crash(es) in {runs} runs: the test no longer exercises recovery"
    committed = read(broker.bootstrap, dst, "read_committed")
    assert collections.Counter(committed) == collections.Counter(v.upper() for v in values)
    # The crashes left aborted records behind: a read_uncommitted reader sees them as well.
    assert len(read(broker.bootstrap, dst, "read_uncommitted")) >= len(committed)


def test_a_zombie_is_fenced_and_its_open_transaction_aborted(broker, topic_name):
    make_topics(broker.bootstrap, topic_name)
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-app"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"from the zombie", partition=0)
    assert zombie.flush(30) == 0
    successor = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-app"})
    successor.init_transactions(30)        # fences the zombie and aborts what it left open
    successor.begin_transaction()
    successor.produce(topic_name, value=b"from the successor", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction(10)
    assert read(broker.bootstrap, topic_name, "read_committed") == [b"from the successor"]
    assert sorted(read(broker.bootstrap, topic_name, "read_uncommitted")) == [b"from the successor",
                                                                              b"from the zombie"]
    successor.close()
    zombie.close()


def _open_transaction_then_a_plain_record(bootstrap: str, topic: str, pending: bytes, plain_value: bytes,
                                          **config) -> Producer:
    """A one-partition topic holding a transaction left open (its producer returned) and, after
    it, a record outside any transaction."""
    make_topics(bootstrap, topic, partitions=1)
    stuck = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-open", **config})
    stuck.init_transactions(30)
    stuck.begin_transaction()
    stuck.produce(topic, value=pending)
    assert stuck.flush(30) == 0
    with Producer({"bootstrap.servers": bootstrap}) as plain:
        plain.produce(topic, value=plain_value)
        assert plain.flush(30) == 0
    return stuck


def test_an_abandoned_transaction_times_out_and_unblocks_read_committed_readers(broker, topic_name):
    stuck = _open_transaction_then_a_plain_record(broker.bootstrap, topic_name, b"never committed",
                                                  b"after the open transaction", **{"transaction.timeout.ms": 1500})
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": "read_committed"})
    reader.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
    started = time.monotonic()
    got = []
    # Held back by the open transaction (the last stable offset is its first offset) until the
    # coordinator aborts it; then the later record arrives and the aborted one never does.
    wait_until(lambda: got.extend(m.value() for m in reader.consume(100, 0.1) if m.error() is None) or got,
               30, 0.01, "the record behind the abandoned transaction")
    assert got == [b"after the open transaction"]
    assert time.monotonic() - started > 0.5
    reader.close()
    with pytest.raises(ProducerFencedError):
        stuck.commit_transaction(10)
    stuck.close()
    assert sorted(read(broker.bootstrap, topic_name, "read_uncommitted", 1)) == [b"after the open transaction",
                                                                                 b"never committed"]


def test_aborted_records_are_seen_only_by_read_uncommitted_readers(broker, topic_name):
    make_topics(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-mixed"})
    p.init_transactions(30)
    expected = []
    for n in range(6):
        p.begin_transaction()
        batch = [b"t%d-%d" % (n, i) for i in range(20)]
        for i, v in enumerate(batch):
            p.produce(topic_name, value=v, partition=i % 2)
        if n % 2:
            assert p.flush(30) == 0  # sent: abort_transaction() purges what is not
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            expected += batch
    p.close()
    assert sorted(read(broker.bootstrap, topic_name, "read_committed")) == sorted(expected)
    assert len(read(broker.bootstrap, topic_name, "read_uncommitted")) == 120


def test_a_transaction_commits_across_a_failover_of_its_coordinator(cluster_factory, topic_name):
    from tests.integration.test_cluster import FAST, create
    cluster = cluster_factory(3, {**FAST, **CONFIG})
    create(cluster, topic_name, partitions=2, rf=3, min_insync_replicas=2)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"{topic_name}-moving"})
    p.init_transactions(30)
    coordinator = p._txn.coordinator.node_id
    p.begin_transaction()
    values = [b"v%d" % i for i in range(50)]
    for i, v in enumerate(values):
        p.produce(topic_name, value=v, partition=i % 2)
    assert p.flush(30) == 0
    cluster.nodes[coordinator].kill9()
    p.commit_transaction(60)       # the new coordinator replayed the open transaction and ends it
    assert p._txn.coordinator.node_id != coordinator
    assert sorted(read(cluster.bootstrap, topic_name, "read_committed")) == sorted(values)
    p.close()


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_a_consumer_s_position_moves_past_markers_and_aborted_records(broker, topic_name, level):
    make_topics(broker.bootstrap, topic_name, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-{level}"})
    p.init_transactions(30)
    for commit in (True, False):
        p.begin_transaction()
        p.produce(topic_name, value=b"committed" if commit else b"aborted")
        assert p.flush(30) == 0  # sent, so the aborted record is in the log (abort purges unsent ones)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    p.close()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": level, "enable.partition.eof": True})
    c.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
    values, eof = [], []
    wait_until(lambda: [eof.append(m) if m.error() else values.append(m.value()) for m in c.consume(10, 0.1)]
               is not None and eof, 30, 0.01, "the end of the partition")
    # Offsets 0 record, 1 commit marker, 2 record, 3 abort marker: the position ends at 4 either way.
    assert values == ([b"committed"] if level == "read_committed" else [b"committed", b"aborted"])
    assert c.position([TopicPartition(topic_name, 0)])[0].offset == 4
    c.close()


def test_the_latest_offset_of_a_read_committed_consumer_is_the_last_stable_offset(broker, topic_name):
    make_topics(broker.bootstrap, topic_name, partitions=1)
    with Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        plain.produce(topic_name, value=b"plain")
        assert plain.flush(30) == 0
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-open"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"open")
    assert p.flush(30) == 0
    tp = TopicPartition(topic_name, 0)
    for level, latest in (("read_committed", 1), ("read_uncommitted", 2)):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": level})
        assert c.get_watermark_offsets(tp, 10) == (0, latest), level
        c.close()
    p.abort_transaction(30)
    p.close()


def test_timestamp_lookups_stop_at_what_the_isolation_level_may_read(broker, topic_name):
    """An open transaction's record is no answer for read_committed (nor for MAX_TIMESTAMP): a
    consumer seeking there would wait on records it may not read yet."""
    make_topics(broker.bootstrap, topic_name, partitions=1)
    now = int(time.time() * 1000)
    with Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        plain.produce(topic_name, value=b"plain", timestamp=now - 5000)
        assert plain.flush(30) == 0
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-open"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"open", timestamp=now - 1000)
    assert p.flush(30) == 0
    tp = TopicPartition(topic_name, 0)

    def lookup(spec: int, level: IsolationLevel) -> tuple[int, int]:
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            found = admin.list_offsets({tp: OffsetSpec(spec)}, isolation_level=level)[tp].result(30)
        return found.offset, found.timestamp

    for spec in (now - 2000, OffsetSpec.max_timestamp().value):
        assert lookup(spec, IsolationLevel.READ_UNCOMMITTED) == (1, now - 1000), spec
        assert lookup(spec, IsolationLevel.READ_COMMITTED) == (-1, -1), spec
    p.commit_transaction(30)
    p.close()
    assert lookup(now - 2000, IsolationLevel.READ_COMMITTED) == (1, now - 1000)


def test_the_last_stable_offset_never_falls_below_the_log_start(broker, topic_name):
    """DeleteRecords past an open transaction's first record: read_committed readers start at
    the log start, not at a deleted offset they would be reset from again and again."""
    p = _open_transaction_then_a_plain_record(broker.bootstrap, topic_name, b"open", b"plain")
    tp = TopicPartition(topic_name, 0)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        assert admin.delete_records({tp: -1})[tp].result(30).low_watermark == 2
    c = Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": "read_committed"})
    assert c.get_watermark_offsets(tp, 10) == (2, 2)
    c.close()
    p.abort_transaction(30)
    p.close()


def test_idle_transactional_ids_and_producers_are_forgotten_and_can_start_again(broker_factory, topic_name):
    node = broker_factory({**CONFIG, "transactional.id.expiration.ms": 1500,
                           "transaction.remove.expired.transaction.cleanup.interval.ms": 100,
                           "producer.id.expiration.ms": 1500, "producer.id.expiration.check.interval.ms": 100})
    make_topics(node.bootstrap, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})

    def listed() -> dict[str, str]:
        return {t.transactional_id: t.state for t in admin.list_transactions().result(30)}

    def producers() -> list:
        return admin.describe_producers([tp])[tp].result(30).active_producers

    done = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "done-app"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce(topic_name, value=b"committed")
    done.commit_transaction(30)
    hanging = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "open-app",
                        "transaction.timeout.ms": 120_000})
    hanging.init_transactions(30)
    hanging.begin_transaction()
    hanging.produce(topic_name, value=b"open")
    hanging.flush(30)
    assert listed() == {"done-app": "CompleteCommit", "open-app": "Ongoing"}
    assert len(producers()) == 2

    wait_until(lambda: "done-app" not in listed(), 30, 0.1, "the idle transactional.id forgotten")
    wait_until(lambda: len(producers()) == 1, 30, 0.1, "the idle producer forgotten by the partition")
    assert listed() == {"open-app": "Ongoing"}              # an open transaction is never expired
    assert producers()[0].current_txn_start_offset == 2    # after the record and its commit marker

    node.stop()
    node.start()                                            # the tombstone is replayed: still forgotten
    assert wait_until(lambda: _quietly(listed) == {"open-app": "Ongoing"}, 30, 0.2, "transactions after restart")
    again = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "done-app"})
    again.init_transactions(30)                             # starts afresh, with a new producer id
    again.begin_transaction()
    again.produce(topic_name, value=b"again")
    again.commit_transaction(30)
    assert listed()["done-app"] == "CompleteCommit"
    for p in (done, hanging, again):
        p.close()
    admin.close()


def test_an_idempotent_producer_forgotten_by_a_partition_starts_a_new_epoch(broker_factory, topic_name):
    node = broker_factory({"producer.id.expiration.ms": 1500, "producer.id.expiration.check.interval.ms": 100})
    make_topics(node.bootstrap, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    failed = []
    producer = Producer({"bootstrap.servers": node.bootstrap, "on_delivery": lambda err, msg: err and failed.append(err)})
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        for i in range(3):
            producer.produce(topic_name, value=b"%d" % i)
        assert producer.flush(30) == 0
        [before] = admin.describe_producers([tp])[tp].result(30).active_producers
        assert (before.producer_epoch, before.last_sequence) == (0, 2)
        wait_until(lambda: not admin.describe_producers([tp])[tp].result(30).active_producers, 30, 0.1,
                   "the idle producer forgotten")
        for i in range(3, 6):
            producer.produce(topic_name, value=b"%d" % i)  # sequence 3 is unknown: UnknownProducerId
        assert producer.flush(30) == 0
        [after] = admin.describe_producers([tp])[tp].result(30).active_producers
    producer.close()
    assert failed == []
    assert (after.producer_id, after.producer_epoch, after.last_sequence) == (before.producer_id, 1, 2)
    assert read(node.bootstrap, topic_name, "read_uncommitted", partitions=1, settle=0.5) == \
        [b"%d" % i for i in range(6)]


def test_a_transaction_after_the_partition_forgot_the_producer_commits(broker_factory, topic_name):
    # A transactional producer idle past producer.id.expiration.ms between transactions: its next
    # transaction's first batch (sequence 1) is accepted, not refused with UnknownProducerId.
    node = broker_factory({"producer.id.expiration.ms": 1500, "producer.id.expiration.check.interval.ms": 100})
    make_topics(node.bootstrap, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    failed = []
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "idle-" + topic_name,
                         "on_delivery": lambda err, msg: err and failed.append(err)})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"one")
    producer.commit_transaction(30)
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        wait_until(lambda: not admin.describe_producers([tp])[tp].result(30).active_producers, 30, 0.1,
                   "the idle producer forgotten")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"two")
    producer.commit_transaction(30)
    producer.close()
    assert failed == []
    assert read(node.bootstrap, topic_name, "read_committed", partitions=1, settle=0.5) == [b"one", b"two"]


def _raised(action):
    """The exception ``action()`` raised (the test fails if it raised none)."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the caller inspects it
        action()
    return caught.value


def _requires_abort(error) -> bool:
    """confluent-kafka's error-handling loop: retriable -> retry, txn_requires_abort -> abort, else fatal."""
    err = error.args[0]
    return err.txn_requires_abort() and not err.retriable() and not err.fatal()


def test_offsets_refused_after_a_rebalance_or_for_an_unknown_member_make_the_transaction_abort(broker, topic_name):
    # A transaction whose offsets were refused must not commit its output without them: the input
    # would be processed again (duplicates). As Kafka: a stale member epoch is ILLEGAL_GENERATION,
    # and it or UNKNOWN_MEMBER_ID makes the transaction abortable (txn_requires_abort()).
    src, dst, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-g"
    make_topics(broker.bootstrap, src, dst)
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
              "isolation.level": "read_committed"}
    first = Consumer(config)
    first.subscribe([src])
    wait_until(lambda: first.poll(0.1) is None and len(first.assignment()) == 2, 30, 0, "first consumer assigned")
    before = first.consumer_group_metadata()
    second = Consumer(config)
    second.subscribe([src])
    wait_until(lambda: (first.poll(0.05), second.poll(0.05)) and len(first.assignment()) == 1
               and len(second.assignment()) == 1, 30, 0, "the partitions shared after the rebalance")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-eos"})
    p.init_transactions(30)
    stale = before
    unknown = ConsumerGroupMetadata(group, "no-such-member", before.member_epoch, None)
    for metadata, kind in ((stale, IllegalGenerationError), (unknown, UnknownMemberIdError)):
        p.begin_transaction()
        p.produce(dst, value=b"output", partition=0)
        refused = _raised(lambda: p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], metadata, 10))
        assert isinstance(refused, kind) and _requires_abort(refused), refused
        committing = _raised(lambda: p.commit_transaction(10))
        assert isinstance(committing, kind) and _requires_abort(committing), committing
        producing = _raised(lambda: p.produce(dst, value=b"more"))
        assert isinstance(producing, StateError) and producing.args[0].code() == KafkaError._STATE
        p.abort_transaction(30)
    assert first.committed([TopicPartition(src, 0)], 30)[0].offset < 0
    assert read(broker.bootstrap, dst, "read_committed") == []
    # After the abort the producer goes on: with the current metadata the offsets commit.
    owner = first if TopicPartition(src, 0) in first.assignment() else second
    p.begin_transaction()
    p.produce(dst, value=b"output", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], owner.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    assert first.committed([TopicPartition(src, 0)], 30)[0].offset == 5
    assert read(broker.bootstrap, dst, "read_committed") == [b"output"]
    for client in (p, first, second):
        client.close()


def test_client_side_state_errors_are_local_state(broker, topic_name):
    # librdkafka's _STATE for the producer's own state; still InvalidTxnStateError for except clauses.
    make_topics(broker.bootstrap, topic_name, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-state"})
    p.init_transactions(30)
    outside = [lambda: p.commit_transaction(5), lambda: p.abort_transaction(5),
               lambda: p.produce(topic_name, value=b"outside")]
    errors = [_raised(call) for call in outside]
    p.begin_transaction()
    errors.append(_raised(p.begin_transaction))
    for error in errors:
        assert isinstance(error, InvalidTxnStateError) and error.args[0].code() == KafkaError._STATE, error
    p.abort_transaction(30)
    p.close()


def test_an_abort_after_a_commit_that_timed_out_is_a_retriable_conflict_and_the_commit_resumes(broker, topic_name):
    """librdkafka's ``rd_kafka_txn_curr_api_begin``: once ``commit_transaction`` has sent EndTxn and
    timed out, the coordinator may have decided; ``abort_transaction`` is ``_CONFLICT`` (retriable)
    until the commit is called again, which completes it. The abort used to reach the coordinator
    and fail there (``INVALID_TXN_STATE``: already committed) or, when the EndTxn was lost, abort."""
    from broker.errors import ConflictError, KafkaTimeoutError
    make_topics(broker.bootstrap, topic_name, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-conflict",
                  "linger.ms": 0})
    p.init_transactions(30)
    coordinator = p._txn.coordinator
    real = coordinator.call

    def reply_lost(method, request, timeout=None):      # EndTxn reaches the coordinator; its answer does not
        answer = real(method, request, timeout)
        if method == "EndTxn":
            coordinator.call = real
            raise KafkaTimeoutError("EndTxn: no answer within the timeout")
        return answer

    coordinator.call = reply_lost
    p.begin_transaction()
    p.produce(topic_name, value=b"decided", partition=0)
    with pytest.raises(KafkaTimeoutError):
        p.commit_transaction(30)
    error = _raised(lambda: p.abort_transaction(5))
    assert isinstance(error, ConflictError) and error.args[0].code() == KafkaError._CONFLICT, error
    assert error.args[0].retriable()
    p.commit_transaction(30)                                  # resumed: it completes
    assert read(broker.bootstrap, topic_name, "read_committed", partitions=1) == [b"decided"]
    p.begin_transaction()                                     # and the producer goes on
    p.produce(topic_name, value=b"after", partition=0)
    p.abort_transaction(30)
    p.close()


def test_the_transaction_log_keeps_decisions_on_transaction_state_log_min_isr_replicas(broker, topic_name):
    """Kafka's ``TransactionStateManager.transactionTopicConfigs``: __transaction_state is created with
    ``min.insync.replicas`` = ``transaction.state.log.min.isr`` (2), capped by its replication
    factor, so one node still commits (and three acknowledge a decision only once two hold it)."""
    from broker.client import ConfigResource
    make_topics(broker.bootstrap, topic_name, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-isr"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"v", partition=0)
    p.commit_transaction(30)
    p.close()
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        resource = ConfigResource("topic", "__transaction_state")
        configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["min.insync.replicas"].value == "2"
    assert read(broker.bootstrap, topic_name, "read_committed", partitions=1) == [b"v"]


def test_a_transaction_timeout_the_broker_refuses_makes_init_fatal(broker, topic_name):
    # Kafka's clients treat INVALID_TRANSACTION_TIMEOUT from InitProducerId as fatal.
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-timeout",
                  "transaction.timeout.ms": 3_600_000})    # above transaction.max.timeout.ms
    for _ in range(2):
        error = _raised(lambda: p.init_transactions(30))
        assert isinstance(error, InvalidTxnTimeoutError) and error.args[0].fatal(), error
    assert isinstance(_raised(p.begin_transaction), InvalidTxnTimeoutError)
    p.close()


def test_abort_purges_records_not_sent_yet(broker, topic_name):
    # confluent-kafka: records still queued when the transaction aborts fail with _PURGE_QUEUE
    # (they were delivered before: read_uncommitted readers saw them, with offsets in the reports).
    make_topics(broker.bootstrap, topic_name, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-purge",
                  "linger.ms": 5000})
    p.init_transactions(30)
    p.begin_transaction()
    reports = []
    for i in range(3):
        p.produce(topic_name, value=b"q%d" % i, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    started = time.monotonic()
    p.abort_transaction(30)
    p.poll(0)
    assert time.monotonic() - started < 4        # not held for linger.ms
    assert [(err.code() if err else None, offset) for err, offset in reports] == [(KafkaError._PURGE_QUEUE, -1)] * 3
    p.begin_transaction()
    p.produce(topic_name, value=b"next")
    p.commit_transaction(30)
    p.close()
    assert read(broker.bootstrap, topic_name, "read_uncommitted", partitions=1, settle=0.5) == [b"next"]


def test_a_read_committed_consumer_reports_partition_eof_at_the_last_stable_offset(broker, topic_name):
    # librdkafka's end offset for _PARTITION_EOF is the last stable offset under read_committed:
    # an open transaction holds it back, and the reader is at the end when it reaches it.
    make_topics(broker.bootstrap, topic_name, partitions=1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic_name, value=b"c0")
    plain.produce(topic_name, value=b"c1")
    plain.flush(30)
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-open"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic_name, value=b"open")
    txn.flush(30)
    seen = {}
    for level in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": level, "enable.partition.eof": True})
        c.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        events, deadline = [], time.monotonic() + 15
        while time.monotonic() < deadline and not (events and events[-1][0] == "EOF"):
            m = c.poll(0.2)
            if m is not None:
                events.append(("EOF", m.offset()) if m.error() else (m.value(), m.offset()))
        seen[level] = events
        c.close()
    txn.abort_transaction(30)
    txn.close()
    plain.close()
    assert seen["read_committed"] == [(b"c0", 0), (b"c1", 1), ("EOF", 2)]
    assert seen["read_uncommitted"] == [(b"c0", 0), (b"c1", 1), (b"open", 2), ("EOF", 3)]


def test_a_producer_whose_transactional_id_expired_recovers_by_aborting(broker_factory, topic_name):
    # Kafka's coordinator forgets an idle transactional.id; its producer's next transaction fails,
    # and (as Kafka's Java client) abort_transaction() takes a new producer id instead of EndTxn,
    # so the producer carries on instead of being stuck.
    node = broker_factory({**CONFIG, "transactional.id.expiration.ms": 1500,
                           "transaction.remove.expired.transaction.cleanup.interval.ms": 100})
    make_topics(node.bootstrap, topic_name, partitions=1)
    txn_id = f"{topic_name}-expiring"
    p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"one")
    p.commit_transaction(30)
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        wait_until(lambda: txn_id not in {t.transactional_id for t in admin.list_transactions().result(30)},
                   30, 0.1, "the idle transactional.id forgotten")
    p.begin_transaction()
    reports = []
    p.produce(topic_name, value=b"two", on_delivery=lambda err, msg: reports.append(err))
    p.flush(30)
    # Kafka's coordinator answers INVALID_PRODUCER_ID_MAPPING for an id it does not know: abortable.
    assert [(isinstance(e.exception(), InvalidProducerIdMappingError), e.fatal()) for e in reports] == [(True, False)]
    committing = _raised(lambda: p.commit_transaction(10))
    assert isinstance(committing, InvalidProducerIdMappingError) and _requires_abort(committing)
    p.abort_transaction(30)                 # recovers in place
    p.begin_transaction()
    p.produce(topic_name, value=b"three")
    p.commit_transaction(30)
    p.close()
    assert read(node.bootstrap, topic_name, "read_committed", partitions=1, settle=0.5) == [b"one", b"three"]


def _quietly(fn):
    try:
        return fn()
    except Exception:  # noqa: BLE001 - still starting
        return None
