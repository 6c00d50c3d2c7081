"""Tables and aggregations against Kafka Streams' own tests (inputs and expected records ported
from ``KTableAggregateTest``, ``KTableFilterTest``, ``KTableImplTest``, ``KStreamImplTest`` and
``KTableMapKeysTest``): old values between an aggregation and a re-grouping, a filter that asks its
parent for old values without forcing a store, versioned tables' out-of-order updates, the record
cache switched off, and the DSL's overloads."""
from __future__ import annotations

import pytest

from streams import Consumed, Grouped, Materialized, Named, Produced, Serdes, Stores, StreamsBuilder
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S, I, L = Serdes.String(), Serdes.Integer(), Serdes.Long()
NO_CACHE = {"application.id": "a", "statestore.cache.max.bytes": 0}


def _out(driver, topic="out", key=S, value=S):
    return [(r.key, r.value, r.timestamp) for r in driver.createOutputTopic(topic, key, value).readRecordsToList()]


def _pipe(driver, topic, rows, key=S, value=S):
    t = driver.createInputTopic(topic, key, value)
    for row in rows:
        t.pipeInput(*row)


# ---------------------------------------------------------------------- aggregations send old values
@pytest.mark.parametrize("config, expected", [
    ({"application.id": "a"}, [("1", 1, 1), ("1", 0, 2), ("2", 1, 2), ("1", 1, 3)]),
    # caching off: a group's first count carries the initializer (0) as its old value, as Kafka's
    # KStreamAggregate forwards it, and subtracting from the absent group "0" forwards its delete
    (NO_CACHE, [("0", None, 1), ("1", 1, 1), ("1", 0, 2), ("2", 1, 2), ("0", None, 3), ("1", 1, 3)])])
def test_a_regrouped_stream_aggregate_subtracts_the_row_that_left_its_group(config, expected):
    """An aggregation's result sends old values when a re-grouping asks
    (``KStreamAggProcessorSupplier.enableSendingOldValues``); A moving from count 1 to 2 leaves group "1"."""
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).groupByKey().count() \
        .groupBy(lambda k, c: (str(c), k), Grouped.with_(S, S)).count().toStream().to("out", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), config)
    _pipe(d, "in", [("A", "a", 1), ("A", "a", 2), ("B", "b", 3)])
    assert _out(d, value=L) == expected


def test_a_regrouped_table_aggregate_subtracts_the_row_that_left_its_group():
    b = StreamsBuilder()
    b.table("users", Consumed.with_(S, S)).groupBy(lambda k, v: (v, k), Grouped.with_(S, S)).count() \
        .groupBy(lambda k, v: (str(v), k), Grouped.with_(S, S)).count().toStream().to("out", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": "a"})
    _pipe(d, "users", [("u1", "eu", 1), ("u2", "eu", 2)])
    assert _out(d, value=L) == [("1", 1, 1), ("1", 0, 2), ("2", 1, 2)]


def test_a_regrouped_cogroup_subtracts_the_row_that_left_its_group():
    b = StreamsBuilder()
    counts = b.stream("in", Consumed.with_(S, S)).groupByKey().cogroup(lambda k, v, agg: agg + 1).aggregate(lambda: 0)
    counts.groupBy(lambda k, c: (str(c), k), Grouped.with_(S, S)).count().toStream().to("out", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": "a"})
    _pipe(d, "in", [("A", "a", 1), ("A", "a", 2)])
    assert _out(d, value=L) == [("1", 1, 1), ("1", 0, 2), ("2", 1, 2)]


# ---------------------------------------------------------------------- filters and old values
def test_a_filter_after_a_count_forwards_no_tombstone_for_a_row_that_never_passed():
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).groupByKey().count().filter(lambda k, v: v >= 2) \
        .toStream().to("out", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), NO_CACHE)
    _pipe(d, "in", [("A", "x", 1), ("B", "x", 2), ("A", "x", 3), ("C", "x", 4), ("A", "x", 5)])
    assert _out(d, value=L) == [("A", 2, 3), ("A", 3, 5)]


@pytest.mark.parametrize("config", [{"application.id": "a"}, NO_CACHE])
def test_a_filter_uses_old_values_of_a_user_materialized_source(config):
    """KTableFilterTest.shouldSendOldValuesWhenEnabledOnUpStreamMaterialization."""
    b = StreamsBuilder()
    b.table("topic1", Consumed.with_(S, I), Materialized.as_("store2")).filter(lambda k, v: v % 2 == 0) \
        .toStream().to("out", Produced.with_(S, I))
    d = TopologyTestDriver(b.build(), config)
    _pipe(d, "topic1", [("A", 1, 5), ("B", 1, 10), ("C", 1, 15), ("A", 2, 15), ("B", 2, 8), ("A", 3, 20),
                        ("A", None, 10), ("B", None, 20)], S, I)
    assert _out(d, value=I) == [("A", 2, 15), ("B", 2, 8), ("A", None, 20), ("B", None, 20)]


def test_a_filter_of_an_unnamed_source_still_forwards_every_failing_update():
    """KTableImplTest.testKTable: an unnamed source table is not materialized in Kafka, so its
    filter cannot have old values and forwards a tombstone for each failing update."""
    b = StreamsBuilder()
    b.table("topic1", Consumed.with_(S, I)).filter(lambda k, v: v % 2 == 0).toStream().to("out", Produced.with_(S, I))
    d = TopologyTestDriver(b.build(), NO_CACHE)
    _pipe(d, "topic1", [("A", 1, 5), ("B", 2, 100), ("A", 3, 10)], S, I)
    assert _out(d, value=I) == [("A", None, 5), ("B", 2, 100), ("A", None, 10)]


def test_with_no_record_cache_a_materialized_filter_forwards_deletes_of_absent_keys():
    """KTableFilterTest.shouldPassThroughOnMaterialization: ``statestore.cache.max.bytes=0`` turns
    caching off on every store (``InternalTopologyBuilder.rewriteTopology``)."""
    b = StreamsBuilder()
    b.table("topic1", Consumed.with_(S, I)).filter(lambda k, v: v % 2 == 0, materialized=Materialized.as_("store2")) \
        .toStream().to("out", Produced.with_(S, I))
    d = TopologyTestDriver(b.build(), NO_CACHE)
    _pipe(d, "topic1", [("A", 1, 10), ("B", 2, 5), ("C", 3, 8), ("D", 4, 14), ("A", None, 18), ("B", None, 15)], S, I)
    assert _out(d, value=I) == [("A", None, 10), ("B", 2, 5), ("C", None, 8), ("D", 4, 14), ("A", None, 18),
                                ("B", None, 15)]


# ---------------------------------------------------------------------- versioned tables
def _versioned(name="versioned"):
    return Materialized.as_(Stores.persistentVersionedKeyValueStore(name, 300_000))


def test_an_out_of_order_versioned_update_does_not_reach_an_aggregate():
    """KTableAggregateTest.testAggOfVersionedStore (KTableRepartitionMap skips non-latest changes)."""
    def select(k, v):
        return (None, v) if k == "null" else None if k == "NULL" else (v, v)
    b = StreamsBuilder()
    b.table("topic1", Consumed.with_(S, S), _versioned()).groupBy(select, Grouped.with_(S, S)) \
        .aggregate(lambda: "0", lambda k, v, a: f"{a}+{v}", lambda k, v, a: f"{a}-{v}",
                   materialized=Materialized.as_("topic1-Canonized").withValueSerde(S)) \
        .toStream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "a"})
    _pipe(d, "topic1", [("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20), ("null", "3", 25),
                        ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22)])
    assert _out(d) == [("1", "0+1", 10), ("1", "0+1-1", 15), ("2", "0+2", 20), ("2", "0+2-2", 23), ("4", "0+4", 23)]


@pytest.mark.parametrize("step", ["mapValues", "filter"])
def test_an_unmaterialized_step_keeps_a_versioned_updates_out_of_order_mark(step):
    """KTableMapValues/KTableFilter forward ``isLatest``: the join after them skips the late update."""
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S), _versioned("lv"))
    left = left.mapValues(lambda v: v.upper()) if step == "mapValues" else left.filter(lambda k, v: True)
    left.join(b.table("right", Consumed.with_(S, S), _versioned("rv")), lambda a, c: f"{a}/{c}") \
        .toStream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "a"})
    _pipe(d, "right", [("k", "r", 1)])
    _pipe(d, "left", [("k", "new", 20), ("k", "old", 10)])
    assert [v for _, v, _ in _out(d)] == ["NEW/r" if step == "mapValues" else "new/r"]


def test_a_filter_below_a_versioned_table_forwards_every_failing_update():
    """KTableFilterTest.shouldNotSkipNullIfVersionedUpstream."""
    b = StreamsBuilder()
    t = b.table("topic1", Consumed.with_(S, S), _versioned()).filter(lambda k, v: v == "accept")
    t.groupBy(lambda k, v: (k, v), Grouped.with_(S, S)).reduce(lambda a, v: a + v, lambda a, v: a)
    t.toStream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "a"})
    _pipe(d, "topic1", [("A", "reject", 5), ("B", "reject", 10), ("C", "reject", 20)])
    assert _out(d) == [("A", None, 5), ("B", None, 10), ("C", None, 20)]


# ---------------------------------------------------------------------- overloads
def test_to_table_after_a_key_change_repartitions_with_the_materialized_serdes():
    """KStreamImplTest.shouldSupportKeyChangeKTableFromKStream."""
    b = StreamsBuilder()
    b.stream("input", Consumed.with_(S, S)).map(lambda k, v: (ord(k[0]) - ord("A"), v)) \
        .toTable(Materialized.with_(I, None)).toStream().to("output", Produced.with_(I, S))
    d = TopologyTestDriver(b.build(), {"application.id": "a", "default.value.serde": "String"})
    _pipe(d, "input", [("A", "01", 5), ("B", "02", 100), ("C", "03", 0), ("D", "04", 0), ("A", "05", 10),
                       ("A", "06", 8)])
    assert _out(d, "output", I, S) == [(0, "01", 5), (1, "02", 100), (2, "03", 0), (3, "04", 0), (0, "05", 10),
                                       (0, "06", 8)]


def test_to_stream_with_a_key_mapper():
    """KTableMapKeysTest: ``toStream(mapper[, Named])``."""
    b = StreamsBuilder()
    b.table("t", Consumed.with_(S, S)).toStream(lambda k, v: k + v, Named.as_("keys")).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "a"})
    _pipe(d, "t", [("A", "1", 5)])
    assert _out(d) == [("A1", "1", 5)]


def test_materialized_in_the_name_slot_is_the_materialized():
    b = StreamsBuilder()
    g = b.stream("in", Consumed.with_(S, S)).groupByKey()
    assert g.count(Materialized.as_("c1")).queryableStoreName() == "c1"
    assert g.reduce(lambda a, v: a + v, Materialized.as_("r1")).queryableStoreName() == "r1"
    assert g.aggregate(lambda: "", lambda k, v, a: a + v, Materialized.as_("a1")).queryableStoreName() == "a1"
    t = b.table("t", Consumed.with_(S, S))
    assert t.filter(lambda k, v: True, Materialized.as_("f1")).queryableStoreName() == "f1"
    assert t.mapValues(lambda v: v, Materialized.as_("m1")).queryableStoreName() == "m1"
    gt = t.groupBy(lambda k, v: (v, k), Grouped.with_(S, S))
    assert gt.count(Materialized.as_("c2")).queryableStoreName() == "c2"
    assert b.stream("s", Consumed.with_(S, S)).toTable(Materialized.as_("tt")).queryableStoreName() == "tt"


def test_queryable_store_name_is_none_unless_materialized_names_the_store():
    """KTableImpl.queryableStoreName is MaterializedInternal.queryableStoreName(): null for a
    generated store name (a source table, an unnamed aggregation or filter)."""
    b = StreamsBuilder()
    t = b.table("t", Consumed.with_(S, S))
    assert t.queryableStoreName() is None
    assert b.table("t2", Consumed.with_(S, S), Materialized.as_("named")).queryableStoreName() == "named"
    assert b.stream("in", Consumed.with_(S, S)).groupByKey().count().queryableStoreName() is None
    assert t.filter(lambda k, v: True, Materialized.with_(S, S)).queryableStoreName() is None


def test_suppress_on_a_versioned_table_is_refused_at_build():
    """KTableImpl.suppress: a late update of a versioned table would be buffered and emitted as
    the final result while the table holds a newer value."""
    from streams import Suppressed
    from streams.errors import TopologyError
    from streams.suppress import BufferConfig
    b = StreamsBuilder()
    t = b.table("t", Consumed.with_(S, S),
                Materialized.as_(Stores.persistentVersionedKeyValueStore("v", 60_000)))
    with pytest.raises(TopologyError, match="suppress\\(\\) is only supported for non-versioned KTables"):
        t.filter(lambda k, v: True).suppress(Suppressed.untilTimeLimit(1000, BufferConfig.unbounded()))
