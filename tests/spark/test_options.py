"""Every option of Spark's Kafka source and sink that riverlog accepts has Spark's meaning and
precedence, or is refused naming it: parsing on the driver, no SparkSession needed."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from broker.client import AdminClient, NewTopic, Producer
from broker.errors import InvalidConfigError, NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from spark_sink.options import SinkOptions, check_schema
from spark_source.options import SourceOptions
from spark_source.planning import Slice
from spark_source.reader import DataLossError, OffsetLookup, StreamReader, per_partition, read_slice, retrying

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
@pytest.mark.parametrize("options, named", [   # endingTimestamp is only warned about (test_source_kafka_fidelity)
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
    assert (d.poll_timeout_ms, d.fetch_offset_attempts, d.fetch_offset_retry_interval_ms) == (120_000, 3, 1000)


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
def test_a_read_that_gets_nothing_for_poll_timeout_reports_the_missing_offsets(spark_broker, topic_name):
    """After ``kafkaConsumer.pollTimeoutMs`` without records the task asks the partition what it
    holds: offsets past its end are data loss (Spark's ``KafkaDataConsumer``), not a bare timeout."""
    with AdminClient({"bootstrap.servers": spark_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    with Producer({"bootstrap.servers": spark_broker.bootstrap}) as p:
        for i in range(5):
            p.produce(topic_name, value=b"%d" % i)
        assert p.flush(30) == 0
    o = SourceOptions.parse({"riverlog.bootstrap.servers": spark_broker.bootstrap, "subscribe": topic_name,
                             "kafkaConsumer.pollTimeoutMs": "800"}, streaming=False)
    rows = 0
    with pytest.raises(DataLossError, match=r"offsets \[5, 10\) of .* holds \[0, 5\)"):
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


def lookup_over(topics: dict[str, int], **options) -> tuple[OffsetLookup, list]:
    """An OffsetLookup whose admin client is a stand-in for a cluster of ``{topic: partitions}``
    (``__`` topics marked internal, as the broker marks its own), and the list of its
    ``describe_topics`` calls."""
    from concurrent.futures import Future
    from broker.client import TopicDescription, TopicPartitionInfo
    lookup, calls = OffsetLookup(parse(**options)), []

    def describe(collection):
        calls.append(collection.topic_names)
        out = {}
        for name in collection.topic_names:
            out[name] = f = Future()
            if name in topics:
                f.set_result(TopicDescription(name, "", name.startswith("__"),
                                              [TopicPartitionInfo(p, None) for p in range(topics[name])]))
            else:
                f.set_exception(UnknownTopicOrPartitionError(f"topic '{name}' does not exist"))
        return out
    lookup._admin = SimpleNamespace(list_topics=lambda timeout: SimpleNamespace(topics=dict.fromkeys(topics)),
                                    describe_topics=describe, close=lambda: None)
    return lookup, calls


CLUSTER = {"orders": 2, "orders-dlq": 1, "old-orders": 1, "payments": 1, "__consumer_offsets": 3}


@pytest.mark.unit
def test_subscribe_pattern_is_trimmed_and_keeps_a_topic_it_is_found_anywhere_in():
    lookup, _ = lookup_over(CLUSTER, subscribe=None, subscribePattern="  orders ")
    assert lookup.options.subscribe_pattern == "orders"
    assert lookup.partitions() == [("old-orders", 0), ("orders", 0), ("orders", 1), ("orders-dlq", 0)]
    lookup, _ = lookup_over(CLUSTER, subscribe=None, subscribePattern="^orders$")
    assert lookup.partitions() == [("orders", 0), ("orders", 1)]
    lookup, _ = lookup_over(CLUSTER, subscribe=None, subscribePattern="offsets")   # internal topics never match
    assert lookup.partitions() == []
    for pattern, why in (("   ", "is empty"), (r"\p{L}+", "is not a regular expression")):
        with pytest.raises(InvalidConfigError, match=f"'subscribePattern': {why}"):
            parse(subscribe=None, subscribePattern=pattern)


@pytest.mark.unit
def test_a_subscribed_topic_the_cluster_does_not_have_fails_the_query_naming_it():
    lookup, calls = lookup_over(CLUSTER, subscribe="orders,nosuch,gone", **{"fetchOffset.numRetries": "2",
                                                                           "fetchOffset.retryIntervalMs": "0"})
    with pytest.raises(UnknownTopicOrPartitionError, match="'nosuch', 'gone', which the cluster does not have: "
                                                           "create them"):
        lookup.partitions()
    assert len(calls) == 2          # retried as fetchOffset.numRetries says: it may be being created
    lookup, _ = lookup_over(CLUSTER, subscribe="orders,payments")
    assert lookup.partitions() == [("orders", 0), ("orders", 1), ("payments", 0)]


@pytest.mark.unit
def test_per_partition_offsets_and_timestamps_must_name_exactly_the_querys_partitions():
    tps = [("t", 0), ("t", 1)]
    assert per_partition({"t": {0: 5, 1: -2}}, tps, "startingOffsets") == {("t", 0): 5, ("t", 1): -2}
    with pytest.raises(InvalidConfigError, match=r"'startingOffsets' names t-5, u-0, which the query does not "
                                                 r"read: .* t-0, t-1 \(-2 earliest, -1 latest\)"):
        per_partition({"t": {0: 5, 1: 0, 5: 0}, "u": {0: 0}}, tps, "startingOffsets")
    with pytest.raises(InvalidConfigError, match=r"'endingOffsetsByTimestamp' leaves out t-1; names t-2, .* t-0, "
                                                 r"t-1$"):
        per_partition({"t": {0: 5, 2: 9}}, tps, "endingOffsetsByTimestamp")


@pytest.mark.unit
def test_a_batch_read_cannot_start_at_latest_but_only_the_winning_option_is_checked(caplog):
    for latest in ("latest", " LATEST ", '{"t": {"0": 0, "1": -1}}'):
        with pytest.raises(InvalidConfigError, match="'startingOffsets'.*latest.*read nothing"):
            parse(startingOffsets=latest)
        assert parse(streaming=True, startingOffsets=latest).starting is not None   # a stream may
        # startingTimestamp and startingOffsetsByTimestamp win over startingOffsets, which is then not used
        assert parse(startingTimestamp="5", startingOffsets=latest).starting_timestamp == 5
        assert parse(startingOffsetsByTimestamp='{"t": {"0": 5}}', startingOffsets=latest).starting_by_timestamp
    for earliest in ("earliest", '{"t": {"0": -2}}'):
        with pytest.raises(InvalidConfigError, match="'endingOffsets'.*earliest"):
            parse(endingOffsets=earliest)
        assert parse(endingTimestamp="5", endingOffsets=earliest).ending_timestamp == 5
        assert parse(endingOffsetsByTimestamp='{"t": {"0": 5}}', endingOffsets=earliest).ending_by_timestamp


@pytest.mark.unit
@pytest.mark.parametrize("given, ms", [("250", 250), ("30s", 30_000), (" 5M ", 300_000), ("2min", 120_000),
                                       ("1h", 3_600_000), ("1d", 86_400_000), ("100us", 0), ("2500us", 2),
                                       ("-1s", -1000)])
def test_max_trigger_delay_takes_sparks_time_strings(given, ms):
    assert parse(streaming=True, maxTriggerDelay=given).max_trigger_delay_ms == ms


@pytest.mark.unit
@pytest.mark.parametrize("given", ["1 minute", "5 m", "1.5s", "2 hours", "10 seconds", "1w", ""])
def test_max_trigger_delay_refuses_what_spark_refuses(given):
    with pytest.raises(InvalidConfigError, match="'maxTriggerDelay'.*units us, ms, s, m, min, h, d"):
        parse(streaming=True, maxTriggerDelay=given)


class _Lookup:
    """The driver's view of one partition ``t-0`` whose latest offset a test moves."""
    def __init__(self, latest: int):
        self.latest = latest

    def commit_group(self, offsets, pin=False):
        pass

    def partitions(self):
        return [("t", 0)]

    def watermarks(self, tps):
        return {tp: (0, self.latest) for tp in tps}


def stream(clock: list, latest: int, **options) -> StreamReader:
    reader = StreamReader(parse(streaming=True, **options))
    reader.clock, reader._lookup = (lambda: clock[0]), _Lookup(latest)
    return reader


@pytest.mark.unit
def test_min_offsets_per_trigger_runs_the_first_trigger_then_waits_from_the_last_batch_that_ran():
    now = [1000.0]
    reader = stream(now, 30, minOffsetsPerTrigger="50", maxTriggerDelay="10s")
    limit = reader.getDefaultReadLimit()

    def trigger(start: int, latest: int, seconds_later: float) -> int:
        reader._lookup.latest = latest
        now[0] += seconds_later
        return reader.latestOffset({"t": {"0": start}}, limit)["t"]["0"]

    assert trigger(0, 30, 0) == 30            # the first trigger after a start runs with what there is
    assert trigger(30, 60, 9) == 30           # 30 new < 50, 9 s after the last batch: wait
    assert trigger(30, 60, 1) == 60           # 10 s (maxTriggerDelay) after the last batch: run
    assert trigger(60, 80, 1) == 60           # the delay counts from that batch again
    assert trigger(60, 110, 1) == 110         # 50 new: run at once
    restarted = stream(now, 120, minOffsetsPerTrigger="50", maxTriggerDelay="10s")
    assert restarted.latestOffset({"t": {"0": 110}}, limit) == {"t": {"0": 120}}   # every start runs at once


@pytest.mark.unit
def test_sink_topic_option_is_trimmed_and_makes_the_topic_column_irrelevant():
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType
    base = {"riverlog.bootstrap.servers": "x:1"}
    assert SinkOptions.parse({**base, "topic": "  clicks "}).topic == "clicks"
    schema = StructType([StructField("value", StringType()), StructField("topic", IntegerType())])
    check_schema(schema, SinkOptions.parse({**base, "topic": "clicks"}))   # Spark's sink ignores the column then
    with pytest.raises(InvalidConfigError, match="column 'topic' .* must be string"):
        check_schema(schema, SinkOptions.parse(base))
