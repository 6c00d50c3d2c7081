"""Scenarios a topology's unit test meets in the driver, with the answers Kafka Streams documents:
stream time is the task's, across all its input topics; output timestamps follow the operation's
rule (a stream-table join: the stream record's; a table-table join and an aggregation: the larger
of the inputs'); a null key skips a stateful operation; writing to a global table's topic feeds the
global store, and the topic counts as produced (``TopologyTestDriverTest``)."""
from __future__ import annotations

from datetime import timedelta

import pytest

from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Grouped, Materialized, Produced
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from streams.windows import TimeWindows

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()


def rows(d, topic, value_serde=S):
    return [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(topic, S, value_serde).readRecordsToList()]


def test_stream_time_is_the_tasks_across_its_topics():
    """A record of topic ``b`` older than the grace of the stream time that topic ``a`` advanced is
    dropped ("Skipping record for expired window"), as both topics feed one task."""
    b = StreamsBuilder()
    a, c = b.stream("a", Consumed.with_(S, S)), b.stream("b", Consumed.with_(S, S))
    a.merge(c).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(timedelta(milliseconds=10), timedelta(0))) \
        .count().toStream().map(lambda k, v: (f"{k.key}@{k.start}", v)).to("out", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": "t"})
    ia, ib = d.createInputTopic("a", S, S), d.createInputTopic("b", S, S)
    ia.pipeInput("k", "x", 100)
    ib.pipeInput("k", "late", 0)
    ib.pipeInput("k", "y", 105)
    assert rows(d, "out", L) == [("k@100", 1, 100), ("k@100", 2, 105)]


def test_join_and_aggregation_output_timestamps():
    b = StreamsBuilder()
    t, t2 = b.table("t", Consumed.with_(S, S)), b.table("t2", Consumed.with_(S, S))
    b.stream("s", Consumed.with_(S, S)).join(t, lambda v, tv: v + tv).to("st", Produced.with_(S, S))
    t.join(t2, lambda x, y: x + y).toStream().to("tt", Produced.with_(S, S))
    b.stream("s", Consumed.with_(S, S)).groupByKey().count().toStream().to("n", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": "t"})
    d.createInputTopic("t", S, S).pipeInput("k", "T", 50)
    s = d.createInputTopic("s", S, S)
    s.pipeInput("k", "S", 10)
    s.pipeInput(None, "no key", 60)
    s.pipeInput("k", "S2", 5)
    d.createInputTopic("t2", S, S).pipeInput("k", "U", 20)
    assert rows(d, "st") == [("k", "ST", 10), ("k", "S2T", 5)]
    assert rows(d, "tt") == [("k", "TU", 50)]
    assert rows(d, "n", L) == [("k", 1, 10), ("k", 2, 10)]


def test_a_record_written_to_a_global_tables_topic_reaches_its_store():
    b = StreamsBuilder()
    b.globalTable("g", Consumed.with_(S, S), Materialized.as_("gstore"))
    b.stream("s", Consumed.with_(S, S)).to("g", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "t"})
    assert d.producedTopicNames() == set() and set(d.getAllStateStores()) == {"gstore"}
    d.createInputTopic("s", S, S).pipeInput("k", "v", 3)
    assert d.producedTopicNames() == {"g"}
    assert d.getTimestampedKeyValueStore("gstore").get("k").timestamp == 3
    assert d.getKeyValueStore("gstore").get("k") == "v"


def test_produced_topic_names_hold_the_changelog_of_each_store_written():
    """Kafka's ``producedTopicNames``: "may include user (e.g., output) and internal (e.g.,
    changelog, repartition) topic names" — a store's changelog once a write went to its store,
    not before; a record that writes no store (a null key) adds none; Riverlog's own processor
    metadata changelog is not one Kafka would list."""
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, S))
    s.groupByKey().count(materialized=Materialized.as_("counts")).toStream().to("counts-out", Produced.with_(S, L))
    (s.groupBy(lambda k, v: v, Grouped.with_(S, S)).windowedBy(TimeWindows.ofSizeWithNoGrace(timedelta(seconds=10)))
     .count(materialized=Materialized.as_("per-value")))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    assert d.producedTopicNames() == set()
    i = d.createInputTopic("in", S, S)
    i.pipeInput(None, None, 1)                 # no key, no value: no group, no store written
    assert d.producedTopicNames() == set()
    i.pipeInput("k", "v", 2)
    assert d.producedTopicNames() == {"counts-out", "app-counts-changelog", "app-per-value-repartition",
                                      "app-per-value-changelog"}
