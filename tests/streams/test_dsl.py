"""Every DSL operator through ``TopologyTestDriver``: a topology built with ``StreamsBuilder``,
records piped in, and the output topics compared with what Kafka Streams documents for the same
topology (the KStream/KTable javadoc, the developer guide's semantics tables, and the naming rules
of ``StreamsBuilder``/``KStreamImpl``). These tests check the wiring the DSL does (names, serdes,
repartitions, old values, stores) on top of the processors, which have their own tests."""
from __future__ import annotations

import pytest

from streams.builder import StreamsBuilder
from streams.errors import TopologyError
from streams.expressions import UnsupportedExpressionError
from streams.grouped import EmitStrategy
from streams.parameters import Branched, Consumed, Grouped, Materialized, Named, Produced, Repartitioned
from streams.record import Windowed
from streams.serdes import Serdes
from streams.suppress import BufferConfig, Suppressed
from streams.testing import KeyValue, TopologyTestDriver
from streams.windows import SessionWindows, SlidingWindows, TimeWindows

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()
ORDER = "user STRING, amount DOUBLE"
J = Serdes.Json(ORDER)
APP = "app"


def stream(b: StreamsBuilder, topic="in", value_serde=J):
    return b.stream(topic, Consumed.with_(S, value_serde))


def drive(b: StreamsBuilder, records, topic="in", value_serde=J, config=None):
    """Pipe ``(key, value, ts)`` into ``topic``; return the driver."""
    d = TopologyTestDriver(b.build(), {"application.id": APP, **(config or {})})
    i = d.createInputTopic(topic, S, value_serde)
    for k, v, ts in records:
        i.pipeInput(k, v, ts)
    return d


def read(d, topic="out", key_serde=S, value_serde=L):
    return [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(topic, key_serde, value_serde)
            .readRecordsToList()]


def o(user, amount):
    return {"user": user, "amount": amount}


ORDERS = [("k1", o("ann", 50.0), 10), ("k2", o("bob", 150.0), 20), ("k3", o("ann", 250.0), 30),
          ("k1", o("cy", 100.0), 40)]


# ---------------------------------------------------------------------- stateless KStream operators
@pytest.mark.parametrize("predicate", ["value.amount > 100", lambda k, v: v["amount"] > 100], ids=["sql", "callable"])
def test_filter_keeps_the_records_the_predicate_holds_for(predicate):
    b = StreamsBuilder()
    stream(b).filter(predicate).to("out", Produced.with_(S, J))
    assert read(drive(b, ORDERS), value_serde=J) == [("k2", o("bob", 150.0), 20), ("k3", o("ann", 250.0), 30)]


@pytest.mark.parametrize("predicate", ["value.amount > 100", lambda k, v: v["amount"] > 100], ids=["sql", "callable"])
def test_filter_not_keeps_the_others(predicate):
    b = StreamsBuilder()
    stream(b).filterNot(predicate).to("out", Produced.with_(S, J))
    assert read(drive(b, ORDERS), value_serde=J) == [("k1", o("ann", 50.0), 10), ("k1", o("cy", 100.0), 40)]


def test_a_sql_predicate_that_is_null_drops_the_record():
    # SQL's WHERE: a NULL condition is not true.
    b = StreamsBuilder()
    stream(b).filter("value.amount > 100").to("out", Produced.with_(S, J))
    d = drive(b, [("k", {"user": "ann", "amount": None}, 1), ("k", o("ann", 101.0), 2)])
    assert read(d, value_serde=J) == [("k", o("ann", 101.0), 2)]


def test_map_with_a_callable_changes_key_and_value():
    b = StreamsBuilder()
    stream(b).map(lambda k, v: (v["user"], int(v["amount"]))).to("out", Produced.with_(S, L))
    assert read(drive(b, ORDERS)) == [("ann", 50, 10), ("bob", 150, 20), ("ann", 250, 30), ("cy", 100, 40)]


def test_map_with_two_sql_expressions():
    b = StreamsBuilder()
    stream(b).map("upper(value.user)", "cast(value.amount AS BIGINT) + 1").to("out", Produced.with_(S, L))
    assert read(drive(b, ORDERS)) == [("ANN", 51, 10), ("BOB", 151, 20), ("ANN", 251, 30), ("CY", 101, 40)]


def test_map_values_by_arity_and_in_sql():
    b = StreamsBuilder()
    s = stream(b)
    s.mapValues(lambda v: v["user"]).to("one", Produced.with_(S, S))
    s.mapValues(lambda k, v: f"{k}:{v['user']}").to("two", Produced.with_(S, S))
    s.mapValues("concat(key, '/', value.user)").to("sql", Produced.with_(S, S))
    d = drive(b, ORDERS[:2])
    assert read(d, "one", value_serde=S) == [("k1", "ann", 10), ("k2", "bob", 20)]
    assert read(d, "two", value_serde=S) == [("k1", "k1:ann", 10), ("k2", "k2:bob", 20)]
    assert read(d, "sql", value_serde=S) == [("k1", "k1/ann", 10), ("k2", "k2/bob", 20)]


def test_map_values_sql_struct_result_is_written_with_a_json_serde():
    b = StreamsBuilder()
    stream(b).mapValues("named_struct('who', value.user, 'gross', value.amount * 2)").to(
        "out", Produced.with_(S, Serdes.Json("who STRING, gross DOUBLE")))
    d = drive(b, ORDERS[:1])
    assert read(d, value_serde=Serdes.Json("who STRING, gross DOUBLE")) == [("k1", {"who": "ann", "gross": 100.0}, 10)]


def test_flat_map_emits_every_pair_with_the_input_timestamp():
    b = StreamsBuilder()
    stream(b).flatMap(lambda k, v: [(f"{k}-{i}", i) for i in range(int(v["amount"]) // 100)]).to(
        "out", Produced.with_(S, L))
    assert read(drive(b, ORDERS)) == [("k2-0", 0, 20), ("k3-0", 0, 30), ("k3-1", 1, 30), ("k1-0", 0, 40)]


def test_flat_map_in_sql_takes_an_array_of_key_value_structs():
    b = StreamsBuilder()
    stream(b).flatMap("array(named_struct('key', value.user, 'value', 1), named_struct('key', key, 'value', 2))").to(
        "out", Produced.with_(S, L))
    assert read(drive(b, ORDERS[:1])) == [("ann", 1, 10), ("k1", 2, 10)]


@pytest.mark.parametrize("mapper", [lambda v: [v["user"], v["user"].upper()],
                                    lambda k, v: [v["user"], v["user"].upper()],
                                    "array(value.user, upper(value.user))"], ids=["arity1", "arity2", "sql"])
def test_flat_map_values_keeps_the_key(mapper):
    b = StreamsBuilder()
    stream(b).flatMapValues(mapper).to("out", Produced.with_(S, S))
    assert read(drive(b, ORDERS[:2]), value_serde=S) == [("k1", "ann", 10), ("k1", "ANN", 10),
                                                          ("k2", "bob", 20), ("k2", "BOB", 20)]


@pytest.mark.parametrize("op, mapper", [("flatMap", lambda k, v: None if v["amount"] > 100 else []),
                                        ("flatMapValues", lambda v: None if v["amount"] > 100 else [])])
def test_a_flat_map_callable_returning_none_fails_the_task_and_an_empty_list_emits_nothing(op, mapper):
    # Kafka's KStreamFlatMap(Values) iterates the result: null is a NullPointerException
    from streams.errors import StreamsError
    b = StreamsBuilder()
    getattr(stream(b), op)(mapper).to("out", Produced.with_(S, J))
    d = drive(b, ORDERS[:1])
    assert read(d, value_serde=J) == []
    with pytest.raises(StreamsError, match=f"{op}'s mapper returned None"):
        d.createInputTopic("in", S, J).pipeInput(*ORDERS[1])


@pytest.mark.parametrize("selector", ["value.user", lambda k, v: v["user"]], ids=["sql", "callable"])
def test_select_key_keeps_the_value(selector):
    b = StreamsBuilder()
    stream(b).selectKey(selector).to("out", Produced.with_(S, J))
    assert [(k, ts) for k, _, ts in read(drive(b, ORDERS), value_serde=J)] == [
        ("ann", 10), ("bob", 20), ("ann", 30), ("cy", 40)]


def test_peek_and_foreach_see_every_record_and_peek_forwards_it():
    seen, each = [], []
    b = StreamsBuilder()
    s = stream(b).peek(lambda k, v: seen.append((k, v["user"])))
    s.foreach(lambda k, v: each.append(k))
    s.to("out", Produced.with_(S, J))
    d = drive(b, ORDERS[:2])
    assert seen == [("k1", "ann"), ("k2", "bob")] and each == ["k1", "k2"]
    assert [k for k, _, _ in read(d, value_serde=J)] == ["k1", "k2"]


def test_split_names_branches_prefix_plus_branch_name_and_sends_each_record_to_its_first_match():
    b = StreamsBuilder()
    branches = (stream(b).split(Named.as_("size-"))
                .branch("value.amount >= 200", Branched.as_("large"))
                .branch(lambda k, v: v["amount"] >= 100, Branched.as_("medium"))
                .defaultBranch(Branched.as_("small")))
    assert set(branches) == {"size-large", "size-medium", "size-small"}
    for name, s in branches.items():
        s.to(name, Produced.with_(S, J))
    d = drive(b, ORDERS)
    assert [k for k, _, _ in read(d, "size-large", value_serde=J)] == ["k3"]
    assert [k for k, _, _ in read(d, "size-medium", value_serde=J)] == ["k2", "k1"]
    assert [k for k, _, _ in read(d, "size-small", value_serde=J)] == ["k1"]


def test_split_branches_without_names_are_numbered_from_one_and_the_default_is_zero():
    b = StreamsBuilder()
    branches = stream(b).split(Named.as_("s-")).branch("value.amount > 100").branch("value.amount > 50").defaultBranch()
    assert set(branches) == {"s-1", "s-2", "s-0"}


def test_split_without_a_prefix_uses_the_generated_split_name_as_prefix():
    # BranchedKStreamImpl: the child name is always splitterName + (branch name or index).
    b = StreamsBuilder()
    s = stream(b)
    branches = s.split().branch("value.amount > 100", Branched.as_("big")).branch("true").noDefaultBranch()
    split_name = "KSTREAM-BRANCH-0000000001"
    assert set(branches) == {f"{split_name}big", f"{split_name}2"}


def test_split_with_a_chain_function_keeps_what_it_returns_and_drops_none():
    b = StreamsBuilder()
    branches = (stream(b).split(Named.as_("b-"))
                .branch("value.amount > 100", Branched.withFunction(lambda s: s.mapValues("value.user"), "big"))
                .defaultBranch(Branched.withFunction(lambda s: s.to("rest", Produced.with_(S, J)) or None, "rest")))
    assert set(branches) == {"b-big"}
    branches["b-big"].to("out", Produced.with_(S, S))
    d = drive(b, ORDERS)
    assert read(d, value_serde=S) == [("k2", "bob", 20), ("k3", "ann", 30)]
    assert [k for k, _, _ in read(d, "rest", value_serde=J)] == ["k1", "k1"]


def test_split_branches_exist_without_a_terminal_call_and_route_once_per_record():
    """Kafka's BranchedKStreamImpl makes each branch in branch(): defaultBranch()/noDefaultBranch()
    are optional. Each predicate runs once per record, until the first that holds."""
    b = StreamsBuilder()
    calls = []

    def big(k, v):
        calls.append(k)
        return v["amount"] > 100
    split = stream(b).split(Named.as_("s-"))
    split.branch(big, Branched.withFunction(lambda s: s.to("big", Produced.with_(S, J))))
    split.branch("true", Branched.withFunction(lambda s: s.to("rest", Produced.with_(S, J))))
    d = drive(b, ORDERS)
    assert [k for k, _, _ in read(d, "big", value_serde=J)] == ["k2", "k3"]
    assert [k for k, _, _ in read(d, "rest", value_serde=J)] == ["k1", "k1"]
    assert calls == ["k1", "k2", "k3", "k1"]


def test_split_describes_as_kafka_with_a_splitter_and_consumers_leave_the_map():
    # StreamsGraphTest's shape: split() -> KSTREAM-BRANCH-<n>, its children <n>1 ... and <n>0
    b = StreamsBuilder()
    branches = (stream(b).split()
                .branch("value.amount > 100", Branched.withConsumer(lambda s: s.mapValues("value.user")
                                                                     .to("big", Produced.with_(S, S))))
                .defaultBranch(Branched.withConsumer(lambda s: s.filter("true").to("rest", Produced.with_(S, J)))))
    assert branches == {}
    text = [line.strip() for line in str(b.build().describe()).splitlines()]
    for i, line in enumerate(["Source: KSTREAM-SOURCE-0000000000 (topics: [in])",
                              "--> KSTREAM-BRANCH-0000000001",
                              "Processor: KSTREAM-BRANCH-0000000001 (stores: [])",
                              "--> KSTREAM-BRANCH-00000000010, KSTREAM-BRANCH-00000000011",
                              "<-- KSTREAM-SOURCE-0000000000",
                              "Processor: KSTREAM-BRANCH-00000000010 (stores: [])",
                              "--> KSTREAM-FILTER-0000000006",
                              "<-- KSTREAM-BRANCH-0000000001",
                              "Processor: KSTREAM-BRANCH-00000000011 (stores: [])",
                              "--> KSTREAM-MAPVALUES-0000000003",
                              "<-- KSTREAM-BRANCH-0000000001"]):
        assert text[i + 2] == line
    assert "Sink: KSTREAM-SINK-0000000007 (topic: rest)" in text


def test_merge_interleaves_both_streams_in_processing_order():
    b = StreamsBuilder()
    s = stream(b)
    big = s.filter("value.amount > 100").mapValues("'big'")
    small = s.filterNot("value.amount > 100").mapValues("'small'")
    big.merge(small).to("out", Produced.with_(S, S))
    assert read(drive(b, ORDERS), value_serde=S) == [("k1", "small", 10), ("k2", "big", 20), ("k3", "big", 30),
                                                      ("k1", "small", 40)]


def test_merge_of_two_source_topics():
    b = StreamsBuilder()
    stream(b, "a").merge(stream(b, "b")).to("out", Produced.with_(S, J))
    d = TopologyTestDriver(b.build(), {"application.id": APP})
    a, bb = d.createInputTopic("a", S, J), d.createInputTopic("b", S, J)
    a.pipeInput("x", o("ann", 1.0), 1)
    bb.pipeInput("y", o("bob", 2.0), 2)
    a.pipeInput("z", o("cy", 3.0), 3)
    assert [k for k, _, _ in read(d, value_serde=J)] == ["x", "y", "z"]


def _partition_time_extractor(seen):
    """UsePartitionTimeOnInvalidTimestamp's shape: a value "bad" takes the partition time, "neg"
    is dropped, any other value is the timestamp."""
    def extract(record, partition_time):
        seen.append((record.value, partition_time))
        return {"bad": partition_time, "neg": -5}.get(record.value) or int(record.value)
    return extract


def test_a_timestamp_extractor_gets_the_partition_time_before_the_record():
    # Kafka's RecordQueue: partition time starts UNKNOWN (-1) and is the largest timestamp
    # extracted so far in the input partition; a dropped (negative) timestamp leaves it
    seen = []
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S).withTimestampExtractor(_partition_time_extractor(seen))) \
        .to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": APP})
    i = d.createInputTopic("in", S, S)
    for ts, v in enumerate(["100", "bad", "50", "neg", "bad", "120", "bad"]):
        i.pipeInput("k", v, ts + 7)
    assert seen == [("100", -1), ("bad", 100), ("50", 100), ("neg", 100), ("bad", 100), ("120", 100),
                    ("bad", 120)]
    assert [ts for _, _, ts in read(d, value_serde=S)] == [100, 100, 50, 100, 120, 120]


def test_a_stateless_spark_task_keeps_the_partition_time_across_its_arrow_batches():
    """mapInArrow hands a Spark task its rows in several Arrow batches: the partition time
    carries over from one to the next (no store, so not across micro-batches: docs/streams.md)."""
    from datetime import datetime, timezone

    import pyarrow as pa

    from streams.spark_task import stateless_batches
    seen = []
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S).withTimestampExtractor(_partition_time_extractor(seen))) \
        .to("out", Produced.with_(S, S))
    topology = b.build()

    def batch(offset, values):
        n = len(values)
        return pa.RecordBatch.from_pydict({
            "key": [b"k"] * n, "value": [v.encode() for v in values], "topic": ["in"] * n,
            "partition": pa.array([0] * n, pa.int32()), "offset": list(range(offset, offset + n)),
            "timestamp": [datetime(2024, 1, 1, tzinfo=timezone.utc)] * n})
    out = list(stateless_batches(topology, 0, APP, (None, None))([batch(0, ["100", "bad"]), batch(2, ["bad"])]))
    assert seen == [("100", -1), ("bad", 100), ("bad", 100)]
    assert [t.value // 1000 for o in out for t in o.column("timestamp")] == [100, 100, 100]


def test_repartition_writes_to_an_internal_topic_named_after_the_application():
    b = StreamsBuilder()
    stream(b).selectKey("value.user").repartition(Repartitioned.as_("by-user").withKeySerde(S)).to("out", Produced.with_(S, J))
    d = drive(b, ORDERS[:2])
    assert f"{APP}-by-user-repartition" in d.producedTopicNames()
    assert [(k, ts) for k, _, ts in read(d, value_serde=J)] == [("ann", 10), ("bob", 20)]
    assert read(d, f"{APP}-by-user-repartition", value_serde=J)[0][:1] == ("ann",)


def test_repartition_without_a_name_uses_the_generated_processor_name():
    b = StreamsBuilder()
    stream(b).repartition().to("out", Produced.with_(S, J))
    d = drive(b, ORDERS[:1])
    assert f"{APP}-KSTREAM-REPARTITION-0000000001-repartition" in d.producedTopicNames()
    assert len(d.topology.subtopologies) == 2


def test_to_a_fixed_topic_and_to_a_topic_chosen_per_record():
    b = StreamsBuilder()
    s = stream(b)
    s.to(lambda k, v: f"user-{v['user']}", Produced.with_(S, J))
    s.mapValues("value.user").to("names", Produced.with_(S, S))
    d = drive(b, ORDERS)
    assert d.producedTopicNames() == {"user-ann", "user-bob", "user-cy", "names"}
    assert [k for k, _, _ in read(d, "user-ann", value_serde=J)] == ["k1", "k3"]
    assert read(d, "names", value_serde=S)[-1] == ("k1", "cy", 40)


def test_to_table_keeps_the_latest_value_per_key():
    b = StreamsBuilder()
    t = stream(b).mapValues("value.user").toTable(materialized=Materialized.as_("latest").withValueSerde(S))
    t.toStream().to("out", Produced.with_(S, S))
    d = drive(b, ORDERS)
    assert read(d, value_serde=S) == [("k1", "ann", 10), ("k2", "bob", 20), ("k3", "ann", 30), ("k1", "cy", 40)]
    assert d.getKeyValueStore("latest").get("k1") == "cy"


# ---------------------------------------------------------------------- KTable
def table_driver(b: StreamsBuilder):
    d = TopologyTestDriver(b.build(), {"application.id": APP})
    return d, d.createInputTopic("t", S, S)


def test_table_from_a_topic_latest_value_per_key_null_deletes_null_key_dropped():
    b = StreamsBuilder()
    b.table("t", Consumed.with_(S, S), Materialized.as_("rows")).toStream().to("out", Produced.with_(S, S))
    d, t = table_driver(b)
    for k, v, ts in [("a", "1", 1), ("b", "1", 2), ("a", "2", 3), (None, "x", 4), ("b", None, 5)]:
        t.pipeInput(k, v, ts)
    assert read(d, value_serde=S) == [("a", "1", 1), ("b", "1", 2), ("a", "2", 3), ("b", None, 5)]
    store = d.getKeyValueStore("rows")
    assert store.get("a") == "2" and store.get("b") is None and store.approximateNumEntries() == 1


def test_table_filter_turns_failing_rows_into_tombstones():
    # KTableFilter without old values: every update that fails the predicate becomes a delete.
    b = StreamsBuilder()
    b.table("t", Consumed.with_(S, S)).filter("cast(value AS INT) > 1").toStream().to("out", Produced.with_(S, S))
    d, t = table_driver(b)
    for k, v, ts in [("a", "1", 1), ("a", "2", 2), ("a", "1", 3), ("b", "5", 4), ("b", None, 5)]:
        t.pipeInput(k, v, ts)
    assert read(d, value_serde=S) == [("a", None, 1), ("a", "2", 2), ("a", None, 3), ("b", "5", 4), ("b", None, 5)]


def test_materialized_table_filter_forwards_a_tombstone_only_for_a_row_that_stops_passing():
    b = StreamsBuilder()
    b.table("t", Consumed.with_(S, S)).filterNot(lambda k, v: v == "x", materialized=Materialized.as_("kept")) \
        .toStream().to("out", Produced.with_(S, S))
    d, t = table_driver(b)
    for k, v, ts in [("a", "x", 1), ("a", "y", 2), ("a", "x", 3), ("a", "x", 4)]:
        t.pipeInput(k, v, ts)
    # the materialized filter keeps its own rows: a delete of an absent row is not forwarded (caching store)
    assert read(d, value_serde=S) == [("a", "y", 2), ("a", None, 3)]
    assert d.getKeyValueStore("kept").get("a") is None


@pytest.mark.parametrize("mapper", [lambda v: v + "!", lambda k, v: v + "!", "concat(value, '!')"],
                         ids=["arity1", "arity2", "sql"])
def test_table_map_values_is_not_called_for_deletes(mapper):
    b = StreamsBuilder()
    b.table("t", Consumed.with_(S, S)).mapValues(mapper).toStream().to("out", Produced.with_(S, S))
    d, t = table_driver(b)
    t.pipeInput("a", "1", 1)
    t.pipeInput("a", None, 2)
    assert read(d, value_serde=S) == [("a", "1!", 1), ("a", None, 2)]


# ---------------------------------------------------------------------- grouped streams
COUNTED = [("k1", o("ann", 1.0), 5), ("k2", o("bob", 2.0), 1), ("k3", o("ann", 3.0), 3), ("k4", o("ann", 4.0), 10)]


def test_group_by_key_count_emits_every_update_with_the_largest_timestamp_so_far():
    b = StreamsBuilder()
    stream(b).selectKey("value.user").repartition(Repartitioned.with_(S, J)).groupByKey().count().toStream().to("out", Produced.with_(S, L))
    assert read(drive(b, COUNTED)) == [("ann", 1, 5), ("bob", 1, 1), ("ann", 2, 5), ("ann", 3, 10)]


@pytest.mark.parametrize("selector", ["value.user", lambda k, v: v["user"]], ids=["sql", "callable"])
def test_group_by_repartitions_through_a_topic_named_after_the_store(selector):
    b = StreamsBuilder()
    stream(b).groupBy(selector, Grouped.with_(S, J)).count(materialized=Materialized.as_("counts")) \
        .toStream().to("out", Produced.with_(S, L))
    d = drive(b, COUNTED)
    assert read(d) == [("ann", 1, 5), ("bob", 1, 1), ("ann", 2, 5), ("ann", 3, 10)]
    assert f"{APP}-counts-repartition" in d.producedTopicNames()
    assert d.getKeyValueStore("counts").get("ann") == 3


def test_group_by_with_a_grouped_name_names_the_repartition_topic_and_drops_null_keys():
    b = StreamsBuilder()
    stream(b).groupBy("value.user", Grouped.as_("by-user").withKeySerde(S).withValueSerde(J)).count() \
        .toStream().to("out", Produced.with_(S, L))
    d = drive(b, COUNTED[:2] + [("k9", {"user": None, "amount": 1.0}, 2)])
    assert f"{APP}-by-user-repartition" in d.producedTopicNames()
    assert read(d) == [("ann", 1, 5), ("bob", 1, 1)]


def test_a_named_grouping_shares_one_repartition_topic_between_its_aggregations():
    # GroupedStreamAggregateBuilder re-uses the repartition node when the user named it.
    b = StreamsBuilder()
    g = stream(b).groupBy("value.user", Grouped.as_("by-user").withKeySerde(S).withValueSerde(J))
    g.count().toStream().to("counts", Produced.with_(S, L))
    g.reduce(lambda a, v: {"user": a["user"], "amount": a["amount"] + v["amount"]}).toStream() \
        .mapValues("cast(value.amount AS BIGINT)").to("sums", Produced.with_(S, L))
    d = drive(b, COUNTED)
    assert read(d, "counts") == [("ann", 1, 5), ("bob", 1, 1), ("ann", 2, 5), ("ann", 3, 10)]
    assert read(d, "sums") == [("ann", 1, 5), ("bob", 2, 1), ("ann", 4, 5), ("ann", 8, 10)]
    assert len(read(d, f"{APP}-by-user-repartition", value_serde=J)) == 4


def test_a_named_table_grouping_shares_one_repartition_topic_between_its_aggregations():
    """KGroupedTableImpl re-uses the repartition node when Grouped names it
    (RepartitionTopicNamingTest.shouldNotFailWithSameRepartitionTopicNameUsingSameKGroupedTable):
    counting and summing the same grouping used to fail, naming its sink twice."""
    b = StreamsBuilder()
    g = b.table("users", Consumed.with_(S, S)).groupBy(lambda k, v: (v, 1), Grouped.as_("by-city").withKeySerde(S)
                                                      .withValueSerde(L))
    g.count().toStream().to("counts", Produced.with_(S, L))
    g.reduce(lambda agg, v: agg + v, lambda agg, v: agg - v).toStream().to("sums", Produced.with_(S, L))
    topology = b.build()
    assert [t for t in topology.internal_topics(APP) if t.endswith("-repartition")] == [f"{APP}-by-city-repartition"]
    d = TopologyTestDriver(topology, {"application.id": APP})
    users = d.createInputTopic("users", S, S)
    for user, city in [("u1", "paris"), ("u2", "paris"), ("u1", "rome")]:
        users.pipeInput(user, city)
    assert d.createOutputTopic("counts", S, L).readKeyValuesToMap() == {"paris": 1, "rome": 1}
    assert d.createOutputTopic("sums", S, L).readKeyValuesToMap() == {"paris": 1, "rome": 1}


@pytest.mark.parametrize("reducer", ["agg + value", lambda agg, v: agg + v], ids=["sql", "callable"])
def test_group_by_key_reduce(reducer):
    b = StreamsBuilder()
    stream(b).mapValues("cast(value.amount AS BIGINT)").groupByKey(Grouped.with_(S, L)).reduce(reducer) \
        .toStream().to("out", Produced.with_(S, L))
    d = drive(b, [("a", o("x", 1.0), 1), ("a", o("x", 2.0), 2), ("b", o("x", 5.0), 3), ("a", o("x", 3.0), 4)])
    assert read(d) == [("a", 1, 1), ("a", 3, 2), ("b", 5, 3), ("a", 6, 4)]


def test_group_by_key_aggregate_in_sql_sees_agg_key_and_value():
    b = StreamsBuilder()
    stream(b).groupByKey().aggregate("''", "concat(agg, key, ':', value.user, ';')",
                                     materialized=Materialized.with_(S, S)).toStream().to("out", Produced.with_(S, S))
    d = drive(b, [("a", o("x", 1.0), 1), ("a", o("y", 1.0), 2), ("b", o("z", 1.0), 3)])
    assert read(d, value_serde=S) == [("a", "a:x;", 1), ("a", "a:x;a:y;", 2), ("b", "b:z;", 3)]


def test_group_by_key_aggregate_with_callables():
    b = StreamsBuilder()
    stream(b).groupByKey().aggregate(lambda: 0, lambda k, v, agg: agg + int(v["amount"]),
                                     materialized=Materialized.as_("sum").withValueSerde(L)) \
        .toStream().to("out", Produced.with_(S, L))
    d = drive(b, [("a", o("x", 1.0), 1), ("a", o("y", 2.0), 2)])
    assert read(d) == [("a", 1, 1), ("a", 3, 2)]
    assert d.getKeyValueStore("sum").get("a") == 3


def test_grouping_after_a_key_change_without_serdes_fails_at_build_naming_the_node():
    b = StreamsBuilder()
    stream(b).map(lambda k, v: (v["user"], v)).groupByKey().count()
    with pytest.raises(TopologyError, match=r"\(repartition .*-repartition\) has no key serde.*Grouped"):
        TopologyTestDriver(b.build(), {"application.id": APP})


# ---------------------------------------------------------------------- grouped tables
def grouped_table(b, op):
    """A table of user -> "dept" re-grouped by department."""
    t = b.table("t", Consumed.with_(S, S))
    g = t.groupBy(lambda k, v: (v, k), Grouped.with_(S, S))
    return op(g)


def pipe_moves(b):
    d, t = table_driver(b)
    for k, v, ts in [("ann", "eng", 1), ("bob", "eng", 2), ("ann", "ops", 3), ("bob", None, 4), ("cy", "ops", 5)]:
        t.pipeInput(k, v, ts)
    return d


def test_grouped_table_count_subtracts_from_the_old_group_then_adds_to_the_new():
    b = StreamsBuilder()
    grouped_table(b, lambda g: g.count(materialized=Materialized.as_("per-dept"))).toStream() \
        .to("out", Produced.with_(S, L))
    d = pipe_moves(b)
    assert read(d) == [("eng", 1, 1), ("eng", 2, 2), ("eng", 1, 3), ("ops", 1, 3), ("eng", 0, 4), ("ops", 2, 5)]
    assert f"{APP}-per-dept-repartition" in d.producedTopicNames()
    assert dict(d.getKeyValueStore("per-dept").all()) == {"eng": 0, "ops": 2}


def test_grouped_table_reduce_with_adder_and_subtractor():
    b = StreamsBuilder()
    grouped_table(b, lambda g: g.reduce("concat(agg, '+', value)", lambda agg, v: "+".join(
        x for x in agg.split("+") if x != v))).toStream().to("out", Produced.with_(S, S))
    d = pipe_moves(b)
    assert read(d, value_serde=S) == [("eng", "ann", 1), ("eng", "ann+bob", 2), ("eng", "bob", 3),
                                      ("ops", "ann", 3), ("eng", "", 4), ("ops", "ann+cy", 5)]


def test_grouped_table_aggregate_in_sql():
    b = StreamsBuilder()
    grouped_table(b, lambda g: g.aggregate("cast(0 AS BIGINT)", "agg + length(value)", "agg - length(value)",
                                           materialized=Materialized.with_(S, L))).toStream() \
        .to("out", Produced.with_(S, L))
    d = pipe_moves(b)
    assert read(d) == [("eng", 3, 1), ("eng", 6, 2), ("eng", 3, 3), ("ops", 3, 3), ("eng", 0, 4), ("ops", 5, 5)]


def test_grouped_table_row_updated_within_its_group_is_replaced_in_one_step():
    b = StreamsBuilder()
    t = b.table("t", Consumed.with_(S, L))
    t.groupBy(lambda k, v: ("all", v), Grouped.with_(S, L)).reduce(lambda a, v: a + v, lambda a, v: a - v) \
        .toStream().to("out", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": APP})
    i = d.createInputTopic("t", S, L)
    i.pipeInput("a", 5, 1)
    i.pipeInput("b", 7, 2)
    i.pipeInput("a", 1, 3)
    assert read(d) == [("all", 5, 1), ("all", 12, 2), ("all", 8, 3)]


# ---------------------------------------------------------------------- windows
def windowed_out(b, table, fmt="{k.key}@{k.start}-{k.end}"):
    table.toStream().map(lambda k, v: (fmt.format(k=k), v)).to("out", Produced.with_(S, L))


WINDOWED = [("a", o("x", 1.0), 1_000), ("a", o("x", 1.0), 4_000), ("b", o("x", 1.0), 6_000),
            ("a", o("x", 1.0), 12_000), ("a", o("x", 1.0), 3_000), ("a", o("x", 1.0), 30_000)]


def test_tumbling_window_count_updates_each_window_and_drops_records_after_grace():
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 2_000)).count())
    d = drive(b, WINDOWED)
    # 3_000 arrives at stream time 12_000: window [0, 10000) closed at 12_000 (end + grace <= stream time)
    assert read(d) == [("a@0-10000", 1, 1_000), ("a@0-10000", 2, 4_000), ("b@0-10000", 1, 6_000),
                       ("a@10000-20000", 1, 12_000), ("a@30000-40000", 1, 30_000)]


def test_tumbling_window_record_within_grace_updates_the_old_window():
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 3_000)).count())
    d = drive(b, WINDOWED[:5])
    assert read(d)[-1] == ("a@0-10000", 3, 4_000)


def test_hopping_windows_put_a_record_in_every_window_containing_it():
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey()
                 .windowedBy(TimeWindows.ofSizeWithNoGrace(10_000).advanceBy(5_000)).count())
    d = drive(b, [("a", o("x", 1.0), 7_000), ("a", o("x", 1.0), 12_000)])
    assert read(d) == [("a@0-10000", 1, 7_000), ("a@5000-15000", 1, 7_000),
                       ("a@5000-15000", 2, 12_000), ("a@10000-20000", 1, 12_000)]


def test_sliding_window_count_creates_left_and_right_windows():
    # KStreamSlidingWindowAggregate: a record's left window [ts - d, ts]; a record within d of an
    # earlier one creates the earlier one's right window [prev + 1, prev + 1 + d].
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(10_000)).count())
    d = drive(b, [("a", o("x", 1.0), 20_000), ("a", o("x", 1.0), 25_000)])
    assert read(d) == [("a@10000-20000", 1, 20_000), ("a@20001-30001", 1, 25_000),
                       ("a@15000-25000", 2, 25_000)]


def test_session_window_count_merges_sessions_and_retracts_the_merged_ones():
    # KStreamSessionWindowAggregate: merged-away sessions are forwarded as Change(null, old) at their
    # end, then the merged session. The grace keeps the older session in the store (retention gap + grace).
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(5_000, 10_000)).count())
    d = drive(b, [("a", o("x", 1.0), 1_000), ("a", o("x", 1.0), 10_000), ("a", o("x", 1.0), 5_500)])
    assert read(d) == [("a@1000-1000", 1, 1_000), ("a@10000-10000", 1, 10_000),
                       ("a@1000-1000", None, 1_000), ("a@10000-10000", None, 10_000), ("a@1000-10000", 3, 10_000)]


def test_session_store_default_retention_hides_a_session_ended_more_than_gap_before_stream_time():
    # As Kafka's segmented session store: retention gap + grace; a fetch starts at stream time -
    # retention + 1, so with no grace the bridging record at 5_500 no longer sees [1000, 1000].
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(5_000)).count())
    d = drive(b, [("a", o("x", 1.0), 1_000), ("a", o("x", 1.0), 10_000), ("a", o("x", 1.0), 5_500)])
    assert read(d) == [("a@1000-1000", 1, 1_000), ("a@10000-10000", 1, 10_000),
                       ("a@10000-10000", None, 10_000), ("a@5500-10000", 2, 10_000)]


def test_session_reduce_and_aggregate_in_sql():
    b = StreamsBuilder()
    s = stream(b).mapValues("cast(value.amount AS BIGINT)").groupByKey(Grouped.with_(S, L)) \
        .windowedBy(SessionWindows.ofInactivityGapAndGrace(5_000, 10_000))
    s.reduce("agg + value").toStream().map(lambda k, v: (f"{k.key}@{k.start}-{k.end}", v)).to(
        "r", Produced.with_(S, L))
    s.aggregate("cast(0 AS BIGINT)", "agg + value * 10", "agg1 + agg2", materialized=Materialized.with_(S, L)) \
        .toStream().map(lambda k, v: (f"{k.key}@{k.start}-{k.end}", v)).to("a", Produced.with_(S, L))
    d = drive(b, [("a", o("x", 1.0), 1_000), ("a", o("x", 2.0), 7_000), ("a", o("x", 4.0), 4_000)])
    assert read(d, "r")[-1] == ("a@1000-7000", 7, 7_000)
    assert read(d, "a")[-1] == ("a@1000-7000", 70, 7_000)


def test_emit_on_window_close_forwards_each_window_once_when_stream_time_passes_its_end_plus_grace():
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 2_000))
                 .emitStrategy(EmitStrategy.onWindowClose())
                 .count(materialized=Materialized.as_("closing").withRetention(60_000)))
    d = drive(b, WINDOWED[:4])
    assert read(d) == [("a@0-10000", 2, 4_000), ("b@0-10000", 1, 6_000)]
    d = drive(b, WINDOWED)
    assert read(d) == [("a@0-10000", 2, 4_000), ("b@0-10000", 1, 6_000), ("a@10000-20000", 1, 12_000)]


def test_emit_on_window_close_for_sessions():
    # A session closes when its end < stream time - gap - grace: [1000, 3000] at stream time 8_001.
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(5_000))
                 .emitStrategy(EmitStrategy.onWindowClose()).count())
    first = [("a", o("x", 1.0), 1_000), ("a", o("x", 1.0), 3_000), ("b", o("x", 1.0), 8_000)]
    assert read(drive(b, first)) == []
    d = drive(b, first + [("b", o("x", 1.0), 8_001), ("b", o("x", 1.0), 8_002)])
    assert read(d) == [("a@1000-3000", 2, 3_000)]


def test_suppress_until_window_closes_gives_one_final_result_per_window():
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 2_000)).count()
                 .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded())))
    d = drive(b, WINDOWED)
    assert read(d) == [("a@0-10000", 2, 4_000), ("b@0-10000", 1, 6_000), ("a@10000-20000", 1, 12_000)]


def test_suppress_after_sessions_drops_the_merged_away_sessions():
    b = StreamsBuilder()
    windowed_out(b, stream(b).groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(5_000, 10_000)).count()
                 .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded())))
    # the merged session [1000, 10000] closes when stream time reaches its end + gap + grace = 25_000
    d = drive(b, [("a", o("x", 1.0), 1_000), ("a", o("x", 1.0), 10_000), ("a", o("x", 1.0), 5_500),
                  ("b", o("x", 1.0), 24_999)])
    assert read(d) == []
    d = drive(b, [("a", o("x", 1.0), 1_000), ("a", o("x", 1.0), 10_000), ("a", o("x", 1.0), 5_500),
                  ("b", o("x", 1.0), 25_000)])
    assert read(d) == [("a@1000-10000", 3, 10_000)]


# ---------------------------------------------------------------------- describe
def test_describe_shows_sub_topologies_repartition_and_changelog_topics():
    b = StreamsBuilder()
    s = stream(b, "orders")
    s.filter("value.amount > 100").groupBy("value.user", Grouped.as_("by-user").withKeySerde(S).withValueSerde(J)) \
        .count(materialized=Materialized.as_("per-user")).toStream().to("out", Produced.with_(S, L))
    text = str(b.build().describe("shop"))
    assert "Sub-topology: 0" in text and "Sub-topology: 1" in text and "Sub-topology: 2" not in text
    assert "Source: KSTREAM-SOURCE-0000000000 (topics: [orders])" in text
    assert "Processor: KSTREAM-FILTER-0000000001 (stores: [])" in text
    assert "Sink: by-user-repartition-sink (topic: by-user-repartition)" in text      # bare, as Kafka prints
    assert "Source: by-user-repartition-source (topics: [by-user-repartition])" in text
    assert "reads [orders]; writes [shop-by-user-repartition]" in text                  # the Spark part: real names
    assert "(stores: [per-user])" in text
    assert "Store: per-user (keyValue) changelog: shop-per-user-changelog" in text
    assert "Sink: KSTREAM-SINK-" in text and "(topic: out)" in text
    sub0, sub1 = text.split("Spark (")[0].split("Sub-topology: 1")
    assert "per-user" not in sub0 and "orders" not in sub1


def test_describe_names_generated_stores_and_their_changelogs():
    b = StreamsBuilder()
    stream(b).groupByKey().count().toStream().to("out", Produced.with_(S, L))
    tp = b.build()
    text = str(tp.describe("shop"))
    assert "shop-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog" in text
    assert tp.internal_topics("shop") == {"shop-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog": "changelog"}


def test_describe_of_a_topic_chosen_per_record():
    b = StreamsBuilder()
    def choose(k, v):
        return "x"
    stream(b).to(choose, Produced.with_(S, J))
    assert "(extractor class: test_describe_of_a_topic_chosen_per_record.<locals>.choose)" in str(b.build().describe())


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize("make", [
    lambda: TimeWindows.ofSizeWithNoGrace(0),
    lambda: TimeWindows.ofSizeWithNoGrace(10).advanceBy(11),
    lambda: TimeWindows.ofSizeAndGrace(10, -1),
    lambda: SlidingWindows.ofTimeDifferenceAndGrace(-1, 0),
    lambda: SessionWindows.ofInactivityGapWithNoGrace(0),
    lambda: TimeWindows.ofSizeWithNoGrace("ten seconds"),
])
def test_a_bad_window_fails_when_made(make):
    with pytest.raises(TopologyError):
        make()


def test_a_retention_shorter_than_size_plus_grace_fails_when_defined():
    b = StreamsBuilder()
    w = stream(b).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 1_000))
    with pytest.raises(TopologyError, match=r"store w must be no smaller than its window size plus the grace period\. "
                                            r"Got size=\[10000\], grace=\[1000\], retention=\[5000\]"):
        w.count(materialized=Materialized.as_("w").withRetention(5_000))


def test_a_missing_serde_without_default_fails_at_build_naming_the_node():
    b = StreamsBuilder()
    b.stream("in").to("out")
    with pytest.raises(TopologyError, match=r"KSTREAM-SOURCE-0000000000 \(stream in\) has no key serde.*Consumed"):
        TopologyTestDriver(b.build(), {"application.id": APP})
    b = StreamsBuilder()
    stream(b).mapValues(lambda v: 1).to("out")
    with pytest.raises(TopologyError, match=r"KSTREAM-SINK-0000000002 \(to out\) has no value serde.*Produced"):
        TopologyTestDriver(b.build(), {"application.id": APP})


def test_default_serdes_fill_in_what_is_missing():
    b = StreamsBuilder()
    b.stream("in").mapValues("upper(value)").to("out")
    d = TopologyTestDriver(b.build(), {"application.id": APP, "default.key.serde": "String",
                                       "default.value.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde"})
    d.createInputTopic("in", S, S).pipeInput("k", "abc", 1)
    assert d.createOutputTopic("out", S, S).readKeyValue() == KeyValue("k", "ABC")


@pytest.mark.parametrize("define", [
    lambda s: s.filter(42),
    lambda s: s.mapValues(None),
    lambda s: s.map(lambda k, v: (k, v), "value"),
    lambda s: s.map("key"),
    lambda s: s.filter(lambda v: True),
    lambda s: s.mapValues(lambda a, b, c: a),
    lambda s: s.peek("key"),
    lambda s: s.to(3),
    lambda s: s.groupByKey().aggregate(lambda x: 0, lambda k, v, a: a),
    lambda s: s.groupByKey().reduce(lambda a: a),
])
def test_a_non_callable_or_wrong_arity_argument_fails_when_defined(define):
    b = StreamsBuilder()
    with pytest.raises(TopologyError):
        define(stream(b))


@pytest.mark.parametrize("define", [
    lambda s: s.filter("value.amount >>> 1"),
    lambda s: s.mapValues("no_such_function(value)"),
    lambda s: s.selectKey("SELECT"),
    lambda s: s.groupByKey().aggregate("0", "agg +"),
    lambda s: s.filter("   "),
])
def test_bad_sql_fails_when_defined(define):
    b = StreamsBuilder()
    with pytest.raises((UnsupportedExpressionError, TopologyError), match="expression"):
        define(stream(b))


def test_an_illegal_name_fails_when_defined():
    with pytest.raises(TopologyError, match="not a legal name"):
        Named.as_("bad name!")
    for dots in (".", ".."):                 # Kafka's Named.validate refuses them too
        with pytest.raises(TopologyError, match="cannot be"):
            Named.as_(dots)
    with pytest.raises(TopologyError, match="used twice"):
        b = StreamsBuilder()
        stream(b).filter("true", Named.as_("f")).filter("true", Named.as_("f"))


def test_a_topic_read_as_a_stream_and_a_table_fails_at_build():
    """(Two streams of one topic share a source: tests/streams/test_builder_sources_upstream.py.)"""
    b = StreamsBuilder()
    stream(b, "in")
    b.table("in")
    with pytest.raises(TopologyError, match="read by both"):
        b.build()


def test_window_store_all_reports_each_window_with_its_end():
    """Kafka's ``WindowStore.all()`` yields ``Windowed`` keys whose window ends at start + size."""
    b = StreamsBuilder()
    (stream(b).groupBy("value.user", Grouped.with_(S, J))
     .windowedBy(TimeWindows.ofSizeAndGrace("10 milliseconds", "1 minute"))
     .count(materialized=Materialized.as_("counts")))
    d = drive(b, ORDERS)
    got = {(w.key, w.start, w.end): n for w, n in d.getWindowStore("counts").all()}
    assert got == {("ann", 10, 20): 1, ("bob", 20, 30): 1, ("ann", 30, 40): 1, ("cy", 40, 50): 1}


def test_with_logging_enabled_config_reaches_the_changelog_spec_and_refuses_delete_only():
    b = StreamsBuilder()
    stream(b).groupByKey().count(materialized=Materialized.as_("c").withLoggingEnabled({"segment.ms": 60000}))
    b.table("prices", Consumed.with_(S, S), Materialized.as_("p").withLoggingEnabled({"segment.ms": 1000})
            .withCachingDisabled())
    from streams.internal_topics import ADDITIONAL_RETENTION_DEFAULT, changelog_config
    stores = {s.name: s for n in b.build().nodes for s in n.stores}
    made = {name: changelog_config(s, {}, ADDITIONAL_RETENTION_DEFAULT) for name, s in stores.items()}
    stamped = {"message.timestamp.type": "CreateTime"}
    assert made["c"] == {**stamped, "cleanup.policy": "compact", "segment.ms": "60000"}
    assert made["p"] == {**stamped, "cleanup.policy": "compact", "segment.ms": "1000"}   # a source table's too
    assert (stores["c"].caching, stores["p"].caching) == (True, False)
    with pytest.raises(TopologyError, match="cleanup.policy"):
        Materialized.as_("d").withLoggingEnabled({"cleanup.policy": "delete"})


def test_a_negative_timestamp_is_refused_as_kafkas_test_record_refuses_it():
    from streams.testing import TestRecord
    b = StreamsBuilder()
    stream(b).to("out", Produced.with_(S, J))
    d = TopologyTestDriver(b.build(), {"application.id": APP})
    with pytest.raises(ValueError, match="Invalid timestamp: -5. Timestamp should always be non-negative"):
        d.createInputTopic("in", S, J).pipeInput("k", o("ann", 1.0), -5)
    with pytest.raises(ValueError, match="Invalid timestamp"):
        TestRecord("k", "v", -1)
    assert d.createOutputTopic("out", S, J).readKeyValuesToList() == []


def test_read_key_values_to_map_keeps_a_key_whose_last_update_is_a_tombstone():
    # Kafka's TestOutputTopic.readKeyValuesToMap: "the key will still be in the map (with null-value)"
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": APP})
    i = d.createInputTopic("in", S, S)
    i.pipeKeyValueList([("a", "1"), ("b", "2"), ("a", None), ("b", None), ("b", "3")], 1)
    assert d.createOutputTopic("out", S, S).readKeyValuesToMap() == {"a": None, "b": "3"}
