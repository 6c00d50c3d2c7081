"""Offsets sent to transactions (consume-transform-produce), against a real broker process, as Kafka
and librdkafka handle them: stable offset fetches (KIP-447), write order of committed and pending
offsets, OffsetDelete of a pending offset, verification with the transaction coordinator
(KIP-890), and send_offsets_to_transaction's retries and arguments."""
from __future__ import annotations

import threading
import time

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.client.consumer import ConsumerGroupMetadata
from broker.client.coordinator import CoordinatorClient
from broker.errors import (IllegalGenerationError, InvalidConfigError, KafkaError, KafkaTimeoutError,
                           UnknownMemberIdError)
from broker.proto import riverlog_pb2 as pb

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

OUTSIDER = ""  # an assign()-style commit: no member id, epoch -1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from tests.conftest import BrokerProcess
    b = BrokerProcess(str(tmp_path_factory.mktemp("txnoffsets")), {"group.min.session.timeout.ms": 300}).start()
    yield b
    b.kill9()


@pytest.fixture
def topics(broker, topic_name):
    src, out = f"{topic_name}-src", f"{topic_name}-out"
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        for name in (src, out):
            admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    return src, out


def _producer(broker, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    return p


def _open(broker, txn_id: str, out: str, offsets, group: str) -> Producer:
    """A transaction with one record and ``offsets`` sent to it, left open."""
    p = _producer(broker, txn_id)
    p.begin_transaction()
    p.produce(out, value=b"x", partition=0)
    p.flush(10)
    p.send_offsets_to_transaction(offsets, ConsumerGroupMetadata(group, OUTSIDER, -1, ""), 30)
    return p


def _committed(broker, group, tps, level="read_committed", timeout=30):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": level})
    try:
        return [tp.offset for tp in c.committed(tps, timeout)]
    finally:
        c.close()


def _commit(broker, group, tps) -> None:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=tps, asynchronous=False)
    finally:
        c.close()


def test_a_read_committed_consumer_waits_for_the_transaction_that_holds_the_offset(broker, topics):
    # KIP-447: the partition's new owner must not read the offset the open transaction is about to
    # move (it would process the transaction's input again); librdkafka sends require_stable for
    # read_committed and retries UNSTABLE_OFFSET_COMMIT.
    src, out = topics
    group = f"{src}-g"
    _commit(broker, group, [TopicPartition(src, 0, 3)])
    p = _open(broker, f"{src}-t", out, [TopicPartition(src, 0, 10)], group)
    assert _committed(broker, group, [TopicPartition(src, 0)], "read_uncommitted") == [3]
    with pytest.raises(KafkaTimeoutError, match="UNSTABLE_OFFSET_COMMIT"):
        _committed(broker, group, [TopicPartition(src, 0)], timeout=1)
    # confluent-kafka's "no timeout" (-1) waits as the default does, request.timeout.ms here
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "request.timeout.ms": 1000})
    try:
        with pytest.raises(KafkaTimeoutError, match=r"after 1s \(UNSTABLE_OFFSET_COMMIT\)"):
            c.committed([TopicPartition(src, 0)], timeout=-1)
    finally:
        c.close()
    seen = []
    reader = threading.Thread(target=lambda: seen.append(_committed(broker, group, [TopicPartition(src, 0)])))
    reader.start()
    p.commit_transaction(30)
    reader.join(60)
    assert seen == [[10]]


def test_a_transaction_does_not_move_back_an_offset_committed_after_its_offsets(broker, topics):
    # Kafka's replayEndTransactionMarker compares record offsets: the later write wins.
    src, out = topics
    group = f"{src}-g"
    p = _open(broker, f"{src}-t", out, [TopicPartition(src, 0, 5)], group)
    _commit(broker, group, [TopicPartition(src, 0, 10)])
    p.commit_transaction(30)
    assert _committed(broker, group, [TopicPartition(src, 0)]) == [10]
    # two transactions: the one whose offsets were written later commits first
    old = _open(broker, f"{src}-old", out, [TopicPartition(src, 1, 5)], group)
    new = _open(broker, f"{src}-new", out, [TopicPartition(src, 1, 8)], group)
    new.commit_transaction(30)
    old.commit_transaction(30)
    assert _committed(broker, group, [TopicPartition(src, 1)]) == [8]


def test_offset_delete_also_deletes_the_offset_pending_in_a_transaction(broker, topics):
    src, out = topics
    group = f"{src}-g"
    _commit(broker, group, [TopicPartition(src, 0, 3)])
    p = _open(broker, f"{src}-t", out, [TopicPartition(src, 0, 5)], group)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_consumer_group_offsets(group, [TopicPartition(src, 0)]).result(30)
    p.commit_transaction(30)
    assert _committed(broker, group, [TopicPartition(src, 0)]) == [-1001]


def test_offsets_outside_the_producer_s_transaction_are_refused(broker, topics):
    # KIP-890: the group's coordinator verifies with the transaction coordinator; a TxnOffsetCommit
    # without AddOffsetsToTxn was kept pending and applied by a later transaction's commit marker.
    src, out = topics
    group = f"{src}-g"
    p = _producer(broker, f"{src}-t")
    p.begin_transaction()
    p.produce(out, value=b"x", partition=0)
    p.flush(10)
    handle = p.transaction_handle()
    request = pb.TxnOffsetCommitRequest(
        transactional_id=handle.transactional_id, group_id=group, producer_id=handle.producer_id,
        producer_epoch=handle.producer_epoch, member_id="", member_epoch=-1,
        topics=[pb.CommitTopic(name=src, partitions=[pb.CommitPartition(partition=1, offset=777, leader_epoch=-1)])])
    response = CoordinatorClient(p.cluster, group).call("TxnOffsetCommit", request, 10)
    assert [r.error_code for r in response.results] == [KafkaError.INVALID_TXN_STATE]
    p.abort_transaction(10)
    p.begin_transaction()
    p.produce(out, value=b"y", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], ConsumerGroupMetadata(group, "", -1, ""), 30)
    p.commit_transaction(30)
    assert _committed(broker, group, [TopicPartition(src, 0), TopicPartition(src, 1)]) == [5, -1001]


def test_a_transient_refusal_is_retried_until_the_timeout_then_the_transaction_must_abort(broker, topics):
    # librdkafka retries a retriable TxnOffsetCommit every 500 ms until the call's timeout, then the
    # transaction is abortable: it never commits with part of its offsets.
    src, out = topics
    group = f"{src}-g"
    p = _producer(broker, f"{src}-t")
    p.begin_transaction()
    p.produce(out, value=b"x", partition=0)
    p.flush(10)
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        p.send_offsets_to_transaction([TopicPartition(src, 0, 5), TopicPartition(src, 7, 7)],
                                      ConsumerGroupMetadata(group, "", -1, ""), 2)
    error = caught.value.args[0]
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and error.txn_requires_abort()
    assert time.monotonic() - started >= 1.0   # retried, not given up at the first answer
    with pytest.raises(Exception) as refused:
        p.commit_transaction(10)
    assert refused.value.args[0].txn_requires_abort()
    p.abort_transaction(10)
    assert _committed(broker, group, [TopicPartition(src, 0)]) == [-1001]


def test_send_offsets_arguments_as_librdkafka(broker, topics):
    src, out = topics
    p = _producer(broker, f"{src}-t")
    p.begin_transaction()
    # no valid offset (nothing consumed): nothing is sent, the transaction stays as it was
    p.send_offsets_to_transaction([TopicPartition(src, 0, -1001)], ConsumerGroupMetadata(f"{src}-g", "", -1, ""), 10)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        described = admin.describe_transactions([f"{src}-t"])[f"{src}-t"].result(10)
    assert described.groups == [] and described.state == "Empty"
    with pytest.raises(InvalidConfigError) as caught:
        p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], None, 10)
    assert caught.value.args[0].code() == KafkaError._INVALID_ARG
    p.abort_transaction(10)


def test_transactional_commit_errors_as_validate_transactional_offset_commit(broker, topics):
    src, out = topics
    p = _producer(broker, f"{src}-t")
    p.begin_transaction()
    with pytest.raises(IllegalGenerationError):   # no such group, but a member epoch: nothing created
        p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], ConsumerGroupMetadata(f"{src}-none", "m1", 5, ""), 10)
    p.abort_transaction(10)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        assert f"{src}-none" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{src}-live", "enable.auto.commit": False,
                       "session.timeout.ms": 6000})
    try:
        member.subscribe([src])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.1)
        p.begin_transaction()
        with pytest.raises(UnknownMemberIdError):      # an outsider, while the group has a member
            p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], ConsumerGroupMetadata(f"{src}-live", "", -1, ""), 10)
        p.abort_transaction(10)
    finally:
        member.close()
    p.begin_transaction()                             # a member id with epoch -1, on an empty group
    p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], ConsumerGroupMetadata(f"{src}-empty", "someid", -1, ""), 10)
    p.commit_transaction(30)
    assert _committed(broker, f"{src}-empty", [TopicPartition(src, 0)]) == [5]


def test_offsets_sent_to_a_transaction_keep_their_leader_epoch(broker, topics):
    """librdkafka's TxnOffsetCommit carries each offset's leader epoch (KIP-320), so a consumer
    resuming from the committed offset can validate it against log truncation."""
    src, out = topics
    group = f"{src}-epoch"
    p = _open(broker, f"{src}-epoch-txn", out, [TopicPartition(src, 0, 5, leader_epoch=0)], group)
    p.commit_transaction(30)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    try:
        [got] = c.committed([TopicPartition(src, 0)], 30)
    finally:
        c.close()
    assert (got.offset, got.leader_epoch) == (5, 0)
