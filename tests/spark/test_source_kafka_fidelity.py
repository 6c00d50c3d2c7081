"""The riverlog source where Spark's Kafka source decides how a query starts, what counts as data
loss, which topics it reads and which options it accepts, driven through the readers' own calls
against a real broker (no SparkSession: what is checked happens on the driver)."""
from __future__ import annotations

import json
import logging

import pytest

from broker.client import AdminClient, Consumer, NewPartitions, NewTopic, Producer, TopicPartition
from broker.errors import InvalidConfigError, UnknownTopicOrPartitionError
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from spark_source.options import SourceOptions
from spark_source.reader import BatchReader, DataLossError, OffsetLookup, StreamReader
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def create(servers: str, topic: str, partitions: int = 1) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(servers: str, topic: str, n: int, partition: int = 0) -> None:
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for i in range(n):
            p.produce(topic, value=str(i).encode(), partition=partition)
        assert p.flush(30) == 0


def options(servers: str, streaming: bool = True, **given) -> SourceOptions:
    return SourceOptions.parse({"riverlog.bootstrap.servers": servers, **given}, streaming=streaming)


def stream(servers: str, **given) -> StreamReader:
    return StreamReader(options(servers, **given))


def topics(servers: str) -> set[str]:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        return set(admin.list_topics(timeout=30).topics)


# ------------------------------------------------------------------ where a new checkpoint starts
def test_a_new_checkpoint_starts_at_its_own_starting_offsets_not_at_another_querys_pin(spark_broker, topic_name):
    """Spark takes a new checkpoint's start from ``startingOffsets`` only; ``kafka.group.id`` never
    moves it. Query A (latest) left its batch-0 pin in the group; query B (earliest, same group)
    must still read from the start, while a replay of A's batch 0 still finds A's pin."""
    servers, group = spark_broker.bootstrap, f"{topic_name}-reports"
    create(servers, topic_name)
    produce(servers, topic_name, 50)
    a = stream(servers, subscribe=topic_name, startingOffsets="latest", groupId=group)
    assert a.initialOffset() == {topic_name: {"0": 50}}
    a.stop()                                              # stopped before batch 0 finished: the pin stays
    produce(servers, topic_name, 5)
    b = stream(servers, subscribe=topic_name, startingOffsets="earliest", groupId=group)
    assert b.initialOffset() == {topic_name: {"0": 0}}    # not A's 50: nothing silently skipped
    b.stop()
    c = stream(servers, subscribe=topic_name, startingOffsets="latest", groupId=group)
    assert c.initialOffset() == {topic_name: {"0": 55}}   # B's pin is not A's options' either
    c.stop()
    produce(servers, topic_name, 5)
    replay = stream(servers, subscribe=topic_name, startingOffsets="latest", groupId=group)
    assert replay.initialOffset() == {topic_name: {"0": 55}}   # the same options find their own pin
    replay.stop()


# ------------------------------------------------------------------ data loss Spark reports
def test_a_start_past_the_end_of_a_partition_is_data_loss(spark_broker, topic_name):
    """Spark's ``getOffsetRangesFromResolvedOffsets``: a latest offset below the query's position
    (``KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED``) fails the query, or with ``failOnDataLoss=false``
    warns and goes on from the lower offset, so records written afterwards are read."""
    servers = spark_broker.bootstrap
    create(servers, topic_name)
    produce(servers, topic_name, 10)
    past = json.dumps({topic_name: {"0": 50}})
    strict = stream(servers, subscribe=topic_name, startingOffsets=past)
    start = strict.initialOffset()
    with pytest.raises(DataLossError, match=rf"Partition {topic_name}-0's offset was changed from 50 to 10"):
        strict.latestOffset(start, ReadAllAvailable())
    strict.stop()
    lenient = stream(servers, subscribe=topic_name, startingOffsets=past, failOnDataLoss="false")
    start = lenient.initialOffset()
    end = lenient.latestOffset(start, ReadAllAvailable())
    assert end == {topic_name: {"0": 10}}                 # not stuck at 50 waiting for offsets 10..49
    produce(servers, topic_name, 30)
    assert lenient.latestOffset(end, ReadAllAvailable()) == {topic_name: {"0": 40}}
    lenient.stop()


def test_a_rate_limited_batch_also_moves_a_partition_back_to_its_latest_offset(spark_broker, topic_name):
    servers = spark_broker.bootstrap
    create(servers, topic_name, 2)
    produce(servers, topic_name, 10, partition=0)
    produce(servers, topic_name, 20, partition=1)
    r = stream(servers, subscribe=topic_name, failOnDataLoss="false", maxOffsetsPerTrigger=5,
               startingOffsets=json.dumps({topic_name: {"0": 50, "1": 0}}))
    end = r.latestOffset(r.initialOffset(), ReadMaxRows(5))
    assert end[topic_name]["0"] == 10 and 0 < end[topic_name]["1"] <= 5
    r.stop()


def test_a_topic_deleted_and_created_again_is_data_loss(spark_broker, topic_name):
    servers = spark_broker.bootstrap
    create(servers, topic_name)
    produce(servers, topic_name, 20)
    r = stream(servers, subscribe=topic_name, startingOffsets="earliest",
               **{"fetchOffset.numRetries": "20", "fetchOffset.retryIntervalMs": "50"})
    end = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    assert end == {topic_name: {"0": 20}}
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.delete_topics([topic_name])[topic_name].result(30)
        wait_until(lambda: topic_name not in topics(servers), 30, 0.1, "the topic deleted")
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    produce(servers, topic_name, 5)
    with pytest.raises(DataLossError, match=rf"{topic_name}-0's offset was changed from 20 to 5"):
        r.latestOffset(end, ReadAllAvailable())
    r.stop()


def test_an_added_partition_that_does_not_start_at_zero_is_data_loss(spark_broker, topic_name, caplog):
    """Spark's ``KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO``: records of a new
    partition removed before the query saw it were never read."""
    servers = spark_broker.bootstrap
    create(servers, topic_name)
    produce(servers, topic_name, 5)
    strict = stream(servers, subscribe=topic_name, startingOffsets="earliest")
    lenient = stream(servers, subscribe=topic_name, startingOffsets="earliest", failOnDataLoss="false",
                     groupId=f"{topic_name}-lenient")
    ends = [r.latestOffset(r.initialOffset(), ReadAllAvailable()) for r in (strict, lenient)]
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(30)
        produce(servers, topic_name, 10, partition=1)
        tp = TopicPartition(topic_name, 1, 6)
        admin.delete_records([tp])[tp].result(30)
    with pytest.raises(DataLossError, match=rf"Added partition {topic_name}-1 starts from 6 instead of 0"):
        strict.latestOffset(ends[0], ReadAllAvailable())
    with caplog.at_level(logging.WARNING, logger="spark_source.reader"):
        assert lenient.latestOffset(ends[1], ReadAllAvailable()) == {topic_name: {"0": 5, "1": 10}}
    assert "starts from 6 instead of 0" in caplog.text
    strict.stop()
    lenient.stop()


# ------------------------------------------------------------------ which topics a query reads
def test_assign_never_creates_a_topic_and_refuses_one_the_cluster_does_not_have(spark_broker, topic_name):
    """Spark checks an assignment with ``describeTopics``, which creates nothing: a missing topic
    fails (``UnknownTopicOrPartitionException``). A missing partition of an existing topic fails
    too (Spark drops it silently)."""
    servers, typo = spark_broker.bootstrap, f"{topic_name}-typo"
    reader = BatchReader(options(servers, streaming=False, assign=json.dumps({typo: [0]}),
                                 **{"fetchOffset.retryIntervalMs": "0"}))
    with pytest.raises(UnknownTopicOrPartitionError, match=rf"option 'assign' names '{typo}', which the cluster "
                                                           "does not have"):
        reader.partitions()
    assert typo not in topics(servers)
    create(servers, topic_name)
    reader = BatchReader(options(servers, streaming=False, assign=json.dumps({topic_name: [0, 5]})))
    with pytest.raises(UnknownTopicOrPartitionError, match=rf"names {topic_name}-5, which the cluster does not "
                                                           rf"have \(topic '{topic_name}' has 1 partition"):
        reader.partitions()


def test_subscribe_pattern_leaves_out_only_the_topics_the_broker_marks_internal(spark_broker, topic_name):
    servers, mine = spark_broker.bootstrap, f"__x{topic_name}"
    create(servers, mine)
    c = Consumer({"bootstrap.servers": servers, "group.id": f"{topic_name}-g"})
    try:   # so that __consumer_offsets exists
        c.commit(offsets=[TopicPartition(mine, 0, 0)], asynchronous=False)
    finally:
        c.close()
    assert "__consumer_offsets" in topics(servers)
    lookup = OffsetLookup(options(servers, subscribePattern=f"^__consumer_offsets$|^__x{topic_name}$"))
    try:
        assert lookup.partitions() == [(mine, 0)]   # a user's "__" topic matches; the broker's own does not
    finally:
        lookup.close()


# ------------------------------------------------------------------ options as Spark takes them
@pytest.mark.parametrize("given, named", [
    ({"startingOffsets": '{"t": {"0": 15, "1": 5}}', "endingOffsets": '{"t": {"0": 10, "1": 8}}'},
     r"'startingOffsets': offset 15 of t-0 is after its end offset 10"),
    ({"startingOffsetsByTimestamp": '{"t": {"0": 30}}', "endingOffsetsByTimestamp": '{"t": {"0": 10}}'},
     r"'startingOffsetsByTimestamp': timestamp 30 of t-0 is after its end timestamp 10"),
    ({"startingOffsets": '{"t": {"0": 1}}', "endingOffsets": '{"t": {"1": 8}}'},
     r"'startingOffsets': names t-0 but 'endingOffsets' names t-1"),
])
def test_a_batch_whose_explicit_start_lies_past_its_end_is_refused(given, named):
    """Spark's ``checkOffsetLimitValidity``; -2/-1 (earliest, latest) are not compared."""
    with pytest.raises(InvalidConfigError, match=named):
        options("127.0.0.1:1", streaming=False, subscribe="t", **given)
    assert options("127.0.0.1:1", streaming=False, subscribe="t", startingOffsets='{"t": {"0": 15}}',
                   endingOffsets='{"t": {"0": -1}}').starting == {"t": {0: 15}}


def test_options_spark_ignores_with_a_warning_are_accepted(caplog):
    """Spark's ``validateGeneralOptions`` only warns about ``groupIdPrefix`` next to
    ``kafka.group.id``; its ``validateStreamOptions`` refuses ``endingOffsets`` and
    ``endingOffsetsByTimestamp`` in a stream, not ``endingTimestamp``, which has no effect there."""
    with caplog.at_level(logging.WARNING, logger="spark_source.options"):
        o = options("127.0.0.1:1", subscribe="t", groupIdPrefix="p", **{"riverlog.group.id": "g"})
        assert o.group_id == "g"
        assert options("127.0.0.1:1", subscribe="t", groupIdPrefix="p", groupId="g").group_id == "g"
        assert options("127.0.0.1:1", subscribe="t", endingTimestamp="1000").ending_timestamp is None
    assert "option 'groupIdPrefix' will be ignored as option 'riverlog.group.id' has been set" in caplog.text
    assert "'endingTimestamp' has no effect on a streaming query" in caplog.text
