"""Spark's Kafka sink options and save modes in real writes; foreachBatch with sinkId/batchId; a
decided batch lost to riverlog.transaction.timeout.ms."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from broker.client import AdminClient
from spark_sink import TransactionLostError
from spark_sink.commit_log import CommitLog
from spark_sink.protocol import Decision
from spark_sink.writer import StreamWriter
from tests.conftest import wait_until
from tests.spark.test_sink import make_topic, read_all, values, write_json_files

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def writer(df, broker, topic):
    return df.write.format("riverlog").option("riverlog.bootstrap.servers", broker.bootstrap).option("topic", topic)


def test_save_modes_as_sparks_kafka_sink(spark, spark_broker):
    topic = make_topic(spark_broker, "sink-modes", 1)
    df = spark.createDataFrame([(str(i),) for i in range(5)], "value string")
    writer(df, spark_broker, topic).mode("append").save()
    # Overwrite and Ignore are refused, as by Spark's Kafka sink: a topic cannot be emptied.
    with pytest.raises(Exception, match="save mode 'overwrite' is not allowed"):
        writer(df, spark_broker, topic).mode("overwrite").save()
    with pytest.raises(Exception, match='"Ignore" mode'):
        writer(df, spark_broker, topic).mode("ignore").save()
    # The default, ErrorIfExists, is refused by Spark itself for every Python data source, before
    # the source is asked (Spark's Kafka sink takes it): Spark's limit, see docs/spark.md.
    with pytest.raises(Exception, match='"ErrorIfExists" mode'):
        writer(df, spark_broker, topic).save()
    assert values(read_all(spark_broker, topic, partitions=1)) == list(range(5))


def test_the_topic_option_is_trimmed_and_a_topic_column_of_any_type_is_then_ignored(spark, spark_broker):
    topic = make_topic(spark_broker, "sink-topic-option", 1)
    df = spark.createDataFrame([(str(i), i) for i in range(3)], "value string, topic int")
    writer(df, spark_broker, f"  {topic} ").mode("append").save()     # as Spark's Kafka sink
    assert values(read_all(spark_broker, topic, partitions=1)) == list(range(3))


def test_include_headers(spark, spark_broker):
    schema = "value string, headers array<struct<key:string,value:binary>>"
    df = spark.createDataFrame([(str(i), [("h", str(i).encode())]) for i in range(4)], schema)
    for option, expect in ((None, True), ("true", True), ("false", False)):
        topic = make_topic(spark_broker, f"sink-headers-{option}", 1)
        w = writer(df, spark_broker, topic)
        if option is not None:
            w = w.option("includeHeaders", option)
        w.mode("append").save()
        got = read_all(spark_broker, topic, partitions=1)
        assert sorted((v, h) for _, v, h, _ in got) == \
            sorted((str(i).encode(), [("h", str(i).encode())] if expect else None) for i in range(4)), option
    with pytest.raises(Exception, match="'includeHeaders' is true but there is no 'headers' column"):
        writer(df.select("value"), spark_broker, "sink-headers-none").option("includeHeaders", "true") \
            .mode("append").save()


def test_foreach_batch_with_sink_id_and_batch_id_is_exactly_once(spark, spark_broker, tmp_path):
    """docs/spark.md's update-mode example: an aggregation's changed rows, each micro-batch one
    recorded write; a replayed batch id writes nothing."""
    topic = make_topic(spark_broker, "sink-foreach", 1)
    write_json_files(tmp_path / "in", 3, 30)
    servers = spark_broker.bootstrap

    def write_counts(df, batch_id):
        (df.selectExpr("CAST(bucket AS STRING) AS key", "CAST(n AS STRING) AS value")
           .write.format("riverlog").option("riverlog.bootstrap.servers", servers).option("topic", topic)
           .option("sinkId", "counts").option("batchId", batch_id).mode("append").save())

    counts = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
              .selectExpr("id % 3 AS bucket").groupBy("bucket").count().withColumnRenamed("count", "n"))
    q = (counts.writeStream.outputMode("update").foreachBatch(write_counts)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    got = read_all(spark_broker, topic, partitions=1)
    assert sorted((k, int(v)) for k, v, _, _ in got) == sorted((str(b).encode(), n) for b in range(3)
                                                               for n in (10, 20, 30))
    # A driver that died after batch 2 committed runs it again: recognised, nothing written twice.
    write_counts(spark.createDataFrame([(0, 999)], "bucket long, n long"), 2)
    assert len(read_all(spark_broker, topic, partitions=1)) == 9
    with pytest.raises(Exception, match="SinkReusedError"):   # an older batch: another checkpoint's
        write_counts(spark.createDataFrame([(0, 999)], "bucket long, n long"), 1)
    write_counts(spark.createDataFrame([(0, 31)], "bucket long, n long"), 3)
    assert (b"0", b"31") in [(k, v) for k, v, _, _ in read_all(spark_broker, topic, partitions=1)]


def test_a_decided_batch_past_its_transaction_timeout_fails_with_transaction_lost(spark_broker):
    topic = make_topic(spark_broker, "sink-txn-timeout", 1)
    schema = StructType([StructField("value", BinaryType())])
    w = StreamWriter({"riverlog.bootstrap.servers": spark_broker.bootstrap, "topic": topic,
                      "riverlog.transaction.timeout.ms": "1000"}, schema)
    first = w.write_partition([pa.record_batch({"value": [b"1", b"2"]})], "txn-timeout", 0, 0, 0, True)
    CommitLog({"bootstrap.servers": spark_broker.bootstrap}).record(Decision("txn-timeout", 0, [first.attempt]))

    def aborted():
        with AdminClient({"bootstrap.servers": spark_broker.bootstrap}) as admin:
            return not admin.list_transactions(30, states=["Ongoing"], prefix="txn-timeout-").result(30)
    wait_until(aborted, 60, 0.1, "the broker to abort the transaction after transaction.timeout.ms")
    replay = [w.write_partition([pa.record_batch({"value": [b"1", b"2"]})], "txn-timeout", 0, 0, 0, True)]
    assert replay[0].skipped
    with pytest.raises(TransactionLostError, match=first.attempt.transactional_id):
        w.commit(replay, 0)
    assert read_all(spark_broker, topic, partitions=1) == []
