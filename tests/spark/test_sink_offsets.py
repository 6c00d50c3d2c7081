"""A consume-transform-produce query: each micro-batch of topic A written to topic B with the
batch's input offsets committed for a group in the same exactly-once batch — from foreachBatch
(sinkId/batchId, groupId/groupOffsets read from Spark's offset log), or by a streaming write with
groupId, whose commit reads the offset log itself."""
from __future__ import annotations

import json

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from broker.client import Consumer, Producer, TopicPartition
from broker.errors import InvalidConfigError
from spark_sink.writer import StreamWriter
from tests.spark.test_sink import make_topic, read_all

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def end_offsets(checkpoint, batch_id: int) -> str:
    """The source's end offsets of ``batch_id`` from Spark's offset log: the file's last line is
    the (only) source's offset JSON, ``{"topic": {"partition": offset}}``."""
    with open(checkpoint / "offsets" / str(batch_id)) as f:
        return f.read().strip().splitlines()[-1]


def committed(broker, group: str, topic: str, partitions: int) -> dict[str, dict[str, int]]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        c.close()
    return {topic: {str(tp.partition): tp.offset for tp in got}}


def produce_numbers(servers: str, topic: str, numbers) -> None:
    """Each number as key and value, even ones to partition 0 and odd ones to 1."""
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for i in numbers:
            p.produce(topic, value=str(i).encode(), key=str(i).encode(), partition=i % 2)
        assert p.flush(30) == 0


def test_foreach_batch_commits_its_input_offsets_with_its_output(spark, spark_broker, tmp_path):
    source, out = make_topic(spark_broker, "offsets-in", 2), make_topic(spark_broker, "offsets-out", 2)
    servers, group, checkpoint = spark_broker.bootstrap, "offsets-app", tmp_path / "ck"
    produce_numbers(servers, source, range(60))
    batches: list[int] = []

    def transform(df, batch_id):
        if batches:  # the previous batch's input progress committed with its output
            assert committed(spark_broker, group, source, 2) == json.loads(end_offsets(checkpoint, batches[-1]))
        batches.append(batch_id)
        (df.selectExpr("key", "CAST(CAST(value AS STRING) AS INT) * 10 AS n")
           .selectExpr("key", "CAST(n AS STRING) AS value")
           .write.format("riverlog").option("riverlog.bootstrap.servers", servers).option("topic", out)
           .option("sinkId", "offsets-app").option("batchId", batch_id)
           .option("groupId", group).option("groupOffsets", end_offsets(checkpoint, batch_id))
           .mode("append").save())

    q = (spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", servers)
         .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20)
         .load().writeStream.foreachBatch(transform).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    assert len(batches) >= 3
    last = batches[-1]
    assert json.loads(end_offsets(checkpoint, last)) == {source: {"0": 30, "1": 30}}
    assert committed(spark_broker, group, source, 2) == {source: {"0": 30, "1": 30}}
    assert sorted(int(v) for _, v, _, _ in read_all(spark_broker, out)) == [i * 10 for i in range(60)]

    # The driver died after the last batch committed and Spark runs it again: recognised, nothing
    # written twice, offsets where they were.
    transform(spark.createDataFrame([(b"x", b"1")], "key binary, value binary"), last)
    assert sorted(int(v) for _, v, _, _ in read_all(spark_broker, out)) == [i * 10 for i in range(60)]
    assert committed(spark_broker, group, source, 2) == {source: {"0": 30, "1": 30}}


def test_a_streaming_write_commits_its_input_offsets_with_its_output(spark, spark_broker, tmp_path):
    source, out = make_topic(spark_broker, "stream-offsets-in", 2), make_topic(spark_broker, "stream-offsets-out", 2)
    servers, group, checkpoint = spark_broker.bootstrap, "stream-offsets-app", tmp_path / "ck"
    produce_numbers(servers, source, range(60))

    def run():
        q = (spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", servers)
             .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20)
             .load().selectExpr("key", "CAST(CAST(CAST(value AS STRING) AS INT) * 10 AS STRING) AS value")
             .writeStream.format("riverlog").option("riverlog.bootstrap.servers", servers).option("topic", out)
             .option("groupId", group).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()

    run()
    batches = sorted(int(f.name) for f in (checkpoint / "offsets").iterdir() if f.name.isdigit())
    assert len(batches) >= 3
    assert json.loads(end_offsets(checkpoint, batches[-1])) == {source: {"0": 30, "1": 30}}
    assert committed(spark_broker, group, source, 2) == {source: {"0": 30, "1": 30}}
    assert sorted(int(v) for _, v, _, _ in read_all(spark_broker, out)) == [i * 10 for i in range(60)]

    # Ten more, the query run again from its checkpoint: the group follows, nothing is written twice.
    produce_numbers(servers, source, range(60, 70))
    run()
    assert committed(spark_broker, group, source, 2) == {source: {"0": 35, "1": 35}}
    assert sorted(int(v) for _, v, _, _ in read_all(spark_broker, out)) == [i * 10 for i in range(70)]


def test_a_streaming_write_refuses_given_group_offsets():
    schema = StructType([StructField("value", BinaryType())])
    with pytest.raises(InvalidConfigError, match="offset log") as caught:
        StreamWriter({"riverlog.bootstrap.servers": "127.0.0.1:1", "topic": "t", "sinkId": "s", "batchId": "1",
                      "groupId": "g", "groupOffsets": '{"a": {"0": 1}}', "checkpointLocation": "/tmp/x"}, schema)
    assert caught.value.details["config"] == "groupOffsets"
    with pytest.raises(InvalidConfigError, match="set checkpointLocation") as caught:
        StreamWriter({"riverlog.bootstrap.servers": "127.0.0.1:1", "topic": "t", "groupId": "g"}, schema)
    assert caught.value.details["config"] == "checkpointLocation"
