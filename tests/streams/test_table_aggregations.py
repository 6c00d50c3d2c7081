"""Grouped-table aggregations, with scenarios ported from Kafka's KTableAggregateTest and
KGroupedTableImplTest (inputs and expected (key, value, timestamp) outputs copied from there)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from streams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder
from streams.aggregate import KTableAggregate, KTableReduce, table_count
from streams.errors import StreamsError
from streams.interpreter import Interpreter
from streams.record import Change, Record
from streams.table import KTableRepartitionMap, KTableSource, KTableToStream
from tests.streams.any_order import run_in_any_order
from tests.streams.table_kit import Pipeline

pytestmark = pytest.mark.unit


def string_init():
    return "0"


def tostring_adder(key, value, agg):
    return f"{agg}+{value}"


def tostring_remover(key, value, agg):
    return f"{agg}-{value}"


def grouped(selector, aggregation, caching=True):
    """builder.table(topic).groupBy(selector).<aggregation>.toStream(), in one task."""
    return Pipeline(["source", aggregation.store_name],
                    KTableSource("source", send_old_values=True, caching=caching),
                    KTableRepartitionMap(selector), aggregation, KTableToStream())


def to_string_aggregate(**kw):
    return KTableAggregate("agg", string_init, tostring_adder, tostring_remover, **kw)


def test_agg_basic():
    p = grouped(lambda k, v: (k, v), to_string_aggregate())
    assert p.pipe_all([("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18), ("C", "5", 5),
                       ("D", "6", 25), ("B", "7", 15), ("C", "8", 10)]) == [
        ("A", "0+1", 10), ("B", "0+2", 15), ("A", "0+1-1+3", 20), ("B", "0+2-2+4", 18), ("C", "0+5", 5),
        ("D", "0+6", 25), ("B", "0+2-2+4-4+7", 18), ("C", "0+5-5+8", 10)]


def repartition_selector(key, value):
    if key == "null":
        return (None, value)
    if key == "NULL":
        return None
    return (value, value)


def test_agg_repartition_moves_rows_between_groups_and_skips_null_group_keys():
    p = grouped(repartition_selector, to_string_aggregate())
    assert p.pipe_all([("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20), ("null", "3", 25),
                       ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22)]) == [
        ("1", "0+1", 10), ("1", "0+1-1", 15), ("1", "0+1-1+1", 15), ("2", "0+2", 20), ("2", "0+2-2", 23),
        ("4", "0+4", 23), ("4", "0+4-4", 23), ("7", "0+7", 22)]
    assert p.rows("agg") == {"1": ("0+1-1+1", 15), "2": ("0+2-2", 23), "4": ("0+4-4", 23), "7": ("0+7", 22)}


@pytest.mark.parametrize("caching", [True, False])
def test_count(caching):
    p = grouped(lambda k, v: (v, v), table_count("agg", caching=caching), caching=caching)
    assert p.pipe_all([("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15),
                       ("D", "green", 11)]) == [
        ("green", 1, 10), ("green", 2, 10), ("green", 1, 12), ("blue", 1, 12), ("yellow", 1, 15), ("green", 2, 12)]


def test_remove_old_before_add_new():
    p = grouped(lambda k, v: (k[0], k[1]),
                KTableAggregate("agg", lambda: "", lambda k, v, a: a + v, lambda k, v, a: a.replace(v, "")))
    assert p.pipe_all([("11", "A", 10), ("12", "B", 8), ("11", None, 12), ("12", "C", 6)]) == [
        ("1", "1", 10), ("1", "12", 10), ("1", "2", 12), ("1", "2", 12)]


def test_same_group_update_sends_no_transient_state():
    # testShouldNotSendTransientStateIfNotUpgrading: one combined change, not a 0 in between.
    p = grouped(lambda k, v: (k, v), table_count("agg"))
    assert p.pipe_all([("1", "", 8), ("1", "", 9)]) == [("1", 1, 8), ("1", 1, 9)]


def test_repartition_map_forwards_old_group_first_then_new_group():
    p = Pipeline([], KTableRepartitionMap(lambda k, v: (v % 2, v)))
    assert p.pipe("k", Change(3, 2), 7) == [(0, Change(None, 2), 7), (1, Change(3, None), 7)]
    assert p.pipe("k", Change(4, 2), 8) == [(0, Change(4, 2), 8)]
    assert p.pipe("k", Change(None, 2), 9) == [(0, Change(None, 2), 9)]
    assert p.pipe("k", Change(None, None), 9) == []


def test_repartition_map_refuses_a_null_table_key():
    p = Pipeline([], KTableRepartitionMap(lambda k, v: (v, v)))
    with pytest.raises(StreamsError, match="grouping KTable should not be null"):
        p.pipe(None, Change(1, None), 1)


def test_table_aggregate_refuses_a_null_group_key():
    p = Pipeline(["agg"], to_string_aggregate())
    with pytest.raises(StreamsError, match="KTable aggregate operator with state agg"):
        p.pipe(None, Change("1", None), 1)
    p = Pipeline(["agg"], KTableReduce("agg", lambda a, v: a + v, lambda a, v: a - v))
    with pytest.raises(StreamsError, match="KTable reduce operator with state agg"):
        p.pipe(None, Change(1, None), 1)


def int_adder(agg, value):
    return agg + value


def int_subtractor(agg, value):
    return agg - value


def test_reduce():
    # KGroupedTableImplTest.shouldReduce: intProjection, integer adder and subtractor.
    p = grouped(lambda k, v: (k, int(v)), KTableReduce("reduced", int_adder, int_subtractor))
    p.pipe_all([("A", 1.1, 10), ("B", 2.2, 11)])
    assert p.rows("reduced") == {"A": (1, 10), "B": (2, 11)}
    p.pipe_all([("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50), ("B", 6.2, 20)])
    assert p.rows("reduced") == {"A": (5, 50), "B": (6, 30)}
    last = {k: (v, ts) for k, v, ts in [(r.key, r.value, r.timestamp) for r in p.out.records]}
    assert last == {"A": (5, 50), "B": (6, 30)}


PROCESS_DATA = [("A", "1", 10), ("B", "1", 50), ("C", "1", 30), ("D", "2", 40), ("E", "2", 60)]


def test_count_and_materialize_results():
    p = grouped(lambda k, v: (v, v), table_count("count"))
    p.pipe_all(PROCESS_DATA)
    assert p.rows("count") == {"1": (3, 50), "2": (2, 60)}


def test_aggregate_and_materialize_results():
    p = grouped(lambda k, v: (v, v), to_string_aggregate())
    p.pipe_all(PROCESS_DATA)
    assert p.rows("agg") == {"1": ("0+1+1+1", 50), "2": ("0+2+2", 60)}


def test_a_delete_takes_the_row_out_of_its_group_and_an_emptied_group_keeps_count_zero():
    p = grouped(lambda k, v: (v, v), table_count("count"))
    p.pipe_all(PROCESS_DATA)
    assert p.pipe("B", None, 70) == [("1", 2, 70)]
    assert p.pipe_all([("D", None, 5), ("E", None, 6)]) == [("2", 1, 60), ("2", 0, 60)]
    assert p.rows("count") == {"1": (2, 70), "2": (0, 60)}
    assert p.pipe("Z", None, 80) == []


def test_a_row_moving_between_groups_leaves_the_old_group_first():
    p = grouped(lambda k, v: (v, v), table_count("count"))
    p.pipe_all(PROCESS_DATA)
    assert p.pipe("A", "2", 70) == [("1", 2, 70), ("2", 3, 70)]


def test_reduce_to_none_deletes_the_group_row_and_forwards_through_the_cache_at_the_record_time():
    # A subtractor returning None empties the row: KTableReduce puts null, which deletes it.
    sub = lambda agg, v: None if agg == v else agg - v  # noqa: E731
    p = Pipeline(["agg"], KTableReduce("agg", int_adder, sub, send_old_values=True))
    assert p.pipe("g", Change(5, None), 10) == [("g", Change(5, None), 10)]
    assert p.pipe("g", Change(None, 5), 7) == [("g", Change(None, 5), 7)]
    assert p.rows("agg") == {}
    assert p.pipe("g", Change(None, 5), 8) == []


def test_reduce_to_none_without_the_cache_forwards_at_the_aggregate_time_and_forwards_empty_deletes():
    sub = lambda agg, v: None if agg == v else agg - v  # noqa: E731
    p = Pipeline(["agg"], KTableReduce("agg", int_adder, sub, send_old_values=True, caching=False))
    assert p.pipe("g", Change(5, None), 10) == [("g", Change(5, None), 10)]
    assert p.pipe("g", Change(None, 5), 7) == [("g", Change(None, 5), 10)]
    assert p.pipe("g", Change(None, 5), 8) == [("g", Change(None, None), 8)]


def test_aggregate_sends_old_values_only_when_asked():
    p = Pipeline(["agg"], to_string_aggregate(send_old_values=True))
    assert p.pipe("g", Change("1", None), 1) == [("g", Change("0+1", None), 1)]
    assert p.pipe("g", Change("2", "1"), 2) == [("g", Change("0+1-1+2", "0+1"), 2)]
    p = Pipeline(["agg"], to_string_aggregate())
    p.pipe("g", Change("1", None), 1)
    assert p.pipe("g", Change("2", "1"), 2) == [("g", Change("0+1-1+2", None), 2)]


def test_aggregate_keeps_the_input_headers():
    p = Pipeline(["agg"], table_count("agg"))
    p.head.process(Record("g", Change("x", None), 1, headers=(("h", b"v"),)))
    assert p.out.records[0].headers == (("h", b"v"),)


@settings(max_examples=150, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from(["u1", "u2", "u3", "u4"]),
                                 st.one_of(st.none(), st.tuples(st.sampled_from("ABC"), st.integers(0, 9)))),
                       max_size=25),
       seed=st.integers(0, 2**32 - 1), cache=st.sampled_from([(0, 0.0), (10_485_760, 0.2), (200, 0.1)]))
def test_grouped_table_sum_and_count_converge_in_any_processing_order(events, seed, cache):
    """A row moving between groups is subtracted from the old group's task and added in the new
    one's, two tasks that run at once: in whatever order the partitions are processed, the last
    result per group is the sum and count of the current table's rows in it. So too with record
    caches, whose forwarded old value must be what the subtractor added before."""
    S, L = Serdes.String(), Serdes.Long()
    b = StreamsBuilder()
    g = b.table("t", Consumed.with_(S, S)).groupBy(lambda k, v: (v.split(":")[0], int(v.split(":")[1])),
                                                   Grouped.with_(S, L))
    g.reduce(lambda agg, v: agg + v, lambda agg, v: agg - v).toStream().to("sums", Produced.with_(S, L))
    g.count(materialized=Materialized.as_("counts")).toStream().to("counts", Produced.with_(S, L))
    interp = Interpreter(b.build(), {"application.id": "any"}, {"t": 2}, cache_bytes=cache[0])
    table: dict = {}
    for i, (key, row) in enumerate(events):
        value = None if row is None else f"{row[0]}:{row[1]}"
        (table.__setitem__(key, row) if row is not None else table.pop(key, None))
        interp.append("t", S.serialize(key), S.serialize(value), i)
    run_in_any_order(interp, random.Random(seed), commit_chance=cache[1])

    def last(topic):
        out: dict = {}
        for part in interp.topics.get(topic, []):
            for k, v, _, _ in part:
                out[S.deserialize(k)] = L.deserialize(v)
        return out
    groups = {grp for grp, _ in table.values()}
    sums, counts = last("sums"), last("counts")
    assert {k: v for k, v in counts.items() if v} == {grp: sum(1 for g_, _ in table.values() if g_ == grp)
                                                      for grp in groups}
    assert {k: v for k, v in sums.items() if k in groups} == {
        grp: sum(n for g_, n in table.values() if g_ == grp) for grp in groups}
