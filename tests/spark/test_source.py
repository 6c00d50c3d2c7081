"""The riverlog source in Spark: batch and streaming reads against a real broker process."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from tests.conftest import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def make_topic(bootstrap: str, name: str, partitions: int = 2, n: int = 100, start: int = 0) -> list[tuple]:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        if name not in admin.list_topics().topics:
            admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return produce(bootstrap, name, n, start, partitions)


def produce(bootstrap: str, name: str, n: int, start: int = 0, partitions: int = 2) -> list[tuple]:
    rows = []
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(start, start + n):
            p.produce(name, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions,
                      headers=[("h", b"%d" % i)], timestamp=1_700_000_000_000 + i)
            rows.append((b"k%d" % i, b"v%d" % i, i % partitions))
        assert p.flush(30) == 0
    return rows


def source(spark, bootstrap: str, topic: str, streaming: bool = False, **options):
    reader = (spark.readStream if streaming else spark.read).format("riverlog") \
        .option("riverlog.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def test_a_batch_read_equals_what_was_produced(spark, spark_broker, topic_name):
    rows = make_topic(spark_broker.bootstrap, topic_name)
    df = source(spark, spark_broker.bootstrap, topic_name, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType", "headers"]
    got = df.collect()
    assert sorted((bytes(r.key), bytes(r.value), r.partition) for r in got) == sorted(rows)
    assert {r.topic for r in got} == {topic_name}
    by_value = {bytes(r.value): r for r in got}
    assert by_value[b"v7"].timestamp.timestamp() == pytest.approx(1_700_000_000.007)
    assert [(h.key, bytes(h.value)) for h in by_value[b"v7"].headers] == [("h", b"7")]
    assert sorted(r.offset for r in got if r.partition == 0) == list(range(50))


def test_a_session_whose_timestamps_default_to_ntz_still_reads(spark, spark_broker, topic_name):
    """Spark's Kafka source gives a TimestampType whatever ``spark.sql.timestampType`` says; read as
    that session's ``timestamp``, every task failed (DATA_SOURCE_RETURN_SCHEMA_MISMATCH)."""
    make_topic(spark_broker.bootstrap, topic_name, partitions=1, n=3)
    spark.conf.set("spark.sql.timestampType", "TIMESTAMP_NTZ")
    try:
        df = source(spark, spark_broker.bootstrap, topic_name)
        assert df.schema["timestamp"].dataType.simpleString() == "timestamp"
        assert [bytes(r.value) for r in df.orderBy("offset").collect()] == [b"v0", b"v1", b"v2"]
    finally:
        spark.conf.unset("spark.sql.timestampType")
    with pytest.raises(Exception, match="fixed schema"):
        (spark.read.format("riverlog").schema("value string")
         .option("riverlog.bootstrap.servers", spark_broker.bootstrap).option("subscribe", topic_name).load().collect())


def test_batch_offsets_ranges_and_min_partitions(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name)
    df = source(spark, spark_broker.bootstrap, topic_name,
                startingOffsets=f'{{"{topic_name}": {{"0": 10, "1": -2}}}}',
                endingOffsets=f'{{"{topic_name}": {{"0": 20, "1": -1}}}}', minPartitions=6)
    assert df.rdd.getNumPartitions() >= 6
    got = df.select("partition", "offset").collect()
    assert sorted(r.offset for r in got if r.partition == 0) == list(range(10, 20))
    assert sorted(r.offset for r in got if r.partition == 1) == list(range(50))


def test_bad_options_fail_at_start_naming_the_option(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, n=1)
    for options, name in (({"maxOffsetPerTrigger": 5}, "maxoffsetpertrigger"),
                          ({"startingOffsets": "yesterday"}, "startingOffsets"),
                          ({"startingOffsets": "latest"}, "'startingOffsets': can't be latest"),
                          ({"subscribe": f"{topic_name},{topic_name}-none"}, f"'subscribe' names '{topic_name}-none'"),
                          ({"failOnDataLoss": "maybe"}, "failOnDataLoss")):
        with pytest.raises(Exception, match=name):
            source(spark, spark_broker.bootstrap, topic_name, **options).collect()


def test_a_stream_restarted_from_its_checkpoint_reads_every_record_once(spark, spark_broker, topic_name, tmp_path):
    make_topic(spark_broker.bootstrap, topic_name, n=100)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run():
        q = (source(spark, spark_broker.bootstrap, topic_name, streaming=True, startingOffsets="earliest",
                    groupId=f"{topic_name}-g")
             .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()

    run()
    produce(spark_broker.bootstrap, topic_name, 50, start=100)
    run()
    got = spark.read.parquet(out).collect()
    assert sorted(r.value for r in got) == sorted("v%d" % i for i in range(150))
    # The group saw each finished batch: its lag is zero once the query caught up.
    c = Consumer({"bootstrap.servers": spark_broker.bootstrap, "group.id": f"{topic_name}-g"})
    parts = [TopicPartition(topic_name, p) for p in range(2)]
    assert [tp.offset for tp in c.committed(parts, 30)] == [75, 75]
    c.close()
    from tests.integration.test_cli import run_cli
    rows = [line.split() for line in run_cli(spark_broker.bootstrap, "groups", "describe", f"{topic_name}-g")
            .stdout.splitlines() if line.startswith(f"{topic_name}-g ")]
    assert [(r[2], r[3], r[4], r[5]) for r in rows] == [("0", "75", "75", "0"), ("1", "75", "75", "0")], rows


def test_max_offsets_per_trigger_bounds_every_micro_batch(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, n=100)
    sizes = []
    q = (source(spark, spark_broker.bootstrap, topic_name, streaming=True, startingOffsets="earliest",
                maxOffsetsPerTrigger=30)
         .writeStream.foreachBatch(lambda df, batch_id: sizes.append(df.count()))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert sum(sizes) == 100 and max(sizes) <= 30 and len([s for s in sizes if s]) >= 4, sizes


def test_unlimited_topics_are_read_to_their_end_in_every_batch(spark, spark_broker, topic_name):
    facts, dims = f"{topic_name}-facts", f"{topic_name}-dims"
    make_topic(spark_broker.bootstrap, facts, n=100)
    make_topic(spark_broker.bootstrap, dims, partitions=1, n=40)
    batches = []
    q = (source(spark, spark_broker.bootstrap, f"{facts},{dims}", streaming=True, startingOffsets="earliest",
                maxOffsetsPerTrigger=30, unlimitedTopics=dims)
         .writeStream.foreachBatch(lambda df, batch_id: batches.append(
             {t: n for t, n in df.groupBy("topic").count().collect()}))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    # the whole reference topic in the first batch; the budget for the other one alone
    assert batches[0] == {facts: 30, dims: 40}, batches
    assert sum(b.get(facts, 0) for b in batches) == 100 and max(b.get(facts, 0) for b in batches) <= 30, batches


def test_align_by_timestamp_cuts_every_topic_at_one_timestamp(spark, spark_broker, topic_name):
    """Two topics with a third of the records each, one of them over three times the time span: by
    backlog alone a batch would read the dense one's 0..11 ms beside the sparse one's 0..30 ms;
    aligned, no batch reads a record later than one a following batch reads."""
    dense, sparse = f"{topic_name}-dense", f"{topic_name}-sparse"
    for name, n, step in ((dense, 60, 1), (sparse, 20, 10)):
        with AdminClient({"bootstrap.servers": spark_broker.bootstrap}) as admin:
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
        with Producer({"bootstrap.servers": spark_broker.bootstrap}) as p:
            for i in range(n):
                p.produce(name, value=b"x", partition=0, timestamp=1_700_000_000_000 + i * step)
            assert p.flush(30) == 0
    batches = []
    q = (source(spark, spark_broker.bootstrap, f"{dense},{sparse}", streaming=True, startingOffsets="earliest",
                maxOffsetsPerTrigger=16, alignByTimestamp="true")
         .writeStream.foreachBatch(lambda df, _: batches.append(
             sorted(r.t for r in df.selectExpr("unix_millis(timestamp) - 1700000000000 AS t").collect())))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    batches = [b for b in batches if b]
    assert sum(len(b) for b in batches) == 80 and max(len(b) for b in batches) <= 16, batches
    assert all(a[-1] <= b[0] for a, b in zip(batches, batches[1:])), batches


def test_records_removed_by_retention_fail_the_query_or_are_skipped(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, partitions=1, n=40)
    with AdminClient({"bootstrap.servers": spark_broker.bootstrap}) as admin:
        admin.delete_records([TopicPartition(topic_name, 0, 25)])[TopicPartition(topic_name, 0, 25)].result(30)
    offsets = f'{{"{topic_name}": {{"0": 5}}}}'
    with pytest.raises(Exception, match=r"offsets \[5, 25\) of .* were removed"):
        source(spark, spark_broker.bootstrap, topic_name, startingOffsets=offsets).collect()
    got = source(spark, spark_broker.bootstrap, topic_name, startingOffsets=offsets,
                 failOnDataLoss="false").select("offset").collect()
    assert sorted(r.offset for r in got) == list(range(25, 40))


def test_read_committed_hides_aborted_records_and_read_uncommitted_shows_them(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, partitions=1, n=3)
    p = Producer({"bootstrap.servers": spark_broker.bootstrap, "transactional.id": f"{topic_name}-t"})
    p.init_transactions(30)
    for commit in (False, True):
        p.begin_transaction()
        p.produce(topic_name, value=b"committed" if commit else b"aborted")
        assert p.flush(30) == 0  # sent, so read_uncommitted sees it (abort_transaction purges unsent records)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    p.close()

    def values(level):
        return sorted(bytes(r.value) for r in source(spark, spark_broker.bootstrap, topic_name,
                                                     **{"riverlog.isolation.level": level}).collect())
    assert values("read_committed") == [b"committed", b"v0", b"v1", b"v2"]
    assert values("read_uncommitted") == [b"aborted", b"committed", b"v0", b"v1", b"v2"]


def test_partitions_added_to_a_topic_are_read_from_their_start(spark, spark_broker, topic_name, tmp_path):
    make_topic(spark_broker.bootstrap, topic_name, partitions=1, n=10)
    seen = []
    query = (source(spark, spark_broker.bootstrap, topic_name, streaming=True, startingOffsets="earliest")
             .writeStream.foreachBatch(lambda df, _: seen.extend(r.partition for r in df.collect()))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="200 milliseconds")
             .start())
    try:
        wait_until(lambda: len(seen) >= 10, 120, 0.1, "the first records")
        from broker.client import NewPartitions
        with AdminClient({"bootstrap.servers": spark_broker.bootstrap}) as admin:
            admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(30)
        produce(spark_broker.bootstrap, topic_name, 10, start=10, partitions=2)
        wait_until(lambda: len(seen) >= 20, 120, 0.1, "records of the new partition")
        assert seen.count(1) == 5
    finally:
        query.stop()


def test_trigger_once_reads_everything_available_in_one_batch(spark, spark_broker, topic_name):
    make_topic(spark_broker.bootstrap, topic_name, n=20)
    sizes = []
    q = (source(spark, spark_broker.bootstrap, topic_name, streaming=True, startingOffsets="earliest",
                maxOffsetsPerTrigger=5)
         .writeStream.foreachBatch(lambda df, batch_id: sizes.append(df.count()))
         .trigger(once=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert sizes == [20], sizes   # Trigger.Once ignores maxOffsetsPerTrigger, as with Spark's Kafka source
