"""``describe()`` against Kafka Streams' own expected topologies: the texts below are the ones
Kafka's tests (TopologyTest, KStreamImplTest, SuppressTopologyTest, RepartitionTopicNamingTest)
assert for the same DSL calls, so processor, store and internal topic names, node order and
layout are Kafka's character for character. (Kafka's tests whose tables are not materialized are
left out: a `builder.table()` here always has its store, docs/streams.md.)"""
from __future__ import annotations

import pytest

from streams import (BufferConfig, Consumed, Grouped, JoinWindows, Materialized, Produced, Serdes, SessionWindows,
                     SlidingWindows, StreamJoined, StreamsBuilder, Suppressed, TimeWindows)

pytestmark = pytest.mark.unit
S, L, I = Serdes.String(), Serdes.Long(), Serdes.Integer()
C = Consumed.with_(S, S)

def _s(b):
    return b.stream("input-topic")


def _join(kind, store=None):
    def build(b):
        joined = StreamJoined.with_(Serdes.Integer(), Serdes.String(), Serdes.String())
        if store:
            joined = joined.withStoreName(store)
        getattr(b.stream("input-topic1"), kind)(b.stream("input-topic2"), lambda a, c: a,
                                                 JoinWindows.ofTimeDifferenceWithNoGrace(100), joined)
    return build


def _suppressed_session_count(name=None):
    def build(b):
        suppressed = Suppressed.untilWindowCloses(BufferConfig.unbounded())
        (b.stream("input", C).groupBy(lambda k, v: k, Grouped.with_(S, S))
          .windowedBy(SessionWindows.ofInactivityGapAndGrace(5, 5))
          .count(materialized=Materialized.as_("counts").withCachingDisabled())
          .suppress(suppressed.withName(name) if name else suppressed)
          .toStream().map(lambda k, v: (str(k), v)).to("output-suppressed", Produced.with_(S, L)))
    return build


def _suppressed_count(name=None):
    def build(b):
        suppressed = Suppressed.untilTimeLimit(1000, BufferConfig.unbounded())
        (b.stream("input", C).groupByKey().count().suppress(suppressed.withName(name) if name else suppressed)
          .toStream().to("output", Produced.with_(S, L)))
    return build


def _repartition_naming(b):
    """RepartitionTopicNamingTest's topology (its process() is a foreach of the same name)."""
    mapped = b.stream("input", C).map(lambda k, v: (k.upper(), v))
    (mapped.filter(lambda k, v: k == "B").mapValues(lambda v: v.upper())
           .foreach(lambda k, v: None, named="KSTREAM-PROCESSOR-0000000004"))
    count = mapped.groupByKey(Grouped.as_("count-stream")).count(materialized=Materialized.with_(S, L)).toStream()
    count.to("outputTopic_0", Produced.with_(S, L))
    (mapped.groupByKey(Grouped.as_("aggregate-stream"))
           .aggregate(lambda: 0, lambda k, v, a: a + len(v), materialized=Materialized.with_(S, I))
           .toStream().to("outputTopic_1", Produced.with_(S, I)))
    (mapped.filter(lambda k, v: True).peek(lambda k, v: None).groupByKey(Grouped.as_("reduced-stream"))
           .reduce(lambda a, c: a + c, materialized=Materialized.with_(S, S)).toStream()
           .to("outputTopic_2", Produced.with_(S, S)))
    (mapped.filter(lambda k, v: k == "A")
           .join(count, lambda a, c: a, JoinWindows.ofTimeDifferenceWithNoGrace(5000),
                 StreamJoined.with_(S, S, L).withStoreName("joined-stream").withName("joined-stream"))
           .to("outputTopicForJoin", Produced.with_(S, S)))


def _fk_join(b):
    left, right = b.stream("input1", C).toTable(), b.stream("input2", C).toTable()
    left.join(right, lambda v: v.split("|")[1], lambda a, c: a).toStream().to("output")


BUILDERS = {
    "TopologyTest.kGroupedStreamZeroArgCount": lambda b: _s(b).groupByKey().count(),
    "TopologyTest.kGroupedStreamNamedMaterializedCount":
        lambda b: _s(b).groupByKey().count(materialized=Materialized.as_("count-store")),
    "TopologyTest.kGroupedStreamAnonymousMaterializedCount":
        lambda b: _s(b).groupByKey().count(materialized=Materialized.with_(None, L)),
    "TopologyTest.timeWindowZeroArgCount":
        lambda b: _s(b).groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1)).count(),
    "TopologyTest.timeWindowNamedMaterializedCount":
        lambda b: _s(b).groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1))
                       .count(materialized=Materialized.as_("count-store")),
    "TopologyTest.timeWindowAnonymousMaterializedCount":
        lambda b: _s(b).groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1))
                       .count(materialized=Materialized.with_(None, L)),
    "TopologyTest.timeWindowedCogroupedZeroArgCount":
        lambda b: _s(b).groupByKey().cogroup(lambda k, v, a: v).windowedBy(TimeWindows.ofSizeWithNoGrace(1))
                       .aggregate(lambda: ""),
    "TopologyTest.timeWindowedCogroupedNamedMaterializedCount":
        lambda b: _s(b).groupByKey().cogroup(lambda k, v, a: v).windowedBy(TimeWindows.ofSizeWithNoGrace(1))
                       .aggregate(lambda: "", materialized=Materialized.as_("aggregate-store")),
    "TopologyTest.slidingWindowedCogroupedZeroArgCount":
        lambda b: _s(b).groupByKey().cogroup(lambda k, v, a: v)
                       .windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(1)).aggregate(lambda: ""),
    "TopologyTest.sessionWindowedCogroupedZeroArgCount":
        lambda b: _s(b).groupByKey().cogroup(lambda k, v, a: v)
                       .windowedBy(SessionWindows.ofInactivityGapWithNoGrace(1)).aggregate(lambda: "", lambda k, a, c: ""),
    "TopologyTest.sessionWindowZeroArgCount":
        lambda b: _s(b).groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(1)).count(),
    "TopologyTest.sessionWindowNamedMaterializedCount":
        lambda b: _s(b).groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(1))
                       .count(materialized=Materialized.as_("count-store")),
    "TopologyTest.sessionWindowAnonymousMaterializedCount":
        lambda b: _s(b).groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(1))
                       .count(materialized=Materialized.with_(None, L)),
    "TopologyTest.tableZeroArgCount": lambda b: b.table("input-topic").groupBy(lambda k, v: (None, v)).count(),
    "TopologyTest.tableNamedMaterializedCount":
        lambda b: b.table("input-topic").groupBy(lambda k, v: (None, v)).count(materialized=Materialized.as_("count-store")),
    "TopologyTest.tableAnonymousMaterializedCount":
        lambda b: b.table("input-topic").groupBy(lambda k, v: (None, v)).count(materialized=Materialized.with_(None, L)),
    "TopologyTest.streamStreamJoinTopologyWithDefaultStoresNames": _join("join"),
    "TopologyTest.streamStreamJoinTopologyWithCustomStoresNames": _join("join", "custom-name"),
    "TopologyTest.streamStreamLeftJoinTopologyWithDefaultStoresNames": _join("leftJoin"),
    "TopologyTest.streamStreamLeftJoinTopologyWithCustomStoresNames": _join("leftJoin", "custom-name"),
    "TopologyTest.streamStreamOuterJoinTopologyWithDefaultStoresNames": _join("outerJoin"),
    "TopologyTest.streamStreamOuterJoinTopologyWithCustomStoresNames": _join("outerJoin", "custom-name"),
    "KStreamImplTest.shouldSupportGroupByCountWithKStreamToKTable":
        lambda b: b.stream("input", C).toTable().groupBy(lambda k, v: (v, v), Grouped.with_(S, S)).count()
                   .toStream().to("output"),
    "KStreamImplTest.shouldSupportStreamTableJoinWithKStreamToKTable":
        lambda b: b.stream("streamTopic", C).join(b.stream("tableTopic", C).toTable(), lambda a, c: a).to("output"),
    "KStreamImplTest.shouldSupportTableTableJoinWithKStreamToKTable":
        lambda b: b.stream("left", C).toTable().join(b.stream("right", C).toTable(), lambda a, c: a)
                   .toStream().to("output"),
    "KStreamImplTest.shouldSupportForeignKeyTableTableJoinWithKTableFromKStream": _fk_join,
    "SuppressTopologyTest.ANONYMOUS_FINAL_TOPOLOGY": _suppressed_session_count(),
    "SuppressTopologyTest.NAMED_FINAL_TOPOLOGY": _suppressed_session_count("myname"),
    "SuppressTopologyTest.ANONYMOUS_INTERMEDIATE_TOPOLOGY": _suppressed_count(),
    "SuppressTopologyTest.NAMED_INTERMEDIATE_TOPOLOGY": _suppressed_count("asdf"),
    "RepartitionTopicNamingTest.EXPECTED_UNOPTIMIZED_TOPOLOGY": _repartition_naming,
}


EXPECTED = {
    "TopologyTest.kGroupedStreamZeroArgCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.kGroupedStreamNamedMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000001\n'
        '    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [count-store])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.kGroupedStreamAnonymousMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000003\n'
        '    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.timeWindowZeroArgCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.timeWindowNamedMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000001\n'
        '    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [count-store])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.timeWindowAnonymousMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000003\n'
        '    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.timeWindowedCogroupedZeroArgCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> COGROUPKSTREAM-AGGREGATE-0000000002\n'
        '    Processor: COGROUPKSTREAM-AGGREGATE-0000000002 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001])\n'
        '      --> COGROUPKSTREAM-MERGE-0000000003\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: COGROUPKSTREAM-MERGE-0000000003 (stores: [])\n'
        '      --> none\n'
        '      <-- COGROUPKSTREAM-AGGREGATE-0000000002\n'
        '\n'
    ),
    "TopologyTest.timeWindowedCogroupedNamedMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> COGROUPKSTREAM-AGGREGATE-0000000001\n'
        '    Processor: COGROUPKSTREAM-AGGREGATE-0000000001 (stores: [aggregate-store])\n'
        '      --> COGROUPKSTREAM-MERGE-0000000002\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: COGROUPKSTREAM-MERGE-0000000002 (stores: [])\n'
        '      --> none\n'
        '      <-- COGROUPKSTREAM-AGGREGATE-0000000001\n'
        '\n'
    ),
    "TopologyTest.slidingWindowedCogroupedZeroArgCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> COGROUPKSTREAM-AGGREGATE-0000000002\n'
        '    Processor: COGROUPKSTREAM-AGGREGATE-0000000002 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001])\n'
        '      --> COGROUPKSTREAM-MERGE-0000000003\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: COGROUPKSTREAM-MERGE-0000000003 (stores: [])\n'
        '      --> none\n'
        '      <-- COGROUPKSTREAM-AGGREGATE-0000000002\n'
        '\n'
    ),
    "TopologyTest.sessionWindowedCogroupedZeroArgCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> COGROUPKSTREAM-AGGREGATE-0000000002\n'
        '    Processor: COGROUPKSTREAM-AGGREGATE-0000000002 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001])\n'
        '      --> COGROUPKSTREAM-MERGE-0000000003\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: COGROUPKSTREAM-MERGE-0000000003 (stores: [])\n'
        '      --> none\n'
        '      <-- COGROUPKSTREAM-AGGREGATE-0000000002\n'
        '\n'
    ),
    "TopologyTest.sessionWindowZeroArgCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.sessionWindowNamedMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000001\n'
        '    Processor: KSTREAM-AGGREGATE-0000000001 (stores: [count-store])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.sessionWindowAnonymousMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n'
        '      --> KSTREAM-AGGREGATE-0000000003\n'
        '    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '\n'
    ),
    "TopologyTest.tableZeroArgCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic])\n'
        '      --> KTABLE-SOURCE-0000000002\n'
        '    Processor: KTABLE-SOURCE-0000000002 (stores: [input-topic-STATE-STORE-0000000000])\n'
        '      --> KTABLE-SELECT-0000000003\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KTABLE-SELECT-0000000003 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000005\n'
        '      <-- KTABLE-SOURCE-0000000002\n'
        '    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n'
        '      <-- KTABLE-SELECT-0000000003\n'
        '\n'
        '  Sub-topology: 1\n'
        '    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n'
        '      --> KTABLE-AGGREGATE-0000000007\n'
        '    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000006\n'
        '\n'
    ),
    "TopologyTest.tableNamedMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic])\n'
        '      --> KTABLE-SOURCE-0000000002\n'
        '    Processor: KTABLE-SOURCE-0000000002 (stores: [input-topic-STATE-STORE-0000000000])\n'
        '      --> KTABLE-SELECT-0000000003\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KTABLE-SELECT-0000000003 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000004\n'
        '      <-- KTABLE-SOURCE-0000000002\n'
        '    Sink: KSTREAM-SINK-0000000004 (topic: count-store-repartition)\n'
        '      <-- KTABLE-SELECT-0000000003\n'
        '\n'
        '  Sub-topology: 1\n'
        '    Source: KSTREAM-SOURCE-0000000005 (topics: [count-store-repartition])\n'
        '      --> KTABLE-AGGREGATE-0000000006\n'
        '    Processor: KTABLE-AGGREGATE-0000000006 (stores: [count-store])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000005\n'
        '\n'
    ),
    "TopologyTest.tableAnonymousMaterializedCount": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic])\n'
        '      --> KTABLE-SOURCE-0000000002\n'
        '    Processor: KTABLE-SOURCE-0000000002 (stores: [input-topic-STATE-STORE-0000000000])\n'
        '      --> KTABLE-SELECT-0000000003\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KTABLE-SELECT-0000000003 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000005\n'
        '      <-- KTABLE-SOURCE-0000000002\n'
        '    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n'
        '      <-- KTABLE-SELECT-0000000003\n'
        '\n'
        '  Sub-topology: 1\n'
        '    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n'
        '      --> KTABLE-AGGREGATE-0000000007\n'
        '    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000006\n'
        '\n'
    ),
    "TopologyTest.streamStreamJoinTopologyWithDefaultStoresNames": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic1])\n'
        '      --> KSTREAM-WINDOWED-0000000002\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic2])\n'
        '      --> KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])\n'
        '      --> KSTREAM-JOINTHIS-0000000004\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-JOINOTHER-0000000005-store])\n'
        '      --> KSTREAM-JOINOTHER-0000000005\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KSTREAM-JOINOTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-JOINOTHER-0000000005-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000002\n'
        '    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n'
        '      --> none\n'
        '      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-JOINOTHER-0000000005\n'
        '\n'
    ),
    "TopologyTest.streamStreamJoinTopologyWithCustomStoresNames": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic1])\n'
        '      --> KSTREAM-WINDOWED-0000000002\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic2])\n'
        '      --> KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-WINDOWED-0000000002 (stores: [custom-name-this-join-store])\n'
        '      --> KSTREAM-JOINTHIS-0000000004\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KSTREAM-WINDOWED-0000000003 (stores: [custom-name-other-join-store])\n'
        '      --> KSTREAM-JOINOTHER-0000000005\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KSTREAM-JOINOTHER-0000000005 (stores: [custom-name-this-join-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [custom-name-other-join-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000002\n'
        '    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n'
        '      --> none\n'
        '      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-JOINOTHER-0000000005\n'
        '\n'
    ),
    "TopologyTest.streamStreamLeftJoinTopologyWithDefaultStoresNames": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic1])\n'
        '      --> KSTREAM-WINDOWED-0000000002\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic2])\n'
        '      --> KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])\n'
        '      --> KSTREAM-JOINTHIS-0000000004\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-OUTEROTHER-0000000005-store])\n'
        '      --> KSTREAM-OUTEROTHER-0000000005\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000002\n'
        '    Processor: KSTREAM-OUTEROTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store, KSTREAM-OUTERSHARED-0000000004-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n'
        '      --> none\n'
        '      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n'
        '\n'
    ),
    "TopologyTest.streamStreamLeftJoinTopologyWithCustomStoresNames": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic1])\n'
        '      --> KSTREAM-WINDOWED-0000000002\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic2])\n'
        '      --> KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-WINDOWED-0000000002 (stores: [custom-name-this-join-store])\n'
        '      --> KSTREAM-JOINTHIS-0000000004\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KSTREAM-WINDOWED-0000000003 (stores: [custom-name-outer-other-join-store])\n'
        '      --> KSTREAM-OUTEROTHER-0000000005\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [custom-name-outer-other-join-store, custom-name-left-shared-join-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000002\n'
        '    Processor: KSTREAM-OUTEROTHER-0000000005 (stores: [custom-name-this-join-store, custom-name-left-shared-join-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n'
        '      --> none\n'
        '      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n'
        '\n'
    ),
    "TopologyTest.streamStreamOuterJoinTopologyWithDefaultStoresNames": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic1])\n'
        '      --> KSTREAM-WINDOWED-0000000002\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic2])\n'
        '      --> KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-OUTERTHIS-0000000004-store])\n'
        '      --> KSTREAM-OUTERTHIS-0000000004\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-OUTEROTHER-0000000005-store])\n'
        '      --> KSTREAM-OUTEROTHER-0000000005\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KSTREAM-OUTEROTHER-0000000005 (stores: [KSTREAM-OUTERTHIS-0000000004-store, KSTREAM-OUTERSHARED-0000000004-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-OUTERTHIS-0000000004 (stores: [KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000002\n'
        '    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n'
        '      --> none\n'
        '      <-- KSTREAM-OUTERTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n'
        '\n'
    ),
    "TopologyTest.streamStreamOuterJoinTopologyWithCustomStoresNames": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic1])\n'
        '      --> KSTREAM-WINDOWED-0000000002\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic2])\n'
        '      --> KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-WINDOWED-0000000002 (stores: [custom-name-outer-this-join-store])\n'
        '      --> KSTREAM-OUTERTHIS-0000000004\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KSTREAM-WINDOWED-0000000003 (stores: [custom-name-outer-other-join-store])\n'
        '      --> KSTREAM-OUTEROTHER-0000000005\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '    Processor: KSTREAM-OUTEROTHER-0000000005 (stores: [custom-name-outer-this-join-store, custom-name-outer-shared-join-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000003\n'
        '    Processor: KSTREAM-OUTERTHIS-0000000004 (stores: [custom-name-outer-other-join-store, custom-name-outer-shared-join-store])\n'
        '      --> KSTREAM-MERGE-0000000006\n'
        '      <-- KSTREAM-WINDOWED-0000000002\n'
        '    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n'
        '      --> none\n'
        '      <-- KSTREAM-OUTERTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n'
        '\n'
    ),
    "KStreamImplTest.shouldSupportGroupByCountWithKStreamToKTable": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
        '      --> KSTREAM-TOTABLE-0000000001\n'
        '    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
        '      --> KTABLE-SELECT-0000000003\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KTABLE-SELECT-0000000003 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000005\n'
        '      <-- KSTREAM-TOTABLE-0000000001\n'
        '    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n'
        '      <-- KTABLE-SELECT-0000000003\n'
        '\n'
        '  Sub-topology: 1\n'
        '    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n'
        '      --> KTABLE-AGGREGATE-0000000007\n'
        '    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n'
        '      --> KTABLE-TOSTREAM-0000000008\n'
        '      <-- KSTREAM-SOURCE-0000000006\n'
        '    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000009\n'
        '      <-- KTABLE-AGGREGATE-0000000007\n'
        '    Sink: KSTREAM-SINK-0000000009 (topic: output)\n'
        '      <-- KTABLE-TOSTREAM-0000000008\n'
        '\n'
    ),
    "KStreamImplTest.shouldSupportStreamTableJoinWithKStreamToKTable": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [streamTopic])\n'
        '      --> KSTREAM-JOIN-0000000004\n'
        '    Processor: KSTREAM-JOIN-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000003])\n'
        '      --> KSTREAM-SINK-0000000005\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Source: KSTREAM-SOURCE-0000000001 (topics: [tableTopic])\n'
        '      --> KSTREAM-TOTABLE-0000000002\n'
        '    Sink: KSTREAM-SINK-0000000005 (topic: output)\n'
        '      <-- KSTREAM-JOIN-0000000004\n'
        '    Processor: KSTREAM-TOTABLE-0000000002 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000003])\n'
        '      --> none\n'
        '      <-- KSTREAM-SOURCE-0000000001\n'
        '\n'
    ),
    "KStreamImplTest.shouldSupportTableTableJoinWithKStreamToKTable": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n'
        '      --> KSTREAM-TOTABLE-0000000001\n'
        '    Source: KSTREAM-SOURCE-0000000003 (topics: [right])\n'
        '      --> KSTREAM-TOTABLE-0000000004\n'
        '    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
        '      --> KTABLE-JOINTHIS-0000000007\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KSTREAM-TOTABLE-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n'
        '      --> KTABLE-JOINOTHER-0000000008\n'
        '      <-- KSTREAM-SOURCE-0000000003\n'
        '    Processor: KTABLE-JOINOTHER-0000000008 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
        '      --> KTABLE-MERGE-0000000006\n'
        '      <-- KSTREAM-TOTABLE-0000000004\n'
        '    Processor: KTABLE-JOINTHIS-0000000007 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n'
        '      --> KTABLE-MERGE-0000000006\n'
        '      <-- KSTREAM-TOTABLE-0000000001\n'
        '    Processor: KTABLE-MERGE-0000000006 (stores: [])\n'
        '      --> KTABLE-TOSTREAM-0000000009\n'
        '      <-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008\n'
        '    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000010\n'
        '      <-- KTABLE-MERGE-0000000006\n'
        '    Sink: KSTREAM-SINK-0000000010 (topic: output)\n'
        '      <-- KTABLE-TOSTREAM-0000000009\n'
        '\n'
    ),
    "KStreamImplTest.shouldSupportForeignKeyTableTableJoinWithKTableFromKStream": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KTABLE-SOURCE-0000000016 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])\n'
        '      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input1])\n'
        '      --> KSTREAM-TOTABLE-0000000001\n'
        '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
        '      --> KTABLE-FK-JOIN-OUTPUT-0000000018\n'
        '      <-- KTABLE-SOURCE-0000000016\n'
        '    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n'
        '      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])\n'
        '      --> KTABLE-TOSTREAM-0000000020\n'
        '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n'
        '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])\n'
        '      --> KTABLE-SINK-0000000008\n'
        '      <-- KSTREAM-TOTABLE-0000000001\n'
        '    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000021\n'
        '      <-- KTABLE-FK-JOIN-OUTPUT-0000000018\n'
        '    Sink: KSTREAM-SINK-0000000021 (topic: output)\n'
        '      <-- KTABLE-TOSTREAM-0000000020\n'
        '    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)\n'
        '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n'
        '\n'
        '  Sub-topology: 1\n'
        '    Source: KSTREAM-SOURCE-0000000003 (topics: [input2])\n'
        '      --> KSTREAM-TOTABLE-0000000004\n'
        '    Source: KTABLE-SOURCE-0000000009 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])\n'
        '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n'
        '    Processor: KSTREAM-TOTABLE-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n'
        '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n'
        '      <-- KSTREAM-SOURCE-0000000003\n'
        '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n'
        '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012\n'
        '      <-- KTABLE-SOURCE-0000000009\n'
        '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n'
        '      --> KTABLE-SINK-0000000015\n'
        '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n'
        '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n'
        '      --> KTABLE-SINK-0000000015\n'
        '      <-- KSTREAM-TOTABLE-0000000004\n'
        '    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)\n'
        '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n'
        '\n'
    ),
    "SuppressTopologyTest.ANONYMOUS_FINAL_TOPOLOGY": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
        '      --> KSTREAM-KEY-SELECT-0000000001\n'
        '    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n'
        '      --> counts-repartition-filter\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: counts-repartition-filter (stores: [])\n'
        '      --> counts-repartition-sink\n'
        '      <-- KSTREAM-KEY-SELECT-0000000001\n'
        '    Sink: counts-repartition-sink (topic: counts-repartition)\n'
        '      <-- counts-repartition-filter\n'
        '\n'
        '  Sub-topology: 1\n'
        '    Source: counts-repartition-source (topics: [counts-repartition])\n'
        '      --> KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [counts])\n'
        '      --> KTABLE-SUPPRESS-0000000006\n'
        '      <-- counts-repartition-source\n'
        '    Processor: KTABLE-SUPPRESS-0000000006 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000007])\n'
        '      --> KTABLE-TOSTREAM-0000000008\n'
        '      <-- KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n'
        '      --> KSTREAM-MAP-0000000009\n'
        '      <-- KTABLE-SUPPRESS-0000000006\n'
        '    Processor: KSTREAM-MAP-0000000009 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000010\n'
        '      <-- KTABLE-TOSTREAM-0000000008\n'
        '    Sink: KSTREAM-SINK-0000000010 (topic: output-suppressed)\n'
        '      <-- KSTREAM-MAP-0000000009\n'
        '\n'
    ),
    "SuppressTopologyTest.NAMED_FINAL_TOPOLOGY": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
        '      --> KSTREAM-KEY-SELECT-0000000001\n'
        '    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n'
        '      --> counts-repartition-filter\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: counts-repartition-filter (stores: [])\n'
        '      --> counts-repartition-sink\n'
        '      <-- KSTREAM-KEY-SELECT-0000000001\n'
        '    Sink: counts-repartition-sink (topic: counts-repartition)\n'
        '      <-- counts-repartition-filter\n'
        '\n'
        '  Sub-topology: 1\n'
        '    Source: counts-repartition-source (topics: [counts-repartition])\n'
        '      --> KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [counts])\n'
        '      --> myname\n'
        '      <-- counts-repartition-source\n'
        '    Processor: myname (stores: [myname-store])\n'
        '      --> KTABLE-TOSTREAM-0000000006\n'
        '      <-- KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])\n'
        '      --> KSTREAM-MAP-0000000007\n'
        '      <-- myname\n'
        '    Processor: KSTREAM-MAP-0000000007 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000008\n'
        '      <-- KTABLE-TOSTREAM-0000000006\n'
        '    Sink: KSTREAM-SINK-0000000008 (topic: output-suppressed)\n'
        '      <-- KSTREAM-MAP-0000000007\n'
        '\n'
    ),
    "SuppressTopologyTest.ANONYMOUS_INTERMEDIATE_TOPOLOGY": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
        '      --> KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n'
        '      --> KTABLE-SUPPRESS-0000000003\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KTABLE-SUPPRESS-0000000003 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004])\n'
        '      --> KTABLE-TOSTREAM-0000000005\n'
        '      <-- KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000006\n'
        '      <-- KTABLE-SUPPRESS-0000000003\n'
        '    Sink: KSTREAM-SINK-0000000006 (topic: output)\n'
        '      <-- KTABLE-TOSTREAM-0000000005\n'
        '\n'
    ),
    "SuppressTopologyTest.NAMED_INTERMEDIATE_TOPOLOGY": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
        '      --> KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n'
        '      --> asdf\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: asdf (stores: [asdf-store])\n'
        '      --> KTABLE-TOSTREAM-0000000003\n'
        '      <-- KSTREAM-AGGREGATE-0000000002\n'
        '    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000004\n'
        '      <-- asdf\n'
        '    Sink: KSTREAM-SINK-0000000004 (topic: output)\n'
        '      <-- KTABLE-TOSTREAM-0000000003\n'
        '\n'
    ),
    "RepartitionTopicNamingTest.EXPECTED_UNOPTIMIZED_TOPOLOGY": (
        'Topologies:\n'
        '   Sub-topology: 0\n'
        '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
        '      --> KSTREAM-MAP-0000000001\n'
        '    Processor: KSTREAM-MAP-0000000001 (stores: [])\n'
        '      --> KSTREAM-FILTER-0000000029, KSTREAM-FILTER-0000000002, KSTREAM-FILTER-0000000020, aggregate-stream-repartition-filter, count-stream-repartition-filter\n'
        '      <-- KSTREAM-SOURCE-0000000000\n'
        '    Processor: KSTREAM-FILTER-0000000020 (stores: [])\n'
        '      --> KSTREAM-PEEK-0000000021\n'
        '      <-- KSTREAM-MAP-0000000001\n'
        '    Processor: KSTREAM-FILTER-0000000002 (stores: [])\n'
        '      --> KSTREAM-MAPVALUES-0000000003\n'
        '      <-- KSTREAM-MAP-0000000001\n'
        '    Processor: KSTREAM-FILTER-0000000029 (stores: [])\n'
        '      --> joined-stream-left-repartition-filter\n'
        '      <-- KSTREAM-MAP-0000000001\n'
        '    Processor: KSTREAM-PEEK-0000000021 (stores: [])\n'
        '      --> reduced-stream-repartition-filter\n'
        '      <-- KSTREAM-FILTER-0000000020\n'
        '    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])\n'
        '      --> KSTREAM-PROCESSOR-0000000004\n'
        '      <-- KSTREAM-FILTER-0000000002\n'
        '    Processor: aggregate-stream-repartition-filter (stores: [])\n'
        '      --> aggregate-stream-repartition-sink\n'
        '      <-- KSTREAM-MAP-0000000001\n'
        '    Processor: count-stream-repartition-filter (stores: [])\n'
        '      --> count-stream-repartition-sink\n'
        '      <-- KSTREAM-MAP-0000000001\n'
        '    Processor: joined-stream-left-repartition-filter (stores: [])\n'
        '      --> joined-stream-left-repartition-sink\n'
        '      <-- KSTREAM-FILTER-0000000029\n'
        '    Processor: reduced-stream-repartition-filter (stores: [])\n'
        '      --> reduced-stream-repartition-sink\n'
        '      <-- KSTREAM-PEEK-0000000021\n'
        '    Processor: KSTREAM-PROCESSOR-0000000004 (stores: [])\n'
        '      --> none\n'
        '      <-- KSTREAM-MAPVALUES-0000000003\n'
        '    Sink: aggregate-stream-repartition-sink (topic: aggregate-stream-repartition)\n'
        '      <-- aggregate-stream-repartition-filter\n'
        '    Sink: count-stream-repartition-sink (topic: count-stream-repartition)\n'
        '      <-- count-stream-repartition-filter\n'
        '    Sink: joined-stream-left-repartition-sink (topic: joined-stream-left-repartition)\n'
        '      <-- joined-stream-left-repartition-filter\n'
        '    Sink: reduced-stream-repartition-sink (topic: reduced-stream-repartition)\n'
        '      <-- reduced-stream-repartition-filter\n'
        '\n'
        '  Sub-topology: 1\n'
        '    Source: count-stream-repartition-source (topics: [count-stream-repartition])\n'
        '      --> KSTREAM-AGGREGATE-0000000007\n'
        '    Processor: KSTREAM-AGGREGATE-0000000007 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000006])\n'
        '      --> KTABLE-TOSTREAM-0000000011\n'
        '      <-- count-stream-repartition-source\n'
        '    Processor: KTABLE-TOSTREAM-0000000011 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000012, joined-stream-other-windowed\n'
        '      <-- KSTREAM-AGGREGATE-0000000007\n'
        '    Source: joined-stream-left-repartition-source (topics: [joined-stream-left-repartition])\n'
        '      --> joined-stream-this-windowed\n'
        '    Processor: joined-stream-other-windowed (stores: [joined-stream-other-join-store])\n'
        '      --> joined-stream-other-join\n'
        '      <-- KTABLE-TOSTREAM-0000000011\n'
        '    Processor: joined-stream-this-windowed (stores: [joined-stream-this-join-store])\n'
        '      --> joined-stream-this-join\n'
        '      <-- joined-stream-left-repartition-source\n'
        '    Processor: joined-stream-other-join (stores: [joined-stream-this-join-store])\n'
        '      --> joined-stream-merge\n'
        '      <-- joined-stream-other-windowed\n'
        '    Processor: joined-stream-this-join (stores: [joined-stream-other-join-store])\n'
        '      --> joined-stream-merge\n'
        '      <-- joined-stream-this-windowed\n'
        '    Processor: joined-stream-merge (stores: [])\n'
        '      --> KSTREAM-SINK-0000000038\n'
        '      <-- joined-stream-this-join, joined-stream-other-join\n'
        '    Sink: KSTREAM-SINK-0000000012 (topic: outputTopic_0)\n'
        '      <-- KTABLE-TOSTREAM-0000000011\n'
        '    Sink: KSTREAM-SINK-0000000038 (topic: outputTopicForJoin)\n'
        '      <-- joined-stream-merge\n'
        '\n'
        '  Sub-topology: 2\n'
        '    Source: aggregate-stream-repartition-source (topics: [aggregate-stream-repartition])\n'
        '      --> KSTREAM-AGGREGATE-0000000014\n'
        '    Processor: KSTREAM-AGGREGATE-0000000014 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000013])\n'
        '      --> KTABLE-TOSTREAM-0000000018\n'
        '      <-- aggregate-stream-repartition-source\n'
        '    Processor: KTABLE-TOSTREAM-0000000018 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000019\n'
        '      <-- KSTREAM-AGGREGATE-0000000014\n'
        '    Sink: KSTREAM-SINK-0000000019 (topic: outputTopic_1)\n'
        '      <-- KTABLE-TOSTREAM-0000000018\n'
        '\n'
        '  Sub-topology: 3\n'
        '    Source: reduced-stream-repartition-source (topics: [reduced-stream-repartition])\n'
        '      --> KSTREAM-REDUCE-0000000023\n'
        '    Processor: KSTREAM-REDUCE-0000000023 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000022])\n'
        '      --> KTABLE-TOSTREAM-0000000027\n'
        '      <-- reduced-stream-repartition-source\n'
        '    Processor: KTABLE-TOSTREAM-0000000027 (stores: [])\n'
        '      --> KSTREAM-SINK-0000000028\n'
        '      <-- KSTREAM-REDUCE-0000000023\n'
        '    Sink: KSTREAM-SINK-0000000028 (topic: outputTopic_2)\n'
        '      <-- KTABLE-TOSTREAM-0000000027\n'
        '\n'
    ),
}


@pytest.mark.parametrize("case", sorted(BUILDERS))
def test_describe_is_kafkas_text(case):
    b = StreamsBuilder()
    BUILDERS[case](b)
    assert b.build().describe().kafka_text() == EXPECTED[case]
