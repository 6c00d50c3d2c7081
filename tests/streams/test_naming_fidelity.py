"""Names a ported Kafka Streams application must get unchanged: generated processor, store and
internal-topic names decide where its state lives (changelogs, repartition topics), so an index
drawn differently from Kafka's loses the state on upgrade. Expected names come from Kafka's own
naming code (``NamedInternal``, ``BranchedKStreamImpl``, ``CogroupedStreamAggregateBuilder``) and
its topology tests."""
from __future__ import annotations

import pytest

from streams.builder import StreamsBuilder
from streams.errors import TopologyError
from streams.parameters import Branched, Consumed, Grouped, Materialized, Named, Produced
from streams.serdes import Serdes
from streams.testing import KeyValue, TopologyTestDriver

pytestmark = pytest.mark.unit

S = Serdes.String()
C = Consumed.with_(S, S)


# ---------------------------------------------------------------------- split
def test_a_named_split_burns_an_index_so_later_stores_and_topics_keep_kafkas_names():
    """BranchedKStreamImpl: ``named.orElseGenerateWithPrefix(builder, "KSTREAM-BRANCH-")`` draws an
    index for a given name too; each branch draws one (``newProcessorName(branchChildName)``).
    source 0, split 1, branch px 2, default p0 3, selectKey 4, store 5."""
    b = StreamsBuilder()
    m = b.stream("in", C).split(Named.as_("p")).branch(lambda k, v: True, Branched.as_("x")).defaultBranch()
    m["px"].groupBy(lambda k, v: v).count().toStream().to("out")
    t = b.build()
    assert t.internal_topics("app") == {
        "app-KSTREAM-AGGREGATE-STATE-STORE-0000000005-repartition": "repartition",
        "app-KSTREAM-AGGREGATE-STATE-STORE-0000000005-changelog": "changelog"}


def test_a_named_split_numbers_the_next_processor_as_an_unnamed_one():
    b = StreamsBuilder()
    s = b.stream("in", C)
    s.split(Named.as_("p")).branch(lambda k, v: True, Branched.as_("x")).branch(lambda k, v: True).noDefaultBranch()
    assert s.filter(lambda k, v: True)._node.name == "KSTREAM-FILTER-0000000004"


# ---------------------------------------------------------------------- Branched
def test_a_branch_name_is_any_string_as_kafkas_branched_rejects_only_null():
    b = StreamsBuilder()
    m = b.stream("in", C).split(Named.as_("p")).branch(lambda k, v: True, Branched.as_("big orders")).defaultBranch()
    assert set(m) == {"pbig orders", "p0"}
    m["pbig orders"].to("big", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    d.createInputTopic("in", S, S).pipeInput("k", "v", 1)
    assert d.createOutputTopic("big", S, S).readValuesToList() == ["v"]
    with pytest.raises(TopologyError, match="name cannot be null"):
        Branched.as_(None)


def test_branched_with_name_renames_and_keeps_the_chain_or_consumer():
    seen = []
    b = StreamsBuilder()
    split = b.stream("in", C).split(Named.as_("p"))
    m = (split.branch(lambda k, v: v == "a", Branched.withConsumer(lambda s: seen.append(s)).withName("c"))
         .branch(lambda k, v: v == "b", Branched.withFunction(lambda s: s.mapValues(str.upper)).withName("f"))
         .defaultBranch(Branched.as_("x").withName("y")))
    assert set(m) == {"pf", "py"}
    assert [s._node.name for s in seen] == ["pc"]
    assert m["pf"]._node.name != "pf"          # the chain's result, not the branch
    with pytest.raises(TopologyError, match="name cannot be null"):
        Branched.as_("x").withName(None)


def test_a_branch_name_that_becomes_a_repartition_topic_must_be_a_legal_topic_name():
    """An unnamed join repartitions a key-changed stream under the stream's own name
    (KStreamImpl.repartitionForJoin); Kafka's InternalTopicConfig validates that topic."""
    b = StreamsBuilder()
    m = (b.stream("in", C).selectKey(lambda k, v: v).split(Named.as_("p"))
         .branch(lambda k, v: True, Branched.as_("big orders")).noDefaultBranch())
    table = b.table("t", C)
    with pytest.raises(TopologyError, match="pbig orders-repartition"):
        m["pbig orders"].join(table, lambda l, r: l + r)


# ---------------------------------------------------------------------- cogroup
AGG = lambda k, v, agg: agg + v   # noqa: E731


def test_a_named_cogroup_with_a_key_change_describes_as_kafkas_test():
    """CogroupedKStreamImplTest.shouldInsertRepartitionsTopicForUpstreamKeyModification: the
    repartition topic is ``<store>-repartition`` (processRepartitions), the aggregators
    ``<Named>-cogroup-agg-<i>`` and the merge ``<Named>-cogroup-merge``."""
    b = StreamsBuilder()
    s1, s2 = b.stream("one", C), b.stream("two", C)
    g1, g2 = s1.map(lambda k, v: (v, k)).groupByKey(), s2.groupByKey()
    (g1.cogroup(AGG).cogroup(g2, AGG).aggregate(lambda: "", Named.as_("test"), Materialized.as_("store"))
       .toStream().to("output"))
    assert b.build().describe().kafka_text() == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> KSTREAM-MAP-0000000002\n"
        "    Processor: KSTREAM-MAP-0000000002 (stores: [])\n"
        "      --> store-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: store-repartition-filter (stores: [])\n"
        "      --> store-repartition-sink\n"
        "      <-- KSTREAM-MAP-0000000002\n"
        "    Sink: store-repartition-sink (topic: store-repartition)\n"
        "      <-- store-repartition-filter\n\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
        "      --> test-cogroup-agg-1\n"
        "    Source: store-repartition-source (topics: [store-repartition])\n"
        "      --> test-cogroup-agg-0\n"
        "    Processor: test-cogroup-agg-0 (stores: [store])\n"
        "      --> test-cogroup-merge\n"
        "      <-- store-repartition-source\n"
        "    Processor: test-cogroup-agg-1 (stores: [store])\n"
        "      --> test-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: test-cogroup-merge (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000009\n"
        "      <-- test-cogroup-agg-0, test-cogroup-agg-1\n"
        "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000010\n"
        "      <-- test-cogroup-merge\n"
        "    Sink: KSTREAM-SINK-0000000010 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000009\n\n")


def test_cogroup_draws_every_repartition_name_before_the_aggregators():
    """processRepartitions runs before the aggregators are named: with the key-changed stream
    second, its repartition takes 4-6 and the aggregators 7 and 8, the merge 9."""
    b = StreamsBuilder()
    s1, s2 = b.stream("one", C), b.stream("two", C)
    g1, g2 = s1.map(lambda k, v: (v, k)).groupByKey(), s2.groupByKey()
    g2.cogroup(AGG).cogroup(g1, AGG).aggregate(lambda: "").toStream().to("output")
    lines = [line.strip() for line in b.build().describe().kafka_text().splitlines()]
    assert "Source: KSTREAM-SOURCE-0000000001 (topics: [two])" in lines
    assert lines[lines.index("Source: KSTREAM-SOURCE-0000000001 (topics: [two])") + 1] == \
        "--> COGROUPKSTREAM-AGGREGATE-0000000007"
    assert "Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])" \
        in lines
    assert "Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])" in lines


def test_two_unnamed_key_changed_streams_in_one_cogroup_get_distinct_repartition_topics():
    """Kafka names both ``<store>-repartition`` and fails on the repeated processor names; here the
    first keeps Kafka's name and the later one is ``<store>-<position>-repartition``; both count."""
    b = StreamsBuilder()
    s1, s2 = b.stream("one", C), b.stream("two", C)
    g1 = s1.map(lambda k, v: (v, k)).groupByKey(Grouped.with_(S, S))
    g2 = s2.map(lambda k, v: (v, k)).groupByKey(Grouped.with_(S, S))
    (g1.cogroup(AGG).cogroup(g2, AGG).aggregate(lambda: "", Materialized.as_("store"))
       .toStream().to("output", Produced.with_(S, S)))
    t = b.build()
    assert set(t.internal_topics("app")) == {"app-store-repartition", "app-store-1-repartition",
                                             "app-store-changelog"}
    d = TopologyTestDriver(t, {"application.id": "app"})
    d.createInputTopic("one", S, S).pipeInput("x", "k", 1)
    d.createInputTopic("two", S, S).pipeInput("y", "k", 2)
    assert d.createOutputTopic("output", S, S).readKeyValuesToList()[-1] == KeyValue("k", "xy")


# ---------------------------------------------------------------------- toTable
def _to_table_topology(b):
    b.stream("input", C).toTable().toStream().to("output", Produced.with_(S, S))
    return b.build()


def test_an_unnamed_to_table_keeps_no_store_and_no_changelog():
    """KStreamImplTest.shouldNotMaterializedKTableFromKStream: ``KSTREAM-TOTABLE-0000000001
    (stores: [])`` (the store name 2 is drawn, not used), so no changelog topic."""
    t = _to_table_topology(StreamsBuilder())
    assert t.describe().kafka_text() == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000003\n\n")
    assert t.internal_topics("app") == {}
    assert StreamsBuilder().stream("input", C).toTable().queryableStoreName() is None


def test_an_unnamed_to_table_forwards_every_record_through_a_record_cache():
    """An unmaterialized KTableSource forwards ``Change(value, null)`` for each record: with a
    record cache, updates of a key between two commits are not merged away."""
    from streams.interpreter import Interpreter
    it = Interpreter(_to_table_topology(StreamsBuilder()), {"application.id": "app"}, cache_bytes=10 * 1024 * 1024)
    for k, v, ts in [("A", "01", 5), ("A", "05", 10), ("A", "06", 12), ("B", "02", 100)]:
        it.append("input", S.serialize(k), S.serialize(v), ts)
    it.run()
    it.commit()
    it.run()
    assert [(S.deserialize(k), S.deserialize(v), ts) for k, v, ts, _ in it.topics["output"][0]] == \
        [("A", "01", 5), ("A", "05", 10), ("A", "06", 12), ("B", "02", 100)]


def test_an_unnamed_to_table_after_a_key_change_has_only_its_repartition_topic():
    """KStreamImplTest.shouldSupportKeyChangeKTableFromKStream."""
    b = StreamsBuilder()
    (b.stream("input", C).map(lambda k, v: (ord(k[0]) - ord("A"), v))
      .toTable(Materialized.with_(Serdes.Integer(), None)).toStream().to("output"))
    t = b.build()
    lines = [line.strip() for line in t.describe().kafka_text().splitlines()]
    assert "Processor: KSTREAM-TOTABLE-0000000002 (stores: [])" in lines
    assert t.internal_topics("app") == {"app-KSTREAM-TOTABLE-0000000002-repartition": "repartition"}


def test_a_downstream_step_that_needs_the_values_materializes_an_unnamed_to_table():
    """KTableImpl.valueGetterSupplier / enableSendingOldValues(true) call KTableSource.materialize:
    the store is the one toTable named (``KSTREAM-TOTABLE-STATE-STORE-<n>``)."""
    b = StreamsBuilder()
    table = b.stream("t", C).toTable()
    b.stream("s", C).join(table, lambda l, r: l + r).to("joined", Produced.with_(S, S))
    grouped = b.stream("g", C).toTable()
    grouped.groupBy(lambda k, v: (v, v), Grouped.with_(S, S)).count()
    t = b.build()
    assert {"app-KSTREAM-TOTABLE-STATE-STORE-0000000002-changelog",
            "app-KSTREAM-TOTABLE-STATE-STORE-0000000008-changelog"} <= set(t.internal_topics("app"))
    d = TopologyTestDriver(t, {"application.id": "app"})
    d.createInputTopic("t", S, S).pipeInput("k", "r", 1)
    d.createInputTopic("s", S, S).pipeInput("k", "l", 2)
    assert d.createOutputTopic("joined", S, S).readValuesToList() == ["lr"]


def test_a_materialized_step_below_an_unnamed_to_table_leaves_it_without_a_store():
    """KStreamImplTest.shouldSupportTriggerMaterializedWithKTableFromKStream."""
    b = StreamsBuilder()
    (b.stream("input", C).toTable()
      .mapValues(lambda v: ord(v[0]) - ord("a"), Materialized.as_("store").withKeySerde(S).withValueSerde(Serdes.Integer()))
      .toStream().to("output"))
    t = b.build()
    lines = [line.strip() for line in t.describe().kafka_text().splitlines()]
    assert "Processor: KSTREAM-TOTABLE-0000000001 (stores: [])" in lines
    assert "Processor: KTABLE-MAPVALUES-0000000003 (stores: [store])" in lines
    d = TopologyTestDriver(t, {"application.id": "app"})
    i = d.createInputTopic("input", S, S)
    for k, v, ts in [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15), ("D", "green", 11)]:
        i.pipeInput(k, v, ts)
    assert d.createOutputTopic("output", S, Serdes.Integer()).readKeyValuesToList() == [
        KeyValue("A", 6), KeyValue("B", 6), KeyValue("A", 1), KeyValue("C", 24), KeyValue("D", 6)]
    assert dict(d.getKeyValueStore("store").all()) == {"A": 1, "B": 6, "C": 24, "D": 6}
