"""Every join kind against the tables of the "Kafka Streams Join Semantics" wiki (current
versions: the improved left/outer stream–stream join of 3.1+, KIP-962's null keys), and the
corner cases of Kafka's own join tests: asymmetric windows, grace, late records, many-to-many."""
from __future__ import annotations

import pytest

from streams import Consumed, Grouped, JoinWindows, Materialized, Produced, Serdes, StreamJoined, StreamsBuilder
from streams.testing import KeyValue, TopologyTestDriver
from tests.streams.join_kit import S, WIKI, TwoInputs, show

pytestmark = pytest.mark.unit

# ---------------------------------------------------------------------- stream–stream
# Window 10 ms, no grace; after the wiki's 15 steps, E(30) F(45) f(60) G(75) close the windows.
STREAM_STREAM = WIKI + [("L", "E", 30), ("L", "F", 45), ("R", "f", 60), ("L", "G", 75)]
SS_EXPECTED = {
    #        inner                             left                               outer
    4: (["A - a"], ["A - a"], ["A - a"]),
    5: (["B - a"], ["B - a"], ["B - a"]),
    6: (["A - b", "B - b"], ["A - b", "B - b"], ["A - b", "B - b"]),
    9: (["C - a", "C - b"], ["C - a", "C - b"], ["C - a", "C - b"]),
    10: (["A - c", "B - c", "C - c"],) * 3,
    14: (["B - d", "C - d"],) * 3,
    15: (["D - b", "D - c", "D - d"],) * 3,
    45: ([], ["E - null"], ["E - null"]),
    60: ([], ["F - null"], ["F - null"]),
    75: ([], [], ["null - f"]),
}


def _stream_stream(kind: str, windows=JoinWindows.ofTimeDifferenceWithNoGrace(10), joined=None):
    def build(b, left, right):
        join = {"inner": left.join, "left": left.leftJoin, "outer": left.outerJoin}[kind]
        return join(right, show, windows) if joined is None else join(right, show, windows, joined)
    return TwoInputs(build)


@pytest.mark.parametrize("column, kind", [(0, "inner"), (1, "left"), (2, "outer")])
def test_stream_stream_joins_match_the_wiki_table(column, kind):
    t = _stream_stream(kind)
    for side, value, ts in STREAM_STREAM:
        expected = SS_EXPECTED.get(ts, ([], [], []))[column]
        assert t.values(side, "k", value, ts) == expected, f"{kind} join at ts={ts}"


def test_a_join_result_takes_the_larger_timestamp_of_its_two_records():
    t = _stream_stream("inner")
    t.step("R", "k", "a", 7)
    assert t.step("L", "k", "A", 3) == [("k", "A - a", 7)]
    assert t.step("L", "k", "B", 9) == [("k", "B - a", 9)]


def test_many_to_many_keeps_duplicates_of_one_key_and_timestamp():
    t = _stream_stream("inner")
    t.step("L", "k", "A", 5)
    t.step("L", "k", "A", 5)
    assert t.values("R", "k", "a", 5) == ["A - a", "A - a"]


def test_unmatched_left_record_waits_for_the_window_and_grace_to_close():
    t = _stream_stream("left", JoinWindows.ofTimeDifferenceAndGrace(10, 5))
    t.step("L", "k", "A", 0)
    assert t.values("L", "x", "X", 15) == []          # 0 + 10 + 5 is not yet passed
    assert t.step("L", "x", "Y", 16) == [("k", "A - null", 0)]


@pytest.mark.parametrize("grace", [0, 3])
def test_window_close_boundary_is_after_plus_grace_exclusive(grace):
    t = _stream_stream("outer", JoinWindows.ofTimeDifferenceAndGrace(10, grace))
    t.step("L", "k", "A", 0)
    t.step("R", "j", "b", 0)
    assert t.values("L", "x", "X", 10 + grace) == []
    assert t.values("L", "y", "Y", 11 + grace) == ["null - b", "A - null"]


def test_a_match_arriving_within_grace_cancels_the_pending_non_joined_result():
    t = _stream_stream("outer", JoinWindows.ofTimeDifferenceAndGrace(10, 20))
    t.step("L", "k", "A", 0)
    t.step("L", "x", "X", 25)
    assert t.values("R", "k", "a", 9) == ["A - a"]     # out of order, still within the window's grace
    assert t.values("L", "z", "Z", 100) == ["X - null"]


def test_an_asymmetric_window_closes_each_side_by_its_own_bound():
    """before(0).after(10): a left record at t joins right records in [t, t+10], so it is
    emitted unjoined only once stream time passes t+10; a right record at t joins left records in
    [t-10, t] and closes as soon as stream time passes t (KAFKA-15417's asymmetric case)."""
    t = _stream_stream("outer", JoinWindows.ofTimeDifferenceWithNoGrace(10).before(0))
    t.step("L", "k", "A", 100)
    t.step("R", "j", "b", 100)
    assert t.values("R", "x", "X", 101) == ["null - b"]          # A is still open: 100 + 10 >= 101
    assert t.values("L", "y", "Y", 111) == ["A - null", "null - X"]


def test_a_record_whose_window_already_closed_is_emitted_at_once():
    t = _stream_stream("left")
    t.step("L", "x", "X", 100)
    assert t.step("L", "k", "late", 50) == [("k", "late - null", 50)]


def test_a_record_older_than_the_store_retention_is_not_joined_later():
    t = _stream_stream("inner")
    t.step("L", "k", "A", 0)
    t.step("L", "x", "X", 100)            # left store's stream time 100: A (0) is past retention 20
    assert t.values("R", "k", "a", 5) == []


def test_null_keys_are_dropped_in_inner_joins_and_emitted_at_once_in_left_joins():
    inner, left = _stream_stream("inner"), _stream_stream("left")
    inner.step("R", None, "a", 1)
    assert inner.values("L", None, "A", 1) == []
    assert left.step("L", None, "A", 1) == [(None, "A - null", 1)]


def test_stream_joined_names_the_stores():
    t = _stream_stream("left", joined=StreamJoined.as_("clicks").withName("pair"))
    names = set(t.topology.stores())
    # Kafka's names: a left join's other side is its outer side ("-outer-other-join")
    assert names == {"clicks-this-join-store", "clicks-outer-other-join-store", "clicks-left-shared-join-store"}
    text = str(t.topology.describe())
    assert "pair-this-windowed" in text and "pair-this-join" in text and "pair-outer-other-join" in text
    assert "pair-merge" in text


def test_joins_need_join_windows():
    from streams.errors import TopologyError
    with pytest.raises(TopologyError, match="JoinWindows"):
        _stream_stream("inner", windows=None)


# ---------------------------------------------------------------------- stream–table
ST_EXPECTED = {3: ([], ["A - null"]), 5: (["B - a"], ["B - a"]), 9: ([], ["C - null"]), 15: (["D - d"], ["D - d"])}


@pytest.mark.parametrize("column, kind", [(0, "inner"), (1, "left")])
def test_stream_table_joins_match_the_wiki_table(column, kind):
    t = TwoInputs(lambda b, s, tb: (s.join if kind == "inner" else s.leftJoin)(tb, show), "stream", "table")
    for side, value, ts in WIKI:
        assert t.values(side, "k", value, ts) == ST_EXPECTED.get(ts, ([], []))[column], f"{kind} at ts={ts}"


def test_stream_table_join_in_sql_names_the_sides_left_and_right():
    t = TwoInputs(lambda b, s, tb: s.join(tb, "concat(left, '/', right, '/', value)"), "stream", "table")
    t.step("R", "k", "gold", 1)
    assert t.values("L", "k", "o1", 2) == ["o1/gold/o1"]


def test_a_table_update_never_joins_backwards():
    t = TwoInputs(lambda b, s, tb: s.join(tb, show), "stream", "table")
    t.step("L", "k", "A", 5)
    assert t.values("R", "k", "a", 1) == []
    assert t.values("L", "k", "B", 6) == ["B - a"]


# ---------------------------------------------------------------------- stream–GlobalKTable
def test_global_table_join_by_a_key_taken_from_the_value_with_no_copartitioning():
    def build(b, s, g):
        return s.leftJoin(g, lambda k, v: v.split(":")[0], lambda v, r: show(v, r))
    t = TwoInputs(build, "stream", "global", partitions={"left": 3, "right": 2})
    t.step("R", "EU", "euro", 1)
    assert t.values("L", "o1", "EU:10", 2) == ["EU:10 - euro"]
    assert t.values("L", "o2", "US:3", 3) == ["US:3 - null"]
    t.step("R", "EU", None, 4)
    assert t.values("L", "o3", "EU:1", 5) == ["EU:1 - null"]
    assert "for global store (will not generate tasks)" in str(t.topology.describe())


def test_global_table_inner_join_with_a_sql_key_selector():
    t = TwoInputs(lambda b, s, g: s.join(g, key_selector="substring(value, 1, 2)", joiner=show),
                  "stream", "global", partitions={"left": 2})
    t.step("R", "EU", "euro", 1)
    assert [t.values("L", k, v, 2) for k, v in (("a", "EU1"), ("b", "US1"), ("c", "EU2"))] == \
        [["EU1 - euro"], [], ["EU2 - euro"]]


# ---------------------------------------------------------------------- table–table
TT_EXPECTED = {
    #   inner          left           outer
    3: ([], ["A - null"], ["A - null"]),
    4: (["A - a"],) * 3,
    5: (["B - a"],) * 3,
    6: (["B - b"],) * 3,
    7: ([None], [None], ["null - b"]),
    8: ([], [], [None]),
    9: ([], ["C - null"], ["C - null"]),
    10: (["C - c"],) * 3,
    11: ([None], ["C - null"], ["C - null"]),
    12: ([], [None], [None]),
    14: ([], [], ["null - d"]),
    15: (["D - d"],) * 3,
}


@pytest.mark.parametrize("column, kind", [(0, "inner"), (1, "left"), (2, "outer")])
def test_table_table_joins_match_the_wiki_table(column, kind):
    def build(b, lt, rt):
        return {"inner": lt.join, "left": lt.leftJoin, "outer": lt.outerJoin}[kind](rt, show).toStream()
    t = TwoInputs(build, "table", "table")
    for side, value, ts in WIKI:
        assert t.values(side, "k", value, ts) == TT_EXPECTED.get(ts, ([], [], []))[column], f"{kind} at ts={ts}"


def test_table_table_result_materialized_and_queryable():
    t = TwoInputs(lambda b, lt, rt: lt.join(rt, show, Materialized.as_("joined")).toStream(), "table", "table")
    t.step("L", "k", "A", 1)
    assert t.step("R", "k", "a", 5) == [("k", "A - a", 5)]
    assert t.driver.getKeyValueStore("joined").get("k") == "A - a"


def test_table_table_join_of_a_filtered_table_reads_through_the_filter():
    def build(b, lt, rt):
        return lt.filter(lambda k, v: v != "hidden").join(rt, show).toStream()
    t = TwoInputs(build, "table", "table")
    t.step("L", "k", "hidden", 1)
    assert t.values("R", "k", "a", 2) == []
    t.step("L", "k", "A", 3)
    assert t.values("R", "k", "b", 4) == ["A - b"]


def test_table_join_result_sends_old_values_to_a_regrouping():
    def build(b, lt, rt):
        return (lt.join(rt, show).groupBy(lambda k, v: (v[0], v), Grouped.with_(S, S)).count()
                .toStream().mapValues(lambda v: str(v)))
    t = TwoInputs(build, "table", "table")
    t.step("L", "k", "A", 1)
    t.step("R", "k", "a", 2)
    assert t.step("L", "k", "B", 3)[-2:] == [("A", "0", 3), ("B", "1", 3)]


# ---------------------------------------------------------------------- null keys through repartitions
STRINGS = {"application.id": "joins", "default.key.serde": "String", "default.value.serde": "String"}
# Kafka's RelaxedNullKeyRequirementJoinTest: both inputs repartitioned; a repartition drops null keys
# unless a left/outer stream–stream join or a left stream–table/global join is reachable downstream.
RELAXED = {
    "left stream-stream": (lambda b, l, r: l.leftJoin(r, show, JoinWindows.ofTimeDifferenceWithNoGrace(60_000)),
                           [("L", "leftValue")], ["leftValue - null"]),
    "left stream-table": (lambda b, l, r: l.leftJoin(r.toTable(), show), [("L", "leftValue")], ["leftValue - null"]),
    "outer stream-stream": (lambda b, l, r: l.outerJoin(r, show, JoinWindows.ofTimeDifferenceWithNoGrace(60_000)),
                            [("R", "rightValue"), ("L", "leftValue")], ["null - rightValue", "leftValue - null"]),
    "left stream-global": (lambda b, l, r: l.leftJoin(b.globalTable("global", Consumed.with_(S, S)),
                                                      key_selector=lambda k, v: None, joiner=show),
                           [("L", "leftValue")], ["leftValue - null"]),
    "no join": (lambda b, l, r: l, [("L", "leftValue")], []),
}


def test_explicit_repartitions_keep_null_keys_only_for_a_relaxed_join_downstream():
    for case, (build, steps, expected) in RELAXED.items():
        t = TwoInputs(lambda b, l, r: build(b, l.repartition(), r.repartition()))
        assert [v for side, value in steps for v in t.values(side, None, value, 1)] == expected, case


def test_a_key_changed_to_null_before_a_stream_stream_join_reaches_only_a_left_or_outer_joiner():
    window = JoinWindows.ofTimeDifferenceWithNoGrace(10)
    for kind, expected in [("leftJoin", ["n - null"]), ("outerJoin", ["n - null"]), ("join", [])]:
        t = TwoInputs(lambda b, l, r: getattr(l.selectKey(lambda k, v: None), kind)(r, show, window),
                      config=STRINGS)
        assert t.values("L", "a", "n", 1) == expected, kind


def test_a_key_changed_to_null_before_a_stream_table_join_reaches_only_a_left_joiner():
    for kind, expected in [("leftJoin", ["n - null", "k - null"]), ("join", [])]:
        t = TwoInputs(lambda b, l, r: getattr(l.selectKey(lambda k, v: None if v == "n" else k), kind)(r, show),
                      "stream", "table", config=STRINGS)
        assert t.values("L", "a", "n", 1) + t.values("L", "a", "k", 2) == expected, kind


def test_a_relaxed_join_further_down_keeps_null_keys_in_every_repartition_above_it():
    """The rule looks past other repartitions: both the explicit one and the join's own keep nulls."""
    t = TwoInputs(lambda b, l, r: l.repartition().mapValues(lambda v: v.upper()).selectKey(lambda k, v: k)
                  .leftJoin(r.repartition().toTable(), show), config=STRINGS)
    filters = [n for n in t.topology.nodes if n.args.get("repartition_filter")]
    # the table's side is not upstream of the join in Kafka's graph: its repartition drops nulls
    assert [f.args["predicate"].sql for f in filters] == ["TRUE", "key IS NOT NULL", "TRUE"]
    assert t.values("L", None, "v", 1) == ["V - null"]


def test_a_grouping_repartition_drops_null_keys_and_the_spark_plan_compiles_the_same_filter():
    from streams.spark_plan import plan
    b = StreamsBuilder()
    b.stream("left", Consumed.with_(S, S)).groupBy("CASE WHEN value = 'n' THEN NULL ELSE value END").count() \
        .toStream().to("counts", Produced.with_(S, Serdes.Long()))
    b.stream("other", Consumed.with_(S, S)).repartition() \
        .leftJoin(b.table("right", Consumed.with_(S, S)), show).to("out", Produced.with_(S, S))
    topology = b.build()
    sql = {n.name: n.args["predicate"].sql for n in topology.nodes if n.args.get("repartition_filter")}
    assert list(sql.values()) == ["key IS NOT NULL", "TRUE"]
    # the Spark path compiles the filter of each repartition's sub-topology from the same SQL
    prefixes = [plan(sub).prefix for sub in topology.subtopologies]
    compiled = {n.name: n.args["predicate"].sql for p in prefixes for n in p if n.name in sql}
    assert compiled == sql
    d = TopologyTestDriver(topology, STRINGS)
    d.createInputTopic("other", S, S).pipeInput(None, "v", 1)
    assert d.createOutputTopic("out", S, S).readValuesToList() == ["v - null"]
    d.createInputTopic("left", S, S).pipeKeyValueList([("a", "n"), ("b", "x")], 1)
    assert d.createOutputTopic("counts", S, Serdes.Long()).readKeyValuesToList() == [KeyValue("x", 1)]
