"""Bad input gets a typed error, stores nothing, and the broker keeps serving everyone else."""
from __future__ import annotations

import grpc
import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.client.cluster import ClusterClient, translate_rpc_error
from broker.errors import (CorruptRecordError, InvalidConfigError, InvalidPartitionsError, InvalidRecordError,
                           InvalidReplicationFactorError, InvalidRequestError, InvalidTopicError,
                           MessageTooLargeError, OffsetOutOfRangeError, RecordListTooLargeError,
                           TopicAlreadyExistsError, UnknownPartitionError, UnknownTopicOrPartitionError,
                           UnsupportedVersionError, error_for_code)
from broker.proto import riverlog_pb2 as pb
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import MAGIC_KAFKA_V2, build_batch
from tests.integration.test_produce_consume import create, read_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def admin(shared_broker):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as client:
        yield client


def raw_produce(servers: str, topic: str, records: bytes, partition: int = 0):
    cluster = ClusterClient(servers)
    try:
        request = pb.ProduceRequest(acks=-1, topics=[pb.ProduceTopic(
            name=topic, partitions=[pb.ProducePartition(partition=partition, records=records)])])
        result = cluster.call("Produce", request).topics[0].partitions[0]
        return error_for_code(result.error_code) if result.error_code else None, result
    finally:
        cluster.close()


def raw_fetch(servers: str, topic: str, offset: int):
    cluster = ClusterClient(servers)
    try:
        request = pb.FetchRequest(replica_id=-1, max_wait_ms=0, topics=[pb.FetchTopic(
            name=topic, partitions=[pb.FetchPartition(partition=0, fetch_offset=offset, max_bytes=1 << 20)])])
        return cluster.call("Fetch", request).topics[0].partitions[0]
    finally:
        cluster.close()


def log_end(servers: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": servers})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
    finally:
        consumer.close()


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "bad name!", "a/b", "tópico"])
def test_invalid_topic_names(admin, name):
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic(name, 1)])[name].result(10)


def test_invalid_topic_settings(admin, topic_name):
    # counts librdkafka refuses before sending: ValueError from the call, as confluent-kafka's
    for bad in (NewTopic(topic_name + "-p", -5), NewTopic(topic_name + "-p", 100_001), NewTopic(topic_name + "-rf", 1, -2)):
        with pytest.raises(ValueError, match="out of expected range"):
            admin.create_topics([NewTopic(topic_name + "-ok", 1), bad])
    cases = [(NewTopic(topic_name + "-p", 0), InvalidPartitionsError),
             (NewTopic(topic_name + "-rf", 1, 3), InvalidReplicationFactorError),
             (NewTopic(topic_name + "-cfg", 1, 1, {"no.such.config": "1"}), InvalidConfigError),
             (NewTopic(topic_name + "-val", 1, 1, {"retention.ms": "soon"}), InvalidConfigError)]
    futures = admin.create_topics([t for t, _ in cases])
    for topic, error in cases:
        with pytest.raises(error) as info:
            futures[topic.topic].result(10)
        assert info.value.message
    assert not set(admin.list_topics().topics) & ({t.topic for t, _ in cases} | {topic_name + "-ok"}), \
        "a refused topic was created"


def test_duplicate_create(admin, topic_name):
    admin.create_topics([NewTopic(topic_name, 2)])[topic_name].result(10)
    with pytest.raises(TopicAlreadyExistsError, match=topic_name):
        admin.create_topics([NewTopic(topic_name, 5)])[topic_name].result(10)
    assert len(admin.list_topics(topic_name).topics[topic_name].partitions) == 2


def test_unknown_topic_and_partition(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    create(servers, topic_name)
    reports = []
    with Producer({"bootstrap.servers": servers, "topic.metadata.propagation.max.ms": 300}) as producer:
        producer.produce(topic_name + "-missing", value=b"x", on_delivery=lambda e, m: reports.append(e))
        producer.produce(topic_name, value=b"y", partition=7, on_delivery=lambda e, m: reports.append(e))
        producer.flush(20)
    # The missing topic is created on first use (auto.create.topics.enable, on by default as Kafka's;
    # test_kafka_habits covers a broker with it off); a missing partition stays an error.
    assert {type(e and e.exception()) for e in reports} == {type(None), UnknownPartitionError}, reports
    assert "7" in next(e for e in reports if isinstance(e.exception(), UnknownPartitionError)).str()
    error, _ = raw_produce(servers, topic_name, encode_batch(record_batch([None], [b"z"], [1])), partition=3)
    assert error is UnknownTopicOrPartitionError
    consumer = Consumer({"bootstrap.servers": servers})
    consumer.assign([TopicPartition(topic_name, 9, 0)])
    event = consumer.poll(10)
    assert event is not None and isinstance(event.error().exception(), UnknownTopicOrPartitionError)
    consumer.close()
    assert log_end(servers, topic_name) == 0


def test_oversized_batches(broker_factory, topic_name):
    broker = broker_factory({"socket.request.max.bytes": 2 * 1024 * 1024})
    servers = broker.bootstrap
    create(servers, topic_name, max_message_bytes=2000)
    reports = []
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as producer:
        producer.produce(topic_name, value=b"x" * 5000, on_delivery=lambda e, m: reports.append(e))
        producer.flush(20)
        with pytest.raises(MessageTooLargeError):
            producer.produce(topic_name, value=b"x" * 2_000_000)
    assert len(reports) == 1 and isinstance(reports[0].exception(), MessageTooLargeError)
    assert "2000" in reports[0].str()
    with pytest.raises(RecordListTooLargeError):
        raw_produce(servers, topic_name, b"\0" * (3 * 1024 * 1024))
    assert log_end(servers, topic_name) == 0


def test_corrupt_and_malformed_batches_store_nothing(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    create(servers, topic_name)
    good = encode_batch(record_batch([b"k"], [b"v"], [1]))
    bad_crc = bytearray(good)
    bad_crc[-5] ^= 0xFF
    garbage_body = build_batch(b"not an arrow message at all", record_count=1, base_timestamp=1, max_timestamp=1)
    wrong_magic = build_batch(b"x" * 20, record_count=1, base_timestamp=1, max_timestamp=1, magic=MAGIC_KAFKA_V2)
    cases = [(bytes(bad_crc), CorruptRecordError), (good[:40], CorruptRecordError),
             (good[:-3], CorruptRecordError), (garbage_body, InvalidRecordError),
             (wrong_magic, UnsupportedVersionError), (good + good[:30], CorruptRecordError)]
    for payload, expected in cases:
        error, result = raw_produce(servers, topic_name, payload)
        assert error is expected, (expected, result.error_message)
        assert result.error_message
    assert log_end(servers, topic_name) == 0
    assert raw_produce(servers, topic_name, good)[0] is None
    assert [m.value() for m in read_all(servers, topic_name, 1, 1)] == [b"v"]


def test_out_of_range_offsets(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    create(servers, topic_name)
    with Producer({"bootstrap.servers": servers}) as producer:
        for i in range(10):
            producer.produce(topic_name, value=b"%d" % i)
        producer.flush(10)
    for offset in (-5, 11, 10_000):
        result = raw_fetch(servers, topic_name, offset)
        assert error_for_code(result.error_code) is OffsetOutOfRangeError
        assert (result.log_start_offset, result.log_end_offset) == (0, 10)
    assert raw_fetch(servers, topic_name, 10).error_code == 0  # the log end itself is a valid position

    earliest = Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"})
    earliest.assign([TopicPartition(topic_name, 0, 500)])
    assert earliest.poll(10).offset() == 0
    earliest.close()
    strict = Consumer({"bootstrap.servers": servers, "auto.offset.reset": "error"})
    strict.assign([TopicPartition(topic_name, 0, 500)])
    event = strict.poll(10)
    assert isinstance(event.error().exception(), OffsetOutOfRangeError)
    strict.close()

    cluster = ClusterClient(servers)
    request = pb.ListOffsetsRequest(topics=[pb.ListOffsetsTopic(
        name=topic_name, partitions=[pb.ListOffsetsPartition(partition=0, timestamp=-7)])])
    r = cluster.call("ListOffsets", request).topics[0].partitions[0]
    cluster.close()
    assert error_for_code(r.error_code) is InvalidRequestError


def test_bad_client_config_names_the_option():
    with pytest.raises(InvalidConfigError, match="linger.ms"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": "soon"})
    with pytest.raises(InvalidConfigError, match="no.such"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "no.such": 1})
    with pytest.raises(InvalidConfigError, match="compression.type"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "compression.type": "gzip"})


def test_broker_keeps_serving_after_bad_input(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    create(servers, topic_name)
    for _ in range(20):
        raw_produce(servers, topic_name, b"\xff" * 100)
    channel = grpc.insecure_channel(servers)
    with pytest.raises(grpc.RpcError) as info:
        channel.unary_unary("/riverlog.v1.Riverlog/Produce")(b"\x0a\xff\xff\xff", timeout=5)
    assert translate_rpc_error(info.value, "Produce").retriable is False
    channel.close()
    with Producer({"bootstrap.servers": servers}) as producer:
        producer.produce(topic_name, value=b"still fine")
        assert producer.flush(10) == 0
    assert [m.value() for m in read_all(servers, topic_name, 1, 1)] == [b"still fine"]
