"""The source's driver side without a SparkSession or a broker: the stream reader's calls in the
order Spark makes them (which offsets a micro-batch starts and ends at, against a fake view of the
brokers), batch 0's pinned start as the group answers it, and the schema a query may not replace."""
from __future__ import annotations

import pytest
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from broker.client import TopicPartition
from broker.errors import InvalidConfigError
from spark_source.data_source import RiverlogDataSource
from spark_source.offset_lookup import OffsetLookup
from spark_source.options import SourceOptions
from spark_source.reader import StreamReader

TP = ("t", 0)


class _Lookup:
    """One partition ``t-0``, empty from 0, whose latest offset a test moves; nothing pinned."""

    def __init__(self, latest: int):
        self.latest, self.committed = latest, []

    def partitions(self):
        return [TP]

    def watermarks(self, tps):
        return {tp: (0, self.latest) for tp in tps}

    def pinned_start(self, tps):
        return None

    def starting(self, tps):   # startingOffsets=latest
        return {tp: self.latest for tp in tps}

    def commit_group(self, offsets, pin=False):
        self.committed.append((dict(offsets), pin))


def stream(lookup: _Lookup, **options) -> StreamReader:
    reader = StreamReader(SourceOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                               **options}, streaming=True))
    reader._lookup = lookup
    return reader


def test_available_now_from_latest_never_ends_below_its_start_when_records_arrive_as_it_starts():
    """Spark calls ``prepareForTriggerAvailableNow`` before ``initialOffset``; records produced in
    between put ``startingOffsets=latest`` past the end the run fixed first. Spark's Kafka source
    resolves the start before the run's end, so the end is never below it: the run reads nothing
    and ends, where it reported data loss (a topic "deleted and re-created") and failed the query."""
    lookup = _Lookup(10)
    reader = stream(lookup, startingOffsets="latest")
    reader.prepareForTriggerAvailableNow()
    lookup.latest = 15                                   # produced while the query starts
    start = reader.initialOffset()
    assert start == {"t": {"0": 15}}
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"t": {"0": 15}}                       # at the start: nothing of the past re-read
    lookup.latest = 20                                   # after the run began: left to the next run
    assert reader.latestOffset(end, reader.getDefaultReadLimit()) == {"t": {"0": 15}}


class _GroupConsumer:
    """What ``Consumer.committed`` answers for the query's group: ``{tp: (offset, metadata)}``."""

    def __init__(self, committed: dict):
        self.committed_offsets = committed

    def committed(self, partitions, timeout=None):
        return [TopicPartition(p.topic, p.partition, *self.committed_offsets.get((p.topic, p.partition), (-1001, None)))
                for p in partitions]


def lookup_of(committed: dict, **options) -> OffsetLookup:
    lookup = object.__new__(OffsetLookup)   # no broker: only the group's answer matters here
    lookup._timeout = 30.0
    lookup.options = SourceOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribePattern": "^ev-.*",
                                          "groupId": "q", **options}, streaming=True)
    lookup.consumer = _GroupConsumer(committed)
    return lookup


def test_a_pinned_start_holds_when_a_partition_was_added_before_the_replay():
    """Batch 0's pinned start is answered again on the replay even if a partition (a new topic the
    pattern matches, or ``riverlog topics alter``) appeared since: Spark's checkpoint keeps the
    initial offsets of the partitions there were, and the next ``latestOffset`` reads the new one
    from its start. Resolving ``latest`` anew instead skipped what the old partitions received."""
    mark = lookup_of({})._pin_mark()
    lookup = lookup_of({("ev-a", 0): (7, mark), ("ev-a", 1): (3, mark)})
    assert lookup.pinned_start([("ev-a", 0), ("ev-a", 1), ("ev-b", 0)]) == {("ev-a", 0): 7, ("ev-a", 1): 3}
    # Another query's pin, or a finished batch's plain commit on a partition, is not this query's start.
    assert lookup_of({("ev-a", 0): (7, "riverlog.spark.initialOffset:other"), ("ev-a", 1): (3, mark)}).pinned_start(
        [("ev-a", 0), ("ev-a", 1)]) is None
    assert lookup_of({("ev-a", 0): (7, None), ("ev-a", 1): (3, mark)}).pinned_start([("ev-a", 0), ("ev-a", 1)]) is None
    assert lookup_of({}).pinned_start([("ev-a", 0)]) is None


def test_a_custom_schema_is_refused_when_the_query_starts_as_sparks_kafka_source_does():
    """``.schema(...)`` on a riverlog read: Spark's Kafka source refuses it ("has a fixed schema and
    cannot be set with a custom one"); here every task then failed (DATA_SOURCE_RETURN_SCHEMA_MISMATCH)."""
    kafka = [StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
             StructField("partition", IntegerType()), StructField("offset", LongType()),
             StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType())]
    headers = StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                           StructField("value", BinaryType())])))
    options = {"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    RiverlogDataSource(options).reader(StructType(kafka))                  # the source's own: no query set one
    RiverlogDataSource(options).streamReader(StructType(kafka))
    RiverlogDataSource({**options, "includeHeaders": "true"}).reader(StructType([*kafka, headers]))
    for schema, given in ((StructType([StructField("value", StringType())]), options),
                          (StructType(kafka[1::-1] + kafka[2:]), options),       # key and value swapped
                          (StructType(kafka), {**options, "includeHeaders": "true"})):
        with pytest.raises(InvalidConfigError, match="fixed schema") as e:
            RiverlogDataSource(given).reader(schema)
        assert e.value.details["config"] == "schema"
        with pytest.raises(InvalidConfigError, match="fixed schema"):
            RiverlogDataSource(given).streamReader(schema)


def test_a_batch_read_whose_pattern_matches_no_topic_is_empty(monkeypatch):
    """Spark's Kafka source plans no offset range for a ``subscribePattern`` that matches nothing,
    and the batch read is an empty DataFrame; it failed here (UnknownTopicOrPartitionError)."""
    from spark_source import reader

    class NoTopics:
        def __init__(self, options):
            self.closed = False

        def partitions(self):
            return []

        def close(self):
            self.closed = True

    monkeypatch.setattr(reader, "OffsetLookup", NoTopics)
    options = SourceOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribePattern": "^none-.*"},
                                  streaming=False)
    assert reader.BatchReader(options).partitions() == []


def test_a_group_that_cannot_answer_for_a_moment_is_asked_again_not_taken_as_no_pin():
    """Reading the pin right after the brokers restarted (the crash batch 0's replay follows) may
    meet a coordinator still loading its offsets: asked again as ``fetchOffset.numRetries`` says.
    Taken as "no pin", ``latest`` was resolved anew and what arrived since the pin was skipped."""
    from broker.errors import CoordinatorLoadInProgressError
    mark = lookup_of({})._pin_mark()
    tp = ("ev-a", 0)
    lookup = lookup_of({tp: (7, mark)})
    answers = lookup.consumer

    class Loading:
        calls = 0

        def committed(self, partitions, timeout=None):
            Loading.calls += 1
            if Loading.calls == 1:
                raise CoordinatorLoadInProgressError("loading __consumer_offsets")
            return answers.committed(partitions, timeout)

    lookup.consumer, lookup.reset = Loading(), lambda: None
    assert lookup.pinned_start([tp]) == {tp: 7}
    lookup.consumer = type("Down", (), {"committed": lambda self, p, timeout=None: (_ for _ in ()).throw(
        CoordinatorLoadInProgressError("still loading"))})()
    with pytest.raises(CoordinatorLoadInProgressError):   # not a silent start at latest
        lookup.pinned_start([tp])
