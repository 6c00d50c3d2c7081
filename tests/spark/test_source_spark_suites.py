"""Edge cases of Spark's own Kafka connector suites (KafkaMicroBatchSourceSuite,
KafkaRelationSuite, KafkaOffsetRangeCalculatorSuite) that the riverlog source must match, driven
through the readers' own calls against a real broker (no SparkSession: what is checked happens on
the driver or in one task's read)."""
from __future__ import annotations

import logging

import pytest

from broker.client import AdminClient, Consumer, NewPartitions, TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_source.planning import Slice
from spark_source.reader import DataLossError, read_slice
from tests.conftest import wait_until
from tests.spark.test_source_kafka_fidelity import create, options, produce, stream, topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_available_now_leaves_out_partitions_added_after_it_started(spark_broker, topic_name):
    """Spark's ``prepareForTriggerAvailableNow`` fixes the run's end, partitions included
    (``allDataForTriggerAvailableNow``): a partition added while an ``AvailableNow`` run goes on is
    read by the next run, from its start. Read to its end in every batch, a partition producers keep
    writing to would never let the run end. The progress report's ``latestOffset`` is that end too
    (Spark's ``reportLatestOffset`` answers the prefetched offsets)."""
    servers = spark_broker.bootstrap
    create(servers, topic_name)
    produce(servers, topic_name, 5)
    r = stream(servers, subscribe=topic_name, startingOffsets="earliest")
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(30)
    produce(servers, topic_name, 3, partition=1)
    produce(servers, topic_name, 2, partition=0)
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {topic_name: {"0": 5}}
    assert r.reportLatestOffset() == end     # the progress report's latestOffset: the run's end, as Spark's
    produce(servers, topic_name, 3, partition=1)
    assert r.latestOffset(end, ReadAllAvailable()) == end      # nothing new: the run ends
    assert [(s.partition, s.start, s.until) for s in (p.value for p in r.partitions(start, end))] == [(0, 0, 5)]
    r.stop()
    later = stream(servers, subscribe=topic_name, startingOffsets="earliest")   # the next run, same checkpoint
    assert later.latestOffset(end, ReadAllAvailable()) == {topic_name: {"0": 7, "1": 6}}
    later.stop()


# ------------------------------------------------------------------ a task's range the log no longer holds
def offsets_read(servers: str, topic: str, start: int, until: int, **given) -> list[int]:
    """One task's read of [start, until) of partition 0, as a batch query's task reads it."""
    o = options(servers, streaming=False, subscribe=topic, **{"kafkaConsumer.pollTimeoutMs": "300", **given})
    return [o for batch in read_slice(o, Slice(topic, 0, start, until)) for o in batch.column("offset").to_pylist()]


def test_a_range_past_the_end_of_the_log_is_data_loss_and_skipped_without_fail_on_data_loss(spark_broker, topic_name):
    """Spark's ``KafkaDataConsumer.get``: an offset at or past the partition's end after a poll that
    waited ``kafkaConsumer.pollTimeoutMs`` is out of range, reported as data loss (an explicit
    ``endingOffsets`` past the end, a topic deleted and created again under a running batch). With
    ``failOnDataLoss=false`` the rest of the range is skipped (``getEarliestAvailableOffsetBetween``:
    no overlap with what the log holds) and the task ends with what it read; records outside its
    range are never returned."""
    servers = spark_broker.bootstrap
    create(servers, topic_name)
    produce(servers, topic_name, 10)
    assert offsets_read(servers, topic_name, 50, 60, failOnDataLoss="false") == []   # not offsets 0..9
    assert offsets_read(servers, topic_name, 5, 20, failOnDataLoss="false") == list(range(5, 10))
    for start, until in ((5, 20), (50, 60)):
        with pytest.raises(DataLossError, match=rf"{topic_name}-0"):
            offsets_read(servers, topic_name, start, until)


def test_a_latest_offset_below_the_querys_position_is_asked_again_before_it_is_data_loss(spark_broker, topic_name,
                                                                                          caplog):
    """Spark's ``fetchLatestOffsets(knownOffsets)``: ``latestOffset`` asks again, up to
    ``fetchOffset.numRetries`` times in all, before a lower latest offset counts as data loss (a
    leader elected a moment ago may answer a high watermark behind its predecessor's)."""
    servers = spark_broker.bootstrap
    create(servers, topic_name)
    produce(servers, topic_name, 10)
    r = stream(servers, subscribe=topic_name, startingOffsets=f'{{"{topic_name}": {{"0": 50}}}}',
               **{"fetchOffset.numRetries": "4", "fetchOffset.retryIntervalMs": "0"})
    start = r.initialOffset()
    with caplog.at_level(logging.WARNING, logger="spark_source.reader"):
        with pytest.raises(DataLossError, match=rf"{topic_name}-0's offset was changed from 50 to 10"):
            r.latestOffset(start, ReadAllAvailable())
    assert caplog.text.count("found incorrect offsets") == 3
    r.stop()


def test_a_topic_deleted_under_a_pattern_is_left_out_without_fail_on_data_loss(spark_broker, topic_name, caplog):
    """KafkaMicroBatchSourceSuite's "subscribing topic by pattern with topic deletions": with
    ``failOnDataLoss=false`` a deleted topic's partitions are named in a warning and the query goes
    on with the others; planning the batch does not ask the brokers about the deleted partitions."""
    servers, gone, kept = spark_broker.bootstrap, f"{topic_name}-gone", f"{topic_name}-kept"
    for name in (gone, kept):
        create(servers, name)
        produce(servers, name, 5)
    r = stream(servers, subscribePattern=f"^{topic_name}-(gone|kept)$", startingOffsets="earliest",
               failOnDataLoss="false", **{"fetchOffset.numRetries": "1"})
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {gone: {"0": 5}, kept: {"0": 5}}
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.delete_topics([gone])[gone].result(30)
        wait_until(lambda: gone not in topics(servers), 30, 0.1, "the topic deleted")
    produce(servers, kept, 3)
    with caplog.at_level(logging.WARNING, logger="spark_source.reader"):
        later = r.latestOffset(end, ReadAllAvailable())
    assert later == {kept: {"0": 8}} and f"partitions {gone}-0 disappeared" in caplog.text
    assert "could not commit" not in caplog.text
    # the finished batch's end is committed for lag tools, without the deleted partition the
    # coordinator would refuse (the whole commit with it)
    with Consumer({"bootstrap.servers": servers, "group.id": r.options.group_id}) as c:
        assert [tp.offset for tp in c.committed([TopicPartition(kept, 0)], timeout=30)] == [5]
    assert [(s.topic, s.start, s.until) for s in (p.value for p in r.partitions(end, later))] == [(kept, 5, 8)]
    r.stop()
