"""The riverlog sink against Spark's Kafka sink (``KafkaWriter``/``KafkaRowWriter``) and the
``ProducerRecord`` rules its rows pass through: per-partition input order, oversized records,
negative partitions and timestamps, header keys and types, exact column names, an empty topic."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructField, StructType,
                               TimestampType)

from broker.client import Consumer, TopicPartition
from broker.errors import InvalidConfigError, InvalidTimestampError, MessageTooLargeError
from spark_sink.options import SinkOptions, check_schema
from spark_sink.writer import BatchWriter
from tests.spark.test_sink import make_topic, read_all

pytestmark = [pytest.mark.spark, pytest.mark.integration]

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
ARROW_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def schema(**columns) -> StructType:
    return StructType([StructField(name, t) for name, t in columns.items()])


def write(broker, topic, struct: StructType, *batches, **options) -> None:
    """A batch write of one task, given the Arrow batches Spark would hand ``write()``: the task,
    then the driver's commit (exactly-once, the default)."""
    opts = {"riverlog.bootstrap.servers": broker.bootstrap, "riverlog.linger.ms": "1", **options}
    if topic is not None:
        opts["topic"] = topic
    writer = BatchWriter(opts, struct)
    writer.commit([writer.write_partition(iter(batches), writer.sink_id, 0, 0, 0, check_replay=False)])


def offsets(broker, topic: str, partitions: int = 1):
    """(partition, offset, value) of every committed record, in offset order per partition."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        while msgs := c.consume(10_000, 0.6):
            out += [(m.partition(), m.offset(), m.value().decode()) for m in msgs if m.error() is None]
        return sorted(out)
    finally:
        c.close()


# ------------------------------------------------------------------------------ order
def test_rows_for_one_partition_keep_input_order_when_partitions_are_mixed_null_and_explicit(spark, spark_broker):
    """Spark sends row by row and the producer keeps a partition's order: the partitioner's rows
    and the rows naming the partition stay interleaved as in the input (the latest value of a key
    is what compaction keeps)."""
    topic = make_topic(spark_broker, "fidelity-order", 1)
    rows = [("k", f"v{i}", None if i % 2 else 0) for i in range(1, 7)]
    df = spark.createDataFrame(rows, "key string, value string, partition int").coalesce(1)
    df.write.format("riverlog").option("riverlog.bootstrap.servers", spark_broker.bootstrap) \
        .option("topic", topic).mode("append").save()
    assert [v for _, _, v in offsets(spark_broker, topic)] == [f"v{i}" for i in range(1, 7)]


def test_a_topic_column_keeps_each_partitions_input_order(spark_broker):
    a, b = make_topic(spark_broker, "fidelity-order-a", 1), make_topic(spark_broker, "fidelity-order-b", 1)
    topics = [a, b, a, a, b, a]
    batch = pa.record_batch({"key": pa.array([b"k"] * 6), "value": [f"v{i}" for i in range(6)],
                             "topic": topics, "partition": pa.array([None, 0, 0, None, None, 0], pa.int32())})
    write(spark_broker, None, schema(key=BinaryType(), value=StringType(), topic=StringType(),
                                     partition=IntegerType()), batch)
    assert [v for _, _, v in offsets(spark_broker, a)] == ["v0", "v2", "v3", "v5"]
    assert [v for _, _, v in offsets(spark_broker, b)] == ["v1", "v4"]


# ------------------------------------------------------------------------------ sizes
def test_an_oversized_record_fails_the_exactly_once_write_and_nothing_of_it_commits(spark_broker):
    """librdkafka refuses a message over message.max.bytes on every produce path: the task fails with
    MessageTooLargeError and its transaction, with the earlier batch's rows, is aborted."""
    topic = make_topic(spark_broker, "fidelity-too-large", 1)
    first = pa.record_batch({"value": [b"small1", b"small2"]})
    second = pa.record_batch({"value": [b"small3", b"x" * 5000, b"small4"]})
    with pytest.raises(MessageTooLargeError, match=r"record 1 of the batch .* 5000 bytes .* message.max.bytes=2000"):
        write(spark_broker, topic, schema(value=BinaryType()), first, second, **{"riverlog.message.max.bytes": "2000"})
    assert read_all(spark_broker, topic, partitions=1) == []


def test_max_request_size_caps_one_record_as_kafkas_producer(spark, spark_broker):
    """Kafka's ``KafkaProducer.ensureValidRecordSize``: a record over max.request.size is refused."""
    topic = make_topic(spark_broker, "fidelity-request-size", 1)
    df = spark.createDataFrame([("small1",), ("x" * 5000,), ("small2",)], "value string").coalesce(1)
    with pytest.raises(Exception, match=r"MessageTooLargeError: record 1 .* max.request.size=2000"):
        df.write.format("riverlog").option("riverlog.bootstrap.servers", spark_broker.bootstrap) \
            .option("topic", topic).option("riverlog.max.request.size", "2000").mode("append").save()
    assert read_all(spark_broker, topic, "read_uncommitted", partitions=1) == []


# ------------------------------------------------------------------------------ ProducerRecord's rules
def test_a_negative_partition_is_refused_as_producer_record_refuses_it(spark_broker):
    topic = make_topic(spark_broker, "fidelity-negative-partition", 1)
    batch = pa.record_batch({"value": [b"a", b"b", b"c"], "partition": pa.array([None, -1, -5], pa.int32())})
    with pytest.raises(InvalidConfigError, match=r"^Invalid partition: -1\. Partition number should always be "
                                                 r"non-negative or null\.$"):
        write(spark_broker, topic, schema(value=BinaryType(), partition=IntegerType()), batch)
    assert read_all(spark_broker, topic, "read_uncommitted", partitions=1) == []


def test_a_timestamp_before_1970_is_refused_as_producer_record_refuses_it(spark_broker):
    topic = make_topic(spark_broker, "fidelity-negative-timestamp", 1)
    struct = schema(value=BinaryType(), timestamp=TimestampType())
    before = pa.record_batch({"value": [b"a", b"b"],
                              "timestamp": pa.array([1_000, -1_000_000], pa.timestamp("us", tz="UTC"))})
    with pytest.raises(InvalidTimestampError, match=r"^Invalid timestamp: -1000\. Timestamp should always be "
                                                    r"non-negative or null\.$"):
        write(spark_broker, topic, struct, before)
    assert read_all(spark_broker, topic, "read_uncommitted", partitions=1) == []
    # Spark strips the microseconds by integer division: -999 µs is 0 ms, which Kafka takes.
    write(spark_broker, topic, struct, pa.record_batch(
        {"value": [b"c"], "timestamp": pa.array([-999], pa.timestamp("us", tz="UTC"))}))
    assert [(v, ts) for _, v, _, ts in read_all_with_time(spark_broker, topic)] == [(b"c", 0)]


def read_all_with_time(broker, topic):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        while msgs := c.consume(10_000, 0.6):
            out += [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in msgs if m.error() is None]
        return out
    finally:
        c.close()


def test_a_null_header_key_is_refused_as_record_header_refuses_it(spark_broker):
    topic = make_topic(spark_broker, "fidelity-header-key", 1)
    batch = pa.record_batch({"value": [b"a", b"b"],
                             "headers": pa.array([[("h", b"1")], [(None, b"2")]], ARROW_HEADERS)})
    with pytest.raises(InvalidConfigError, match="^Null header keys are not permitted$"):
        write(spark_broker, topic, schema(value=BinaryType(), headers=HEADERS), batch)
    assert read_all(spark_broker, topic, "read_uncommitted", partitions=1) == []
    # A null header value is a header: Kafka keeps it.
    write(spark_broker, topic, schema(value=BinaryType(), headers=HEADERS),
          pa.record_batch({"value": [b"c"], "headers": pa.array([[("h", None)]], ARROW_HEADERS)}))
    assert [h for _, _, h, _ in read_all(spark_broker, topic, partitions=1)] == [[("h", None)]]


def test_headers_must_be_sparks_headers_type_exactly():
    """Spark's Kafka sink takes ``array<struct<key:string,value:binary>>`` only ("headers attribute
    unsupported type"): string values are cast by nobody."""
    opts = SinkOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "topic": "t"})
    strings = ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())]))
    with pytest.raises(InvalidConfigError, match=r"column 'headers' .* array<struct<key:string,value:binary>>"):
        check_schema(schema(value=BinaryType(), headers=strings), opts)
    check_schema(schema(value=BinaryType(), headers=HEADERS), opts)


# ------------------------------------------------------------------------------ names and the topic option
def test_column_names_match_exactly_as_in_sparks_kafka_sink(spark_broker):
    opts = SinkOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "topic": "t"})
    with pytest.raises(InvalidConfigError, match="Required attribute 'value' not found"):
        check_schema(schema(Value=BinaryType()), opts)
    # ``Key`` is not the key: Spark writes a null key and ignores the column.
    topic = make_topic(spark_broker, "fidelity-names", 1)
    write(spark_broker, topic, schema(value=BinaryType(), Key=BinaryType()),
          pa.record_batch({"value": [b"v"], "Key": [b"k"]}))
    assert [(k, v) for k, v, _, _ in read_all(spark_broker, topic, partitions=1)] == [(None, b"v")]


@pytest.mark.parametrize("option", ["", "   "])
def test_an_empty_topic_option_is_refused_not_taken_as_unset(option):
    """Spark takes a set ``topic`` option (trimmed) as every row's topic, whatever the column says."""
    with pytest.raises(InvalidConfigError, match="option 'topic' is") as raised:
        SinkOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "topic": option})
    assert raised.value.details["config"] == "topic"
