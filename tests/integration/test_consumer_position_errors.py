"""position() and store_offsets() as confluent-kafka's (librdkafka's ``rd_kafka_position`` and
``rd_kafka_offsets_store``): the position carries the leader epoch of the record before it, and a
partition the client does not know is told apart from one it knows but has not assigned."""
from __future__ import annotations

import time

from broker.client import AdminClient, Consumer, KafkaError, KafkaException, NewTopic, Producer, TopicPartition
from broker.client.message import OFFSET_INVALID


def _code_and_text(call, *args, **kwargs) -> tuple[int, str]:
    try:
        call(*args, **kwargs)
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()
    raise AssertionError(f"{call.__name__} must fail")


def _topic(broker, name: str, partitions: int, values: list[bytes]) -> str:
    """``name`` made with ``partitions``, ``values`` written to its partition 0; the bootstrap."""
    servers = broker.bootstrap
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    p = Producer({"bootstrap.servers": servers})
    for v in values:
        p.produce(name, value=v, partition=0)
    p.flush(30)
    return servers


def _first_record(c: Consumer, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            return m
    raise AssertionError("no record")


def test_position_has_the_epoch_and_store_offsets_tells_unknown_from_unassigned(shared_broker, topic_name):
    servers = _topic(shared_broker, topic_name, 2, [b"a", b"b"])
    with Consumer({"bootstrap.servers": servers, "group.id": topic_name, "enable.auto.commit": False,
                   "enable.auto.offset.store": False}) as c:
        c.assign([TopicPartition(topic_name, 0, 0)])
        record = _first_record(c)
        assert record.leader_epoch() is not None
        mine, unassigned, unknown = c.position([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1),
                                                TopicPartition(topic_name + "-nope", 0)])
        assert (mine.offset, mine.leader_epoch, mine.error) == (1, record.leader_epoch(), None)
        assert (unassigned.offset, unassigned.error) == (OFFSET_INVALID, None)
        assert (unknown.offset, unknown.error.code()) == (OFFSET_INVALID, KafkaError._UNKNOWN_PARTITION)

        nope, other = TopicPartition(topic_name + "-nope", 0, 1), TopicPartition(topic_name, 1, 1)
        assert _code_and_text(c.store_offsets, offsets=[nope]) == (
            KafkaError._UNKNOWN_PARTITION, "StoreOffsets failed: Local: Unknown partition")
        assert _code_and_text(c.store_offsets, offsets=[other]) == (
            KafkaError._STATE, "StoreOffsets failed: Local: Erroneous state")
        # none stored: the last partition's error, as rd_kafka_offsets_store
        assert _code_and_text(c.store_offsets, offsets=[other, nope])[0] == KafkaError._UNKNOWN_PARTITION
        assert _code_and_text(c.store_offsets, offsets=[nope, other])[0] == KafkaError._STATE
        c.store_offsets(offsets=[nope, TopicPartition(topic_name, 0, 1)])  # one stored: no error
        assert [tp.offset for tp in c.commit(asynchronous=False)] == [1]


def test_commit_sends_only_absolute_offsets(shared_broker, topic_name):
    """rd_kafka_cgrp_offsets_commit: a partition given OFFSET_INVALID (position() before any fetch)
    keeps its committed offset, and nothing absolute to send is _NO_OFFSET."""
    servers = shared_broker.bootstrap
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    with Consumer({"bootstrap.servers": servers, "group.id": topic_name, "enable.auto.commit": False}) as c:
        c.commit(offsets=[TopicPartition(topic_name, 0, 3), TopicPartition(topic_name, 1, 4)], asynchronous=False)
        out = c.commit(offsets=[TopicPartition(topic_name, 0, OFFSET_INVALID), TopicPartition(topic_name, 1, 7)],
                       asynchronous=False)
        assert [(tp.partition, tp.offset) for tp in out] == [(0, OFFSET_INVALID), (1, 7)]
        assert [tp.offset for tp in c.committed([tp0, tp1], timeout=30)] == [3, 7]
        for offsets in ([TopicPartition(topic_name, 0, OFFSET_INVALID)], []):
            assert _code_and_text(c.commit, offsets=offsets, asynchronous=False)[0] == KafkaError._NO_OFFSET
        assert [tp.offset for tp in c.committed([tp0, tp1], timeout=30)] == [3, 7]


def test_commit_of_a_message_carries_its_leader_epoch(shared_broker, topic_name):
    servers = _topic(shared_broker, topic_name, 1, [b"a"])
    tp0 = TopicPartition(topic_name, 0)
    with Consumer({"bootstrap.servers": servers, "group.id": topic_name, "enable.auto.commit": False}) as c:
        c.assign([TopicPartition(topic_name, 0, 0)])
        record = _first_record(c)
        c.commit(message=record, asynchronous=False)
        [committed] = c.committed([tp0], timeout=30)
        assert (committed.offset, committed.leader_epoch) == (1, record.leader_epoch())


def test_offsets_of_a_partition_the_topic_lacks_fail_unknown_partition(shared_broker, topic_name):
    """rd_kafka_topic_partition_list_get_leaders: a partition its topic does not have is a permanent
    _UNKNOWN_PARTITION (not retried until the timeout, then UNKNOWN_TOPIC_OR_PART)."""
    servers = shared_broker.bootstrap
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    with Consumer({"bootstrap.servers": servers, "group.id": topic_name}) as c:
        assert _code_and_text(c.get_watermark_offsets, TopicPartition(topic_name, 5), 2) == (
            KafkaError._UNKNOWN_PARTITION, "Failed to get watermark offsets: Local: Unknown partition")
        lookups = [TopicPartition(topic_name, 0, 0), TopicPartition(topic_name, 5, 0)]
        assert _code_and_text(c.offsets_for_times, lookups, 2)[0] == KafkaError._UNKNOWN_PARTITION
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), 10) == (0, 0)
