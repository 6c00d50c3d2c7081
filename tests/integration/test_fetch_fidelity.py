"""Fetch read paths as Kafka's and librdkafka's: ``auto.offset.reset=latest`` after
OffsetOutOfRange asks ListOffsets (the last stable offset under read_committed), ``fetch.max.bytes``
bounds a whole response (KIP-74: only the first partition with records may exceed it), and
``fetch.min.bytes=0`` answers at once."""
from __future__ import annotations

import os
import time

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.client.cluster import ClusterClient
from broker.client.config import CONSUMER_CONFIG, client_config
from broker.proto import riverlog_pb2 as pb
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _raw_fetch(bootstrap: str, topic: str, partitions, max_bytes: int, min_bytes: int = 1,
               max_wait_ms: int = 0, offset: int = 0) -> pb.FetchResponse:
    cluster = ClusterClient.from_config(client_config(CONSUMER_CONFIG, {"bootstrap.servers": bootstrap}, {}))
    try:
        cluster.refresh([topic])
        request = pb.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                  max_bytes=max_bytes, isolation_level=0)
        t = request.topics.add(name=topic)
        for p in partitions:
            t.partitions.add(partition=p, fetch_offset=offset, max_bytes=max_bytes)
        return cluster.stub(cluster.leader(topic, partitions[0])).Fetch.with_call(request, timeout=30)[0]
    finally:
        cluster.close()


def test_offset_out_of_range_reset_to_latest_starts_at_the_last_stable_offset(shared_broker, topic_name):
    """librdkafka's rd_kafka_offset_reset / Kafka's requestOffsetResetIfPartitionAssigned: "latest"
    is what ListOffsets answers for the consumer's isolation level, not the log end the
    OffsetOutOfRange error carries, or a transaction open at the reset is skipped once it commits."""
    bootstrap = shared_broker.bootstrap
    _create(bootstrap, topic_name, 1)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        plain.produce(topic_name, value=b"plain%d" % i, partition=0)
    plain.flush(30)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic_name, value=b"txn%d" % i, partition=0)                  # offsets 5-7, open
    txn.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                         "auto.offset.reset": "latest"})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 1000)])                    # out of range
        got = []

        def position() -> int:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                got.append(message.value())
            return consumer.position([TopicPartition(topic_name, 0)])[0].offset

        wait_until(lambda: position() >= 0, 20, 0, "a position after the offset reset")
        assert position() == 5  # the last stable offset, not the log end (8)
        txn.commit_transaction(30)
        wait_until(lambda: position() >= 9 and len(got) == 3, 20, 0, "the committed transaction")
        assert got == [b"txn0", b"txn1", b"txn2"]
    finally:
        consumer.close()
        txn.close()


def test_fetch_max_bytes_bounds_the_response_and_only_the_first_partition_may_exceed_it(shared_broker,
                                                                                        topic_name):
    """Kafka's ReplicaManager.readFromLog: minOneMessage is true only until a partition returned
    records, so a later partition's batch that does not fit what is left is not returned."""
    bootstrap = shared_broker.bootstrap
    _create(bootstrap, topic_name, 3)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "compression.type": "none"})
    producer.produce(topic_name, value=b"s" * 30_000, partition=0)
    producer.produce(topic_name, value=os.urandom(200_000), partition=1)
    producer.produce(topic_name, value=os.urandom(200_000), partition=2)
    producer.flush(30)

    response = _raw_fetch(bootstrap, topic_name, [0, 1, 2], max_bytes=100_000)
    sizes = {r.partition: len(r.records) for r in response.topics[0].partitions}
    assert sizes[0] > 0 and sizes[1] == sizes[2] == 0
    assert sum(sizes.values()) <= 100_000

    first = _raw_fetch(bootstrap, topic_name, [1, 0], max_bytes=100_000)           # KIP-74: the first one
    sizes = {r.partition: len(r.records) for r in first.topics[0].partitions}
    assert sizes[1] > 200_000 and sizes[0] == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "fetch.max.bytes": 100_000,
                         "max.partition.fetch.bytes": 100_000})
    try:
        consumer.assign([TopicPartition(topic_name, p, 0) for p in range(3)])
        seen = set()

        def every_partition() -> bool:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen.add(message.partition())
            return seen == {0, 1, 2}

        wait_until(every_partition, 30, 0, "a record of every partition")
    finally:
        consumer.close()


def test_fetch_min_bytes_zero_answers_at_once(shared_broker, topic_name):
    """Kafka answers a fetch when bytesReadable >= minBytes: with 0, at once, data or not. The
    client's own default stays 1 (as librdkafka's), so an idle consumer long-polls."""
    bootstrap = shared_broker.bootstrap
    _create(bootstrap, topic_name, 1)
    start = time.monotonic()
    response = _raw_fetch(bootstrap, topic_name, [0], max_bytes=100_000, min_bytes=0, max_wait_ms=10_000)
    assert time.monotonic() - start < 5.0
    assert response.topics[0].partitions[0].records == b""
    assert client_config(CONSUMER_CONFIG, {"bootstrap.servers": bootstrap}, {})["fetch.min.bytes"] == 1
