"""Windowed aggregations and suppression against Kafka Streams' rules, for what the other window
tests leave out: KStreamSlidingWindowAggregateTest.testJoin, KStreamWindowAggregateTest's
shouldNotEmitFinalIfNotProgressEnough, null values (Kafka's windowed processors skip only a null
key; sliding windows a null value too), an aggregate that becomes null (Kafka's
``ValueAndTimestamp.make(null)``: the window is deleted and starts again from the initializer), and
seeded differential runs between the definitions and the processors: sliding windows' final
windows (KIP-450, with time difference 0 and early records), emit-on-close against the last update
of each closed window, and ``suppress(untilWindowCloses)`` against emit-on-close."""
from __future__ import annotations

import logging
import random

import pytest

from streams import (BufferConfig, Consumed, EmitStrategy, Grouped, Materialized, Produced, Serdes, SessionWindows,
                     SlidingWindows, StreamsBuilder, Suppressed, TimeWindows)
from streams.suppress import SuppressProcessor
from streams.testing import TopologyTestDriver
from streams.window_aggregate import (ON_WINDOW_CLOSE, ON_WINDOW_UPDATE, SessionWindowAggregate,
                                      SlidingWindowAggregate, TimeWindowAggregate, count_functions,
                                      reduce_functions)
from tests.streams._windowing import Run, concat

pytestmark = pytest.mark.unit

S = Serdes.String()
EMITS = {"update": EmitStrategy.onWindowUpdate(), "close": EmitStrategy.onWindowClose()}
C = count_functions()


@pytest.fixture(autouse=True)
def _quiet():
    """The differential runs drop many late records; Kafka's warning for each is tested elsewhere."""
    logger = logging.getLogger("streams.windows")
    level, logger.level = logger.level, logging.ERROR
    yield
    logger.setLevel(level)


# ---------------------------------------------------------------- KStreamSlidingWindowAggregateTest.testJoin
def _sliding_join_driver(emit: str, cache: int):
    grace = 0 if emit == "close" else 100
    b = StreamsBuilder()

    def table(topic, store):
        w = b.stream(topic, Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S)) \
            .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(10, grace)).emitStrategy(EMITS[emit])
        return w.aggregate(lambda: "0", lambda k, v, a: a + "+" + v,
                           materialized=Materialized.as_(store).withValueSerde(S))

    t1, t2 = table("topic1", "store-name1"), table("topic2", "store-name2")
    for t, out in ((t1, "out1"), (t2, "out2"), (t1.join(t2, lambda p1, p2: f"{p1}%{p2}"), "joined")):
        t.toStream().map(lambda k, v: (f"{k.key}@{k.start}/{k.end}", v)).to(out, Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "app", "statestore.cache.max.bytes": cache})
    outs = {n: d.createOutputTopic(n, S, S) for n in ("out1", "out2", "joined")}
    return d, d.createInputTopic("topic1", S, S), d.createInputTopic("topic2", S, S), outs


def _read(outs):
    return {n: [(r.key, r.value, r.timestamp) for r in o.readRecordsToList()] for n, o in outs.items()}


@pytest.mark.parametrize("cache", [0, 10_485_760])
@pytest.mark.parametrize("emit", ["update", "close"])
def test_join_of_sliding_window_tables_as_kafkas_test_join(emit, cache):
    """Guard (already matched): the tables and their join, step by step, as the Java test expects."""
    d, in1, in2, outs = _sliding_join_driver(emit, cache)
    with d:
        for k, v, ts in [("A", "1", 10), ("B", "2", 11), ("C", "3", 12)]:
            in1.pipeInput(k, v, ts)
        first = [("A@0/10", "0+1", 10), ("B@1/11", "0+2", 11), ("C@2/12", "0+3", 12)]
        assert _read(outs) == {"out1": first[:2] if emit == "close" else first, "out2": [], "joined": []}
        for k, v, ts in [("A", "1", 15), ("B", "2", 16), ("C", "3", 19)]:
            in1.pipeInput(k, v, ts)
        out1 = ([("C@2/12", "0+3", 12), ("A@5/15", "0+1+1", 15), ("B@6/16", "0+2+2", 16)] if emit == "close" else
                [("A@11/21", "0+1", 15), ("A@5/15", "0+1+1", 15), ("B@12/22", "0+2", 16), ("B@6/16", "0+2+2", 16),
                 ("C@13/23", "0+3", 19), ("C@9/19", "0+3+3", 19)])
        assert _read(outs) == {"out1": out1, "out2": [], "joined": []}
        for k, v, ts in [("A", "a", 10), ("C", "c", 12)]:
            in2.pipeInput(k, v, ts)
        out2 = [("A@0/10", "0+a", 10), ("C@2/12", "0+c", 12)]
        joined = [("A@0/10", "0+1%0+a", 10), ("C@2/12", "0+3%0+c", 12)]
        n = 1 if emit == "close" else 2
        assert _read(outs) == {"out1": [], "out2": out2[:n], "joined": joined[:n]}
        for k, v, ts in [("A", "a", 15), ("B", "b", 16), ("C", "c", 17)]:
            in2.pipeInput(k, v, ts)
        if emit == "close":
            out2 = [("C@2/12", "0+c", 12), ("A@5/15", "0+a+a", 15), ("B@6/16", "0+b", 16)]
            joined = [("C@2/12", "0+3%0+c", 12), ("A@5/15", "0+1+1%0+a+a", 15), ("B@6/16", "0+2+2%0+b", 16)]
        else:
            out2 = [("A@11/21", "0+a", 15), ("A@5/15", "0+a+a", 15), ("B@6/16", "0+b", 16),
                    ("C@13/23", "0+c", 17), ("C@7/17", "0+c+c", 17)]
            joined = [("A@11/21", "0+1%0+a", 15), ("A@5/15", "0+1+1%0+a+a", 15), ("B@6/16", "0+2+2%0+b", 16),
                      ("C@13/23", "0+3%0+c", 19)]
        assert _read(outs) == {"out1": [], "out2": out2, "joined": joined}


# ---------------------------------------------------------------- KStreamWindowAggregateTest
@pytest.mark.parametrize("emit", [ON_WINDOW_UPDATE, ON_WINDOW_CLOSE])
def test_should_not_emit_final_if_not_progress_enough(emit):
    """Guard (already matched): emit-on-close forwards nothing until stream time passes a new
    window's end + grace (hopping 10/5, grace 5)."""
    r = Run(TimeWindowAggregate("s", TimeWindows.ofSizeAndGrace(10, 5).advanceBy(5), lambda: "0", concat, emit))
    out = [r.send(k, v, ts) for k, v, ts in [("A", "1", 0), ("B", "2", 5), ("C", "3", 15), ("D", "4", 15),
                                              ("E", "5", 19)]]
    if emit == ON_WINDOW_CLOSE:
        assert out == [[], [], [("A", 0, 10, "0+1", None, 0), ("B", 0, 10, "0+2", None, 5)], [], []]
    else:
        assert [[(k, s, e, new, ts) for k, s, e, new, _old, ts in step] for step in out] == [
            [("A", 0, 10, "0+1", 0)], [("B", 0, 10, "0+2", 5), ("B", 5, 15, "0+2", 5)],
            [("C", 10, 20, "0+3", 15), ("C", 15, 25, "0+3", 15)], [("D", 10, 20, "0+4", 15), ("D", 15, 25, "0+4", 15)],
            [("E", 10, 20, "0+5", 19), ("E", 15, 25, "0+5", 19)]]


# ---------------------------------------------------------------- null values and null aggregates
def _counts(windows, records):
    b = StreamsBuilder()
    counts = b.stream("in", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S)).windowedBy(windows).count()
    counts.toStream().map(lambda k, v: (f"{k.key}@{k.start}/{k.end}", None if v is None else str(v))) \
        .to("out", Produced.with_(S, S))
    with TopologyTestDriver(b.build(), {"application.id": "n", "statestore.cache.max.bytes": 0}) as d:
        i = d.createInputTopic("in", S, S)
        for k, v, ts in records:
            i.pipeInput(k, v, ts)
        return [(r.key, r.value, r.timestamp) for r in d.createOutputTopic("out", S, S).readRecordsToList()]


def test_time_and_session_windows_count_a_null_value_sliding_windows_skip_it():
    """Guard (already matched): KStreamWindowAggregate and KStreamSessionWindowAggregate skip only a
    null key; KStreamSlidingWindowAggregate skips a null key or value."""
    records = [("a", "1", 1), ("a", None, 2)]
    assert _counts(TimeWindows.ofSizeWithNoGrace(10), records) == [("a@0/10", "1", 1), ("a@0/10", "2", 2)]
    assert _counts(SessionWindows.ofInactivityGapWithNoGrace(10), records) == [
        ("a@1/1", "1", 1), ("a@1/1", None, 1), ("a@1/2", "2", 2)]
    assert _counts(SlidingWindows.ofTimeDifferenceWithNoGrace(10), records) == [("a@0/10", "1", 1)]


def _nulling():
    """A reducer whose aggregate becomes null on the value "x"."""
    return reduce_functions(lambda agg, v: None if v == "x" else agg + v)


def test_a_reduce_to_null_deletes_a_time_window_and_a_session():
    """Guard (already matched): a null aggregate is no entry (``ValueAndTimestamp.make``); the next
    record starts the window again from the initializer, and a session is not found any more."""
    f = _nulling()
    r = Run(TimeWindowAggregate("s", TimeWindows.ofSizeWithNoGrace(10), f.initializer, f.aggregator))
    assert [r.send("A", v, ts) for v, ts in [("1", 0), ("x", 5), ("2", 7)]] == [
        [("A", 0, 10, "1", None, 0)], [("A", 0, 10, None, "1", 5)], [("A", 0, 10, "2", None, 7)]]
    r = Run(SessionWindowAggregate("s", SessionWindows.ofInactivityGapWithNoGrace(10), f.initializer, f.aggregator,
                                   f.merger))
    assert [r.send("A", v, ts) for v, ts in [("1", 0), ("x", 5), ("2", 7)]] == [
        [("A", 0, 0, "1", None, 0)], [("A", 0, 0, None, "1", 0), ("A", 0, 5, None, None, 5)],
        [("A", 7, 7, "2", None, 7)]]


def test_a_reduce_to_null_deletes_a_sliding_window_as_kafka():
    """Guard (already matched): the deleted left window of 25 is not found by the record at 27, which
    builds its left window from the window before (Kafka's reverse iteration, same result)."""
    f = _nulling()
    r = Run(SlidingWindowAggregate("s", SlidingWindows.ofTimeDifferenceWithNoGrace(10), f.initializer, f.aggregator))
    assert [r.send("A", v, ts) for v, ts in [("1", 20), ("x", 25), ("2", 27)]] == [
        [("A", 10, 20, "1", None, 20)],
        [("A", 21, 31, "x", None, 25), ("A", 15, 25, None, "1", 25)],
        [("A", 21, 31, "x2", "x", 27), ("A", 17, 27, "12", "1", 27)]]


# ---------------------------------------------------------------- differential runs
def _sorted_concat(key, value, agg):
    return "".join(sorted(agg + value))


def _sliding_definition(d: int, records) -> dict[int, str]:
    """KIP-450 from the definition: each record's left window ``[ts − d, ts]`` (``[0, d]`` for
    ``ts < d``), and its right window ``[ts + 1, ts + 1 + d]`` when a record falls in it; each
    holds every record inside its inclusive bounds."""
    times = sorted({ts for _, ts in records})

    def content(start):
        return "".join(sorted(v for v, ts in records if start <= ts <= start + d))

    out = {}
    for t in times:
        out[max(0, t - d)] = content(max(0, t - d))
        if any(t + 1 <= u <= t + 1 + d for u in times):
            out[t + 1] = content(t + 1)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_sliding_windows_final_windows_match_the_definition_in_any_order(seed):
    """Guard (already matched): random times (duplicates, early records, time difference 0 included)
    in random order, grace large enough to drop nothing: the windows left are the definition's."""
    rnd = random.Random(seed)
    for _ in range(60):
        d = rnd.randrange(0, 7)
        records = [(chr(65 + i), rnd.randrange(0, 25)) for i in range(rnd.randrange(1, 9))]
        r = Run(SlidingWindowAggregate("s", SlidingWindows.ofTimeDifferenceAndGrace(d, 10_000), lambda: "",
                                       _sorted_concat))
        last = {}
        for v, ts in records:
            for _k, start, _end, new, _old, _ts in r.send("k", v, ts):
                last[start] = new
        assert {s: v for s, v in last.items() if v} == _sliding_definition(d, records), (d, records)


def _run(processors, records, end):
    r = Run(*processors)
    out = []
    for k, ts in records + [("z", end)]:
        out += r.send(k, "v", ts)
    return out


def _retained(proc, retention):
    spec = proc.store_spec
    proc.store_spec = lambda r=None: spec(retention)
    return proc


@pytest.mark.parametrize("seed", range(4))
def test_time_windows_on_close_and_final_suppression_forward_each_closed_window_once(seed):
    """Guard (already matched): hopping windows of any size, advance and grace, records out of
    order; emit-on-close forwards each window that closed once, with the last update the emit-on-update
    run forwarded for it, and suppress(untilWindowCloses) after emit-on-update forwards the same."""
    rnd, end = random.Random(seed), 500
    for _ in range(40):
        size = rnd.randrange(1, 12)
        windows = TimeWindows.ofSizeAndGrace(size, rnd.randrange(0, 8)).advanceBy(rnd.randrange(1, size + 1))
        records = sorted(((rnd.choice("ab"), rnd.randrange(0, 80)) for _ in range(rnd.randrange(1, 30))),
                         key=lambda r: r[1] + rnd.randrange(-10, 10))

        def agg(emit):
            return _retained(TimeWindowAggregate("s", windows, C.initializer, C.aggregator, emit), 100_000)

        last = {}
        for k, s, _e, new, _old, ts in _run([agg(ON_WINDOW_UPDATE)], records, end):
            last[(k, s)] = (new, ts)
        closed = {w: v for w, v in last.items() if w[1] + size <= end - windows.graceMs}
        on_close = [((k, s), (new, ts)) for k, s, _e, new, _old, ts in _run([agg(ON_WINDOW_CLOSE)], records, end)]
        assert len(on_close) == len(closed) and dict(on_close) == closed, (windows, records)
        final = SuppressProcessor("buf", Suppressed.untilWindowCloses(BufferConfig.unbounded()), windows)
        suppressed = [((k, s), (new, ts)) for k, s, _e, new, _old, ts in
                      _run([agg(ON_WINDOW_UPDATE), final], records, end)]
        assert sorted(suppressed) == sorted(on_close), (windows, records)


@pytest.mark.parametrize("seed", range(4))
def test_sessions_on_close_forward_each_closed_session_once(seed):
    """Guard (already matched): with the default retention (gap + grace) a session emitted on close
    is out of every later lookup, so each closed session is forwarded once, with its last update."""
    rnd, end = random.Random(seed), 500
    for _ in range(40):
        windows = SessionWindows.ofInactivityGapAndGrace(rnd.randrange(1, 8), rnd.randrange(0, 8))
        records = sorted(((rnd.choice("ab"), rnd.randrange(0, 60)) for _ in range(rnd.randrange(1, 25))),
                         key=lambda r: r[1] + rnd.randrange(-10, 10))

        def agg(emit):
            return SessionWindowAggregate("s", windows, C.initializer, C.aggregator, C.merger, emit)

        last = {}
        for k, s, e, new, _old, ts in _run([agg(ON_WINDOW_UPDATE)], records, end):
            if new is None:
                last.pop((k, s, e), None)
            else:
                last[(k, s, e)] = (new, ts)
        closed = {w: v for w, v in last.items() if w[2] < end - windows.graceMs - windows.gapMs}
        on_close = [((k, s, e), (new, ts)) for k, s, e, new, _old, ts in _run([agg(ON_WINDOW_CLOSE)], records, end)]
        assert len(on_close) == len(closed) and dict(on_close) == closed, (windows, records)


# ---------------------------------------------------------------- suppress at the inclusive end
def _final(windows, records):
    b = StreamsBuilder()
    counts = b.stream("in", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S)).windowedBy(windows).count()
    counts.suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded())).toStream() \
        .map(lambda k, v: (f"{k.key}@{k.start}/{k.end}", str(v))).to("out", Produced.with_(S, S))
    with TopologyTestDriver(b.build(), {"application.id": "f", "statestore.cache.max.bytes": 0}) as d:
        i = d.createInputTopic("in", S, S)
        for k, ts in records:
            i.pipeInput(k, "v", ts)
        return [(r.key, r.value, r.timestamp) for r in d.createOutputTopic("out", S, S).readRecordsToList()]


def test_a_sliding_window_or_session_updated_at_its_close_is_forwarded_again_as_in_kafka():
    """Guard (already matched): suppression forwards a window once stream time − grace reaches its end
    (sessions: − gap too), while sliding and session aggregations still take a record whose window
    ends exactly there (inclusive ends): Kafka's buffer takes the update and forwards it at once."""
    assert _final(SlidingWindows.ofTimeDifferenceWithNoGrace(10), [("a", 30), ("a", 30)]) == [
        ("a@20/30", "1", 30), ("a@20/30", "2", 30)]
    # the session [0, 0] is out of the store's lookups (retention gap + grace): a new [0, 0] replaces it
    assert _final(SessionWindows.ofInactivityGapWithNoGrace(5), [("a", 0), ("b", 5), ("a", 0)]) == [
        ("a@0/0", "1", 0), ("a@0/0", "1", 0)]
    # time windows end exclusively: the same record is dropped as late
    assert _final(TimeWindows.ofSizeWithNoGrace(10), [("a", 9), ("b", 10), ("a", 9)]) == [("a@0/10", "1", 9)]
