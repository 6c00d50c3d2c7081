"""KTable source, filter, mapValues and grouped-table aggregations through the test driver, as
Kafka's ``KTableFilterTest``, ``KTableMapValuesTest``, ``KTableImplTest``, ``KTableAggregateTest``
and ``KGroupedTableImplTest`` run them (inputs and expected (key, value, timestamp) copied from
there): the wiring between steps (which steps have stores, who sends old values, the repartition
topic, the record cache) rather than each processor alone."""
from __future__ import annotations

import logging

import pytest

from streams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S, I, L = Serdes.String(), Serdes.Integer(), Serdes.Long()
CACHE = {"application.id": "a"}
NO_CACHE = {"application.id": "a", "statestore.cache.max.bytes": 0}


def even(key, value):
    return value % 2 == 0


def _out(driver, topic, value=S):
    return [(r.key, r.value, r.timestamp) for r in driver.createOutputTopic(topic, S, value).readRecordsToList()]


def _pipe(driver, topic, rows, value=S):
    t = driver.createInputTopic(topic, S, value)
    for row in rows:
        t.pipeInput(*row)


def _rows(driver, store, keys):
    s = driver.getTimestampedKeyValueStore(store)
    return {k: tuple(v) for k in keys if (v := s.get(k)) is not None}


# ---------------------------------------------------------------------- KTableSourceTest
def test_source_forwards_every_update_and_delete():
    """testKTable."""
    b = StreamsBuilder()
    b.table("topic1", Consumed.with_(S, I)).toStream().to("out", Produced.with_(S, I))
    d = TopologyTestDriver(b.build(), CACHE)
    rows = [("A", 1, 10), ("B", 2, 11), ("C", 3, 12), ("D", 4, 13), ("A", None, 14), ("B", None, 15)]
    _pipe(d, "topic1", rows, I)
    assert _out(d, "out", I) == rows


def test_source_logs_a_null_key_and_an_out_of_order_update_with_their_offsets(caplog):
    """kTableShouldLogAndMeterOnSkippedRecords / kTableShouldLogOnOutOfOrder."""
    b = StreamsBuilder()
    b.table("topic", Consumed.with_(S, S))
    b.table("other", Consumed.with_(S, S), Materialized.as_("store"))
    d = TopologyTestDriver(b.build(), CACHE)
    with caplog.at_level(logging.WARNING, logger="streams.table"):
        _pipe(d, "topic", [(None, "value", 0)])
        _pipe(d, "other", [("key", "value", 10), ("key", "value", 5)])
    assert [r.getMessage() for r in caplog.records] == [
        "Skipping record due to null key. topic=[topic] partition=[0] offset=[0]",
        "Detected out-of-order KTable update for store, old timestamp=[10] new timestamp=[5]. "
        "topic=[other] partition=[0] offset=[1]."]


# ---------------------------------------------------------------------- KTableFilterTest
@pytest.mark.parametrize("filter_mat", [None, Materialized.as_("store2")], ids=["plain", "materialized"])
def test_filter_and_filter_not_pass_through(filter_mat):
    """shouldPassThroughWithoutMaterialization / shouldPassThroughOnMaterialization (no cache): the
    unnamed source has no store, so every failing update is a tombstone, also for an absent row."""
    b = StreamsBuilder()
    t1 = b.table("topic1", Consumed.with_(S, I))
    t2 = t1.filter(even) if filter_mat is None else t1.filter(even, materialized=filter_mat)
    t3 = t1.filterNot(even)
    assert t1.queryableStoreName() is None and t3.queryableStoreName() is None
    assert t2.queryableStoreName() == (None if filter_mat is None else "store2")
    t2.toStream().to("out2", Produced.with_(S, I))
    t3.toStream().to("out3", Produced.with_(S, I))
    d = TopologyTestDriver(b.build(), NO_CACHE)
    _pipe(d, "topic1", [("A", 1, 10), ("B", 2, 5), ("C", 3, 8), ("D", 4, 14), ("A", None, 18), ("B", None, 15)], I)
    assert _out(d, "out2", I) == [("A", None, 10), ("B", 2, 5), ("C", None, 8), ("D", 4, 14), ("A", None, 18),
                                  ("B", None, 15)]
    assert _out(d, "out3", I) == [("A", 1, 10), ("B", None, 5), ("C", 3, 8), ("D", None, 14), ("A", None, 18),
                                  ("B", None, 15)]


def test_filter_stores_hold_only_passing_rows():
    """shouldGetValuesOnMaterialization: the stores of a materialized filter and filterNot."""
    b = StreamsBuilder()
    t1 = b.table("topic1", Consumed.with_(S, I))
    t1.filter(even, materialized=Materialized.as_("store2"))
    t1.filterNot(even, materialized=Materialized.as_("store3"))
    t4 = t1.filterNot(even)
    assert t4.queryableStoreName() is None
    d = TopologyTestDriver(b.build(), NO_CACHE)
    keys = "ABC"
    _pipe(d, "topic1", [("A", 1, 5), ("B", 1, 10), ("C", 1, 15)], I)
    assert _rows(d, "store2", keys) == {}
    assert _rows(d, "store3", keys) == {"A": (1, 5), "B": (1, 10), "C": (1, 15)}
    _pipe(d, "topic1", [("A", 2, 10), ("B", 2, 5)], I)
    assert _rows(d, "store2", keys) == {"A": (2, 10), "B": (2, 5)}
    assert _rows(d, "store3", keys) == {"C": (1, 15)}
    _pipe(d, "topic1", [("A", 3, 15)], I)
    assert _rows(d, "store2", keys) == {"B": (2, 5)}
    assert _rows(d, "store3", keys) == {"A": (3, 15), "C": (1, 15)}
    _pipe(d, "topic1", [("A", None, 10), ("B", None, 20)], I)
    assert _rows(d, "store2", keys) == {}
    assert _rows(d, "store3", keys) == {"C": (1, 15)}


# ---------------------------------------------------------------------- KTableMapValuesTest
@pytest.mark.parametrize("mat", [None, Materialized.as_("anyName").withValueSerde(I)], ids=["plain", "queryable"])
def test_map_values(mat):
    """testKTable / testQueryableKTable."""
    b = StreamsBuilder()
    t1 = b.table("topic1", Consumed.with_(S, S))
    mapper = lambda v: ord(v[0]) - 48  # noqa: E731
    t2 = t1.mapValues(mapper) if mat is None else t1.mapValues(mapper, materialized=mat)
    t2.toStream().to("out", Produced.with_(S, I))
    d = TopologyTestDriver(b.build(), CACHE)
    _pipe(d, "topic1", [("A", "1", 5), ("B", "2", 25), ("C", "3", 20), ("D", "4", 10)])
    assert _out(d, "out", I) == [("A", 1, 5), ("B", 2, 25), ("C", 3, 20), ("D", 4, 10)]


def test_map_values_stores_follow_the_source_and_a_delete_removes_the_row():
    """testQueryableValueGetter: rows keep the source's timestamps; a delete with an older
    timestamp still removes them."""
    b = StreamsBuilder()
    t1 = b.table("topic1", Consumed.with_(S, S))
    t1.mapValues(lambda v: int(v), materialized=Materialized.as_("store2").withValueSerde(I))
    t1.mapValues(lambda v: -int(v), materialized=Materialized.as_("store3").withValueSerde(I))
    assert t1.mapValues(lambda v: int(v)).queryableStoreName() is None
    d = TopologyTestDriver(b.build(), CACHE)
    keys = "ABC"
    _pipe(d, "topic1", [("A", "01", 50), ("B", "01", 10), ("C", "01", 30)])
    assert _rows(d, "store2", keys) == {"A": (1, 50), "B": (1, 10), "C": (1, 30)}
    assert _rows(d, "store3", keys) == {"A": (-1, 50), "B": (-1, 10), "C": (-1, 30)}
    _pipe(d, "topic1", [("A", "02", 25), ("B", "02", 20)])
    assert _rows(d, "store2", keys) == {"A": (2, 25), "B": (2, 20), "C": (1, 30)}
    assert _rows(d, "store3", keys) == {"A": (-2, 25), "B": (-2, 20), "C": (-1, 30)}
    _pipe(d, "topic1", [("A", "03", 35)])
    assert _rows(d, "store2", keys) == {"A": (3, 35), "B": (2, 20), "C": (1, 30)}
    _pipe(d, "topic1", [("A", None, 1)])
    assert _rows(d, "store2", keys) == {"B": (2, 20), "C": (1, 30)}
    assert _rows(d, "store3", keys) == {"B": (-2, 20), "C": (-1, 30)}


# ---------------------------------------------------------------------- KTableImplTest
ROWS = [("A", "01", 5), ("B", "02", 100), ("C", "03", 0), ("D", "04", 0), ("A", "05", 10), ("A", "06", 8)]


@pytest.mark.parametrize("source_mat, filtered", [
    # an unnamed source has no store: its mapValues has no old values, nor has the filter after it
    (None, [("A", None, 5), ("B", 2, 100), ("C", None, 0), ("D", 4, 0), ("A", None, 10), ("A", 6, 8)]),
    # a named source has: the filter after mapValues sees each row's old value and skips a row
    # that failed before and fails again
    (Materialized.as_("fred"), [("B", 2, 100), ("D", 4, 0), ("A", 6, 8)])],
    ids=["testKTable", "testMaterializedKTable"])
def test_a_filter_after_map_values(source_mat, filtered):
    b = StreamsBuilder()
    t1 = b.table("topic1", Consumed.with_(S, S), *([] if source_mat is None else [source_mat]))
    t1.toStream().to("out1", Produced.with_(S, S))
    t2 = t1.mapValues(lambda v: int(v))
    t2.toStream().to("out2", Produced.with_(S, I))
    t2.filter(even).toStream().to("out3", Produced.with_(S, I))
    t1.toStream().to("topic2", Produced.with_(S, S))
    b.table("topic2", Consumed.with_(S, S)).toStream().to("out4", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), CACHE)
    _pipe(d, "topic1", ROWS)
    assert _out(d, "out1") == ROWS
    assert _out(d, "out2", I) == [(k, int(v), t) for k, v, t in ROWS]
    assert _out(d, "out3", I) == filtered
    assert _out(d, "out4") == ROWS


# ---------------------------------------------------------------------- KTableAggregateTest
def _string_aggregate(selector, config=CACHE):
    b = StreamsBuilder()
    (b.table("topic1", Consumed.with_(S, S)).groupBy(selector, Grouped.with_(S, S))
     .aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", lambda k, v, agg: f"{agg}-{v}",
                materialized=Materialized.as_("topic1-Canonized").withValueSerde(S))
     .toStream().to("out", Produced.with_(S, S)))
    return TopologyTestDriver(b.build(), config)


@pytest.mark.parametrize("config", [CACHE, NO_CACHE], ids=["cache", "no-cache"])
def test_agg_basic_result_timestamp_is_the_largest_of_its_rows(config):
    """testAggBasic: after a subtractor the result keeps the aggregate's larger timestamp (B at 18
    updated by a record at 15)."""
    d = _string_aggregate(lambda k, v: (k, v), config)
    _pipe(d, "topic1", [("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18), ("C", "5", 5),
                        ("D", "6", 25), ("B", "7", 15), ("C", "8", 10)])
    assert _out(d, "out") == [("A", "0+1", 10), ("B", "0+2", 15), ("A", "0+1-1+3", 20), ("B", "0+2-2+4", 18),
                              ("C", "0+5", 5), ("D", "0+6", 25), ("B", "0+2-2+4-4+7", 18), ("C", "0+5-5+8", 10)]
    assert _rows(d, "topic1-Canonized", "ABCD") == {"A": ("0+1-1+3", 20), "B": ("0+2-2+4-4+7", 18),
                                                    "C": ("0+5-5+8", 10), "D": ("0+6", 25)}


def _repartition_selector(key, value):
    if key == "null":
        return (None, value)
    if key == "NULL":
        return None
    return (value, value)


def test_agg_repartition_drops_null_group_keys_silently(caplog):
    """testAggRepartition: a selector giving a null key (or null) drops the row;
    ``KTableRepartitionMap`` skips it without a log. B's update at 22 after 23 is logged as an
    out-of-order table update (``KTableSource``)."""
    d = _string_aggregate(_repartition_selector)
    with caplog.at_level(logging.WARNING):
        _pipe(d, "topic1", [("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20), ("null", "3", 25),
                            ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22)])
    assert _out(d, "out") == [("1", "0+1", 10), ("1", "0+1-1", 15), ("1", "0+1-1+1", 15), ("2", "0+2", 20),
                              ("2", "0+2-2", 23), ("4", "0+4", 23), ("4", "0+4-4", 23), ("7", "0+7", 22)]
    assert [r.getMessage() for r in caplog.records] == [
        "Detected out-of-order KTable update for topic1-STATE-STORE-0000000000, old timestamp=[23] new timestamp=[22]. "
        "topic=[topic1] partition=[0] offset=[7]."]


@pytest.mark.parametrize("count_args", [(Materialized.as_("count"),), ()],
                         ids=["testCount", "testCountWithInternalStore"])
@pytest.mark.parametrize("config", [CACHE, NO_CACHE], ids=["cache", "no-cache"])
def test_count(count_args, config):
    b = StreamsBuilder()
    (b.table("count-test-input", Consumed.with_(S, S)).groupBy(lambda k, v: (v, v), Grouped.with_(S, S))
     .count(*count_args).toStream().to("out", Produced.with_(S, L)))
    d = TopologyTestDriver(b.build(), config)
    _pipe(d, "count-test-input", [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15),
                                  ("D", "green", 11)])
    assert _out(d, "out", L) == [("green", 1, 10), ("green", 2, 10), ("green", 1, 12), ("blue", 1, 12),
                                 ("yellow", 1, 15), ("green", 2, 12)]


def test_remove_old_before_add_new():
    b = StreamsBuilder()
    (b.table("count-test-input", Consumed.with_(S, S)).groupBy(lambda k, v: (k[0], k[1]), Grouped.with_(S, S))
     .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, v, agg: agg.replace(v, ""),
                materialized=Materialized.as_("someStore").withValueSerde(S))
     .toStream().to("out", Produced.with_(S, S)))
    d = TopologyTestDriver(b.build(), CACHE)
    _pipe(d, "count-test-input", [("11", "A", 10), ("12", "B", 8), ("11", None, 12), ("12", "C", 6)])
    assert _out(d, "out") == [("1", "1", 10), ("1", "12", 10), ("1", "2", 12), ("1", "2", 12)]


def test_should_not_send_transient_state_if_not_upgrading():
    b = StreamsBuilder()
    (b.table("input-topic", Consumed.with_(S, S)).groupBy(lambda k, v: (k, v), Grouped.with_(S, S))
     .count().toStream().to("output-topic", Produced.with_(S, L)))
    d = TopologyTestDriver(b.build(), CACHE)
    _pipe(d, "input-topic", [("1", "", 8), ("1", "", 9)])
    assert _out(d, "output-topic", L) == [("1", 1, 8), ("1", 1, 9)]


# ---------------------------------------------------------------------- KGroupedTableImplTest
def _reduced(source_mat, reduce_mat):
    b = StreamsBuilder()
    D = Serdes.Double()
    t = b.table("input", Consumed.with_(S, D), *([] if source_mat is None else [source_mat]))
    g = t.groupBy(lambda k, v: (k, int(v)), Grouped.with_(S, I))
    adder, sub = (lambda agg, v: agg + v), (lambda agg, v: agg - v)
    reduced = g.reduce(adder, sub) if reduce_mat is None else g.reduce(adder, sub, materialized=reduce_mat)
    reduced.toStream().to("out", Produced.with_(S, I))
    d = TopologyTestDriver(b.build(), CACHE)
    return d, reduced


@pytest.mark.parametrize("source_mat, reduce_mat, store", [
    (Materialized.as_("store").withKeySerde(S).withValueSerde(Serdes.Double()), Materialized.as_("reduced"), "reduced"),
    (Materialized.as_("store").withKeySerde(S).withValueSerde(Serdes.Double()), None, None),
    (None, Materialized.as_("reduce").withKeySerde(S).withValueSerde(I), "reduce")],
    ids=["shouldReduce", "shouldReduceWithInternalStoreName", "shouldReduceAndMaterializeResults"])
def test_reduce_result_timestamps(source_mat, reduce_mat, store):
    """The subtractor keeps the row's larger timestamp: B's 6 (record at 20) is at 30."""
    d, reduced = _reduced(source_mat, reduce_mat)
    assert reduced.queryableStoreName() == store
    D = Serdes.Double()
    _pipe(d, "input", [("A", 1.1, 10), ("B", 2.2, 11)], D)
    assert {k: (v, t) for k, v, t in _out(d, "out", I)} == {"A": (1, 10), "B": (2, 11)}
    _pipe(d, "input", [("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50), ("B", 6.2, 20)], D)
    assert {k: (v, t) for k, v, t in _out(d, "out", I)} == {"A": (5, 50), "B": (6, 30)}
    if store:
        assert d.getKeyValueStore(store).get("A") == 5 and d.getKeyValueStore(store).get("B") == 6
        assert _rows(d, store, "AB") == {"A": (5, 50), "B": (6, 30)}


PROCESS_DATA = [("A", "1", 10), ("B", "1", 50), ("C", "1", 30), ("D", "2", 40), ("E", "2", 60)]


def test_count_and_aggregate_materialize_results():
    b = StreamsBuilder()
    g = b.table("input", Consumed.with_(S, S)).groupBy(lambda k, v: (v, v), Grouped.with_(S, S))
    g.count(Materialized.as_("count").withKeySerde(S).withValueSerde(L))
    g.aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", lambda k, v, agg: f"{agg}-{v}",
                materialized=Materialized.as_("aggregate").withValueSerde(S).withKeySerde(S))
    d = TopologyTestDriver(b.build(), CACHE)
    _pipe(d, "input", PROCESS_DATA)
    assert d.getKeyValueStore("count").get("1") == 3 and d.getKeyValueStore("count").get("2") == 2
    assert _rows(d, "count", "12") == {"1": (3, 50), "2": (2, 60)}
    assert _rows(d, "aggregate", "12") == {"1": ("0+1+1+1", 50), "2": ("0+2+2", 60)}


# ---------------------------------------------------------------------- KTableImpl: materialized by a join
@pytest.mark.parametrize("join", ["table", "stream"])
@pytest.mark.parametrize("filter_first", [False, True], ids=["join-then-filter", "filter-then-join"])
def test_a_join_materializes_an_unnamed_source_for_filters_defined_after_it(join, filter_first):
    """A join reads the table through ``valueGetterSupplier()``, which materializes an unnamed
    source (``KTableSource.materialize``); a filter built afterwards gets old values from it
    (``parent.enableSendingOldValues(false)`` in ``KTableFilter``'s constructor) and forwards no
    tombstone for a row that never passed. A filter built before the join does not."""
    b = StreamsBuilder()
    t = b.table("t", Consumed.with_(S, I))

    def add_join():
        if join == "table":
            t.join(b.table("u", Consumed.with_(S, I)), lambda a, c: a).toStream().to("j", Produced.with_(S, I))
        else:
            b.stream("s", Consumed.with_(S, I)).join(t, lambda a, c: a).to("j", Produced.with_(S, I))

    def add_filter():
        t.filter(even).toStream().to("o", Produced.with_(S, I))

    for step in ((add_filter, add_join) if filter_first else (add_join, add_filter)):
        step()
    d = TopologyTestDriver(b.build(), CACHE)
    _pipe(d, "t", [("A", 1, 1), ("A", 3, 2), ("A", 2, 3), ("A", 5, 4)], I)
    expected = [("A", 2, 3), ("A", None, 4)]
    assert _out(d, "o", I) == ([("A", None, 1), ("A", None, 2)] + expected if filter_first else expected)
