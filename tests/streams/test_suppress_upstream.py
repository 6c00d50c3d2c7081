"""Kafka's ``SuppressScenarioTest`` and ``KTableSuppressProcessorTest`` scenarios not ported in
test_suppress_scenarios.py: zero time limits, record limits, final results of time, sliding and
session windows, tombstones, suppression before a groupBy (expected outputs copied from there)."""
from __future__ import annotations

import pytest

from streams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder
from streams.errors import TopologyError
from streams.record import Change, Record, Windowed
from streams.suppress import BufferConfig, SuppressionBufferFullError, Suppressed, SuppressProcessor
from streams.task import Collect, Task, chain
from streams.testing import TopologyTestDriver
from streams.windows import SessionWindows, SlidingWindows, TimeWindows

pytestmark = pytest.mark.unit
S, L = Serdes.String(), Serdes.Long()
U = BufferConfig.unbounded()
A = 1 << 40                                   # KTableSuppressProcessorTest.ARBITRARY_LONG
ANY = Change(A, None)                         # ARBITRARY_CHANGE
MAX = 2 ** 63 - 1


def drain(topic):
    return [(r.key, r.value, r.timestamp) for r in topic.readRecordsToList()]


def _value_counts(suppressed, count_args=()):
    """valueCounts = table(input).groupBy((k, v) -> (v, k)).count(); suppressed and raw outputs."""
    b = StreamsBuilder()
    # Kafka's test also disables logging, which Riverlog refuses (its stores are always logged)
    counts = (b.table("input", Consumed.with_(S, S), Materialized.with_(S, S).withCachingDisabled())
              .groupBy(lambda k, v: (v, k), Grouped.with_(S, S)).count(*count_args))
    counts.suppress(suppressed).toStream().to("output-suppressed", Produced.with_(S, L))
    counts.toStream().to("output-raw", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    return (d.createInputTopic("input", S, S), d.createOutputTopic("output-raw", S, L),
            d.createOutputTopic("output-suppressed", S, L))


FIRST_THREE = [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]


def test_should_immediately_emit_events_with_zero_emit_after():
    i, raw, sup = _value_counts(Suppressed.untilTimeLimit(0, U))
    for k, v, t in [("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2)]:
        i.pipeInput(k, v, t)
    assert drain(raw) == FIRST_THREE
    assert drain(sup) == FIRST_THREE
    i.pipeInput("x", "x", 3)
    assert drain(raw) == drain(sup) == [("x", 1, 3)]
    i.pipeInput("x", "y", 4)
    assert drain(raw) == drain(sup) == [("x", 0, 4), ("y", 1, 4)]


def test_should_suppress_intermediate_events_with_time_limit():
    i, raw, sup = _value_counts(Suppressed.untilTimeLimit(2, U))
    for k, v, t in [("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2)]:
        i.pipeInput(k, v, t)
    assert drain(raw) == FIRST_THREE
    assert drain(sup) == [("v1", 1, 2)]          # v1 re-updated within the limit keeps its place (time 0)
    i.pipeInput("tick", "tick", 3)
    assert drain(raw) == [("tick", 1, 3)]
    assert drain(sup) == [("v2", 1, 1)]
    i.pipeInput("tick", "tock", 4)
    assert drain(raw) == [("tick", 0, 4), ("tock", 1, 4)]
    assert drain(sup) == []                      # tick was first buffered at 3


def test_should_suppress_intermediate_events_with_record_limit():
    i, raw, sup = _value_counts(Suppressed.untilTimeLimit(MAX, BufferConfig.maxRecords(1).emitEarlyWhenFull()),
                                (Materialized.with_(S, L),))
    for k, v, t in [("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2)]:
        i.pipeInput(k, v, t)
    assert drain(raw) == FIRST_THREE
    assert drain(sup) == [("v1", 0, 1), ("v2", 1, 1)]
    i.pipeInput("x", "x", 3)
    assert drain(raw) == [("x", 1, 3)]
    assert drain(sup) == [("v1", 1, 2)]


def _windowed(windows, count_mat):
    b = StreamsBuilder()
    grouped = b.stream("input", Consumed.with_(S, S)).groupBy(lambda k, v: k, Grouped.with_(S, S))
    counts = grouped.windowedBy(windows).count(count_mat)
    show = lambda w, v: (f"[{w.key}@{w.start}/{w.end}]", v)  # noqa: E731  Windowed.toString
    counts.suppress(Suppressed.untilWindowCloses(U)).toStream().map(show).to("output-suppressed", Produced.with_(S, L))
    counts.toStream().map(show).to("output-raw", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    return (d.createInputTopic("input", S, S), d.createOutputTopic("output-raw", S, L),
            d.createOutputTopic("output-suppressed", S, L))


def test_should_support_final_results_for_time_windows():
    i, raw, sup = _windowed(TimeWindows.ofSizeAndGrace(2, 1), Materialized.as_("counts").withCachingDisabled())
    for t in [0, 1, 2, 1, 0, 5, 0]:              # the last is out of the grace period: dropped
        i.pipeInput("k1", "v1", t)
    assert drain(raw) == [("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
                          ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 5)]
    assert drain(sup) == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 1, 2)]


def test_should_support_final_results_for_time_windows_with_large_jump():
    i, raw, sup = _windowed(TimeWindows.ofSizeAndGrace(2, 2),
                            Materialized.as_("counts").withCachingDisabled().withKeySerde(S))
    for t in [0, 1, 2, 0, 3, 0, 4, 0, 30]:
        i.pipeInput("k1", "v1", t)
    assert drain(raw) == [("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
                          ("[k1@2/4]", 2, 3), ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 4), ("[k1@30/32]", 1, 30)]
    assert drain(sup) == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 2, 3), ("[k1@4/6]", 1, 4)]


def test_should_support_final_results_for_sliding_windows():
    i, raw, sup = _windowed(SlidingWindows.ofTimeDifferenceAndGrace(5, 15),
                            Materialized.as_("counts").withCachingDisabled().withKeySerde(S))
    for t in [10, 11, 10, 13, 10, 24, 5, 7, 90]:
        i.pipeInput("k1", "v1", t)
    assert sorted(drain(raw), key=lambda r: (r[0], r[2])) == [
        ("[k1@11/16]", 1, 11), ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24),
        ("[k1@5/10]", 1, 10), ("[k1@5/10]", 2, 10), ("[k1@5/10]", 3, 10), ("[k1@5/10]", 4, 10),
        ("[k1@5/10]", 5, 10), ("[k1@6/11]", 2, 11), ("[k1@6/11]", 3, 11), ("[k1@6/11]", 4, 11),
        ("[k1@6/11]", 5, 11), ("[k1@8/13]", 4, 13), ("[k1@8/13]", 5, 13), ("[k1@85/90]", 1, 90)]
    assert drain(sup) == [("[k1@5/10]", 5, 10), ("[k1@6/11]", 5, 11), ("[k1@8/13]", 5, 13),
                          ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24)]


def test_should_support_final_results_for_session_windows():
    i, raw, sup = _windowed(SessionWindows.ofInactivityGapWithNoGrace(5),
                            Materialized.as_("counts").withCachingDisabled())
    for k, t in [("k1", 0), ("k1", 5), ("k1", 1), ("k2", 11), ("k1", 5), ("k1", 30)]:
        i.pipeInput(k, "v1", t)
    assert drain(raw) == [("[k1@0/0]", 1, 0), ("[k1@0/0]", None, 0), ("[k1@0/5]", 2, 5), ("[k1@0/5]", None, 5),
                          ("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11), ("[k1@30/30]", 1, 30)]
    assert drain(sup) == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]


def test_should_work_before_group_by():
    b = StreamsBuilder()
    (b.table("topic", Consumed.with_(S, S)).suppress(Suppressed.untilTimeLimit(10, U))
     .groupBy(lambda k, v: (k, v), Grouped.with_(S, S)).count().toStream().to("output", Produced.with_(S, L)))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    i, out = d.createInputTopic("topic", S, S), d.createOutputTopic("output", S, L)
    i.pipeInput("A", "a", 0)
    i.pipeInput("tick", "tick", 10)
    assert drain(out) == [("A", 1, 0)]


# KTableSuppressProcessorTest: the processor alone, String keys, Long values.

def _harness(suppressed, windows=None, topic=""):
    sup, out = SuppressProcessor("buf", suppressed, windows, key_serde=S, value_serde=L), Collect()
    task = Task("app", 0, [sup.store_spec()])
    task.source = (topic, 0, 0)
    return chain(task, sup, out), out


def _final(grace, size=100):
    return _harness(Suppressed.untilWindowCloses(U), TimeWindows.ofSizeAndGrace(size, grace))


@pytest.mark.parametrize("key", ["hey", Windowed("hey", 0, 100)])
def test_zero_time_limit_should_immediately_emit(key):
    head, out = _harness(Suppressed.untilTimeLimit(0, U))
    head.process(Record(key, ANY, A))
    assert out.records == [Record(key, ANY, A)]


def test_intermediate_suppression_should_buffer_and_emit_later():
    head, out = _harness(Suppressed.untilTimeLimit(1, U), topic="topic")
    head.process(Record("hey", Change(None, 1), 0))
    assert out.records == []
    head.process(Record("tick", Change(None, None), 1))
    assert out.records == [Record("hey", Change(None, 1), 0)]


def test_final_results_suppression_should_buffer_and_emit_at_grace_expiration():
    head, out = _final(1, size=1)
    head.process(Record(Windowed("hey", 99, 100), ANY, 99))
    head.process(Record(Windowed("dummyKey1", 100, 101), ANY, 100))
    assert out.records == []                     # stream time 100: one more ms after the end
    head.process(Record(Windowed("dummyKey2", 101, 102), ANY, 101))
    assert out.records == [Record(Windowed("hey", 99, 100), ANY, 99)]


def test_final_results_with_zero_grace_should_still_buffer_until_the_window_end():
    head, out = _final(0)
    head.process(Record(Windowed("hey", 0, 100), ANY, 5))
    assert out.records == []
    head.process(Record(Windowed("dummyKey", 100, 200), ANY, 100))
    assert out.records == [Record(Windowed("hey", 0, 100), ANY, 5)]


def test_final_results_with_zero_grace_at_window_end_should_immediately_emit():
    head, out = _final(0)
    head.process(Record(Windowed("hey", 0, 100), ANY, 100))
    assert out.records == [Record(Windowed("hey", 0, 100), ANY, 100)]


@pytest.mark.parametrize("windows,key", [(TimeWindows.ofSizeAndGrace(100, 0), Windowed("hey", 0, 100)),
                                         (SessionWindows.ofInactivityGapAndGrace(1, 0), Windowed("hey", 0, 0))])
def test_final_results_should_drop_tombstones(windows, key):
    head, out = _harness(Suppressed.untilWindowCloses(U), windows)
    head.process(Record(key, Change(None, A), 100))
    assert out.records == []


@pytest.mark.parametrize("key", [Windowed("hey", 0, 100), Windowed("hey", 0, 0), "hey"])
def test_suppress_should_not_drop_tombstones(key):
    """suppressShouldNotDropTombstonesFor{TimeWindows,SessionWindows,KTable}: headers travel too."""
    head, out = _harness(Suppressed.untilTimeLimit(0, BufferConfig.maxRecords(0)))
    head.process(Record(key, Change(None, A), 100, (("k", b"v"),)))
    assert out.records == [Record(key, Change(None, A), 100, (("k", b"v"),))]


def test_suppress_should_emit_when_over_record_capacity():
    head, out = _harness(Suppressed.untilTimeLimit(100 * 86_400_000, BufferConfig.maxRecords(1)))
    head.process(Record("hey", Change(None, A), 100))
    head.process(Record("dummyKey", Change(None, A), 101))
    assert out.records == [Record("hey", Change(None, A), 100)]


def test_suppress_should_shut_down_when_over_record_capacity():
    head, out = _harness(Suppressed.untilTimeLimit(100 * 86_400_000, BufferConfig.maxRecords(1).shutDownWhenFull()))
    head.process(Record("hey", Change(None, A), 100))
    with pytest.raises(SuppressionBufferFullError, match=r"exceeded its max capacity.*\[2/1\] records"):
        head.process(Record("dummyKey", Change(None, A), 100))
    assert out.records == []


# KTableImpl.suppress / GraphGraceSearchUtil: refused when the table is defined.

def test_until_window_closes_on_a_table_with_no_window_upstream_is_refused_at_definition():
    b = StreamsBuilder()
    table = b.table("input", Consumed.with_(S, S)).filter(lambda k, v: True)
    with pytest.raises(TopologyError, match=r"Window close time is only defined for windowed computations\. "
                                            r"Got \[.*KTABLE-FILTER-\d+\]\."):
        table.suppress(Suppressed.untilWindowCloses(U))


def test_suppress_takes_a_suppressed():
    with pytest.raises(TopologyError, match="takes a Suppressed"):
        StreamsBuilder().table("input").suppress(None)


def test_a_re_buffered_key_whose_old_value_equals_its_prior_counts_it_once():
    """``BufferValue`` de-duplicates the prior and old values by content (``Arrays.equals``), also
    when a buffered key is updated again: "k" 5→5 then 5→6 holds 8 + 1 + 2 × 8 + 20 = 45 bytes,
    under a 50-byte bound, so nothing is emitted early."""
    head, out = _harness(Suppressed.untilTimeLimit(MAX, BufferConfig.maxBytes(50)))
    head.process(Record("k", Change(5, 5), 1))
    head.process(Record("k", Change(6, 5), 2))
    assert out.records == []
    head.process(Record("k", Change(7, 6), 3))       # old 6 differs from prior 5: 53 bytes, emitted early
    assert out.records == [Record("k", Change(7, 6), 3)]


def test_should_work_with_cogrouped():
    """A windowed cogroup's result can be suppressed until its windows close."""
    from streams import Named
    b = StreamsBuilder()
    one = b.stream("one", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S))
    two = b.stream("two", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S))
    (one.cogroup(lambda k, v, agg: agg + v).cogroup(two, lambda k, v, agg: agg + v)
     .windowedBy(TimeWindows.ofSizeWithNoGrace(15 * 60_000))
     .aggregate(lambda: "", Named.as_("test"), Materialized.as_("store").withValueSerde(S))
     .suppress(Suppressed.untilWindowCloses(U)).toStream()
     .map(lambda w, v: (f"{w.key}@{w.start}", v)).to("out", Produced.with_(S, S)))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    d.createInputTopic("one", S, S).pipeInput("k", "a", 0)
    d.createInputTopic("two", S, S).pipeInput("k", "b", 1)
    out = d.createOutputTopic("out", S, S)
    assert drain(out) == []
    d.createInputTopic("one", S, S).pipeInput("z", "c", 15 * 60_000)
    assert drain(out) == [("k@0", "ab", 1)]
