"""Stream–table joins against the data scenarios of Kafka Streams' own tests (KStreamKTableJoinTest,
StreamTableJoinIntegrationTest, StreamTableJoinWithGraceIntegrationTest), and the topologies
KStreamKStreamJoinTest/KStreamKTableJoinTest expect of a rekeyed stream joined twice."""
from __future__ import annotations

import pytest

from streams import Consumed, Joined, Materialized, Produced, Serdes, StreamsBuilder
from streams.testing import TopologyTestDriver
from streams.versioned import Stores
from tests.streams.test_stream_joins_upstream import W, plus

pytestmark = pytest.mark.unit
S = Serdes.String()


# ---------------------------------------------------------------------- stream–table
# AbstractJoinIntegrationTest.input: one key, with out-of-order data on both sides.
INPUT = [("L", None, 1), ("R", None, 2), ("L", "A", 3), ("R", "a", 4), ("L", "B", 5), ("R", "b", 6),
         ("L", None, 7), ("R", None, 8), ("L", "C", 9), ("R", "c", 10), ("R", None, 11), ("L", None, 12),
         ("R", None, 13), ("R", "d", 7), ("L", "D", 6), ("L", None, 2), ("R", None, 3), ("R", "e", 14),
         ("L", "E", 15), ("L", None, 10), ("R", None, 9), ("L", "F", 4), ("R", "f", 3)]


def _stream_table(kind: str, versioned: bool, grace=None):
    b = StreamsBuilder()
    stream = b.stream("left", Consumed.with_(S, S))
    materialized = Materialized.as_(Stores.persistentVersionedKeyValueStore("V", 300_000)) if versioned else None
    table = b.table("right", Consumed.with_(S, S), materialized) if materialized else b.table("right", Consumed.with_(S, S))
    joined = Joined.with_(S, S, S, "Grace").withGracePeriod(grace) if grace is not None else None
    join = stream.join if kind == "inner" else stream.leftJoin
    args = (table, lambda l, r: f"{l}-{'null' if r is None else r}") + ((joined,) if joined else ())
    join(*args).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "st"})
    inputs = {"L": d.createInputTopic("left", S, S), "R": d.createInputTopic("right", S, S)}
    out = d.createOutputTopic("out", S, S)

    def steps(rows):
        got = {}
        for i, (side, value, ts) in enumerate(rows):
            inputs[side].pipeInput("0", value, ts)
            for r in out.readRecordsToList():
                got.setdefault(i, []).append((r.value, r.timestamp))
        return got
    return steps


@pytest.mark.parametrize("kind, versioned, grace, expected", [
    ("inner", False, None, {4: [("B-a", 5)], 14: [("D-d", 6)], 18: [("E-e", 15)]}),
    ("left", False, None, {2: [("A-null", 3)], 4: [("B-a", 5)], 8: [("C-null", 9)], 14: [("D-d", 6)],
                           18: [("E-e", 15)], 21: [("F-null", 4)]}),
    ("inner", True, None, {4: [("B-a", 5)], 14: [("D-b", 6)], 18: [("E-e", 15)], 21: [("F-a", 4)]}),
    ("left", True, None, {2: [("A-null", 3)], 4: [("B-a", 5)], 8: [("C-null", 9)], 14: [("D-b", 6)],
                          18: [("E-e", 15)], 21: [("F-a", 4)]}),
    ("inner", True, 2, {8: [("B-a", 5)], 14: [("D-b", 6)], 21: [("F-a", 4)]}),
    ("left", True, 2, {4: [("A-null", 3)], 8: [("B-a", 5)], 14: [("D-b", 6)], 18: [("C-null", 9)],
                       21: [("F-a", 4)]}),
], ids=["inner", "left", "inner-versioned", "left-versioned", "inner-grace", "left-grace"])
def test_stream_table_join_integration(kind, versioned, grace, expected):
    """StreamTableJoinIntegrationTest and StreamTableJoinWithGraceIntegrationTest (grace 2): a
    versioned table is read as of the stream record's time; with grace, held records leave in
    timestamp order once stream time passes ts + grace, and a record already late joins at once."""
    assert _stream_table(kind, versioned, grace)(INPUT) == expected


def _grace_join():
    """KStreamKTableJoinTest.makeJoin: versioned table (history 5 min), grace 2 ms, keys 0..3."""
    b = StreamsBuilder()
    table = b.table("table", Consumed.with_(S, S),
                    Materialized.as_(Stores.persistentVersionedKeyValueStore("V-grace", 300_000)))
    b.stream("stream", Consumed.with_(S, S)).join(table, plus, Joined.with_(S, S, S, "Grace").withGracePeriod(2)) \
        .to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "grace"})
    s, tb, out = d.createInputTopic("stream", S, S), d.createInputTopic("table", S, S), d.createOutputTopic("out", S, S)

    def push(topic, n, prefix, ts=None):
        for i in range(n):
            topic.pipeInput(str(i), f"{prefix}{i}", i if ts is None else ts)
        return [(r.key, r.value, r.timestamp) for r in out.readRecordsToList()]
    return s, tb, push


def test_stream_table_join_is_delayed_by_the_grace_period():
    """KStreamKTableJoinTest.shouldDelayJoinByGracePeriod."""
    s, tb, push = _grace_join()
    assert push(tb, 4, "Y", 0) == []
    assert push(s, 4, "X") == [("0", "X0+Y0", 0), ("1", "X1+Y1", 1)]
    assert push(tb, 4, "YY", 0) == []
    assert push(s, 4, "X") == [("0", "X0+YY0", 0), ("1", "X1+YY1", 1)]
    s.pipeInput("5", "test", 7)
    assert push(s, 0, "") == [("2", "X2+YY2", 2), ("2", "X2+YY2", 2), ("3", "X3+YY3", 3), ("3", "X3+YY3", 3)]
    assert push(tb, 4, "YYY", 0) == []


def test_a_late_stream_record_joins_at_once_and_evicts_nothing():
    """KStreamKTableJoinTest.shouldHandleLateJoinsWithGracePeriod."""
    s, tb, push = _grace_join()
    assert push(tb, 4, "Y", 0) == []
    assert push(s, 4, "X") == [("0", "X0+Y0", 0), ("1", "X1+Y1", 1)]
    assert push(s, 1, "X") == [("0", "X0+Y0", 0)]


@pytest.mark.parametrize("versioned, history, grace, filtered, error", [
    (False, 0, 6, False, "KTable must be versioned to use a grace period in a stream table join."),
    (False, 0, 6, True, "KTable must be versioned to use a grace period in a stream table join."),
    (True, 300_000, 6, True, None),
    (True, 300_000, 360_000, False, "History retention must be at least grace period."),
    (True, 0, 6, True, "History retention must be at least grace period."),
], ids=["not-versioned", "not-versioned-inherited", "versioned-inherited", "grace-over-history",
        "grace-over-inherited-history"])
def test_a_stream_table_grace_period_needs_a_versioned_table_with_enough_history(
        versioned, history, grace, filtered, error):
    """KStreamKTableJoinTest.shouldFailIfTableIsNotVersioned(ButMaterializationIsInherited),
    shouldNotFailIfTableIsVersionedButMaterializationIsInherited, shouldFailIfGracePeriodIsLonger
    ThanHistoryRetention(AndInheritedStore), with Kafka's messages."""
    import re
    from streams.errors import TopologyError

    def build():
        b = StreamsBuilder()
        a = b.stream("topic", Consumed.with_(S, S))
        store = Stores.persistentVersionedKeyValueStore("tableB", history) if versioned else "tableB"
        t = b.table("topic2", Consumed.with_(S, S), Materialized.as_(store))
        t = t.filter(lambda k, v: True) if filtered else t
        a.join(t, lambda x, y: x + y, Joined.with_(S, S, S, "first-join").withGracePeriod(grace)).to("out-one")
        return b.build()
    if error is None:
        build()
    else:
        with pytest.raises(TopologyError, match=re.escape(error)):
            build()


# ---------------------------------------------------------------------- describe()
# KStreamKStreamJoinTest / KStreamKTableJoinTest: shouldReuseRepartitionTopicWithGeneratedName and
# shouldCreateRepartitionTopicsWithUserProvidedName, Kafka's expected text verbatim.
SS_NAMED = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n'
    '      --> KSTREAM-MAP-0000000003\n'
    '    Processor: KSTREAM-MAP-0000000003 (stores: [])\n'
    '      --> second-join-left-repartition-filter, first-join-left-repartition-filter\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: first-join-left-repartition-filter (stores: [])\n'
    '      --> first-join-left-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000003\n'
    '    Processor: second-join-left-repartition-filter (stores: [])\n'
    '      --> second-join-left-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000003\n'
    '    Sink: first-join-left-repartition-sink (topic: first-join-left-repartition)\n'
    '      <-- first-join-left-repartition-filter\n'
    '    Sink: second-join-left-repartition-sink (topic: second-join-left-repartition)\n'
    '      <-- second-join-left-repartition-filter\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])\n'
    '      --> first-join-other-windowed\n'
    '    Source: first-join-left-repartition-source (topics: [first-join-left-repartition])\n'
    '      --> first-join-this-windowed\n'
    '    Processor: first-join-other-windowed (stores: [KSTREAM-JOINOTHER-0000000010-store])\n'
    '      --> first-join-other-join\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: first-join-this-windowed (stores: [KSTREAM-JOINTHIS-0000000009-store])\n'
    '      --> first-join-this-join\n'
    '      <-- first-join-left-repartition-source\n'
    '    Processor: first-join-other-join (stores: [KSTREAM-JOINTHIS-0000000009-store])\n'
    '      --> first-join-merge\n'
    '      <-- first-join-other-windowed\n'
    '    Processor: first-join-this-join (stores: [KSTREAM-JOINOTHER-0000000010-store])\n'
    '      --> first-join-merge\n'
    '      <-- first-join-this-windowed\n'
    '    Processor: first-join-merge (stores: [])\n'
    '      --> KSTREAM-SINK-0000000012\n'
    '      <-- first-join-this-join, first-join-other-join\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: out-one)\n'
    '      <-- first-join-merge\n'
    '\n'
    '  Sub-topology: 2\n'
    '    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])\n'
    '      --> second-join-other-windowed\n'
    '    Source: second-join-left-repartition-source (topics: [second-join-left-repartition])\n'
    '      --> second-join-this-windowed\n'
    '    Processor: second-join-other-windowed (stores: [KSTREAM-JOINOTHER-0000000019-store])\n'
    '      --> second-join-other-join\n'
    '      <-- KSTREAM-SOURCE-0000000002\n'
    '    Processor: second-join-this-windowed (stores: [KSTREAM-JOINTHIS-0000000018-store])\n'
    '      --> second-join-this-join\n'
    '      <-- second-join-left-repartition-source\n'
    '    Processor: second-join-other-join (stores: [KSTREAM-JOINTHIS-0000000018-store])\n'
    '      --> second-join-merge\n'
    '      <-- second-join-other-windowed\n'
    '    Processor: second-join-this-join (stores: [KSTREAM-JOINOTHER-0000000019-store])\n'
    '      --> second-join-merge\n'
    '      <-- second-join-this-windowed\n'
    '    Processor: second-join-merge (stores: [])\n'
    '      --> KSTREAM-SINK-0000000021\n'
    '      <-- second-join-this-join, second-join-other-join\n'
    '    Sink: KSTREAM-SINK-0000000021 (topic: out-two)\n'
    '      <-- second-join-merge\n'
    '\n'
)
SS_GENERATED = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n'
    '      --> KSTREAM-MAP-0000000003\n'
    '    Processor: KSTREAM-MAP-0000000003 (stores: [])\n'
    '      --> KSTREAM-FILTER-0000000005\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000004\n'
    '      <-- KSTREAM-MAP-0000000003\n'
    '    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-MAP-0000000003-repartition)\n'
    '      <-- KSTREAM-FILTER-0000000005\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-MAP-0000000003-repartition])\n'
    '      --> KSTREAM-WINDOWED-0000000007, KSTREAM-WINDOWED-0000000016\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])\n'
    '      --> KSTREAM-WINDOWED-0000000008\n'
    '    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])\n'
    '      --> KSTREAM-WINDOWED-0000000017\n'
    '    Processor: KSTREAM-WINDOWED-0000000007 (stores: [KSTREAM-JOINTHIS-0000000009-store])\n'
    '      --> KSTREAM-JOINTHIS-0000000009\n'
    '      <-- KSTREAM-SOURCE-0000000006\n'
    '    Processor: KSTREAM-WINDOWED-0000000008 (stores: [KSTREAM-JOINOTHER-0000000010-store])\n'
    '      --> KSTREAM-JOINOTHER-0000000010\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: KSTREAM-WINDOWED-0000000016 (stores: [KSTREAM-JOINTHIS-0000000018-store])\n'
    '      --> KSTREAM-JOINTHIS-0000000018\n'
    '      <-- KSTREAM-SOURCE-0000000006\n'
    '    Processor: KSTREAM-WINDOWED-0000000017 (stores: [KSTREAM-JOINOTHER-0000000019-store])\n'
    '      --> KSTREAM-JOINOTHER-0000000019\n'
    '      <-- KSTREAM-SOURCE-0000000002\n'
    '    Processor: KSTREAM-JOINOTHER-0000000010 (stores: [KSTREAM-JOINTHIS-0000000009-store])\n'
    '      --> KSTREAM-MERGE-0000000011\n'
    '      <-- KSTREAM-WINDOWED-0000000008\n'
    '    Processor: KSTREAM-JOINOTHER-0000000019 (stores: [KSTREAM-JOINTHIS-0000000018-store])\n'
    '      --> KSTREAM-MERGE-0000000020\n'
    '      <-- KSTREAM-WINDOWED-0000000017\n'
    '    Processor: KSTREAM-JOINTHIS-0000000009 (stores: [KSTREAM-JOINOTHER-0000000010-store])\n'
    '      --> KSTREAM-MERGE-0000000011\n'
    '      <-- KSTREAM-WINDOWED-0000000007\n'
    '    Processor: KSTREAM-JOINTHIS-0000000018 (stores: [KSTREAM-JOINOTHER-0000000019-store])\n'
    '      --> KSTREAM-MERGE-0000000020\n'
    '      <-- KSTREAM-WINDOWED-0000000016\n'
    '    Processor: KSTREAM-MERGE-0000000011 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000012\n'
    '      <-- KSTREAM-JOINTHIS-0000000009, KSTREAM-JOINOTHER-0000000010\n'
    '    Processor: KSTREAM-MERGE-0000000020 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000021\n'
    '      <-- KSTREAM-JOINTHIS-0000000018, KSTREAM-JOINOTHER-0000000019\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: out-one)\n'
    '      <-- KSTREAM-MERGE-0000000011\n'
    '    Sink: KSTREAM-SINK-0000000021 (topic: out-to)\n'
    '      <-- KSTREAM-MERGE-0000000020\n'
    '\n'
)
ST_GENERATED = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n'
    '      --> KSTREAM-MAP-0000000007\n'
    '    Processor: KSTREAM-MAP-0000000007 (stores: [])\n'
    '      --> KSTREAM-FILTER-0000000009\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-FILTER-0000000009 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000008\n'
    '      <-- KSTREAM-MAP-0000000007\n'
    '    Sink: KSTREAM-SINK-0000000008 (topic: KSTREAM-MAP-0000000007-repartition)\n'
    '      <-- KSTREAM-FILTER-0000000009\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000010 (topics: [KSTREAM-MAP-0000000007-repartition])\n'
    '      --> KSTREAM-JOIN-0000000011, KSTREAM-JOIN-0000000016\n'
    '    Processor: KSTREAM-JOIN-0000000011 (stores: [topic2-STATE-STORE-0000000001])\n'
    '      --> KSTREAM-SINK-0000000012\n'
    '      <-- KSTREAM-SOURCE-0000000010\n'
    '    Processor: KSTREAM-JOIN-0000000016 (stores: [topic3-STATE-STORE-0000000004])\n'
    '      --> KSTREAM-SINK-0000000017\n'
    '      <-- KSTREAM-SOURCE-0000000010\n'
    '    Source: KSTREAM-SOURCE-0000000002 (topics: [topic2])\n'
    '      --> KTABLE-SOURCE-0000000003\n'
    '    Source: KSTREAM-SOURCE-0000000005 (topics: [topic3])\n'
    '      --> KTABLE-SOURCE-0000000006\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: out-one)\n'
    '      <-- KSTREAM-JOIN-0000000011\n'
    '    Sink: KSTREAM-SINK-0000000017 (topic: out-two)\n'
    '      <-- KSTREAM-JOIN-0000000016\n'
    '    Processor: KTABLE-SOURCE-0000000003 (stores: [topic2-STATE-STORE-0000000001])\n'
    '      --> none\n'
    '      <-- KSTREAM-SOURCE-0000000002\n'
    '    Processor: KTABLE-SOURCE-0000000006 (stores: [topic3-STATE-STORE-0000000004])\n'
    '      --> none\n'
    '      <-- KSTREAM-SOURCE-0000000005\n'
    '\n'
)
ST_NAMED = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n'
    '      --> KSTREAM-MAP-0000000007\n'
    '    Processor: KSTREAM-MAP-0000000007 (stores: [])\n'
    '      --> first-join-repartition-filter, second-join-repartition-filter\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: first-join-repartition-filter (stores: [])\n'
    '      --> first-join-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000007\n'
    '    Processor: second-join-repartition-filter (stores: [])\n'
    '      --> second-join-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000007\n'
    '    Sink: first-join-repartition-sink (topic: first-join-repartition)\n'
    '      <-- first-join-repartition-filter\n'
    '    Sink: second-join-repartition-sink (topic: second-join-repartition)\n'
    '      <-- second-join-repartition-filter\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: first-join-repartition-source (topics: [first-join-repartition])\n'
    '      --> first-join\n'
    '    Source: KSTREAM-SOURCE-0000000002 (topics: [topic2])\n'
    '      --> KTABLE-SOURCE-0000000003\n'
    '    Processor: first-join (stores: [topic2-STATE-STORE-0000000001])\n'
    '      --> KSTREAM-SINK-0000000012\n'
    '      <-- first-join-repartition-source\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: out-one)\n'
    '      <-- first-join\n'
    '    Processor: KTABLE-SOURCE-0000000003 (stores: [topic2-STATE-STORE-0000000001])\n'
    '      --> none\n'
    '      <-- KSTREAM-SOURCE-0000000002\n'
    '\n'
    '  Sub-topology: 2\n'
    '    Source: second-join-repartition-source (topics: [second-join-repartition])\n'
    '      --> second-join\n'
    '    Source: KSTREAM-SOURCE-0000000005 (topics: [topic3])\n'
    '      --> KTABLE-SOURCE-0000000006\n'
    '    Processor: second-join (stores: [topic3-STATE-STORE-0000000004])\n'
    '      --> KSTREAM-SINK-0000000017\n'
    '      <-- second-join-repartition-source\n'
    '    Sink: KSTREAM-SINK-0000000017 (topic: out-two)\n'
    '      <-- second-join\n'
    '    Processor: KTABLE-SOURCE-0000000006 (stores: [topic3-STATE-STORE-0000000004])\n'
    '      --> none\n'
    '      <-- KSTREAM-SOURCE-0000000005\n'
    '\n'
)


def _rekeyed_joins(table: bool, named: bool) -> str:
    b = StreamsBuilder()
    source = b.stream("topic", Consumed.with_(S, S))
    read = b.table if table else b.stream
    two, three = read("topic2", Consumed.with_(S, S)), read("topic3", Consumed.with_(S, S))
    rekeyed = source.map(lambda k, v: (v, k))
    for other, name, out in ((two, "first-join", "out-one"), (three, "second-join", "out-two" if table or named else "out-to")):
        if table:
            args = (Joined.with_(S, S, S, name),) if named else ()
        else:
            from streams import StreamJoined
            args = (W(100),) + ((StreamJoined.with_(S, S, S).withName(name),) if named else ())
        rekeyed.join(other, lambda a, c: a + c, *args).to(out)
    return b.build().describe().kafka_text()


@pytest.mark.parametrize("table, named, expected", [(False, False, SS_GENERATED), (False, True, SS_NAMED),
                                                    (True, False, ST_GENERATED), (True, True, ST_NAMED)],
                         ids=["stream-generated", "stream-named", "table-generated", "table-named"])
def test_a_rekeyed_stream_joined_twice_describes_as_kafka(table, named, expected):
    assert _rekeyed_joins(table, named) == expected


def test_a_grace_join_restored_from_its_changelogs_continues_identically():
    """The held stream records, their order and the buffer's stream time are state: a task rebuilt
    from its changelogs between any two records emits what the original would have."""
    from hypothesis import given, settings, strategies as st
    from tests.streams.join_kit import TwoInputs
    from tests.streams.test_joins_properties import _restored

    def build(b, s, _):
        table = b.table("versioned", Consumed.with_(S, S),
                        Materialized.as_(Stores.persistentVersionedKeyValueStore("V", 50)))
        return s.leftJoin(table, plus, Joined.as_("held").withGracePeriod(5))

    def make():
        t = TwoInputs(build)
        t.inputs["T"] = t.driver.createInputTopic("versioned", S, S)
        return t

    step = st.tuples(st.sampled_from("LT"), st.sampled_from("ab"), st.sampled_from(["1", "2", None]),
                     st.integers(0, 40))

    @settings(max_examples=40, deadline=None)
    @given(events=st.lists(step, min_size=1, max_size=25), cut=st.floats(0, 1))
    def check(events, cut):
        whole, parted = make(), make()
        split = int(cut * len(events))
        expected = [whole.step(*e) for e in events]
        got = [parted.step(*e) for e in events[:split]]
        _restored(parted)
        got += [parted.step(*e) for e in events[split:]]
        assert got == expected
    check()
