"""Joins in the topology: Kafka's node and store names in ``describe()``, repartitioning before a
join, the co-partitioning check, versioned tables and the stream–table grace period, cogroup."""
from __future__ import annotations

import pytest

from streams import (Consumed, Grouped, JoinWindows, Joined, Materialized, Produced, Serdes, SessionWindows,
                     Stores, StreamJoined, StreamsBuilder, TimeWindows, TopicsNotCopartitionedError, TopologyError)
from streams.testing import TopologyTestDriver
from tests.streams.join_kit import S, TwoInputs, show

pytestmark = pytest.mark.unit
L = Serdes.Long()


def _lines(topology) -> list[str]:
    return [line.strip() for line in str(topology.describe()).splitlines()]


def test_stream_stream_join_describes_as_kafka_does():
    t = TwoInputs(lambda b, l, r: l.join(r, show, JoinWindows.ofTimeDifferenceWithNoGrace(5)))
    lines = _lines(t.topology)
    for expected in ["Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])",
                     "Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-JOINOTHER-0000000005-store])",
                     "Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-JOINOTHER-0000000005-store])",
                     "Processor: KSTREAM-JOINOTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store])",
                     "<-- KSTREAM-JOINTHIS-0000000004, KSTREAM-JOINOTHER-0000000005",
                     "Sink: KSTREAM-SINK-0000000007 (topic: out)"]:
        assert expected in lines


@pytest.mark.parametrize("kind, this, other", [("left", "KSTREAM-JOINTHIS-", "KSTREAM-OUTEROTHER-"),
                                               ("outer", "KSTREAM-OUTERTHIS-", "KSTREAM-OUTEROTHER-")])
def test_left_and_outer_stream_joins_name_their_sides_and_the_shared_store(kind, this, other):
    t = TwoInputs(lambda b, l, r: getattr(l, f"{kind}Join")(r, show, JoinWindows.ofTimeDifferenceWithNoGrace(5)))
    assert set(t.topology.stores()) == {f"{this}0000000004-store", f"{other}0000000005-store",
                                        "KSTREAM-OUTERSHARED-0000000004-store"}


def test_table_joins_describe_as_kafka_does():
    t = TwoInputs(lambda b, l, r: l.join(r, show).toStream(), "table", "table")
    text = "\n".join(_lines(t.topology))
    # each table draws its store's name, then its source's and table source's (Kafka's order)
    assert "Processor: KTABLE-JOINTHIS-0000000007 (stores: [right-STATE-STORE-0000000003])" in text
    assert "Processor: KTABLE-JOINOTHER-0000000008 (stores: [left-STATE-STORE-0000000000])" in text
    assert "<-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008" in text   # KTABLE-MERGE-0000000006
    s = TwoInputs(lambda b, l, r: l.leftJoin(r, show), "stream", "table")
    assert "Processor: KSTREAM-LEFTJOIN-0000000004 (stores: [right-STATE-STORE-0000000001])" in _lines(s.topology)


def test_a_key_change_before_a_join_goes_through_a_repartition_topic():
    def build(b, left, right):
        return left.selectKey(lambda k, v: v).join(right, show, JoinWindows.ofTimeDifferenceWithNoGrace(5),
                                                   StreamJoined.with_(S, S, S))
    t = TwoInputs(build, partitions={"left": 2, "right": 3})
    text = str(t.topology.describe())
    assert "KSTREAM-KEY-SELECT-0000000002-repartition" in text
    t.step("R", "x", "a", 1)
    assert t.values("L", "k", "x", 2) == ["x - a"]
    assert t.driver._interp.partitions("joins-KSTREAM-KEY-SELECT-0000000002-repartition") == 3


@pytest.mark.parametrize("left, right", [("stream", "stream"), ("stream", "table"), ("table", "table")])
def test_joined_topics_with_different_partition_counts_fail_naming_both(left, right):
    def build(b, l, r):
        if left == right == "stream":
            return l.join(r, show, JoinWindows.ofTimeDifferenceWithNoGrace(5))
        return l.join(r, show) if left == "stream" else l.join(r, show).toStream()
    with pytest.raises(TopicsNotCopartitionedError, match=r"left \(2 partitions\), right \(3 partitions\)") as e:
        TwoInputs(build, left, right, partitions={"left": 2, "right": 3})
    assert e.value.code == 1240


def _rekeyed_join(left_parts=None, right_parts=None, rekey_right=True):
    """Both sides (or the left only) re-keyed before a windowed join; ``*_parts`` fixes a side's
    repartition count."""
    from streams import Repartitioned
    b = StreamsBuilder()
    sides = []
    for topic, parts in (("left", left_parts), ("right", right_parts)):
        s = b.stream(topic, Consumed.with_(S, S))
        if topic == "left" or rekey_right:
            s = s.selectKey(lambda k, v: v)
        if parts is not None:
            s = s.repartition(Repartitioned.numberOfPartitions(parts).withKeySerde(S).withValueSerde(S))
        sides.append(s)
    sides[0].join(sides[1], show, JoinWindows.ofTimeDifferenceWithNoGrace(1000),
                  StreamJoined.with_(S, S, S)).to("out", Produced.with_(S, S))
    return b.build()


def test_repartition_topics_alone_in_a_join_take_the_most_partitions_so_every_key_meets():
    """CopartitionedTopicsEnforcer: with only repartition topics in the group, all take the largest
    count; with 2 and 4 (their writers' inputs) one key in ten used to land in different tasks."""
    d = TopologyTestDriver(_rekeyed_join(), {"application.id": "app"}, partitions={"left": 2, "right": 4})
    repartition = [t for t in _rekeyed_join().internal_topics("app") if t.endswith("-repartition")]
    assert len(repartition) == 2 and {d._interp.partitions(t) for t in repartition} == {4}
    left, right = d.createInputTopic("left", S, S), d.createInputTopic("right", S, S)
    for i in range(10):
        left.pipeInput(f"x{i}", f"k{i}", 1000 + i)
    for i in range(10):
        right.pipeInput(f"y{i}", f"k{i}", 1000 + i)
    assert sorted(k for k, _ in d.createOutputTopic("out", S, S).readKeyValuesToList()) == [f"k{i}" for i in range(10)]


def test_a_fixed_repartition_count_that_breaks_co_partitioning_is_refused():
    with pytest.raises(TopicsNotCopartitionedError, match=r"Number of partitions \[3\] of repartition topic"):
        TopologyTestDriver(_rekeyed_join(left_parts=3, rekey_right=False), {"application.id": "app"},
                           partitions={"left": 2, "right": 2})
    with pytest.raises(TopicsNotCopartitionedError, match=r"do not have the same number of partitions"):
        TopologyTestDriver(_rekeyed_join(left_parts=3, right_parts=5), {"application.id": "app"})
    d = TopologyTestDriver(_rekeyed_join(left_parts=3), {"application.id": "app"}, partitions={"left": 2, "right": 4})
    assert {d._interp.partitions(t) for t in _rekeyed_join(3).internal_topics("app") if "repartition" in t} == {3}


def test_join_argument_errors_say_what_to_do():
    with pytest.raises(TopologyError, match="no outer join"):
        TwoInputs(lambda b, s, t: s.outerJoin(t, show), "stream", "table")
    with pytest.raises(TopologyError, match="JoinWindows are for stream"):
        TwoInputs(lambda b, s, t: s.join(t, show, JoinWindows.ofTimeDifferenceWithNoGrace(1)), "stream", "table")
    with pytest.raises(TopologyError, match="takes 1 argument"):
        TwoInputs(lambda b, s, t: s.join(t, lambda x: x), "stream", "table")
    with pytest.raises(TopologyError, match="versioned table"):
        TwoInputs(lambda b, s, t: s.join(t, show, Joined.as_("j").withGracePeriod(5)), "stream", "table")


# ---------------------------------------------------------------------- versioned tables
def _versioned(grace=None, history="100 milliseconds"):
    b = StreamsBuilder()
    orders = b.stream("orders", Consumed.with_(S, S))
    prices = b.table("prices", Consumed.with_(S, S),
                     Materialized.as_(Stores.persistentVersionedKeyValueStore("prices", history)))
    joined = Joined.as_("enrich") if grace is None else Joined.as_("enrich").withGracePeriod(grace)
    orders.join(prices, show, joined).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "v"})
    return (d, d.createInputTopic("orders", S, S), d.createInputTopic("prices", S, S),
            d.createOutputTopic("out", S, S))


def test_stream_table_join_reads_a_versioned_table_as_of_the_record_time():
    d, orders, prices, out = _versioned()
    prices.pipeInput("EUR", "1.0", 100)
    prices.pipeInput("EUR", "2.0", 200)
    orders.pipeInput("EUR", "o150", 150)
    orders.pipeInput("EUR", "o250", 250)
    orders.pipeInput("EUR", "o50", 50)                # before any version
    assert out.readValuesToList() == ["o150 - 1.0", "o250 - 2.0"]
    assert d.getVersionedKeyValueStore("prices").get("EUR").value == "2.0"


def test_a_late_table_update_goes_into_history_and_older_than_history_is_dropped():
    d, orders, prices, out = _versioned()
    prices.pipeInput("EUR", "1.0", 100)
    prices.pipeInput("EUR", "3.0", 300)
    prices.pipeInput("EUR", "1.5", 250)               # late, within history: the present stays 3.0
    prices.pipeInput("EUR", "0.5", 150)               # older than 300 - 100: refused
    orders.pipeInput("EUR", "o260", 260)
    orders.pipeInput("EUR", "o160", 160)
    assert out.readValuesToList() == ["o260 - 1.5"]   # 160 is older than the history kept
    assert d.getVersionedKeyValueStore("prices").get("EUR").value == "3.0"


def test_a_keys_latest_version_never_expires_however_far_stream_time_moved():
    """RocksDBVersionedStore.get reads the latest version first: a key not updated for longer than
    the history is still found by a record older than the history (it was dropped before)."""
    d, orders, prices, out = _versioned(history="10 milliseconds")
    prices.pipeInput("EUR", "1.08", 5)
    prices.pipeInput("USD", "1.00", 100)              # stream time 100: history reaches back to 90
    orders.pipeInput("EUR", "o95", 95)
    orders.pipeInput("EUR", "o50", 50)                # older than the history, newer than EUR's latest
    orders.pipeInput("USD", "o60", 60)                # older than USD's only version: nothing
    assert out.readValuesToList() == ["o95 - 1.08", "o50 - 1.08"]


def test_join_grace_holds_stream_records_so_late_table_updates_count():
    d, orders, prices, out = _versioned(grace=20)
    prices.pipeInput("EUR", "1.0", 100)
    orders.pipeInput("EUR", "o110", 110)
    assert out.readValuesToList() == []               # waits until stream time passes 130
    prices.pipeInput("EUR", "1.1", 105)                # late but within the grace
    orders.pipeInput("EUR", "o131", 131)
    assert out.readValuesToList() == ["o110 - 1.1"]


def test_a_grace_longer_than_the_tables_history_is_refused():
    """KStreamKTableJoinTest.shouldFailIfGracePeriodIsLongerThanHistoryRetention: a record held
    longer than the history would find nothing when it leaves the buffer, and an inner join would
    drop it silently."""
    with pytest.raises(TopologyError, match="History retention must be at least grace period."):
        _versioned(grace=10, history="5 milliseconds")
    _versioned(grace=5, history="5 milliseconds")      # equal is allowed


def test_a_global_table_cannot_be_versioned():
    """InternalStreamsBuilder.globalTable: a GlobalKTable is looked up as of now; a versioned store
    given to it would be quietly read as a plain one."""
    b = StreamsBuilder()
    with pytest.raises(TopologyError, match="GlobalTables cannot be versioned."):
        b.globalTable("g", Consumed.with_(S, S), Materialized.as_(Stores.persistentVersionedKeyValueStore("gv", 1000)))


def test_out_of_order_versioned_updates_do_not_trigger_a_table_join():
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S),
                   Materialized.as_(Stores.persistentVersionedKeyValueStore("lv", 1000)))
    right = b.table("right", Consumed.with_(S, S))
    left.join(right, show).toStream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build())
    lt, rt, out = d.createInputTopic("left", S, S), d.createInputTopic("right", S, S), d.createOutputTopic("out", S, S)
    rt.pipeInput("k", "r", 1)
    lt.pipeInput("k", "new", 10)
    lt.pipeInput("k", "old", 5)
    assert out.readValuesToList() == ["new - r"]


# ---------------------------------------------------------------------- cogroup
def _cogroup(windows=None):
    b = StreamsBuilder()
    clicks = b.stream("clicks", Consumed.with_(S, S)).groupByKey()
    buys = b.stream("buys", Consumed.with_(S, S)).groupBy(lambda k, v: v, Grouped.with_(S, S))
    g = clicks.cogroup(lambda k, v, agg: agg + 1).cogroup(buys, lambda k, v, agg: agg + 100)
    if windows is not None:
        g = g.windowedBy(windows)
    table = g.aggregate(lambda: 0, Materialized.as_("totals").withValueSerde(L)) if not isinstance(
        windows, SessionWindows) else g.aggregate(lambda: 0, Materialized.as_("sessions").withRetention(100),
                                                  merger_=lambda k, a, c: a + c)
    stream = table.toStream()
    if windows is not None:
        stream = stream.selectKey(lambda k, v: f"{k.key}@{k.start}")
    stream.to("out", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": "co"}, partitions={"clicks": 2, "buys": 3})
    return d, d.createInputTopic("clicks", S, S), d.createInputTopic("buys", S, S), d.createOutputTopic("out", S, L)


def test_cogroup_aggregates_several_streams_into_one_table():
    d, clicks, buys, out = _cogroup()
    clicks.pipeInput("ann", "x", 1)
    buys.pipeInput("order-1", "ann", 2)              # re-keyed to ann through a repartition topic
    clicks.pipeInput("bob", "y", 3)
    clicks.pipeInput("ann", "z", 4)
    assert out.readKeyValuesToMap() == {"ann": 102, "bob": 1}
    assert d.getKeyValueStore("totals").get("ann") == 102
    text = str(d.topology.describe())
    assert "COGROUPKSTREAM-AGGREGATE-" in text and "COGROUPKSTREAM-MERGE-" in text


def test_windowed_cogroup_shares_one_window_store():
    d, clicks, buys, out = _cogroup(TimeWindows.ofSizeWithNoGrace(10))
    clicks.pipeInput("ann", "x", 1)
    buys.pipeInput("o1", "ann", 5)
    clicks.pipeInput("ann", "x", 12)
    assert out.readKeyValuesToMap() == {"ann@0": 101, "ann@10": 1}


def test_session_windowed_cogroup_merges_sessions():
    d, clicks, buys, out = _cogroup(SessionWindows.ofInactivityGapWithNoGrace(5))
    clicks.pipeInput("ann", "x", 1)
    clicks.pipeInput("ann", "x", 10)
    buys.pipeInput("o1", "ann", 5)                   # bridges both sessions into one
    # the merged-away session's tombstone stays in the map, as Kafka's readKeyValuesToMap keeps it
    assert out.readKeyValuesToMap() == {"ann@1": 102, "ann@10": None}
    assert [v for _, v in d.getSessionStore("sessions").all()] == [102]


def test_every_join_kind_builds_for_spark_and_one_global_table_per_sub_topology_is_enforced():
    from streams.app import StreamsApp
    from streams.global_table import GlobalTableSharedError
    config = {"application.id": "x", "bootstrap.servers": "127.0.0.1:1"}
    b = StreamsBuilder()
    b.stream("a", Consumed.with_(S, S)).join(b.table("b", Consumed.with_(S, S)), show).to("o", Produced.with_(S, S))
    assert isinstance(b.build(object(), config), StreamsApp)
    b = StreamsBuilder()
    g = b.globalTable("g", Consumed.with_(S, S))
    for t in ("a", "b"):      # two unconnected streams: two sub-topologies, each with a copy of the store
        b.stream(t, Consumed.with_(S, S)).join(g, lambda k, v: v, show).to(f"o{t}", Produced.with_(S, S))
    with pytest.raises(GlobalTableSharedError, match="sub-topologies \\[1, 2\\]") as e:
        b.build(object(), config)
    assert e.value.code == 1260


def test_a_join_result_joins_again_without_a_store_of_its_own():
    b = StreamsBuilder()
    users, balances, tiers = (b.table(t, Consumed.with_(S, S)) for t in ("users", "balances", "tiers"))
    users.join(balances, show).mapValues(lambda v: v.upper()).leftJoin(tiers, show).toStream() \
        .to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build())
    u, bal, tier = (d.createInputTopic(t, S, S) for t in ("users", "balances", "tiers"))
    out = d.createOutputTopic("out", S, S)
    u.pipeInput("k", "ann", 1)
    bal.pipeInput("k", "10", 2)
    tier.pipeInput("k", "gold", 3)                   # the third table reads the first join through its getter
    assert out.readValuesToList() == ["ANN - 10 - null", "ANN - 10 - gold"]


def test_global_store_is_queryable_once_across_tasks():
    b = StreamsBuilder()
    g = b.globalTable("regions", Consumed.with_(S, S), Materialized.as_("regions-store"))
    b.stream("orders", Consumed.with_(S, S)).join(g, lambda k, v: v, show).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), partitions={"orders": 3, "regions": 2})
    d.createInputTopic("regions", S, S).pipeInput("EU", "euro", 1)
    d.createInputTopic("orders", S, S).pipeKeyValueList([(f"o{i}", "EU") for i in range(6)], 2)
    assert d.createOutputTopic("out", S, S).readValuesToList() == ["EU - euro"] * 6
    assert d.getKeyValueStore("regions-store").all() == [("EU", "euro")]
    assert g.queryableStoreName() == "regions-store"


def test_a_versioned_store_elsewhere_than_a_source_table_is_refused():
    b = StreamsBuilder()
    with pytest.raises(TopologyError, match="versioned store"):
        b.stream("a", Consumed.with_(S, S)).toTable(
            materialized=Materialized.as_(Stores.persistentVersionedKeyValueStore("v", 10)))
