"""What Spark's Kafka source checks when it plans the ranges a batch or micro-batch reads, driven
through the readers' own calls against a real broker (no SparkSession: the checks happen on the driver)."""
from __future__ import annotations

import json
import logging

import pytest

from broker.client import AdminClient, NewPartitions, NewTopic, Producer, TopicPartition
from broker.errors import OffsetOutOfRangeError
from spark_source.options import SourceOptions
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_source.reader import BatchReader, DataLossError, StreamReader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def topic_with(servers: str, topic: str, n: int) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for i in range(n):
            p.produce(topic, value=str(i).encode(), partition=0, timestamp=1_700_000_000_000 + i)
        assert p.flush(30) == 0


def plan(servers: str, topic: str, **given) -> list[tuple[int, int]]:
    options = SourceOptions.parse({"riverlog.bootstrap.servers": servers, "subscribe": topic, **given},
                                  streaming=False)
    return [(p.value.start, p.value.until) for p in BatchReader(options).partitions()]


def offsets(topic: str, offset: int) -> str:
    return json.dumps({topic: {"0": offset}})


@pytest.mark.parametrize("failOnDataLoss", ["true", "false"])
def test_a_batch_whose_resolved_start_is_after_its_end_fails_as_sparks_kafka_source_does(
        spark_broker, topic_name, failOnDataLoss):
    """Spark's ``KafkaSourceRDD`` asserts "Beginning offset X is after the ending offset Y" for every
    range, whatever ``failOnDataLoss`` says; an empty read would hide the wrong offset."""
    servers = spark_broker.bootstrap
    topic_with(servers, topic_name, 10)
    with pytest.raises(OffsetOutOfRangeError, match=rf"Beginning offset 50 is after the ending offset 10 for "
                                                    rf"topic {topic_name} partition 0"):
        plan(servers, topic_name, startingOffsets=offsets(topic_name, 50), failOnDataLoss=failOnDataLoss)
    with pytest.raises(OffsetOutOfRangeError, match="Beginning offset 10 is after the ending offset 4"):
        plan(servers, topic_name, startingTimestamp=1_700_000_000_100, startingOffsetsByTimestampStrategy="latest",
             endingOffsets=offsets(topic_name, 4), failOnDataLoss=failOnDataLoss)
    assert plan(servers, topic_name, startingOffsets=offsets(topic_name, 10)) == []   # equal: nothing to read
    assert plan(servers, topic_name, startingOffsets=offsets(topic_name, 3)) == [(3, 10)]


def test_earliest_above_an_explicit_end_fails_but_an_explicit_start_below_it_is_data_loss(spark_broker, topic_name):
    """Records removed past an explicit end: ``earliest`` resolves above that end (Spark's assertion);
    an explicit start below the log start is data loss, skipped with ``failOnDataLoss=false``."""
    servers = spark_broker.bootstrap
    topic_with(servers, topic_name, 10)
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.delete_records([TopicPartition(topic_name, 0, 6)])[TopicPartition(topic_name, 0, 6)].result(30)
    with pytest.raises(OffsetOutOfRangeError, match="Beginning offset 6 is after the ending offset 4"):
        plan(servers, topic_name, endingOffsets=offsets(topic_name, 4))
    with pytest.raises(DataLossError, match=rf"offsets \[1, 6\) of {topic_name}-0 were removed"):
        plan(servers, topic_name, startingOffsets=offsets(topic_name, 1), endingOffsets=offsets(topic_name, 4))
    assert plan(servers, topic_name, startingOffsets=offsets(topic_name, 1), endingOffsets=offsets(topic_name, 4),
                failOnDataLoss="false") == []


def test_a_replayed_batch_reports_an_added_partition_that_no_longer_starts_at_zero(spark_broker, topic_name, caplog):
    """Spark checks an added partition's first offset where it plans the batch
    (``getOffsetRangesFromResolvedOffsets``), so a batch replayed after a restart whose added
    partition lost its first records to retention meanwhile is data loss; it was planned from the
    partition's new first offset and those records skipped without a word."""
    servers = spark_broker.bootstrap
    topic_with(servers, topic_name, 5)

    def stream(**given) -> StreamReader:
        return StreamReader(SourceOptions.parse({"riverlog.bootstrap.servers": servers, "subscribe": topic_name,
                                                 "startingOffsets": "earliest", **given}, streaming=True))
    first = stream()
    start = first.initialOffset()
    end0 = first.latestOffset(start, ReadAllAvailable())
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(30)
        with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
            for i in range(10):
                p.produce(topic_name, value=str(i).encode(), partition=1)
            assert p.flush(30) == 0
        end1 = first.latestOffset(end0, ReadAllAvailable())   # partition 1 starts at 0: nothing lost yet
        assert end1 == {topic_name: {"0": 5, "1": 10}}
        first.stop()
        tp = TopicPartition(topic_name, 1, 6)
        admin.delete_records([tp])[tp].result(30)
    replay = stream()   # the restarted query plans the batch its offset log holds
    with pytest.raises(DataLossError, match=rf"Added partition {topic_name}-1 starts from 6 instead of 0"):
        replay.partitions(end0, end1)
    replay.stop()
    lenient = stream(failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="spark_source.reader"):
        planned = [(p.value.partition, p.value.start, p.value.until) for p in lenient.partitions(end0, end1)]
    lenient.stop()
    assert planned == [(1, 6, 10)]
    assert caplog.text.count("starts from 6 instead of 0") == 1
