"""Every option of Spark's Kafka source and sink that riverlog accepts has Spark's meaning and
precedence, or is refused naming it: parsing on the driver, no SparkSession needed."""
from __future__ import annotations

import logging

import pytest

from broker.client import AdminClient, NewTopic, Producer
from broker.errors import InvalidConfigError, NotLeaderOrFollowerError
from spark_sink.options import SinkOptions
from spark_source.options import SourceOptions
from spark_source.planning import Slice
from spark_source.reader import OffsetLookup, read_slice, retrying

BASE = {"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}


def parse(streaming=False, **options) -> SourceOptions:
    return SourceOptions.parse({**BASE, **options}, streaming=streaming)


@pytest.mark.unit
def test_starting_timestamp_wins_over_by_timestamp_which_wins_over_offsets(caplog):
    with caplog.at_level(logging.WARNING):
        o = parse(startingTimestamp="1000", startingOffsetsByTimestamp='{"t": {"0": 5}}', startingOffsets="latest")
    assert o.starting_timestamp == 1000 and o.starting_by_timestamp is None
    assert "'startingTimestamp' takes precedence" in caplog.text and "'startingOffsetsByTimestamp'" in caplog.text
    o = parse(startingOffsetsByTimestamp='{"t": {"0": 5}}', startingOffsets="latest")
    assert o.starting_timestamp is None and o.starting_by_timestamp == {"t": {0: 5}}


@pytest.mark.unit
def test_ending_timestamp_wins_over_by_timestamp_which_wins_over_offsets(caplog):
    with caplog.at_level(logging.WARNING):
        o = parse(endingTimestamp="2000", endingOffsetsByTimestamp='{"t": {"0": 5}}', endingOffsets="latest")
    assert o.ending_timestamp == 2000 and o.ending_by_timestamp is None
    assert "'endingTimestamp' takes precedence" in caplog.text
    assert parse(endingOffsetsByTimestamp='{"t": {"1": 7}}').ending_by_timestamp == {"t": {1: 7}}


@pytest.mark.unit
@pytest.mark.parametrize("options, named", [
    ({"endingTimestamp": "1"}, "endingTimestamp"),
    ({"endingOffsetsByTimestamp": '{"t": {"0": 1}}'}, "endingOffsetsByTimestamp"),
    ({"endingOffsets": "latest"}, "endingOffsets"),
])
def test_ending_options_are_refused_by_a_stream(options, named):
    with pytest.raises(InvalidConfigError, match=f"'{named}': applies to batch queries only"):
        parse(streaming=True, **options)


@pytest.mark.unit
@pytest.mark.parametrize("options, named", [
    ({"riverlog.auto.offset.reset": "earliest"}, "riverlog.auto.offset.reset"),
    ({"riverlog.enable.auto.commit": "true"}, "riverlog.enable.auto.commit"),
    ({"groupId": "a", "riverlog.group.id": "b"}, "groupId"),
    ({"groupId": "a", "groupIdPrefix": "p"}, "groupIdPrefix"),
    ({"riverlog.group.id": "a", "groupIdPrefix": "p"}, "groupIdPrefix"),
    ({"groupIdPrefix": " "}, "groupIdPrefix"),
    ({"kafkaConsumer.pollTimeoutMs": "0"}, "kafkaConsumer.pollTimeoutMs"),
    ({"fetchOffset.numRetries": "zero"}, "fetchOffset.numRetries"),
    ({"fetchOffset.retryIntervalMs": "-1"}, "fetchOffset.retryIntervalMs"),
    ({"endingTimestamp": "yesterday"}, "endingTimestamp"),
    ({"endingOffsetsByTimestamp": "[1]"}, "endingOffsetsByTimestamp"),
    ({"kafka.bootstrap.servers": "x:1"}, "kafka.bootstrap.servers"),
])
def test_a_setting_the_source_would_replace_or_ignore_is_refused_naming_it(options, named):
    with pytest.raises(InvalidConfigError, match=f"'{named}'"):
        parse(**options)


@pytest.mark.unit
def test_an_unknown_consumer_setting_fails_the_query_at_start_naming_the_option():
    with pytest.raises(InvalidConfigError, match="option 'riverlog.no.such.setting'"):
        OffsetLookup(parse(**{"riverlog.no.such.setting": "1"}))


@pytest.mark.unit
def test_group_id_options():
    assert parse(**{"riverlog.group.id": "mine"}).group_id == "mine"
    assert parse(groupId="mine", **{"riverlog.group.id": "mine"}).group_id == "mine"
    assert parse(groupIdPrefix="dash").group_id.startswith("dash-")
    assert parse().group_id == parse().group_id and parse().group_id.startswith("spark-riverlog-")
    assert parse().group_id != parse(subscribe="other").group_id
    assert "group.id" not in parse(**{"riverlog.group.id": "mine"}).client_config()


@pytest.mark.unit
def test_poll_timeout_and_fetch_offset_retries_are_read():
    o = parse(**{"kafkaConsumer.pollTimeoutMs": "700", "fetchOffset.numRetries": "5",
                 "fetchOffset.retryIntervalMs": "25"})
    assert (o.poll_timeout_ms, o.fetch_offset_attempts, o.fetch_offset_retry_interval_ms) == (700, 5, 25)
    d = parse()
    assert (d.poll_timeout_ms, d.fetch_offset_attempts, d.fetch_offset_retry_interval_ms) == (120_000, 3, 10)


@pytest.mark.unit
def test_offset_fetches_retry_retriable_errors_as_many_times_as_asked():
    slept, calls = [], []

    def flaky(failures):
        def call():
            calls.append(1)
            if len(calls) <= failures:
                raise NotLeaderOrFollowerError("leader moved")
            return "offsets"
        return call

    assert retrying(flaky(2), 3, 25, "watermarks", sleep=slept.append) == "offsets"
    assert slept == [0.025, 0.025] and len(calls) == 3
    calls.clear()
    with pytest.raises(NotLeaderOrFollowerError):
        retrying(flaky(3), 3, 25, "watermarks", sleep=slept.append)
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(InvalidConfigError):  # not retriable: fails at once
        retrying(lambda: calls.append(1) or (_ for _ in ()).throw(InvalidConfigError("bad")), 3, 25, "x",
                 sleep=slept.append)
    assert len(calls) == 1


@pytest.mark.unit
def test_sink_include_headers():
    base = {"riverlog.bootstrap.servers": "x:1", "topic": "t"}
    assert SinkOptions.parse(base).writes_headers(["value", "headers"])
    assert SinkOptions.parse({**base, "includeHeaders": "true"}).writes_headers(["value", "headers"])
    assert not SinkOptions.parse({**base, "includeHeaders": "false"}).writes_headers(["value", "headers"])
    with pytest.raises(InvalidConfigError, match="'includeHeaders'"):
        SinkOptions.parse({**base, "includeHeaders": "yes"})


@pytest.mark.integration
def test_poll_timeout_fails_a_read_that_gets_nothing_that_long(spark_broker, topic_name):
    with AdminClient({"bootstrap.servers": spark_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    with Producer({"bootstrap.servers": spark_broker.bootstrap}) as p:
        for i in range(5):
            p.produce(topic_name, value=b"%d" % i)
        assert p.flush(30) == 0
    o = SourceOptions.parse({"riverlog.bootstrap.servers": spark_broker.bootstrap, "subscribe": topic_name,
                             "kafkaConsumer.pollTimeoutMs": "800"}, streaming=False)
    rows = 0
    with pytest.raises(Exception, match="kafkaConsumer.pollTimeoutMs=800"):
        for batch in read_slice(o, Slice(topic_name, 0, 0, 10)):  # offsets 5..9 never arrive
            rows += batch.num_rows
    assert rows == 5


@pytest.mark.unit
def test_max_records_per_partition_then_min_partitions_cut_ranges_as_spark_does():
    from spark_source.planning import slices
    start, end = {("t", 0): 0, ("t", 1): 0}, {("t", 0): 100, ("t", 1): 10}
    cut = slices(start, end, max_records=30)
    assert max(s.until - s.start for s in cut) <= 30 and len(cut) == 5       # 4 pieces of t-0, 1 of t-1
    assert sorted((s.partition, o) for s in cut for o in range(s.start, s.until)) == \
        sorted([(0, o) for o in range(100)] + [(1, o) for o in range(10)])
    assert len(slices(start, end, min_partitions=8, max_records=30)) >= 8      # minPartitions still met
    assert parse(maxRecordsPerPartition="30").max_records_per_partition == 30
    with pytest.raises(InvalidConfigError, match="'maxRecordsPerPartition'"):
        parse(maxRecordsPerPartition="0")
