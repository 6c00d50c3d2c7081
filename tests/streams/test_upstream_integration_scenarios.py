"""Scenarios of Kafka Streams' integration tests (FineGrainedAutoResetIntegrationTest,
SuppressionIntegrationTest, KStreamAggregationIntegrationTest, SlidingWindowedKStreamIntegrationTest)
ported to what runs without a broker: the application's config and the reference interpreter."""
from __future__ import annotations

import logging

import pytest

from broker.errors import InvalidConfigError
from streams.app import StreamsApp
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Grouped, Produced
from streams.serdes import Serdes

pytestmark = pytest.mark.unit

S = Serdes.String()
APP = {"application.id": "app", "bootstrap.servers": "127.0.0.1:1"}


def _fine_grained(config: dict) -> StreamsApp:
    """FineGrainedAutoResetIntegrationTest's topology: one source reads from the earliest offset,
    one from the latest, one follows the application's reset policy."""
    b = StreamsBuilder()
    b.stream("topic-1", Consumed.with_(S, S).withOffsetResetPolicy("earliest")).to("out", Produced.with_(S, S))
    b.stream("topic-A", Consumed.with_(S, S).withOffsetResetPolicy("latest")).to("out", Produced.with_(S, S))
    b.stream(["topic-Y", "topic-Z"], Consumed.with_(S, S)).to("out", Produced.with_(S, S))
    return StreamsApp(b.build(), None, {**APP, **config})


EARLIEST, LATEST = -2, -1


@pytest.mark.parametrize("config, default", [
    ({}, EARLIEST),                                                   # Streams' own default
    ({"auto.offset.reset": "latest"}, LATEST),
    ({"consumer.auto.offset.reset": "latest"}, LATEST),               # StreamsConfig.consumerPrefix
    ({"main.consumer.auto.offset.reset": "latest"}, LATEST),
    ({"auto.offset.reset": "latest", "consumer.auto.offset.reset": "earliest"}, EARLIEST),
    ({"consumer.auto.offset.reset": "earliest", "main.consumer.auto.offset.reset": "latest"}, LATEST),
], ids=["default", "plain", "consumer-prefix", "main-consumer-prefix", "prefix-over-plain", "main-over-consumer"])
def test_the_main_consumers_reset_policy_is_taken_with_kafkas_client_prefixes(config, default, caplog):
    """FineGrainedAutoResetIntegrationTest.shouldOnlyReadRecordsWhereEarliestSpecifiedWithNoCommitted
    OffsetsWithGlobalAutoOffsetResetLatest sets ``consumerPrefix(auto.offset.reset)=latest``: Kafka's
    ``getMainConsumerConfigs`` applies it (``main.consumer.`` over ``consumer.`` over the plain key),
    so the sources without their own policy start at the end, those with one keep it."""
    with caplog.at_level(logging.WARNING, logger="streams"):
        app = _fine_grained(config)
    assert (app._reset("topic-1"), app._reset("topic-A"), app._reset("topic-Y"), app._reset("topic-Z")) == (
        EARLIEST, LATEST, default, default)
    assert not any("auto.offset.reset" in r.getMessage() for r in caplog.records), "applied, not ignored"


def test_a_repartition_topic_without_a_committed_offset_is_read_from_its_beginning_whatever_the_policy():
    """The application writes its repartition topic for itself: under ``latest`` the query reading
    it would skip what the writing query produced before the reader's first batch (each
    sub-topology is its own query, started one after the other). The input follows the policy."""
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).groupBy(lambda k, v: v, Grouped.with_(S, S)).count()
    app = StreamsApp(b.build(), None, {**APP, "auto.offset.reset": "latest"})
    [repartition] = [t for t, kind in app.topology.internal_topics("app").items() if kind == "repartition"]
    assert (app._reset("in"), app._reset(repartition)) == (LATEST, EARLIEST)


@pytest.mark.parametrize("key", ["auto.offset.reset", "consumer.auto.offset.reset", "main.consumer.auto.offset.reset"])
def test_a_reset_policy_riverlog_does_not_have_is_refused_naming_its_key(key):
    with pytest.raises(InvalidConfigError) as e:
        _fine_grained({key: "smallest"})
    assert key in str(e.value)



# ---------------------------------------------------------------- RangeQueryIntegrationTest, prefixScan
def _table(key_serde, keys):
    from streams.parameters import Materialized
    from streams.testing import TopologyTestDriver
    b = StreamsBuilder()
    b.table("in", Consumed.with_(key_serde, S), Materialized.as_("mytable"))
    d = TopologyTestDriver(b.build(), {"application.id": "range"})
    topic = d.createInputTopic("in", key_serde, S)
    for k in keys:
        topic.pipeInput(k, f"val-{k}", 0)
    return d.getKeyValueStore("mytable")


KEYS = [f"key-{2 * i}" for i in range(5)]


@pytest.mark.parametrize("forward", [True, False])
def test_range_and_all_as_range_query_integration_test_reads_them(forward):
    """RangeQueryIntegrationTest.testStoreConfig: ``range(null, null)`` and ``all()`` in key order
    (``reverseRange``/``reverseAll`` reversed), and each range is ``all()`` filtered by its
    inclusive bounds, a bound between two keys included."""
    store = _table(S, KEYS)
    rows = [(k, f"val-{k}") for k in KEYS]
    expected = rows if forward else rows[::-1]
    scan = store.range if forward else store.reverseRange
    assert scan(None, None) == expected
    assert (store.all() if forward else store.reverseAll()) == expected
    for lo, hi in [("key-2", "key-6"), (None, "key-4"), ("key-4", None), (None, "key-7"), ("key-1", None)]:
        assert scan(lo, hi) == [(k, v) for k, v in expected if (lo is None or k >= lo) and (hi is None or k <= hi)]
    assert scan("key-7", "key-1") == []


def test_prefix_scan_reads_the_keys_whose_bytes_start_with_the_prefixs():
    """ReadOnlyKeyValueStore.prefixScan (KIP-614): the keys whose serialized bytes start with the
    prefix serialized by the given serializer, in byte order. Its javadoc's examples: String keys
    [1, 11, 13, 2] give [1, 11, 13] for the prefix "1"; Integer keys give [1] alone."""
    strings = _table(S, ["2", "13", "1", "11"])
    assert strings.prefixScan("1", Serdes.String()) == [("1", "val-1"), ("11", "val-11"), ("13", "val-13")]
    assert strings.prefixScan("", Serdes.String()) == strings.all()
    assert strings.prefixScan("3", Serdes.String()) == []
    integers = _table(Serdes.Integer(), [2, 13, 1, 11])
    assert integers.prefixScan(1, Serdes.Integer()) == [(1, "val-1")]
    # a prefix of the Integer's first two bytes: every non-negative key below 65536
    assert integers.prefixScan(b"\x00\x00", Serdes.ByteArray()) == [(1, "val-1"), (2, "val-2"), (11, "val-11"),
                                                                     (13, "val-13")]


def test_prefix_scan_refuses_a_null_prefix_or_serializer():
    """MeteredKeyValueStore.prefixScan: NullPointerException("prefix cannot be null") and
    ("prefixKeySerializer cannot be null")."""
    store = _table(S, KEYS)
    with pytest.raises(ValueError, match="prefix cannot be null"):
        store.prefixScan(None, Serdes.String())
    with pytest.raises(ValueError, match="prefixKeySerializer cannot be null"):
        store.prefixScan("key", None)


# ---------------------------------------------------------------- KStreamAggregationIntegrationTest
DAY = 86_400_000


def _unlimited(start, records, emit=None, cogrouped=False):
    from streams import EmitStrategy
    from streams.parameters import Grouped, Materialized
    from streams.testing import TopologyTestDriver
    from streams.unlimited_windows import UnlimitedWindows
    b = StreamsBuilder()
    grouped = b.stream("sessions", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S))
    windows = UnlimitedWindows.of().startOn(start)
    if cogrouped:
        table = grouped.cogroup(lambda k, v, agg: agg + 1).windowedBy(windows).aggregate(
            lambda: 0, Materialized.as_("counts").withValueSerde(Serdes.Long()))
    else:
        windowed = grouped.windowedBy(windows)
        table = (windowed if emit is None else windowed.emitStrategy(emit)).count(Materialized.as_("counts"))
    table.toStream().map(lambda w, c: (f"{w.key}@{w.start}/{w.end}", c)).to("out", Produced.with_(S, Serdes.Long()))
    with TopologyTestDriver(b.build(), {"application.id": "unlimited"}) as d:
        topic = d.createInputTopic("sessions", S, S)
        for key, value, ts in records:
            topic.pipeInput(key, value, ts)
        out = [(r.key, r.value, r.timestamp) for r in d.createOutputTopic("out", S, Serdes.Long()).readRecordsToList()]
        return out, [(w.key, w.start, w.end, c) for w, c in d.getWindowStore("counts").all()]


@pytest.mark.parametrize("cogrouped", [False, True], ids=["count", "cogroup"])
def test_unlimited_windows_count_every_record_from_the_start_on(cogrouped):
    """shouldCountUnlimitedWindows: one window per key, ``[start, Long.MAX_VALUE]``, counting
    every record from ``startOn``; a record before the start is in no window. Nothing is late:
    the window never closes."""
    t1 = 3_600_000
    start = t1 + 1                              # t1's records are before the window
    records = [("bob", "start", t1), ("penny", "start", t1), ("jo", "pause", t1), ("emily", "pause", t1),
               ("emily", "resume", t1 + DAY), ("bob", "pause", t1 + 2 * DAY), ("penny", "stop", t1 + 2 * DAY),
               ("bob", "resume", t1 + 3 * DAY), ("jo", "resume", t1 + 3 * DAY), ("jo", "late", 1 + start)]
    out, store = _unlimited(start, records, cogrouped=cogrouped)
    end = 2 ** 63 - 1
    assert out == [(f"emily@{start}/{end}", 1, t1 + DAY), (f"bob@{start}/{end}", 1, t1 + 2 * DAY),
                   (f"penny@{start}/{end}", 1, t1 + 2 * DAY), (f"bob@{start}/{end}", 2, t1 + 3 * DAY),
                   (f"jo@{start}/{end}", 1, t1 + 3 * DAY), (f"jo@{start}/{end}", 2, t1 + 3 * DAY)]
    assert store == [("bob", start, end, 2), ("emily", start, end, 1), ("jo", start, end, 2), ("penny", start, end, 1)]


def test_unlimited_windows_refuse_what_kafka_refuses():
    """``UnlimitedWindows.startOn`` a negative time, and ``ON_WINDOW_CLOSE`` over windows that never
    close (TimeWindowedKStreamImpl: "ON_WINDOW_CLOSE emit strategy cannot be used for UnlimitedWindows")."""
    from streams import EmitStrategy
    from streams.errors import TopologyError
    from streams.unlimited_windows import UnlimitedWindows
    with pytest.raises(TopologyError, match=r"Window start time \(startMs\) cannot be negative."):
        UnlimitedWindows.of().startOn(-1)
    with pytest.raises(TopologyError, match="ON_WINDOW_CLOSE emit strategy cannot be used for UnlimitedWindows"):
        _unlimited(0, [], emit=EmitStrategy.onWindowClose())
    assert UnlimitedWindows.of().windowsFor(0) == {0: 2 ** 63 - 1} and UnlimitedWindows.of().size() == 2 ** 63 - 1
