"""Table–table joins of windowed aggregations: each side reads the other's window (session) store
by the ``Windowed`` key, as Kafka's ``KStreamWindowAggregateValueGetter`` (``fetch(key, start)``)."""
from __future__ import annotations

import pytest

from streams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder, TopologyError
from streams.windows import SessionWindows, SlidingWindows, TimeWindows
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S = Serdes.String()


def _windowed(b, topic, store, windows):
    w = b.stream(topic, Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S)).windowedBy(windows)
    m = Materialized.as_(store).withValueSerde(S)
    add = lambda k, v, a: a + "+" + v
    if isinstance(windows, SessionWindows):
        return w.aggregate(lambda: "0", add, lambda k, a, c: a + c[1:], materialized=m)
    return w.aggregate(lambda: "0", add, materialized=m)


def _driver(windows, join="join"):
    b = StreamsBuilder()
    t1, t2 = _windowed(b, "topic1", "topic1-Canonized", windows), _windowed(b, "topic2", "topic2-Canonized", windows)
    for table, out in ((t1, "out1"), (t2, "out2"), (getattr(t1, join)(t2, lambda p1, p2: f"{p1}%{p2}"), "joined")):
        table.toStream().map(lambda k, v: (f"{k.key}@{k.start}/{k.end}", v)).to(out, Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    outs = {n: d.createOutputTopic(n, S, S) for n in ("out1", "out2", "joined")}
    return d, d.createInputTopic("topic1", S, S), d.createInputTopic("topic2", S, S), outs


def _read(outs, name):
    return [(r.key, r.value, r.timestamp) for r in outs[name].readRecordsToList()]


def test_join_of_hopping_window_tables():
    """KStreamWindowAggregateTest.testJoin (emit on update, grace 100): processEmitUpdateJoin."""
    d, in1, in2, outs = _driver(TimeWindows.ofSizeAndGrace(10, 100).advanceBy(5))
    for k, v, ts in [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 9)]:
        in1.pipeInput(k, v, ts)
    assert _read(outs, "out1") == [("A@0/10", "0+1", 0), ("B@0/10", "0+2", 1), ("C@0/10", "0+3", 2),
                                   ("D@0/10", "0+4", 3), ("A@0/10", "0+1+1", 9), ("A@5/15", "0+1", 9)]
    assert _read(outs, "joined") == []
    for k, v, ts in [("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9)]:
        in1.pipeInput(k, v, ts)
    assert _read(outs, "out1") == [
        ("A@0/10", "0+1+1+1", 9), ("A@5/15", "0+1+1", 9), ("B@0/10", "0+2+2", 6), ("B@5/15", "0+2", 6),
        ("D@0/10", "0+4+4", 7), ("D@5/15", "0+4", 7), ("B@0/10", "0+2+2+2", 8), ("B@5/15", "0+2+2", 8),
        ("C@0/10", "0+3+3", 9), ("C@5/15", "0+3", 9)]
    assert _read(outs, "joined") == []
    for k, v, ts in [("A", "a", 0), ("B", "b", 1), ("C", "c", 2), ("D", "d", 20), ("A", "a", 20)]:
        in2.pipeInput(k, v, ts)
    assert _read(outs, "out2") == [("A@0/10", "0+a", 0), ("B@0/10", "0+b", 1), ("C@0/10", "0+c", 2),
                                   ("D@15/25", "0+d", 20), ("D@20/30", "0+d", 20), ("A@15/25", "0+a", 20),
                                   ("A@20/30", "0+a", 20)]
    assert _read(outs, "joined") == [("A@0/10", "0+1+1+1%0+a", 9), ("B@0/10", "0+2+2+2%0+b", 8),
                                     ("C@0/10", "0+3+3%0+c", 9)]
    for k, v, ts in [("A", "a", 5), ("B", "b", 6), ("D", "d", 7), ("D", "d", 18), ("A", "a", 21)]:
        in2.pipeInput(k, v, ts)
    assert _read(outs, "joined") == [
        ("A@0/10", "0+1+1+1%0+a+a", 9), ("A@5/15", "0+1+1%0+a", 9), ("B@0/10", "0+2+2+2%0+b+b", 8),
        ("B@5/15", "0+2+2%0+b", 8), ("D@0/10", "0+4+4%0+d", 7), ("D@5/15", "0+4%0+d", 7)]


def test_join_of_sliding_and_session_window_tables_reads_the_other_window():
    """Sliding windows read ``fetch(key, start)``; sessions ``fetchSession(key, start, end)``
    timestamped with the session's end (KStreamSessionWindowAggregate's value getter)."""
    d, in1, in2, outs = _driver(SlidingWindows.ofTimeDifferenceAndGrace(10, 100))
    in1.pipeInput("A", "1", 20)
    in2.pipeInput("A", "a", 20)
    assert _read(outs, "joined") == [("A@10/20", "0+1%0+a", 20)]
    d, in1, in2, outs = _driver(SessionWindows.ofInactivityGapAndGrace(5, 100), join="leftJoin")
    in1.pipeInput("A", "1", 20)
    in2.pipeInput("A", "a", 20)
    in2.pipeInput("A", "b", 30)
    assert _read(outs, "joined") == [("A@20/20", "0+1%None", 20), ("A@20/20", "0+1%0+a", 20)]


def test_a_windowed_table_does_not_join_a_plain_one():
    b = StreamsBuilder()
    t1 = _windowed(b, "topic1", "w", TimeWindows.ofSizeWithNoGrace(10))
    t2 = b.table("topic2", Consumed.with_(S, S))
    with pytest.raises(TopologyError, match="windowed table joins another windowed table"):
        t1.join(t2, lambda a, c: a)


def test_final_results_of_a_windowed_join_wait_the_larger_grace():
    """suppress(untilWindowCloses) after the join waits the larger of the two sides' graces, as
    Kafka's GraphGraceSearchUtil takes the largest grace among the parents."""
    from streams.suppress import BufferConfig, Suppressed
    b = StreamsBuilder()

    def counted(topic, grace):
        return (b.stream(topic, Consumed.with_(S, S)).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, grace))
                .count(materialized=Materialized.as_(f"c-{topic}")))
    joined = counted("in", 5).join(counted("in2", 20), lambda a, c: a + c)
    (joined.suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded())).toStream()
     .map(lambda k, v: (f"{k.key}@{k.start}", str(v))).to("out", Produced.with_(S, S)))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    in1, in2, out = d.createInputTopic("in", S, S), d.createInputTopic("in2", S, S), d.createOutputTopic("out", S, S)
    for key, ts in [("a", 1), ("z", 25)]:
        in2.pipeInput(key, "x", ts)
        in1.pipeInput(key, "x", ts)
    assert out.readKeyValuesToList() == []          # end 10 + grace 5 passed, but not + 20
    in2.pipeInput("y", "x", 31)
    in1.pipeInput("y", "x", 31)
    assert [(kv.key, kv.value) for kv in out.readKeyValuesToList()] == [("a@0", "2")]
