"""Spark's Kafka source options in a real query: where a read starts and ends by timestamp (with
Spark's precedence), subscribePattern, assign, minOffsetsPerTrigger with maxTriggerDelay, the
consumer group options. Records i of make_topic have timestamp BASE + i and sit in partition i % 2."""
from __future__ import annotations

import json

import pytest

from broker.client import AdminClient, Consumer, TopicPartition
from tests.conftest import wait_until
from tests.spark.test_source import make_topic, produce, source

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]
BASE = 1_700_000_000_000


def ids(df) -> list[int]:
    return sorted(int(bytes(r.value)[1:]) for r in df.select("value").collect())


def test_starting_timestamp_and_by_timestamp_with_sparks_precedence(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, n=100)
    servers = spark_broker.bootstrap
    assert ids(source(spark, servers, topic_name, startingTimestamp=BASE + 60)) == list(range(60, 100))
    by_ts = json.dumps({topic_name: {"0": BASE + 10, "1": BASE + 91}})
    assert ids(source(spark, servers, topic_name, startingOffsetsByTimestamp=by_ts)) == \
        [i for i in range(100) if (i % 2 == 0 and i >= 10) or (i % 2 == 1 and i >= 91)]
    # startingTimestamp takes precedence over startingOffsetsByTimestamp and startingOffsets (Spark's rule).
    assert ids(source(spark, servers, topic_name, startingTimestamp=BASE + 95, startingOffsetsByTimestamp=by_ts,
                      startingOffsets="earliest")) == list(range(95, 100))
    # No record that recent: an error by default, the end of the partition with strategy 'latest'.
    with pytest.raises(Exception, match="has a timestamp at or after"):
        source(spark, servers, topic_name, startingTimestamp=BASE + 1000).collect()
    assert ids(source(spark, servers, topic_name, startingTimestamp=BASE + 99,
                      startingOffsetsByTimestampStrategy="latest")) == [99]


def test_ending_timestamp_and_by_timestamp_bound_a_batch_read(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, n=100)
    servers = spark_broker.bootstrap
    assert ids(source(spark, servers, topic_name, endingTimestamp=BASE + 30)) == list(range(30))
    by_ts = json.dumps({topic_name: {"0": BASE + 10, "1": BASE + 5000}})  # partition 1: nothing that late: latest
    assert ids(source(spark, servers, topic_name, endingOffsetsByTimestamp=by_ts)) == \
        [i for i in range(100) if i % 2 == 1 or i < 10]
    # endingTimestamp takes precedence over endingOffsetsByTimestamp and endingOffsets.
    assert ids(source(spark, servers, topic_name, startingTimestamp=BASE + 20, endingTimestamp=BASE + 25,
                      endingOffsetsByTimestamp=by_ts, endingOffsets="latest")) == list(range(20, 25))
    # A stream ignores endingTimestamp, as Spark's Kafka source does (with a warning): it reads on.
    seen = []
    q = source(spark, servers, topic_name, streaming=True, startingOffsets="earliest", endingTimestamp=BASE) \
        .writeStream.foreachBatch(lambda df, _: seen.extend(ids(df))).trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert sorted(seen) == list(range(100))


def test_a_stream_starts_at_a_timestamp(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, n=40)
    seen = []
    q = (source(spark, spark_broker.bootstrap, topic_name, streaming=True,
                startingOffsetsByTimestamp=json.dumps({topic_name: {"0": BASE + 30, "1": BASE + 1}}))
         .writeStream.foreachBatch(lambda df, _: seen.extend(ids(df))).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert sorted(seen) == [i for i in range(40) if i % 2 == 1 or i >= 30]


def test_subscribe_pattern_and_assign(spark, spark_broker, topic_name):
    servers = spark_broker.bootstrap
    for suffix, n in (("a", 4), ("b", 6)):
        make_topic(servers, f"{topic_name}-{suffix}", n=n)
    make_topic(servers, f"other-{topic_name}", n=3)
    # trimmed, and found anywhere in a topic's name (Spark's findFirstIn)
    df = (spark.read.format("riverlog").option("riverlog.bootstrap.servers", servers)
          .option("subscribePattern", f" {topic_name}- ").load())
    assert sorted((r.topic, bytes(r.value)) for r in df.collect()) == sorted(
        [(f"{topic_name}-a", b"v%d" % i) for i in range(4)] + [(f"{topic_name}-b", b"v%d" % i) for i in range(6)])
    df = (spark.read.format("riverlog").option("riverlog.bootstrap.servers", servers)
          .option("assign", json.dumps({f"{topic_name}-b": [1]})).load())
    assert sorted(bytes(r.value) for r in df.collect()) == [b"v1", b"v3", b"v5"]
    # Internal topics never match, even a pattern naming them (docs/spark.md).
    c = Consumer({"bootstrap.servers": servers, "group.id": f"{topic_name}-g"})
    try:
        c.commit(offsets=[TopicPartition(f"{topic_name}-a", 0, 1)], asynchronous=False)
    finally:
        c.close()
    with AdminClient({"bootstrap.servers": servers}) as admin:
        assert "__consumer_offsets" in admin.list_topics().topics
    df = (spark.read.format("riverlog").option("riverlog.bootstrap.servers", servers)
          .option("subscribePattern", f"__consumer_offsets|__.*|{topic_name}-a").load())
    assert sorted((r.topic, bytes(r.value)) for r in df.collect()) == \
        [(f"{topic_name}-a", b"v%d" % i) for i in range(4)]


def test_min_offsets_per_trigger_waits_for_enough_records_or_max_trigger_delay(spark, spark_broker, topic_name):
    servers = spark_broker.bootstrap
    make_topic(servers, topic_name, n=30)
    sizes = []
    q = (source(spark, servers, topic_name, streaming=True, startingOffsets="earliest", minOffsetsPerTrigger=50)
         .writeStream.foreachBatch(lambda df, _: sizes.append(df.count())).start())
    try:
        q.processAllAvailable()
        assert [s for s in sizes if s] == [30], sizes     # the first trigger after a start runs (as Spark's)
        produce(servers, topic_name, 30, start=30)
        q.processAllAvailable()
        assert [s for s in sizes if s] == [30], sizes     # 30 new < 50, maxTriggerDelay (15m) not passed: wait
        produce(servers, topic_name, 20, start=60)
        q.processAllAvailable()
        assert [s for s in sizes if s] == [30, 50], sizes
    finally:
        q.stop()
    sizes.clear()
    q = (source(spark, servers, topic_name, streaming=True, startingOffsets="earliest", minOffsetsPerTrigger=1000,
                maxTriggerDelay="1s")
         .writeStream.foreachBatch(lambda df, _: sizes.append(df.count())).start())
    try:   # fewer than 1000 new records: they come in a batch once maxTriggerDelay has passed
        wait_until(lambda: sum(sizes) == 80, 90, 0.1, "the first micro-batch")
        produce(servers, topic_name, 10, start=80)
        wait_until(lambda: sum(sizes) == 90, 90, 0.1, "a micro-batch after maxTriggerDelay")
        assert [s for s in sizes if s][0] == 80, sizes
    finally:
        q.stop()


def test_group_options_name_the_group_the_source_commits_to(spark, spark_broker, topic_name):
    servers = spark_broker.bootstrap
    make_topic(servers, topic_name, n=20)
    for options, group in (({"riverlog.group.id": f"{topic_name}-spark"}, f"{topic_name}-spark"),
                           ({"groupIdPrefix": f"{topic_name}-dash"}, None)):
        q = (source(spark, servers, topic_name, streaming=True, startingOffsets="earliest", **options)
             .writeStream.foreachBatch(lambda df, _: df.count()).trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
        if group is None:
            with AdminClient({"bootstrap.servers": servers}) as admin:
                groups = [g.group_id for g in admin.list_consumer_groups().result(30).valid]
            [group] = [g for g in groups if g.startswith(f"{topic_name}-dash-")]
        c = Consumer({"bootstrap.servers": servers, "group.id": group})
        try:
            parts = [TopicPartition(topic_name, p) for p in range(2)]
            assert [tp.offset for tp in c.committed(parts, 30)] == [10, 10], group
        finally:
            c.close()


def test_max_records_per_partition_splits_tasks(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, n=100)
    df = source(spark, spark_broker.bootstrap, topic_name, maxRecordsPerPartition=10)
    assert df.rdd.getNumPartitions() == 10
    assert ids(df) == list(range(100))
