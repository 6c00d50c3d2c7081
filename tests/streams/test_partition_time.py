"""Which sub-topologies keep their sources' partition time between batches (Kafka commits it with
the offsets): those with a store, and those whose sources' extractors read it, the application's
``default.timestamp.extractor`` included. An extractor that says it reads none is given -1."""
from __future__ import annotations

from streams.builder import StreamsBuilder
from streams.parameters import (Consumed, FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp, Produced,
                                UsePartitionTimeOnInvalidTimestamp, WallclockTimestampExtractor, uses_partition_time)
from streams.partition_time import with_default_extractor
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver

S = Serdes.String()


def event_time(record, partition_time):
    return int(record.value)


def _topology(extractor=None, repartition=False):
    b = StreamsBuilder()
    consumed = Consumed.with_(S, S) if extractor is None else Consumed.with_(S, S).withTimestampExtractor(extractor)
    s = b.stream("in", consumed)
    if repartition:
        s = s.repartition()
    s.mapValues(lambda v: v).to("out", Produced.with_(S, S))
    return b.build()


def test_kafkas_extractors_say_whether_they_read_the_partition_time_and_a_callable_is_taken_to():
    assert not uses_partition_time(FailOnInvalidTimestamp())
    assert not uses_partition_time(LogAndSkipOnInvalidTimestamp())
    assert not uses_partition_time(WallclockTimestampExtractor())
    assert uses_partition_time(UsePartitionTimeOnInvalidTimestamp())
    assert uses_partition_time(event_time)

    def opted_out(record, partition_time):
        return int(record.value)
    opted_out.uses_partition_time = False
    assert not uses_partition_time(opted_out)


def test_a_source_extractor_that_reads_the_partition_time_makes_a_storeless_sub_topology_stateful():
    assert not _topology().subtopologies[0].stateful
    assert not _topology(LogAndSkipOnInvalidTimestamp).subtopologies[0].stateful
    assert _topology(UsePartitionTimeOnInvalidTimestamp).subtopologies[0].stateful
    tp = _topology(event_time)
    assert tp.subtopologies[0].stateful and not tp.subtopologies[0].stores
    assert "no store: it keeps the partition time" in tp.describe("a").spark_text()


def test_the_default_extractor_marks_the_topologys_own_topics_only():
    tp = _topology(repartition=True)
    marked = with_default_extractor(tp, UsePartitionTimeOnInvalidTimestamp())
    # the repartition topic's records keep the timestamps the application wrote: no extractor
    assert [s.stateful for s in marked.subtopologies] == [True, False]
    assert [s.stateful for s in tp.subtopologies] == [False, False]        # the topology is not changed
    assert [s.stateful for s in with_default_extractor(tp, FailOnInvalidTimestamp()).subtopologies] == [False, False]
    # a source's own extractor wins over the default
    own = with_default_extractor(_topology(LogAndSkipOnInvalidTimestamp), UsePartitionTimeOnInvalidTimestamp())
    assert not own.subtopologies[0].stateful


def test_an_extractor_that_reads_no_partition_time_is_given_minus_one():
    seen = []

    def extract(record, partition_time):
        seen.append(partition_time)
        return int(record.value)
    extract.uses_partition_time = False
    d = TopologyTestDriver(_topology(extract), {"application.id": "app"})
    i = d.createInputTopic("in", S, S)
    for v in ("100", "200"):
        i.pipeInput("k", v, 1)
    assert seen == [-1, -1]
    assert [r.timestamp for r in d.createOutputTopic("out", S, S).readRecordsToList()] == [100, 200]
