"""A source's partition time, as its timestamp extractor reads it, outlives a micro-batch and a
restart on Spark (even one without the checkpoint), as Kafka keeps it in the committed offsets'
metadata (``StreamTask.initializeTaskTimeAndProcessorMetadata``, ``TopicPartitionMetadata``):
a sub-topology with no store whose extractor reads it runs with the task's meta and its changelog."""
from __future__ import annotations

import shutil

import pytest

from broker.client import Producer
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Produced
from streams.serdes import Serdes
from tests.spark.test_sink import make_topic
from tests.spark.test_streams_app import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

S, L = Serdes.String(), Serdes.Long()
BASE = 1_700_000_000_000


def value_or_partition_time(record, partition_time):
    """The value is the event time; a value of 0 takes the partition time (-1, so dropped, when
    there is none)."""
    return record.value if record.value else partition_time


def produce(servers, topic, records):
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for partition, key, value, ts in records:
            p.produce(topic, key=S.serialize(key), value=L.serialize(value), timestamp=ts, partition=partition)
        p.flush(30)


def outputs(servers, topic, partitions=1):
    return sorted((S.deserialize(k), L.deserialize(v), ts) for k, v, ts in read_committed(servers, topic, partitions))


def run(app) -> None:
    app.start()
    try:
        app.processAllAvailable()
    finally:
        app.close()


@pytest.mark.timeout(600)
def test_a_callable_extractor_reads_the_partition_time_of_earlier_micro_batches(spark, spark_broker, tmp_path):
    """One record per micro-batch: a record that takes the partition time gets the largest event
    time before it in its own partition, not -1 (which would drop it)."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "pt-calls-in", 2), make_topic(spark_broker, "pt-calls-out", 2)
    produce(servers, source, [(0, "a", BASE + 3_000, 1), (0, "b", BASE + 2_000, 2), (0, "c", 0, 3),
                              (1, "d", BASE + 500, 4), (1, "f", 0, 6)])
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(S, L).withTimestampExtractor(value_or_partition_time))
     .mapValues(lambda v: 1).to(out, Produced.with_(S, L)))
    tp = b.build()
    run(StreamsApp(tp, spark, {"application.id": "pt-calls", "bootstrap.servers": servers,
                               "state.dir": str(tmp_path / "state"), "maxOffsetsPerTrigger": 1}))
    assert outputs(servers, out, 2) == [("a", 1, BASE + 3_000), ("b", 1, BASE + 2_000), ("c", 1, BASE + 3_000),
                                        ("d", 1, BASE + 500), ("f", 1, BASE + 500)]
    assert "mapInArrow" not in str(tp.describe("pt-calls"))


@pytest.mark.timeout(600)
def test_use_partition_time_on_invalid_timestamp_survives_a_restart_without_the_checkpoint(
        spark, spark_broker, tmp_path):
    """``default.timestamp.extractor`` UsePartitionTimeOnInvalidTimestamp: a negative timestamp
    first after a restart (the checkpoint lost: the broker is the checkpoint) takes the partition
    time of the records before the restart, instead of failing as "partition time is unknown"."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "pt-default-in", 1), make_topic(spark_broker, "pt-default-out", 1)
    config = {"application.id": "pt-default", "bootstrap.servers": servers, "state.dir": str(tmp_path / "state"),
              "default.timestamp.extractor": "UsePartitionTimeOnInvalidTimestamp"}
    b = StreamsBuilder()
    b.stream(source, Consumed.with_(S, L)).filter("value > 0").to(out, Produced.with_(S, L))
    tp = b.build()
    produce(servers, source, [(0, "a", 1, BASE + 5_000), (0, "b", 2, BASE + 1_000)])
    run(StreamsApp(tp, spark, config))
    produce(servers, source, [(0, "c", 3, -5)])      # first of the next micro-batch
    run(StreamsApp(tp, spark, config))
    shutil.rmtree(tmp_path / "state")
    produce(servers, source, [(0, "d", 4, -7), (0, "e", 5, BASE + 9_000), (0, "f", 6, -3)])
    run(StreamsApp(tp, spark, config))
    assert outputs(servers, out) == [("a", 1, BASE + 5_000), ("b", 2, BASE + 1_000), ("c", 3, BASE + 5_000),
                                     ("d", 4, BASE + 5_000), ("e", 5, BASE + 9_000), ("f", 6, BASE + 9_000)]


@pytest.mark.timeout(600)
def test_a_stateful_sub_topology_keeps_the_partition_time_through_a_lost_checkpoint(spark, spark_broker, tmp_path):
    """Guard: with a store, the task's meta (and so the partition time) is in the state and its
    changelog already."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "pt-count-in", 1), make_topic(spark_broker, "pt-count-out", 1)
    config = {"application.id": "pt-count", "bootstrap.servers": servers, "state.dir": str(tmp_path / "state"),
              "statestore.cache.max.bytes": 0}
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(S, L).withTimestampExtractor(value_or_partition_time))
     .groupByKey().count().toStream().to(out, Produced.with_(S, L)))
    tp = b.build()
    produce(servers, source, [(0, "a", BASE + 4_000, 1), (0, "a", BASE + 2_000, 2)])
    run(StreamsApp(tp, spark, config))
    shutil.rmtree(tmp_path / "state")
    produce(servers, source, [(0, "a", 0, 3)])
    run(StreamsApp(tp, spark, config))
    assert outputs(servers, out) == [("a", 1, BASE + 4_000), ("a", 2, BASE + 4_000), ("a", 3, BASE + 4_000)]


@pytest.mark.timeout(600)
def test_a_batch_ending_in_a_negative_timestamp_writes_its_changelog(spark, spark_broker, tmp_path):
    """A changelog entry carries the extracted timestamp of a record the task applied, never a
    negative broker timestamp (which no producer may write) the extractor replaced."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "pt-neg-in", 1), make_topic(spark_broker, "pt-neg-out", 1)
    b = StreamsBuilder()
    b.stream(source, Consumed.with_(S, L)).groupByKey().count().toStream().to(out, Produced.with_(S, L))
    produce(servers, source, [(0, "a", 1, BASE + 1_000), (0, "a", 2, -5)])
    app = StreamsApp(b.build(), spark, {"application.id": "pt-neg", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state"), "statestore.cache.max.bytes": 0,
                                        "default.timestamp.extractor": "UsePartitionTimeOnInvalidTimestamp"})
    run(app)
    assert outputs(servers, out) == [("a", 1, BASE + 1_000), ("a", 2, BASE + 1_000)]
    assert dict(app.store("KSTREAM-AGGREGATE-STATE-STORE-0000000001").all()) == {"a": 2}


@pytest.mark.timeout(600)
def test_a_stateless_querys_checkpoint_gives_way_when_its_extractor_starts_reading_the_partition_time(
        spark, spark_broker, tmp_path):
    """The first run's extractor says it reads no partition time (a mapInArrow query); the next
    run's reads it: the old checkpoint has no state to add to, so the query starts from the
    broker, at the committed offsets, once, and keeps the partition time from then on."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "pt-upgrade-in", 1), make_topic(spark_broker, "pt-upgrade-out", 1)
    config = {"application.id": "pt-upgrade", "bootstrap.servers": servers, "state.dir": str(tmp_path / "state")}

    def value_time(record, partition_time):
        return record.value
    value_time.uses_partition_time = False

    def app(extractor):
        b = StreamsBuilder()
        b.stream(source, Consumed.with_(S, L).withTimestampExtractor(extractor)).to(out, Produced.with_(S, L))
        return StreamsApp(b.build(), spark, config)

    produce(servers, source, [(0, "a", BASE + 1_000, 1)])
    first = app(value_time)
    assert "mapInArrow" in str(first.describe())
    run(first)
    produce(servers, source, [(0, "b", BASE + 3_000, 2), (0, "c", 0, 3)])
    run(app(value_or_partition_time))
    produce(servers, source, [(0, "d", 0, 4)])
    run(app(value_or_partition_time))
    assert outputs(servers, out) == [("a", BASE + 1_000, BASE + 1_000), ("b", BASE + 3_000, BASE + 3_000),
                                     ("c", 0, BASE + 3_000), ("d", 0, BASE + 3_000)]
