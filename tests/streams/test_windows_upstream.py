"""Scenarios of Kafka's KStreamWindowAggregateTest, KStreamSlidingWindowAggregateTest and
KStreamSessionWindowAggregateProcessorTest not ported elsewhere, through ``TopologyTestDriver``:
outputs in order with window bounds and timestamps, with both emit strategies, and the warning
Kafka logs for each record it skips."""
from __future__ import annotations

import logging

import pytest

from streams import (EmitStrategy, Grouped, Materialized, Produced, SessionWindows, SlidingWindows,
                     StreamsBuilder, TimeWindows)
from streams.abstract_window_aggregate import ON_WINDOW_CLOSE, ON_WINDOW_UPDATE
from streams.parameters import Consumed
from streams.record import Record
from streams.serdes import Serdes
from streams.session_window_aggregate import SessionWindowAggregate
from streams.testing import TopologyTestDriver
from streams.window_aggregate import count_functions
from tests.streams._windowing import Run, flat

pytestmark = pytest.mark.unit

S = Serdes.String()
EMITS = {"update": EmitStrategy.onWindowUpdate(), "close": EmitStrategy.onWindowClose()}


def plus(key, value, agg):
    return agg + "+" + value


def run(windowed, records, aggregate=None, emit="update", store="topic1-Canonicalized", retention=None):
    """``windowed(grouped)`` windows the grouped stream of topic ``topic``; pipe ``(key, value, ts)``
    and return the output as ("[key@start/end]", value, ts) in order."""
    b = StreamsBuilder()
    w = windowed(b.stream("topic", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S))).emitStrategy(EMITS[emit])
    m = Materialized.as_(store).withValueSerde(S)
    if retention is not None:
        m = m.withRetention(retention)
    table = (aggregate or (lambda w, m: w.aggregate(lambda: "", plus, materialized=m)))(w, m)
    table.toStream().map(lambda k, v: (f"[{k.key}@{k.start}/{k.end}]", v)).to("output", Produced.with_(S, S))
    with TopologyTestDriver(b.build(), {"application.id": "windows"}) as d:
        i = d.createInputTopic("topic", S, S)
        for k, v, ts in records:
            i.pipeInput(k, v, ts)
        return [(r.key, r.value, r.timestamp) for r in d.createOutputTopic("output", S, S).readRecordsToList()]


def skipped(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Skipping record")]


# ---------------------------------------------------------------- KStreamWindowAggregateTest
AGG_BASIC = [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 4),
             ("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9),
             ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
             ("B", "1", 3), ("B", "2", 2), ("B", "3", 9)]


@pytest.mark.parametrize("emit", ["update", "close"])
def test_agg_basic_hopping_windows_with_grace(emit):
    # testAggBasic: size 10, advance 5, grace 100: each record lands in every window containing it;
    # the out-of-order B records update [0, 10) (and [5, 15)) keeping the window's largest timestamp.
    out = run(lambda g: g.windowedBy(TimeWindows.ofSizeAndGrace(10, 100).advanceBy(5)), AGG_BASIC,
              aggregate=lambda w, m: w.aggregate(lambda: "0", plus, materialized=m), emit=emit)
    if emit == "close":
        assert out == []                       # grace 100: no window closes
        return
    assert out == [
        ("[A@0/10]", "0+1", 0), ("[B@0/10]", "0+2", 1), ("[C@0/10]", "0+3", 2), ("[D@0/10]", "0+4", 3),
        ("[A@0/10]", "0+1+1", 4),
        ("[A@0/10]", "0+1+1+1", 5), ("[A@5/15]", "0+1", 5), ("[B@0/10]", "0+2+2", 6), ("[B@5/15]", "0+2", 6),
        ("[D@0/10]", "0+4+4", 7), ("[D@5/15]", "0+4", 7), ("[B@0/10]", "0+2+2+2", 8), ("[B@5/15]", "0+2+2", 8),
        ("[C@0/10]", "0+3+3", 9), ("[C@5/15]", "0+3", 9),
        ("[A@5/15]", "0+1+1", 10), ("[A@10/20]", "0+1", 10), ("[B@5/15]", "0+2+2+2", 11),
        ("[B@10/20]", "0+2", 11), ("[D@5/15]", "0+4+4", 12), ("[D@10/20]", "0+4", 12),
        ("[B@5/15]", "0+2+2+2+2", 13), ("[B@10/20]", "0+2+2", 13), ("[C@5/15]", "0+3+3", 14),
        ("[C@10/20]", "0+3", 14),
        ("[B@0/10]", "0+2+2+2+1", 8), ("[B@0/10]", "0+2+2+2+1+2", 8), ("[B@0/10]", "0+2+2+2+1+2+3", 9),
        ("[B@5/15]", "0+2+2+2+2+3", 13)]


EXPIRED = [("k", "100", 100), ("k", "0", 0), ("k", "1", 1), ("k", "2", 2), ("k", "3", 3), ("k", "4", 4),
           ("k", "5", 5), ("k", "6", 6), ("k", "105", 105), ("k", "106", 106)]


@pytest.mark.parametrize("emit", ["update", "close"])
def test_records_of_expired_windows_are_skipped_with_kafkas_warning(emit, caplog):
    # shouldLogAndMeterWhenSkippingExpiredWindow: size 10, advance 5, grace 90, retention 100.
    caplog.set_level(logging.WARNING)
    out = run(lambda g: g.windowedBy(TimeWindows.ofSizeAndGrace(10, 90).advanceBy(5)), EXPIRED, emit=emit,
              retention=100)
    assert skipped(caplog) == [
        f"Skipping record for expired window. topic=[topic] partition=[0] offset=[{n}] timestamp=[{n - 1}] "
        "window=[0,10) expiration=[10] streamTime=[100]" for n in range(1, 8)]
    if emit == "close":                        # stream time 105 closes [5, 15)
        assert out == [("[k@5/15]", "+5+6", 6)]
    else:
        assert out == [("[k@95/105]", "+100", 100), ("[k@100/110]", "+100", 100), ("[k@5/15]", "+5", 5),
                       ("[k@5/15]", "+5+6", 6), ("[k@100/110]", "+100+105", 105), ("[k@105/115]", "+105", 105),
                       ("[k@100/110]", "+100+105+106", 106), ("[k@105/115]", "+105+106", 106)]


def test_records_of_windows_expired_by_grace_are_skipped_with_kafkas_warning(caplog):
    # shouldLogAndMeterWhenSkippingExpiredWindowByGrace: tumbling 10, grace 90, stream time 200.
    caplog.set_level(logging.WARNING)
    records = [("k", "100", 200)] + [("k", str(n), 100 + n) for n in range(6)] + [("k", "6", 6)]
    out = run(lambda g: g.windowedBy(TimeWindows.ofSizeAndGrace(10, 90).advanceBy(10)), records)
    assert skipped(caplog) == [
        f"Skipping record for expired window. topic=[topic] partition=[0] offset=[{n}] timestamp=[{99 + n}] "
        "window=[100,110) expiration=[110] streamTime=[200]" for n in range(1, 7)] + [
        "Skipping record for expired window. topic=[topic] partition=[0] offset=[7] timestamp=[6] "
        "window=[0,10) expiration=[110] streamTime=[200]"]
    assert out == [("[k@200/210]", "+100", 200)]


def test_a_null_key_is_skipped_with_kafkas_warning(caplog):
    # shouldLogAndMeterWhenSkippingNullKey
    caplog.set_level(logging.WARNING)
    assert run(lambda g: g.windowedBy(TimeWindows.ofSizeAndGrace(10, 100).advanceBy(5)), [(None, "1", 0)]) == []
    assert skipped(caplog) == ["Skipping record due to null key. topic=[topic] partition=[0] offset=[0]"]


# ---------------------------------------------------------------- KStreamSlidingWindowAggregateTest
@pytest.mark.parametrize("emit", ["update", "close"])
def test_sliding_records_of_expired_windows_are_skipped_with_kafkas_warning(emit, caplog):
    # shouldLogAndMeterWhenSkippingExpiredWindowByGrace (sliding): difference 10, grace 90. A record
    # whose own right window could still be open is read, and its left window is what is skipped.
    caplog.set_level(logging.WARNING)
    records = [("k", "100", 200), ("k", "0", 100), ("k", "1", 101), ("k", "2", 102), ("k", "3", 103),
               ("k", "4", 104), ("k", "5", 105), ("k", "6", 15), ("k", "101", 300), ("k", "102", 400)]
    out = run(lambda g: g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(10, 90)), records, emit=emit,
              aggregate=lambda w, m: w.aggregate(lambda: "0", plus, materialized=m))
    assert skipped(caplog) == [
        f"Skipping record for expired window. topic=[topic] partition=[0] offset=[{n}] timestamp=[{ts}] "
        f"window=[{start},{start + 10}] expiration=[110] streamTime=[200]"
        for n, ts, start in [(1, 100, 90), (2, 101, 91), (3, 102, 92), (4, 103, 93), (5, 104, 94),
                             (6, 105, 95), (7, 15, 15)]]
    expected = [("[k@190/200]", "0+100", 200), ("[k@290/300]", "0+101", 300), ("[k@390/400]", "0+102", 400)]
    assert out == (expected[:2] if emit == "close" else expected)


def test_sliding_null_value_is_skipped_with_kafkas_warning(caplog):
    caplog.set_level(logging.WARNING)
    assert run(lambda g: g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(10, 90)), [("k", None, 5)]) == []
    assert skipped(caplog) == ["Skipping record due to null key or value. topic=[topic] partition=[0] offset=[0]"]


# ---------------------------------------------------------------- KStreamSessionWindowAggregateProcessorTest
def test_session_record_of_an_expired_session_is_skipped_with_kafkas_warning(caplog):
    # shouldLogAndMeterWhenSkippingLateRecordWithNonzeroGrace: gap 10, grace 1 -> close = stream time - 11.
    caplog.set_level(logging.WARNING)
    records = [("dummy", "dummy", 0), ("OnTime1", "1", 0), ("dummy", "dummy", 11), ("OnTime2", "1", 0),
               ("dummy", "dummy", 12), ("Late1", "1", 0)]
    out = run(lambda g: g.windowedBy(SessionWindows.ofInactivityGapAndGrace(10, 1)), records,
              aggregate=lambda w, m: w.aggregate(lambda: "", plus, lambda k, a, b: a + b, materialized=m))
    assert skipped(caplog) == [
        "Skipping record for expired window. topic=[topic] partition=[0] offset=[5] timestamp=[0] "
        "window=[0,0] expiration=[1] streamTime=[12]"]
    assert out == [("[dummy@0/0]", "+dummy", 0), ("[OnTime1@0/0]", "+1", 0), ("[dummy@11/11]", "+dummy", 11),
                   ("[OnTime2@0/0]", "+1", 0), ("[dummy@11/11]", None, 11), ("[dummy@11/12]", "+dummy+dummy", 12)]


def test_session_null_key_is_skipped_with_kafkas_warning(caplog):
    caplog.set_level(logging.WARNING)
    out = run(lambda g: g.windowedBy(SessionWindows.ofInactivityGapAndGrace(10, 1)), [(None, "1", 0)],
              aggregate=lambda w, m: w.aggregate(lambda: "", plus, lambda k, a, b: a + b, materialized=m))
    assert out == []
    assert skipped(caplog) == ["Skipping record due to null key. topic=[topic] partition=[0] offset=[0]"]


# ---------------------------------------------------------------- TimeWindowedKStreamImplTest
PROCESS_DATA = [("1", "1", 10), ("1", "2", 15), ("1", "3", 500), ("2", "10", 550), ("2", "20", 500),
                ("2", "30", 1000)]
TUMBLING_500 = (lambda g: g.windowedBy(TimeWindows.ofSizeWithNoGrace(500)))
L = Serdes.Long()


def _count(w, m):
    return w.count(materialized=Materialized.as_("count-store").withKeySerde(S).withValueSerde(L)) \
        .mapValues(lambda v: str(v))


@pytest.mark.parametrize("emit", ["update", "close"])
@pytest.mark.parametrize("operation, values", [
    (_count, ["1", "2", "1", "1", "2", "1"]),
    (lambda w, m: w.reduce(lambda a, b: a + "+" + b, materialized=m), ["1", "1+2", "3", "10", "10+20", "30"]),
    (lambda w, m: w.aggregate(lambda: "0", plus, materialized=m),
     ["0+1", "0+1+2", "0+3", "0+10", "0+10+20", "0+30"]),
], ids=["count", "reduce", "aggregate"])
def test_time_windowed_count_reduce_aggregate(operation, values, emit):
    out = run(TUMBLING_500, PROCESS_DATA, aggregate=operation, emit=emit)
    windows = [("[1@0/500]", 10), ("[1@0/500]", 15), ("[1@500/1000]", 500), ("[2@500/1000]", 550),
               ("[2@500/1000]", 550), ("[2@1000/1500]", 1000)]
    every = [(w, v, ts) for (w, ts), v in zip(windows, values)]
    # on close: [0, 500) at stream time 500, then both keys' [500, 1000) at 1000, by key
    assert out == (every if emit == "update" else [every[1], every[2], every[4]])


@pytest.mark.parametrize("emit", ["update", "close"])
def test_time_windowed_count_store_view(emit):
    # shouldMaterializeCount (without cache): retention size + grace = 500; on update the store
    # keeps windows starting after stream time - retention, on close from stream time - retention.
    b = StreamsBuilder()
    TUMBLING_500(b.stream("input", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S))).emitStrategy(
        EMITS[emit]).count(materialized=Materialized.as_("count-store").withKeySerde(S).withValueSerde(L)
                           .withCachingDisabled())
    with TopologyTestDriver(b.build(), {"application.id": "windows"}) as d:
        i = d.createInputTopic("input", S, S)
        for k, v, ts in PROCESS_DATA:
            i.pipeInput(k, v, ts)
        data = [((w.key, w.start, w.end), v) for w, v in d.getWindowStore("count-store").fetch("1", "2", 0, 1000)]
        stamped = [((w.key, w.start), v) for w, v in d.getTimestampedWindowStore("count-store").fetch("1", "2", 0, 1000)]
    if emit == "update":
        assert data == [(("2", 1000, 1500), 1)]
        assert [(k, tuple(v)) for k, v in stamped] == [(("2", 1000), (1, 1000))]
    else:
        assert data == [(("1", 500, 1000), 1), (("2", 500, 1000), 2), (("2", 1000, 1500), 1)]
        assert [(k, tuple(v)) for k, v in stamped] == [(("1", 500), (1, 500)), (("2", 500), (2, 550)),
                                                       (("2", 1000), (1, 1000))]


# ---------------------------------------------------------------- SessionWindowedKStreamImplTest
SESSION_DATA = [("1", "1", 10), ("1", "2", 15), ("1", "3", 600), ("2", "1", 600), ("2", "2", 599)]
SESSION_500 = (lambda g: g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(500)))


@pytest.mark.parametrize("emit", ["update", "close"])
@pytest.mark.parametrize("operation, values", [
    (_count, ["1", None, "2", "1", "1", None, "2"]),
    (lambda w, m: w.reduce(lambda a, b: a + "+" + b, materialized=m), ["1", None, "1+2", "3", "1", None, "1+2"]),
    (lambda w, m: w.aggregate(lambda: "0", plus, lambda k, a, b: a + "+" + b, materialized=m),
     ["0+1", None, "0+0+1+2", "0+3", "0+1", None, "0+0+1+2"]),
], ids=["count", "reduce", "aggregate"])
def test_session_windowed_count_reduce_aggregate(operation, values, emit):
    out = run(SESSION_500, SESSION_DATA, aggregate=operation, emit=emit)
    windows = [("[1@10/10]", 10), ("[1@10/10]", 10), ("[1@10/15]", 15), ("[1@600/600]", 600), ("[2@600/600]", 600),
               ("[2@600/600]", 600), ("[2@599/600]", 600)]
    every = [(w, v, ts) for (w, ts), v in zip(windows, values)]
    assert out == (every if emit == "update" else [every[2]])


@pytest.mark.parametrize("emit", ["update", "close"])
def test_session_windowed_count_store_view(emit):
    # shouldMaterializeCount without a cache: stream time 600, retention gap + grace = 500, so
    # [10, 15] is out of the store's view (on close: once emitted, in the same record's step).
    b = StreamsBuilder()
    SESSION_500(b.stream("input", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S))).emitStrategy(
        EMITS[emit]).count(materialized=Materialized.as_("count-store").withCachingDisabled())
    with TopologyTestDriver(b.build(), {"application.id": "windows"}) as d:
        i = d.createInputTopic("input", S, S)
        for k, v, ts in SESSION_DATA:
            i.pipeInput(k, v, ts)
        data = [((w.key, w.start, w.end), v) for w, v in d.getSessionStore("count-store").fetch("1", "2")]
        one = [((w.key, w.start, w.end), v) for w, v in d.getSessionStore("count-store").fetch("1")]
    assert data == [(("1", 600, 600), 1), (("2", 599, 600), 2)]
    assert one == [(("1", 600, 600), 1)]


# ---------------------------------------------------------------- KStreamSessionWindowAggregateProcessorTest
GAP = 50


def _session_run(emit, cached=True):
    c = count_functions()
    agg = SessionWindowAggregate("s", SessionWindows.ofInactivityGapWithNoGrace(GAP), c.initializer, c.aggregator,
                                 c.merger, ON_WINDOW_CLOSE if emit == "close" else ON_WINDOW_UPDATE)
    r = Run(agg)
    if cached and emit == "update":        # Kafka caches no emit-on-close store
        r.task.use_cache(10_000_000)
    return r


def _flushed(r):
    r.task.commit()
    return [(k, s, e, new, old, ts) for k, s, e, new, old, ts in map(flat, r.collect.records)]


@pytest.mark.parametrize("emit", ["update", "close"])
def test_session_several_keys_merging_through_the_cache(emit):
    # shouldHandleMultipleSessionsAndMerging (cached store, one flush): each session's latest value,
    # in the order of their last writes; a session merged away in between is never forwarded.
    r = _session_run(emit)
    for key, ts in [("a", 0), ("b", 0), ("c", 0), ("d", 0), ("d", GAP // 2), ("a", GAP + 1), ("b", GAP + 1),
                    ("a", GAP + 1 + GAP // 2), ("c", GAP + 1 + GAP // 2)]:
        r.head.process(Record(key, "1", ts))
    closed = [("a", 0, 0, 1, None, 0), ("b", 0, 0, 1, None, 0), ("c", 0, 0, 1, None, 0),
              ("d", 0, 25, 2, None, 25)]
    later = [("b", 51, 51, 1, None, 51), ("a", 51, 76, 2, None, 76), ("c", 76, 76, 1, None, 76)]
    assert _flushed(r) == (closed + later if emit == "update" else closed)


@pytest.mark.parametrize("emit", ["update", "close"])
def test_session_same_timestamp_and_sessions_a_gap_apart(emit):
    # shouldHaveMultipleSessionsForSameIdWhenTimestampApartBySessionGap and shouldUpdateSessionIfTheSameTime
    r = _session_run(emit)
    for value, ts in [("first", 0), ("second", GAP + 1), ("second", GAP + 1), ("third", 2 * GAP + 2),
                      ("third", 2 * GAP + 2), ("third", 2 * GAP + 2)]:
        r.head.process(Record("mel", value, ts))
    out = [("mel", 0, 0, 1, None, 0), ("mel", 51, 51, 2, None, 51), ("mel", 102, 102, 3, None, 102)]
    assert _flushed(r) == (out if emit == "update" else out[:2])
    assert [(w.start, w.end, v) for w, v in r.task.store("s").find_sessions("mel", 102, 102)] == [(102, 102, 3)]


# ---------------------------------------------------------------- KStreamWindowAggregateTest, emit final
def _hopping_run(emit, backings=None):
    from streams.window_aggregate import TimeWindowAggregate
    windows = TimeWindows.ofSizeAndGrace(10, 5).advanceBy(5)
    agg = TimeWindowAggregate("w", windows, lambda: "0", plus, ON_WINDOW_CLOSE if emit == "close" else ON_WINDOW_UPDATE)
    spec = agg.store_spec(86_400_000)          # the upstream test's store keeps a day
    agg.store_spec = lambda retention=None: spec
    return Run(agg, backings=backings)


def _send_all(r, records):
    return [out for key, value, ts in records for out in r.send(key, value, ts)]


@pytest.mark.parametrize("emit", ["update", "close"])
def test_emit_with_interval_0_several_windows_close_at_once(emit):
    # shouldEmitWithInterval0: size 10, advance 5, grace 5; D@20 closes [0,10) and [5,15) of A and
    # B at once, by window start, then key.
    out = _send_all(_hopping_run(emit), [("A", "1", 0), ("A", "1", 5), ("B", "2", 10), ("C", "3", 15),
                                         ("D", "4", 20)])
    if emit == "close":
        assert out == [("A", 0, 10, "0+1+1", None, 5), ("A", 5, 15, "0+1", None, 5), ("B", 5, 15, "0+2", None, 10)]
    else:
        assert [(k, s, e, new, ts) for k, s, e, new, _, ts in out] == [
            ("A", 0, 10, "0+1", 0), ("A", 0, 10, "0+1+1", 5), ("A", 5, 15, "0+1", 5), ("B", 5, 15, "0+2", 10),
            ("B", 10, 20, "0+2", 10), ("C", 10, 20, "0+3", 15), ("C", 15, 25, "0+3", 15), ("D", 15, 25, "0+4", 20),
            ("D", 20, 30, "0+4", 20)]


@pytest.mark.parametrize("emit", ["update", "close"])
def test_emit_from_the_last_emit_time_after_a_restart(emit):
    # shouldEmitFromLastEmitTime: a new processor over the same store and metadata emits only the
    # windows closed since the last emission.
    backings = {}
    out = _send_all(_hopping_run(emit, backings), [("A", "1", 0), ("B", "2", 5), ("C", "3", 15)])
    if emit == "close":
        assert out == [("A", 0, 10, "0+1", None, 0), ("B", 0, 10, "0+2", None, 5)]
    else:
        assert [(k, s, e, new, ts) for k, s, e, new, _, ts in out] == [
            ("A", 0, 10, "0+1", 0), ("B", 0, 10, "0+2", 5), ("B", 5, 15, "0+2", 5), ("C", 10, 20, "0+3", 15),
            ("C", 15, 25, "0+3", 15)]
    out = _hopping_run(emit, backings).send("D", "4", 25)
    if emit == "close":
        assert out == [("B", 5, 15, "0+2", None, 5), ("C", 10, 20, "0+3", None, 15)]
    else:
        assert [(k, s, e, new, ts) for k, s, e, new, _, ts in out] == [("D", 20, 30, "0+4", 25),
                                                                       ("D", 25, 35, "0+4", 25)]


# ---------------------------------------------------------------- KGroupedStreamImplTest.doCountSlidingWindows
def test_count_sliding_windows_out_of_order_and_same_timestamp_records():
    # Out-of-order records create their right windows from the later records already seen; a
    # second record at one timestamp updates the same left and right windows. Sorted by key, then
    # start (stably), as the upstream test compares them.
    records = [("1", "A", 500), ("1", "A", 999), ("1", "A", 600), ("2", "B", 500), ("2", "B", 600), ("2", "B", 700),
               ("3", "C", 501), ("1", "A", 1000), ("1", "A", 1000), ("2", "B", 1000), ("2", "B", 1000),
               ("3", "C", 600)]
    out = run(lambda g: g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(500, 2000)), records, aggregate=_count)
    parsed = [(w[1:-1].split("@")[0], int(w.split("@")[1].split("/")[0]), int(w.split("/")[1][:-1]), int(v), ts)
              for w, v, ts in out]
    assert sorted(parsed, key=lambda e: (e[0], e[1])) == [
        ("1", 0, 500, 1, 500), ("1", 100, 600, 2, 600), ("1", 499, 999, 2, 999), ("1", 499, 999, 3, 999),
        ("1", 500, 1000, 4, 1000), ("1", 500, 1000, 5, 1000), ("1", 501, 1001, 1, 999), ("1", 501, 1001, 2, 999),
        ("1", 501, 1001, 3, 1000), ("1", 501, 1001, 4, 1000), ("1", 601, 1101, 1, 999), ("1", 601, 1101, 2, 1000),
        ("1", 601, 1101, 3, 1000), ("1", 1000, 1500, 1, 1000), ("1", 1000, 1500, 2, 1000),
        ("2", 0, 500, 1, 500), ("2", 100, 600, 2, 600), ("2", 200, 700, 3, 700), ("2", 500, 1000, 4, 1000),
        ("2", 500, 1000, 5, 1000), ("2", 501, 1001, 1, 600), ("2", 501, 1001, 2, 700), ("2", 501, 1001, 3, 1000),
        ("2", 501, 1001, 4, 1000), ("2", 601, 1101, 1, 700), ("2", 601, 1101, 2, 1000), ("2", 601, 1101, 3, 1000),
        ("2", 701, 1201, 1, 1000), ("2", 701, 1201, 2, 1000),
        ("3", 1, 501, 1, 501), ("3", 100, 600, 2, 600), ("3", 502, 1002, 1, 600)]


# ---------------------------------------------------------------- TimeWindowsTest, SlidingWindowsTest, SessionWindowsTest, JoinWindowsTest
def test_window_definitions_as_the_upstream_window_tests():
    from streams.windows import JoinWindows
    assert TimeWindows.ofSizeWithNoGrace(12).advanceBy(5).windowsFor(21) == {10: 22, 15: 27, 20: 32}
    assert TimeWindows.ofSizeWithNoGrace(6).advanceBy(5).windowsFor(7) == {5: 11}     # barely overlapping
    assert TimeWindows.ofSizeWithNoGrace(12).windowsFor(21) == {12: 24}
    assert TimeWindows.ofSizeAndGrace(3, 0).gracePeriodMs() == 0
    j = JoinWindows.ofTimeDifferenceWithNoGrace(7)                   # validWindows: [-7, 7] ... [7, 7]
    assert j.before(5).before(0).before(-5).before(-7).size() == 0
    assert j.after(5).after(0).after(-5).after(-7).size() == 0
    assert JoinWindows.ofTimeDifferenceAndGrace(5, 7).before(5_000).gracePeriodMs() == 7
    assert JoinWindows.ofTimeDifferenceAndGrace(5, 7).after(5_000).gracePeriodMs() == 7
    sliding, sliding_again = (SlidingWindows.ofTimeDifferenceAndGrace(10, 5) for _ in range(2))
    assert sliding is not sliding_again and sliding == sliding_again          # equal by value
    session, session_again = (SessionWindows.ofInactivityGapAndGrace(10, 5) for _ in range(2))
    assert session is not session_again and hash(session) == hash(session_again)
    assert SessionWindows.ofInactivityGapAndGrace(10, 5) != SessionWindows.ofInactivityGapAndGrace(10, 6)


@pytest.mark.parametrize("make, message", [
    (lambda: TimeWindows.ofSizeWithNoGrace(0), "Window size"),
    (lambda: TimeWindows.ofSizeWithNoGrace(-1), "Window size"),
    (lambda: TimeWindows.ofSizeWithNoGrace(10).advanceBy(0), "Window advancement interval"),
    (lambda: TimeWindows.ofSizeWithNoGrace(10).advanceBy(-1), "Window advancement interval"),
    (lambda: TimeWindows.ofSizeWithNoGrace(10).advanceBy(11), "Window advancement interval"),
    (lambda: TimeWindows.ofSizeAndGrace(3, -1), "Grace period .*must not be negative"),
    (lambda: SlidingWindows.ofTimeDifferenceAndGrace(-1, 5), "Window time difference .*must not be negative"),
    (lambda: SlidingWindows.ofTimeDifferenceAndGrace(10, -1), "Window grace period .*must not be negative"),
    (lambda: SessionWindows.ofInactivityGapWithNoGrace(-1), "Gap time"),
    (lambda: SessionWindows.ofInactivityGapWithNoGrace(0), "Gap time"),
    (lambda: SessionWindows.ofInactivityGapAndGrace(10, -1), "Grace period .*must not be negative"),
])
def test_window_validation_messages_start_as_kafkas(make, message):
    from streams.errors import TopologyError
    with pytest.raises(TopologyError, match=f"^{message}"):
        make()


@pytest.mark.parametrize("make", [
    lambda j: j.ofTimeDifferenceWithNoGrace(-1), lambda j: j.ofTimeDifferenceAndGrace(-1, 5),
    lambda j: j.ofTimeDifferenceWithNoGrace(7).after(-8), lambda j: j.ofTimeDifferenceWithNoGrace(7).before(-8),
    lambda j: j.ofTimeDifferenceAndGrace(3, -1)])
def test_join_windows_refuse_a_negative_interval_or_grace(make):
    from streams.errors import TopologyError
    from streams.windows import JoinWindows
    with pytest.raises(TopologyError, match="^(Window interval|Grace period)"):
        make(JoinWindows)


# ---------------------------------------------------------------- SlidingWindowedKStreamImplTest
def test_sliding_windowed_count_and_store_views():
    # shouldCountSlidingWindows, shouldMaterializeCount: difference 100, grace 1000.
    b = StreamsBuilder()
    b.stream("input", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S)) \
        .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(100, 1000)) \
        .count(materialized=Materialized.as_("count-store").withKeySerde(S).withValueSerde(L)) \
        .toStream().map(lambda k, v: (f"[{k.key}@{k.start}/{k.end}]", str(v))).to("output", Produced.with_(S, S))
    with TopologyTestDriver(b.build(), {"application.id": "windows"}) as d:
        i = d.createInputTopic("input", S, S)
        for k, v, ts in [("1", "1", 100), ("1", "2", 150), ("1", "3", 500), ("2", "10", 200), ("2", "20", 150)]:
            i.pipeInput(k, v, ts)
        last = {r.key: (r.value, r.timestamp) for r in d.createOutputTopic("output", S, S).readRecordsToList()}
        data = [((w.key, w.start, w.end), v) for w, v in d.getWindowStore("count-store").fetch("1", "2", 0, 1000)]
        stamped = [((w.key, w.start), tuple(v)) for w, v in
                   d.getTimestampedWindowStore("count-store").fetch("1", "2", 0, 1000)]
    assert last == {"[1@0/100]": ("1", 100), "[1@50/150]": ("2", 150), "[1@101/201]": ("1", 150),
                    "[1@400/500]": ("1", 500), "[2@50/150]": ("1", 150), "[2@100/200]": ("2", 200),
                    "[2@151/251]": ("1", 200)}
    assert data == [(("1", 0, 100), 1), (("1", 50, 150), 2), (("1", 101, 201), 1), (("1", 400, 500), 1),
                    (("2", 50, 150), 1), (("2", 100, 200), 2), (("2", 151, 251), 1)]
    assert stamped == [(("1", 0), (1, 100)), (("1", 50), (2, 150)), (("1", 101), (1, 150)), (("1", 400), (1, 500)),
                       (("2", 50), (1, 150)), (("2", 100), (2, 200)), (("2", 151), (1, 200))]
