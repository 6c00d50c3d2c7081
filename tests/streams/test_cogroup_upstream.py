"""Kafka's own cogroup tests, ported: ``CogroupedKStreamImplTest``,
``TimeWindowedCogroupedKStreamImplTest``, ``SessionWindowedCogroupedKStreamImplTest`` and
``SlidingWindowedCogroupedKStreamImplTest`` — the same inputs, the same outputs in the same order
with the same timestamps, and the same ``describe()`` where the test checks one."""
from __future__ import annotations

import pytest

from streams import (Consumed, Grouped, Materialized, Named, Serdes, SessionWindows, SlidingWindows, StreamsBuilder,
                     TimeWindows, TopologyError)
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S, I = Serdes.String(), Serdes.Integer()
C = Consumed.with_(S, S)
CONFIG = {"application.id": "cogroup", "default.key.serde": "String", "default.value.serde": "String"}

STRING_AGGREGATOR = lambda k, v, agg: agg + v                    # noqa: E731
STRING_INITIALIZER = lambda: ""                                  # noqa: E731
STRING_SUM_AGGREGATOR = lambda k, v, agg: agg + int(v)           # noqa: E731
SUM_AGGREGATOR = lambda k, v, agg: agg + v                       # noqa: E731
SUM_INITIALIZER = lambda: 0                                      # noqa: E731
TOSTRING_ADDER = lambda k, v, agg: f"{agg}+{v}"                  # MockAggregator   # noqa: E731
TOSTRING_REMOVER = lambda k, v, agg: f"{agg}-{v}"                # noqa: E731
STRING_INIT = lambda: "0"                                        # MockInitializer  # noqa: E731
SESSION_MERGER = lambda k, a, b: f"{a}+{b}"                      # noqa: E731


def _run(b: StreamsBuilder, steps, value_serde=S, inputs=None):
    """Pipe ``steps`` (topic, key, value, ts) and read ``output`` as (key, value, ts)."""
    d = TopologyTestDriver(b.build(), CONFIG)
    topics = {t: d.createInputTopic(t, S, serde) for t, serde in (inputs or {}).items()}
    for topic, key, value, ts in steps:
        if topic not in topics:
            topics[topic] = d.createInputTopic(topic, S, S)
        topics[topic].pipeInput(key, value, ts)
    out = d.createOutputTopic("output", S, value_serde)
    return [(r.key, r.value, r.timestamp) for r in out.readRecordsToList()]


def _kafka_text(b: StreamsBuilder) -> str:
    return b.build().describe().kafka_text()


# ---------------------------------------------------------------------- key-value cogroup
SHARED_KEYS = [("one", "k1", "A", 0), ("one", "k2", "A", 1), ("one", "k1", "A", 10), ("one", "k2", "A", 100),
               ("two", "k2", "B", 100), ("two", "k2", "B", 200), ("two", "k1", "B", 1), ("two", "k2", "B", 500),
               ("two", "k1", "B", 500), ("two", "k2", "B", 500), ("two", "k3", "B", 500), ("two", "k2", "B", 100)]


def _two(b):
    return b.stream("one", C).groupByKey(), b.stream("two", C).groupByKey()


def test_should_cogroup_and_aggregate_single_kstreams():
    b = StreamsBuilder()
    b.stream("one", C).groupByKey().cogroup(STRING_AGGREGATOR).aggregate(STRING_INITIALIZER).toStream().to("output")
    got = _run(b, [("one", "k1", "A", 0), ("one", "k2", "B", 0), ("one", "k2", "B", 0), ("one", "k1", "A", 0)])
    assert got == [("k1", "A", 0), ("k2", "B", 0), ("k2", "BB", 0), ("k1", "AA", 0)]


def test_cogroup_handle_null_values():
    b = StreamsBuilder()
    b.stream("one", C).groupByKey().cogroup(STRING_AGGREGATOR).aggregate(STRING_INITIALIZER).toStream().to("output")
    got = _run(b, [("one", "k1", "A", 0), ("one", "k2", "B", 0), ("one", "k2", None, 0), ("one", "k2", "B", 0),
                   ("one", "k1", "A", 0)])
    assert got == [("k1", "A", 0), ("k2", "B", 0), ("k2", "BB", 0), ("k1", "AA", 0)]


def test_should_cogroup_and_aggregate_two_kstreams_with_distinct_keys():
    b = StreamsBuilder()
    g1, g2 = _two(b)
    g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).aggregate(STRING_INITIALIZER).toStream().to("output")
    steps = [("one", "k1", "A", 0), ("one", "k1", "A", 1), ("one", "k1", "A", 10), ("one", "k1", "A", 100),
             ("two", "k2", "B", 100), ("two", "k2", "B", 200), ("two", "k2", "B", 1), ("two", "k2", "B", 500),
             ("two", "k2", "B", 500), ("two", "k2", "B", 100)]
    assert _run(b, steps) == [("k1", "A", 0), ("k1", "AA", 1), ("k1", "AAA", 10), ("k1", "AAAA", 100),
                              ("k2", "B", 100), ("k2", "BB", 200), ("k2", "BBB", 200), ("k2", "BBBB", 500),
                              ("k2", "BBBBB", 500), ("k2", "BBBBBB", 500)]


def test_should_cogroup_and_aggregate_two_kstreams_with_shared_keys():
    b = StreamsBuilder()
    g1, g2 = _two(b)
    g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).aggregate(STRING_INITIALIZER).toStream().to("output")
    assert _run(b, SHARED_KEYS)[:10] == [
        ("k1", "A", 0), ("k2", "A", 1), ("k1", "AA", 10), ("k2", "AA", 100), ("k2", "AAB", 100), ("k2", "AABB", 200),
        ("k1", "AAB", 10), ("k2", "AABBB", 500), ("k1", "AABB", 500), ("k2", "AABBBB", 500)]


def test_should_allow_different_output_type_in_cogroup():
    b = StreamsBuilder()
    g1, g2 = _two(b)
    (g1.cogroup(STRING_SUM_AGGREGATOR).cogroup(g2, STRING_SUM_AGGREGATOR)
       .aggregate(SUM_INITIALIZER, Materialized.as_("store1").withValueSerde(I)).toStream().to("output"))
    steps = [("one", "k1", "1", 0), ("one", "k2", "1", 1), ("one", "k1", "1", 10), ("one", "k2", "1", 100),
             ("two", "k2", "2", 100), ("two", "k2", "2", 200), ("two", "k1", "2", 1), ("two", "k2", "2", 500),
             ("two", "k1", "2", 500), ("two", "k2", "3", 500), ("two", "k3", "2", 500), ("two", "k2", "2", 100)]
    assert _run(b, steps, I)[:10] == [("k1", 1, 0), ("k2", 1, 1), ("k1", 2, 10), ("k2", 2, 100), ("k2", 4, 100),
                                      ("k2", 6, 200), ("k1", 4, 10), ("k2", 8, 500), ("k1", 6, 500), ("k2", 11, 500)]


def test_should_cogroup_streams_with_different_input_types():
    b = StreamsBuilder()
    g1 = b.stream("one", C).groupByKey()
    g2 = b.stream("two", Consumed.with_(S, I)).groupByKey()
    (g1.cogroup(STRING_SUM_AGGREGATOR).cogroup(g2, SUM_AGGREGATOR)
       .aggregate(SUM_INITIALIZER, Materialized.as_("store1").withValueSerde(I)).toStream().to("output"))
    steps = [("one", "k1", "1", 0), ("one", "k2", "1", 1), ("one", "k1", "1", 10), ("one", "k2", "1", 100),
             ("two", "k2", 2, 100), ("two", "k2", 2, 200), ("two", "k1", 2, 1), ("two", "k2", 2, 500),
             ("two", "k1", 2, 500), ("two", "k2", 3, 500), ("two", "k3", 2, 500), ("two", "k2", 2, 100)]
    assert _run(b, steps, I, inputs={"one": S, "two": I}) == [
        ("k1", 1, 0), ("k2", 1, 1), ("k1", 2, 10), ("k2", 2, 100), ("k2", 4, 100), ("k2", 6, 200), ("k1", 4, 10),
        ("k2", 8, 500), ("k1", 6, 500), ("k2", 11, 500), ("k3", 2, 500), ("k2", 13, 500)]


def test_cogroup_key_mixed_aggregators():
    b = StreamsBuilder()
    g1, g2 = _two(b)
    (g1.cogroup(lambda k, v, agg: f"{agg}-{v}").cogroup(g2, lambda k, v, agg: f"{agg}+{v}")
       .aggregate(STRING_INIT, Materialized.as_("store1").withValueSerde(S)).toStream().to("output"))
    steps = [("one", "k1", "1", 0), ("one", "k2", "1", 1), ("one", "k1", "1", 10), ("one", "k2", "1", 100),
             ("two", "k1", "2", 500), ("two", "k2", "2", 500), ("two", "k1", "2", 500), ("two", "k2", "2", 100)]
    assert _run(b, steps) == [("k1", "0-1", 0), ("k2", "0-1", 1), ("k1", "0-1-1", 10), ("k2", "0-1-1", 100),
                              ("k1", "0-1-1+2", 500), ("k2", "0-1-1+2", 500), ("k1", "0-1-1+2+2", 500),
                              ("k2", "0-1-1+2+2", 500)]


def test_cogroup_with_three_grouped_streams():
    b = StreamsBuilder()
    g1, g2 = _two(b)
    g3 = b.stream("three", C).groupByKey()
    (g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).cogroup(g3, STRING_AGGREGATOR)
       .aggregate(STRING_INITIALIZER).toStream().to("output"))
    steps = SHARED_KEYS[:8] + [("three", k, v, ts) for _, k, v, ts in
                               [("", "k1", "B", 500), ("", "k2", "B", 500), ("", "k3", "B", 500), ("", "k2", "B", 100)]]
    assert _run(b, steps) == [
        ("k1", "A", 0), ("k2", "A", 1), ("k1", "AA", 10), ("k2", "AA", 100), ("k2", "AAB", 100), ("k2", "AABB", 200),
        ("k1", "AAB", 10), ("k2", "AABBB", 500), ("k1", "AABB", 500), ("k2", "AABBBB", 500), ("k3", "B", 500),
        ("k2", "AABBBBB", 500)]


def test_cogroup_with_ktable_ktable_inner_join():
    """The cogroup's table is read through its store by a table–table join: the result takes the
    larger timestamp of the two rows."""
    b = StreamsBuilder()
    g1, g2 = _two(b)
    table1 = g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).aggregate(
        STRING_INITIALIZER, Named.as_("name"), Materialized.as_("store"))
    table2 = b.table("three", C)
    table1.join(table2, lambda v1, v2: f"{v1}+{v2}", Materialized.with_(S, S)).toStream().to("output")
    d = TopologyTestDriver(b.build(), CONFIG)
    one, two, three = (d.createInputTopic(t, S, S) for t in ("one", "two", "three"))
    out = d.createOutputTopic("output", S, S)
    one.pipeInput("k1", "A", 5)
    two.pipeInput("k2", "B", 6)
    assert out.isEmpty()
    three.pipeInput("k1", "C", 0)
    three.pipeInput("k2", "D", 10)
    assert [(r.key, r.value, r.timestamp) for r in out.readRecordsToList()] == [("k1", "A+C", 5), ("k2", "B+D", 10)]


# ---------------------------------------------------------------------- naming
def test_should_name_processors_and_store_based_on_named_parameter():
    b = StreamsBuilder()
    g1, g2 = _two(b)
    (g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR)
       .aggregate(STRING_INITIALIZER, Named.as_("test"), Materialized.as_("store")).toStream().to("output"))
    assert _kafka_text(b) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> test-cogroup-agg-0\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
        "      --> test-cogroup-agg-1\n"
        "    Processor: test-cogroup-agg-0 (stores: [store])\n"
        "      --> test-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: test-cogroup-agg-1 (stores: [store])\n"
        "      --> test-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: test-cogroup-merge (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000005\n"
        "      <-- test-cogroup-agg-0, test-cogroup-agg-1\n"
        "    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000006\n"
        "      <-- test-cogroup-merge\n"
        "    Sink: KSTREAM-SINK-0000000006 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000005\n\n")


def test_should_name_repartition_topic():
    b = StreamsBuilder()
    s1, s2 = b.stream("one", C), b.stream("two", C)
    g1, g2 = s1.map(lambda k, v: (v, k)).groupByKey(Grouped.as_("repartition-test")), s2.groupByKey()
    g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).aggregate(STRING_INITIALIZER).toStream().to("output")
    assert _kafka_text(b) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> KSTREAM-MAP-0000000002\n"
        "    Processor: KSTREAM-MAP-0000000002 (stores: [])\n"
        "      --> repartition-test-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: repartition-test-repartition-filter (stores: [])\n"
        "      --> repartition-test-repartition-sink\n"
        "      <-- KSTREAM-MAP-0000000002\n"
        "    Sink: repartition-test-repartition-sink (topic: repartition-test-repartition)\n"
        "      <-- repartition-test-repartition-filter\n\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
        "      --> COGROUPKSTREAM-AGGREGATE-0000000008\n"
        "    Source: repartition-test-repartition-source (topics: [repartition-test-repartition])\n"
        "      --> COGROUPKSTREAM-AGGREGATE-0000000007\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000009\n"
        "      <-- repartition-test-repartition-source\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000009\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000010\n"
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000007, COGROUPKSTREAM-AGGREGATE-0000000008\n"
        "    Processor: KTABLE-TOSTREAM-0000000010 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000011\n"
        "      <-- COGROUPKSTREAM-MERGE-0000000009\n"
        "    Sink: KSTREAM-SINK-0000000011 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000010\n\n")


def test_should_insert_repartitions_topic_for_cogroups_used_twice():
    """One cogroup aggregated twice reads one repartition topic: Kafka's aggregate builder keeps
    the repartition node per grouped stream (the second aggregation still draws its names)."""
    b = StreamsBuilder()
    grouped = b.stream("one", C).map(lambda k, v: (v, k)).groupByKey(Grouped.as_("foo"))
    one = grouped.cogroup(STRING_AGGREGATOR)
    one.aggregate(STRING_INITIALIZER)
    one.aggregate(STRING_INITIALIZER)
    assert _kafka_text(b) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> KSTREAM-MAP-0000000001\n"
        "    Processor: KSTREAM-MAP-0000000001 (stores: [])\n"
        "      --> foo-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: foo-repartition-filter (stores: [])\n"
        "      --> foo-repartition-sink\n"
        "      <-- KSTREAM-MAP-0000000001\n"
        "    Sink: foo-repartition-sink (topic: foo-repartition)\n"
        "      <-- foo-repartition-filter\n\n"
        "  Sub-topology: 1\n"
        "    Source: foo-repartition-source (topics: [foo-repartition])\n"
        "      --> COGROUPKSTREAM-AGGREGATE-0000000006, COGROUPKSTREAM-AGGREGATE-0000000012\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000006 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000002])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000007\n"
        "      <-- foo-repartition-source\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000012 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000008])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000013\n"
        "      <-- foo-repartition-source\n"
        "    Processor: COGROUPKSTREAM-MERGE-0000000007 (stores: [])\n"
        "      --> none\n"
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000006\n"
        "    Processor: COGROUPKSTREAM-MERGE-0000000013 (stores: [])\n"
        "      --> none\n"
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000012\n\n")


def test_an_unnamed_cogroup_aggregated_twice_reads_one_repartition_topic():
    """The same without ``Grouped.as_``: the topic is named after the first aggregation's store, and
    the second aggregation reads it too (both counted once per record)."""
    b = StreamsBuilder()
    one = b.stream("one", C).map(lambda k, v: (v, k)).groupByKey().cogroup(STRING_AGGREGATOR)
    one.aggregate(STRING_INITIALIZER).toStream().to("output")
    one.aggregate(STRING_INITIALIZER).toStream().to("output2")
    t = b.build()
    assert set(t.internal_topics("app")) == {"app-COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition",
                                             "app-COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000002-changelog",
                                             "app-COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-changelog"}
    d = TopologyTestDriver(t, dict(CONFIG, **{"application.id": "app"}))
    d.createInputTopic("one", S, S).pipeInput("x", "k", 1)
    d.createInputTopic("one", S, S).pipeInput("y", "k", 2)
    for topic in ("output", "output2"):
        assert [(r.key, r.value) for r in d.createOutputTopic(topic, S, S).readRecordsToList()] == \
            [("k", "x"), ("k", "xy")]


def test_should_insert_repartitions_topic_for_upstream_key_modification_with_grouped_reused_in_same_cogroups():
    b = StreamsBuilder()
    s1, s2 = b.stream("one", C), b.stream("two", C)
    g1, g2 = s1.map(lambda k, v: (v, k)).groupByKey(), s2.groupByKey()
    cogrouped_two = g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).aggregate(STRING_INITIALIZER)
    cogrouped_one = g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).aggregate(STRING_INITIALIZER)
    cogrouped_one.toStream().to("output")
    cogrouped_two.toStream().to("OUTPUT2")
    assert _kafka_text(b) == REUSED_IN_SAME_COGROUPS


def test_should_insert_repartitions_topic_for_upstream_key_modification_with_grouped_reused_in_different_cogroups():
    b = StreamsBuilder()
    s1, s2, s3 = b.stream("one", C), b.stream("two", C), b.stream("three", C)
    g1, g2, g3 = s1.map(lambda k, v: (v, k)).groupByKey(), s2.groupByKey(), s3.groupByKey()
    g1.cogroup(STRING_AGGREGATOR).cogroup(g3, STRING_AGGREGATOR).aggregate(STRING_INITIALIZER)
    g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).aggregate(STRING_INITIALIZER)
    assert _kafka_text(b) == REUSED_IN_DIFFERENT_COGROUPS


def test_should_insert_repartitions_topic_for_upstream_key_modification_with_grouped_reused():
    """A grouped stream in a cogroup and aggregated alone: two repartition topics, the plain
    aggregation's named after its own store."""
    b = StreamsBuilder()
    s1, s2 = b.stream("one", C), b.stream("two", C)
    g1, g2 = s1.map(lambda k, v: (v, k)).groupByKey(), s2.groupByKey()
    g1.cogroup(STRING_AGGREGATOR).cogroup(g2, STRING_AGGREGATOR).aggregate(STRING_INITIALIZER)
    g1.aggregate(STRING_INITIALIZER, STRING_AGGREGATOR)
    assert _kafka_text(b) == GROUPED_REUSED


@pytest.mark.parametrize("windows, merger", [
    (TimeWindows.ofSizeWithNoGrace(500), None), (SessionWindows.ofInactivityGapWithNoGrace(1), SESSION_MERGER),
    (SlidingWindows.ofTimeDifferenceAndGrace(500, 2000), None)])
def test_windowed_named_param_should_set_name(windows, merger):
    b = StreamsBuilder()
    w = b.stream("topic", C).groupByKey(Grouped.with_(S, S)).cogroup(TOSTRING_ADDER).windowedBy(windows)
    w.aggregate(STRING_INIT, *([merger] if merger else []), Named.as_("foo"))
    assert _kafka_text(b) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n"
        "      --> foo-cogroup-agg-0\n"
        "    Processor: foo-cogroup-agg-0 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
        "      --> foo-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: foo-cogroup-merge (stores: [])\n"
        "      --> none\n"
        "      <-- foo-cogroup-agg-0\n\n")


# ---------------------------------------------------------------------- windowed cogroups
def _windowed(windows, second=True, merger=None, with_end=False):
    """topic (TOSTRING_ADDER) and topic2 (TOSTRING_REMOVER) cogrouped and windowed; the output
    key is the window's key (and its bounds with ``with_end``)."""
    b = StreamsBuilder()
    g = b.stream("topic", C).groupByKey(Grouped.with_(S, S))
    c = g.cogroup(TOSTRING_ADDER)
    if second:
        c = c.cogroup(b.stream("topic2", C).groupByKey(Grouped.with_(S, S)), TOSTRING_REMOVER)
    w = c.windowedBy(windows)
    table = w.aggregate(STRING_INIT, *([merger] if merger else []), Materialized.with_(S, S))
    table.toStream().selectKey(lambda k, v: f"{k.key}@{k.start}-{k.end}" if with_end else k.key).to("output")
    return b


TW = TimeWindows.ofSizeWithNoGrace(500)


def test_time_window_aggregate_test_streams_test():
    steps = [("topic", k, v, ts) for k, v, ts in [("k1", "A", 0), ("k2", "A", 0), ("k2", "A", 1), ("k1", "A", 2),
                                                   ("k1", "B", 3), ("k2", "B", 3), ("k2", "B", 4), ("k1", "B", 4)]]
    assert _run(_windowed(TW), steps) == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k2", "0+A+A", 1), ("k1", "0+A+A", 2), ("k1", "0+A+A+B", 3),
        ("k2", "0+A+A+B", 3), ("k2", "0+A+A+B+B", 4), ("k1", "0+A+A+B+B", 4)]


def test_time_window_mix_aggregators_test():
    steps = [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k2", "A", 1), ("topic", "k1", "A", 2),
             ("topic2", "k1", "B", 3), ("topic2", "k2", "B", 3), ("topic2", "k2", "B", 4), ("topic2", "k1", "B", 4)]
    assert _run(_windowed(TW), steps) == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k2", "0+A+A", 1), ("k1", "0+A+A", 2), ("k1", "0+A+A-B", 3),
        ("k2", "0+A+A-B", 3), ("k2", "0+A+A-B-B", 4), ("k1", "0+A+A-B-B", 4)]


def test_time_window_aggregate_many_windows_test():
    steps = [("topic", "k1", "A", 0), ("topic", "k2", "A", 499), ("topic", "k2", "A", 500), ("topic", "k1", "A", 500)]
    assert _run(_windowed(TW, second=False), steps) == [
        ("k1", "0+A", 0), ("k2", "0+A", 499), ("k2", "0+A", 500), ("k1", "0+A", 500)]


def test_time_window_aggregate_overlapping_windows_test():
    steps = [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k1", "B", 250), ("topic", "k2", "B", 250),
             ("topic", "k2", "A", 500), ("topic", "k1", "A", 500)]
    assert _run(_windowed(TimeWindows.ofSizeWithNoGrace(500).advanceBy(200), second=False), steps) == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k1", "0+A+B", 250), ("k1", "0+B", 250), ("k2", "0+A+B", 250),
        ("k2", "0+B", 250), ("k2", "0+B+A", 500), ("k2", "0+A", 500), ("k1", "0+B+A", 500), ("k1", "0+A", 500)]


def test_time_window_mix_aggregators_many_windows_test():
    steps = [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k2", "A", 1), ("topic", "k1", "A", 2),
             ("topic2", "k1", "B", 3), ("topic2", "k2", "B", 3), ("topic2", "k2", "B", 501), ("topic2", "k1", "B", 501)]
    assert _run(_windowed(TW), steps) == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k2", "0+A+A", 1), ("k1", "0+A+A", 2), ("k1", "0+A+A-B", 3),
        ("k2", "0+A+A-B", 3), ("k2", "0-B", 501), ("k1", "0-B", 501)]


SESSIONS_1_DAY = SessionWindows.ofInactivityGapAndGrace(100, 86_400_000)


def test_session_window_aggregate_test():
    steps = [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k1", "B", 599), ("topic", "k2", "B", 607)]
    b = _windowed(SessionWindows.ofInactivityGapWithNoGrace(500), second=False, merger=SESSION_MERGER)
    assert _run(b, steps) == [("k1", "0+A", 0), ("k2", "0+A", 0), ("k1", "0+B", 599), ("k2", "0+B", 607)]


def test_session_window_aggregate2_test():
    steps = [("topic", "k1", "A", 0), ("topic", "k1", "A", 0), ("topic", "k2", "B", 599), ("topic", "k1", "B", 607)]
    b = _windowed(SessionWindows.ofInactivityGapWithNoGrace(500), second=False, merger=SESSION_MERGER)
    assert _run(b, steps) == [("k1", "0+A", 0), ("k1", "0+0+A+A", 0), ("k2", "0+B", 599), ("k1", "0+B", 607)]


def test_session_window_aggregate_test2_streams_test():
    steps = [("topic", k, v, ts) for k, v, ts in [("k1", "A", 0), ("k1", "A", 84), ("k1", "A", 113), ("k1", "A", 199),
                                                   ("k1", "B", 300), ("k2", "B", 301), ("k2", "B", 400),
                                                   ("k1", "B", 400)]]
    assert _run(_windowed(SESSIONS_1_DAY, merger=SESSION_MERGER), steps) == [
        ("k1", "0+A", 0), ("k1", None, 0), ("k1", "0+0+A+A", 84), ("k1", None, 84), ("k1", "0+0+0+A+A+A", 113),
        ("k1", None, 113), ("k1", "0+0+0+0+A+A+A+A", 199), ("k1", "0+B", 300), ("k2", "0+B", 301), ("k2", None, 301),
        ("k2", "0+0+B+B", 400), ("k1", None, 300), ("k1", "0+0+B+B", 400)]


def test_session_window_mix_aggregators_test():
    steps = [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k2", "A", 1), ("topic", "k1", "A", 2),
             ("topic2", "k1", "B", 3), ("topic2", "k2", "B", 3), ("topic2", "k2", "B", 444), ("topic2", "k1", "B", 444)]
    assert _run(_windowed(SESSIONS_1_DAY, merger=SESSION_MERGER), steps) == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k2", None, 0), ("k2", "0+0+A+A", 1), ("k1", None, 0),
        ("k1", "0+0+A+A", 2), ("k1", None, 2), ("k1", "0+0+0+A+A-B", 3), ("k2", None, 1), ("k2", "0+0+0+A+A-B", 3),
        ("k2", "0-B", 444), ("k1", "0-B", 444)]


def test_session_window_mix_aggregators_many_windows_test():
    steps = [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k2", "A", 1), ("topic", "k1", "A", 2),
             ("topic2", "k1", "B", 3), ("topic2", "k2", "B", 500), ("topic2", "k2", "B", 501), ("topic2", "k1", "B", 501)]
    assert _run(_windowed(SESSIONS_1_DAY, merger=SESSION_MERGER), steps) == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k2", None, 0), ("k2", "0+0+A+A", 1), ("k1", None, 0),
        ("k1", "0+0+A+A", 2), ("k1", None, 2), ("k1", "0+0+0+A+A-B", 3), ("k2", "0-B", 500), ("k2", None, 500),
        ("k2", "0+0-B-B", 501), ("k1", "0-B", 501)]


SLIDING = SlidingWindows.ofTimeDifferenceAndGrace(500, 2000)


def test_sliding_window_aggregate_streams_test():
    steps = [("topic", k, v, ts) for k, v, ts in [("k1", "A", 500), ("k2", "A", 500), ("k2", "A", 501), ("k1", "A", 502),
                                                   ("k1", "B", 503), ("k2", "B", 503), ("k2", "B", 504),
                                                   ("k1", "B", 504)]]
    w = lambda k, s, e, v, ts: (f"{k}@{s}-{e}", v, ts)   # noqa: E731
    assert _run(_windowed(SLIDING, with_end=True), steps) == [
        w("k1", 0, 500, "0+A", 500), w("k2", 0, 500, "0+A", 500),
        w("k2", 501, 1001, "0+A", 501), w("k2", 1, 501, "0+A+A", 501),
        w("k1", 501, 1001, "0+A", 502), w("k1", 2, 502, "0+A+A", 502),
        w("k1", 501, 1001, "0+A+B", 503), w("k1", 503, 1003, "0+B", 503), w("k1", 3, 503, "0+A+A+B", 503),
        w("k2", 501, 1001, "0+A+B", 503), w("k2", 502, 1002, "0+B", 503), w("k2", 3, 503, "0+A+A+B", 503),
        w("k2", 502, 1002, "0+B+B", 504), w("k2", 501, 1001, "0+A+B+B", 504), w("k2", 504, 1004, "0+B", 504),
        w("k2", 4, 504, "0+A+A+B+B", 504),
        w("k1", 503, 1003, "0+B+B", 504), w("k1", 501, 1001, "0+A+B+B", 504), w("k1", 504, 1004, "0+B", 504),
        w("k1", 4, 504, "0+A+A+B+B", 504)]


def test_sliding_window_aggregate_overlapping_windows_test():
    steps = [("topic", "k1", "A", 500), ("topic", "k2", "A", 500), ("topic", "k1", "B", 750), ("topic", "k2", "B", 750),
             ("topic", "k2", "A", 1000), ("topic", "k1", "A", 1000)]
    assert _run(_windowed(SLIDING, second=False), steps) == [
        ("k1", "0+A", 500), ("k2", "0+A", 500), ("k1", "0+B", 750), ("k1", "0+A+B", 750), ("k2", "0+B", 750),
        ("k2", "0+A+B", 750), ("k2", "0+B+A", 1000), ("k2", "0+A", 1000), ("k2", "0+A+B+A", 1000),
        ("k1", "0+B+A", 1000), ("k1", "0+A", 1000), ("k1", "0+A+B+A", 1000)]


# ---------------------------------------------------------------------- the windowed cogroup's store
@pytest.mark.parametrize("windows, times, expected", [
    (TW, (10, 20), [("k1", 0, 500, "0+A-B")]),
    (SlidingWindows.ofTimeDifferenceWithNoGrace(500), (600, 700),
     [("k1", 100, 600, "0+A"), ("k1", 200, 700, "0+A-B"), ("k1", 601, 1101, "0-B")])])
def test_a_windowed_cogroup_store_holds_windows_of_the_window_size(windows, times, expected):
    """Kafka materializes a time- or sliding-windowed cogroup in a window store of the windows'
    size (``TimeWindowedCogroupedKStreamImpl.materialize``): its windows read back as
    ``[start, start + size]``."""
    b = StreamsBuilder()
    g1, g2 = _two(b)
    g1.cogroup(TOSTRING_ADDER).cogroup(g2, TOSTRING_REMOVER).windowedBy(windows).aggregate(
        STRING_INIT, Materialized.as_("store"))
    d = TopologyTestDriver(b.build(), CONFIG)
    d.createInputTopic("one", S, S).pipeInput("k1", "A", times[0])
    d.createInputTopic("two", S, S).pipeInput("k1", "B", times[1])
    assert [(w.key, w.start, w.end, v) for w, v in d.getWindowStore("store").all()] == expected


@pytest.mark.parametrize("windows, merger", [
    (TW, None), (SessionWindows.ofInactivityGapWithNoGrace(100), SESSION_MERGER), (SLIDING, None)])
def test_a_windowed_cogroup_refuses_a_retention_shorter_than_its_windows_when_defined(windows, merger):
    """Kafka's windowed cogroups check ``Materialized.withRetention`` in ``aggregate()`` (an
    IllegalArgumentException), not when the first record arrives."""
    c = StreamsBuilder().stream("one", C).groupByKey().cogroup(TOSTRING_ADDER).windowedBy(windows)
    with pytest.raises(TopologyError, match="retention"):
        c.aggregate(STRING_INIT, *([merger] if merger else []), Materialized.as_("s").withRetention(99))


def test_each_stream_of_a_windowed_cogroup_closes_windows_by_its_own_stream_time():
    """Kafka gives each cogrouped stream its own ``KStreamWindowAggregate``, which tracks its own
    observed stream time: a record of the stream that lags still updates a window the other
    stream has closed (from what the store still holds: here nothing, the window having expired
    with the store's time), while a late record of the stream that is ahead is dropped."""
    steps = [("topic", "k1", "A", 0), ("topic", "k1", "A", 1000), ("topic2", "k1", "B", 10), ("topic", "k1", "A", 10)]
    assert _run(_windowed(TW, with_end=True), steps) == [
        ("k1@0-500", "0+A", 0), ("k1@1000-1500", "0+A", 1000), ("k1@0-500", "0-B", 10)]



def test_each_stream_of_a_session_windowed_cogroup_drops_late_records_by_its_own_stream_time():
    """``KStreamSessionWindowAggregate`` per stream, each with its own stream time: a session
    ending before that stream's time − grace − gap is dropped; the other stream, behind, starts a
    new session (the expired one is no longer found)."""
    steps = [("topic", "k1", "A", 0), ("topic", "k1", "A", 1000), ("topic", "k1", "A", 50), ("topic2", "k1", "B", 50)]
    b = _windowed(SessionWindows.ofInactivityGapWithNoGrace(100), merger=SESSION_MERGER, with_end=True)
    assert _run(b, steps) == [("k1@0-0", "0+A", 0), ("k1@1000-1000", "0+A", 1000), ("k1@50-50", "0-B", 50)]

# ---------------------------------------------------------------------- Kafka's describe() texts
REUSED_IN_SAME_COGROUPS = (  # CogroupedKStreamImplTest.shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedInSameCogroups
    "Topologies:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
    "      --> KSTREAM-MAP-0000000002\n"
    "    Processor: KSTREAM-MAP-0000000002 (stores: [])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-filter, COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter\n"
    "      <-- KSTREAM-SOURCE-0000000000\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter (stores: [])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-sink\n"
    "      <-- KSTREAM-MAP-0000000002\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-filter (stores: [])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-sink\n"
    "      <-- KSTREAM-MAP-0000000002\n"
    "    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition)\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter\n"
    "    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition)\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-filter\n"
    "\n"
    "  Sub-topology: 1\n"
    "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000008, COGROUPKSTREAM-AGGREGATE-0000000015\n"
    "    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000007\n"
    "    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000014\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000009\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-source\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000009\n"
    "      <-- KSTREAM-SOURCE-0000000001\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000014 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000016\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition-source\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000015 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000010])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000016\n"
    "      <-- KSTREAM-SOURCE-0000000001\n"
    "    Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])\n"
    "      --> KTABLE-TOSTREAM-0000000019\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-0000000007, COGROUPKSTREAM-AGGREGATE-0000000008\n"
    "    Processor: COGROUPKSTREAM-MERGE-0000000016 (stores: [])\n"
    "      --> KTABLE-TOSTREAM-0000000017\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-0000000014, COGROUPKSTREAM-AGGREGATE-0000000015\n"
    "    Processor: KTABLE-TOSTREAM-0000000017 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000018\n"
    "      <-- COGROUPKSTREAM-MERGE-0000000016\n"
    "    Processor: KTABLE-TOSTREAM-0000000019 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000020\n"
    "      <-- COGROUPKSTREAM-MERGE-0000000009\n"
    "    Sink: KSTREAM-SINK-0000000018 (topic: output)\n"
    "      <-- KTABLE-TOSTREAM-0000000017\n"
    "    Sink: KSTREAM-SINK-0000000020 (topic: OUTPUT2)\n"
    "      <-- KTABLE-TOSTREAM-0000000019\n"
    "\n"
)

REUSED_IN_DIFFERENT_COGROUPS = (  # CogroupedKStreamImplTest.shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedInDifferentCogroups
    "Topologies:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
    "      --> KSTREAM-MAP-0000000003\n"
    "    Processor: KSTREAM-MAP-0000000003 (stores: [])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-filter, COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-filter\n"
    "      <-- KSTREAM-SOURCE-0000000000\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-filter (stores: [])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-sink\n"
    "      <-- KSTREAM-MAP-0000000003\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-filter (stores: [])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-sink\n"
    "      <-- KSTREAM-MAP-0000000003\n"
    "    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition)\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-filter\n"
    "    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition)\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-filter\n"
    "\n"
    "  Sub-topology: 1\n"
    "    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000015\n"
    "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000016\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000015 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000017\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011-repartition-source\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000016 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000011])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000017\n"
    "      <-- KSTREAM-SOURCE-0000000001\n"
    "    Processor: COGROUPKSTREAM-MERGE-0000000017 (stores: [])\n"
    "      --> none\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-0000000015, COGROUPKSTREAM-AGGREGATE-0000000016\n"
    "\n"
    "  Sub-topology: 2\n"
    "    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000008\n"
    "    Source: KSTREAM-SOURCE-0000000002 (topics: [three])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000009\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000010\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition-source\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000009 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000004])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000010\n"
    "      <-- KSTREAM-SOURCE-0000000002\n"
    "    Processor: COGROUPKSTREAM-MERGE-0000000010 (stores: [])\n"
    "      --> none\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-0000000008, COGROUPKSTREAM-AGGREGATE-0000000009\n"
    "\n"
)

GROUPED_REUSED = (  # CogroupedKStreamImplTest.shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReused
    "Topologies:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
    "      --> KSTREAM-MAP-0000000002\n"
    "    Processor: KSTREAM-MAP-0000000002 (stores: [])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter, KSTREAM-FILTER-0000000013\n"
    "      <-- KSTREAM-SOURCE-0000000000\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter (stores: [])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-sink\n"
    "      <-- KSTREAM-MAP-0000000002\n"
    "    Processor: KSTREAM-FILTER-0000000013 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000012\n"
    "      <-- KSTREAM-MAP-0000000002\n"
    "    Sink: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-sink (topic: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition)\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-filter\n"
    "    Sink: KSTREAM-SINK-0000000012 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition)\n"
    "      <-- KSTREAM-FILTER-0000000013\n"
    "\n"
    "  Sub-topology: 1\n"
    "    Source: COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-source (topics: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000007\n"
    "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
    "      --> COGROUPKSTREAM-AGGREGATE-0000000008\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000009\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition-source\n"
    "    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
    "      --> COGROUPKSTREAM-MERGE-0000000009\n"
    "      <-- KSTREAM-SOURCE-0000000001\n"
    "    Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])\n"
    "      --> none\n"
    "      <-- COGROUPKSTREAM-AGGREGATE-0000000007, COGROUPKSTREAM-AGGREGATE-0000000008\n"
    "\n"
    "  Sub-topology: 2\n"
    "    Source: KSTREAM-SOURCE-0000000014 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000010-repartition])\n"
    "      --> KSTREAM-AGGREGATE-0000000011\n"
    "    Processor: KSTREAM-AGGREGATE-0000000011 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000010])\n"
    "      --> none\n"
    "      <-- KSTREAM-SOURCE-0000000014\n"
    "\n"
)
