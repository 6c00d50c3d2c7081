"""``StreamsBuilder.stream(pattern)``, as Kafka's ``stream(Pattern)``: every topic whose whole name
the regular expression matches is read, topics first seen later included; a topic matched by a
pattern and named by another source, or matched by two patterns, is refused with Kafka's
``TopologyException`` texts; ``describe()`` prints the pattern (``Pattern.toString()``)."""
from __future__ import annotations

import re

import pytest

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.errors import TopologyError
from streams.testing import TopologyTestDriver

S = Serdes.String()


def _upper_app():
    b = StreamsBuilder()
    b.stream(re.compile("orders-.*"), Consumed.with_(S, S)).mapValues(lambda v: v.upper()).to(
        "out", Produced.with_(S, S))
    return b.build()


def test_a_pattern_source_reads_every_matching_topic_in_the_order_piped():
    with TopologyTestDriver(_upper_app(), {"application.id": "pattern"}) as d:
        eu = d.createInputTopic("orders-eu", S, S)
        us = d.createInputTopic("orders-us", S, S)
        eu.pipeInput("a", "x", 1)
        us.pipeInput("b", "y", 2)
        eu.pipeInput("c", "z", 3)
        out = [(r.key, r.value) for r in d.createOutputTopic("out", S, S).readRecordsToList()]
    assert out == [("a", "X"), ("b", "Y"), ("c", "Z")]


def test_a_pattern_matches_whole_names_only():
    with TopologyTestDriver(_upper_app(), {"application.id": "pattern"}) as d:
        for topic in ("old-orders-eu", "orders"):
            with pytest.raises(TopologyError, match="not read by the topology"):
                d.createInputTopic(topic, S, S)


def test_describe_prints_the_pattern_as_kafka():
    text = str(_upper_app().describe())
    assert "Source: KSTREAM-SOURCE-0000000000 (topics: orders-.*)\n      --> KSTREAM-MAPVALUES-0000000001" in text


def test_a_pattern_over_a_topic_already_read_is_refused():
    b = StreamsBuilder()
    b.stream("foo")
    with pytest.raises(TopologyError, match=r"Pattern f\.\* will match a topic that has already been registered "
                                            r"by another source"):
        b.stream(re.compile("f.*"))


def test_a_topic_matched_by_a_pattern_already_read_is_refused():
    b = StreamsBuilder()
    b.stream(re.compile("f.*"))
    with pytest.raises(TopologyError, match="Topic foo matches a Pattern already registered by another source"):
        b.stream("foo")
    with pytest.raises(TopologyError, match="Topic fee matches a Pattern already registered by another source"):
        b.table("fee")


def test_a_topic_matched_by_two_patterns_is_refused_when_it_appears():
    b = StreamsBuilder()
    b.stream(re.compile("a.*"), Consumed.with_(S, S)).to("out1", Produced.with_(S, S))
    b.stream(re.compile(".*b"), Consumed.with_(S, S)).to("out2", Produced.with_(S, S))
    with TopologyTestDriver(b.build(), {"application.id": "two-patterns"}) as d:
        d.createInputTopic("axx", S, S).pipeInput("k", "v", 1)
        d.createInputTopic("xb", S, S).pipeInput("k", "v", 1)
        with pytest.raises(TopologyError, match="Topic ab is already matched for another regex pattern"):
            d.createInputTopic("ab", S, S)
        assert [r.value for r in d.createOutputTopic("out1", S, S).readRecordsToList()] == ["v"]
        assert [r.value for r in d.createOutputTopic("out2", S, S).readRecordsToList()] == ["v"]


def test_a_table_takes_a_topic_name_only():
    with pytest.raises(TopologyError, match="table"):
        StreamsBuilder().table(re.compile("t.*"))
    with pytest.raises(TopologyError, match="globalTable"):
        StreamsBuilder().globalTable(re.compile("t.*"))


def test_a_pattern_stream_aggregates_keys_of_every_matching_topic():
    b = StreamsBuilder()
    b.stream(re.compile("clicks-[0-9]+"), Consumed.with_(S, S)).groupByKey().count().toStream().to(
        "counts", Produced.with_(S, Serdes.Long()))
    with TopologyTestDriver(b.build(), {"application.id": "pattern-count"}) as d:
        d.createInputTopic("clicks-1", S, S).pipeInput("k", "a", 1)
        d.createInputTopic("clicks-22", S, S).pipeInput("k", "b", 2)
        out = d.createOutputTopic("counts", S, Serdes.Long()).readKeyValuesToList()
    assert [tuple(kv) for kv in out] == [("k", 1), ("k", 2)]



def test_the_spark_subscription_anchors_patterns_and_named_topics():
    from streams.pattern_sources import subscription
    b = StreamsBuilder()
    b.stream(re.compile("orders-.*"), Consumed.with_(S, S)).merge(b.stream("a.b", Consumed.with_(S, S))).to(
        "out", Produced.with_(S, S))
    b.stream("other", Consumed.with_(S, S)).to("out2", Produced.with_(S, S))
    tp = b.build()
    first, second = tp.subtopologies
    pattern = subscription(tp, "app", first)
    assert pattern == r"^(?:orders-.*)$|^(?:a\.b)$"
    assert [t for t in ("orders-1", "a.b", "axb", "old-orders-1", "orders") if re.search(pattern, t)] == [
        "orders-1", "a.b"]
    assert subscription(tp, "app", second) is None
