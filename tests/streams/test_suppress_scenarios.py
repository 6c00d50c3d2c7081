"""``suppress()`` as Kafka's ``SuppressScenarioTest`` and ``KTableSuppressProcessorTest`` see it:
a suppressed table joined through its buffer's view, the buffer's order within one buffer time,
and its byte bound counted as ``InMemoryTimeOrderedKeyValueChangeBuffer`` counts it."""
from __future__ import annotations

import pytest

from streams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder
from streams.record import Change, Record
from streams.suppress import BufferConfig, SuppressionBufferFullError, Suppressed, SuppressProcessor
from streams.task import Collect, Task, chain
from streams.testing import TopologyTestDriver
from streams.windows import TimeWindows

pytestmark = pytest.mark.unit
S, L = Serdes.String(), Serdes.Long()
U = BufferConfig.unbounded()
# Kafka's TopologyTestDriver draws "dummy-topology-test-driver-app-id-<int>": the application id is
# part of the repartition topic's name, which the byte bound counts
KAFKA_APP = {"application.id": "dummy-topology-test-driver-app-id-1234567"}


def drain(topic):
    return [(r.key, r.value, r.timestamp) for r in topic.readRecordsToList()]


def _joined(suppress_right: bool):
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S))
    if suppress_right:
        right = right.suppress(Suppressed.untilTimeLimit(10, U))
    else:
        left = left.suppress(Suppressed.untilTimeLimit(10, U))
    (left.outerJoin(right, lambda l, r: f"({'null' if l is None else l},{'null' if r is None else r})")
     .toStream().to("output", Produced.with_(S, S)))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    return d, d.createInputTopic("left", S, S), d.createInputTopic("right", S, S), d.createOutputTopic("output", S, S)


@pytest.mark.parametrize("side", ["Right", "Left"])
def test_should_work_before_join(side):
    """SuppressScenarioTest.shouldWorkBeforeJoinRight / shouldWorkBeforeJoinLeft: the join reads a
    buffered key as its value before buffering (what downstream has seen), any other key through
    the parent table (KTableSuppressProcessorSupplier.view)."""
    d, left, right, out = _joined(side == "Right")
    sup, other = (right, left) if side == "Right" else (left, right)
    show = (lambda s, o: f"({o},{s})") if side == "Right" else (lambda s, o: f"({s},{o})")
    sup.pipeInput("B", "1", 0)
    sup.pipeInput("A", "1", 0)
    assert drain(out) == []                                   # buffered, no output
    sup.pipeInput("tick", "tick", 10)
    assert drain(out) == [("A", show("1", "null"), 0), ("B", show("1", "null"), 0)]   # flushed, by key
    sup.pipeInput("A", "2", 11)
    assert drain(out) == []
    other.pipeInput("A", "a", 12)
    assert drain(out) == [("A", show("1", "a"), 12)]          # joins the emitted value, not the buffered 2
    other.pipeInput("B", "b", 12)
    assert drain(out) == [("B", show("1", "b"), 12)]          # B is no longer buffered: the parent's value
    other.pipeInput("A", "b", 13)
    assert drain(out) == [("A", show("1", "b"), 13)]
    sup.pipeInput("tick", "tick1", 21)
    assert drain(out) == [("tick", show("tick1", "null"), 21), ("A", show("2", "b"), 13)]


def test_a_suppressed_join_shares_the_buffer_s_sub_topology():
    """The join reads the suppress buffer, so both run in one task (Kafka connects the buffer's
    store to the join's processor): one sub-topology, the buffer listed on the join's side."""
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S)).suppress(Suppressed.untilTimeLimit(10, U).withName("sup"))
    left.join(right, lambda l, r: l + r).toStream().to("output", Produced.with_(S, S))
    topology = b.build()
    assert len(topology.subtopologies) == 1
    join_this = next(n for n in topology.nodes if n.name.startswith("KTABLE-JOINTHIS-"))
    assert "sup-store" in {s.name for s in join_this.stores}


def test_same_time_entries_leave_by_serialized_key():
    """BufferKey.compareTo: by buffer time, then by the serialized key, not by arrival."""
    b = StreamsBuilder()
    (b.table("topic", Consumed.with_(S, S)).suppress(Suppressed.untilTimeLimit(10, U))
     .toStream().to("output", Produced.with_(S, S)))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    i, out = d.createInputTopic("topic", S, S), d.createOutputTopic("output", S, S)
    for key in ("C", "B", "A", "AB"):
        i.pipeInput(key, "1", 0)
    i.pipeInput("tick", "t", 10)
    assert [k for k, _, _ in drain(out)] == ["A", "AB", "B", "C"]


def test_same_window_end_final_results_leave_by_windowed_key_bytes():
    """untilWindowCloses buffers at the window end; the windows of one end leave by the
    TimeWindowedSerde bytes (key, then start), so b before a only if it sorts first."""
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).groupByKey(Grouped.with_(S, S))
     .windowedBy(TimeWindows.ofSizeWithNoGrace(10)).count()
     .suppress(Suppressed.untilWindowCloses(U)).toStream()
     .map(lambda k, v: (f"{k.key}@{k.start}", v)).to("out", Produced.with_(S, L)))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    i, out = d.createInputTopic("in", S, S), d.createOutputTopic("out", S, L)
    i.pipeInput("b", "x", 1)
    i.pipeInput("a", "x", 2)
    i.pipeInput("ab", "x", 3)
    i.pipeInput("z", "x", 10)
    assert drain(out) == [("a@0", 1, 2), ("ab@0", 1, 3), ("b@0", 1, 1)]


def test_should_suppress_intermediate_events_with_bytes_limit():
    """SuppressScenarioTest.shouldSuppressIntermediateEventsWithBytesLimit: each entry is counted
    from its serialized key and values and its record context (the repartition topic's name)."""
    b = StreamsBuilder()
    counts = (b.table("input", Consumed.with_(S, S), Materialized.with_(S, S).withCachingDisabled())
              .groupBy(lambda k, v: (v, k), Grouped.with_(S, S)).count())
    counts.suppress(Suppressed.untilTimeLimit(2 ** 63 - 1, BufferConfig.maxBytes(200).emitEarlyWhenFull())) \
        .toStream().to("output-suppressed", Produced.with_(S, L))
    counts.toStream().to("output-raw", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), KAFKA_APP)
    i = d.createInputTopic("input", S, S)
    raw, sup = d.createOutputTopic("output-raw", S, L), d.createOutputTopic("output-suppressed", S, L)
    i.pipeInput("k1", "v1", 0)
    i.pipeInput("k1", "v2", 1)
    i.pipeInput("k2", "v1", 2)
    assert drain(raw) == [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
    # consecutive updates to v1 get suppressed into only the latter
    assert drain(sup) == [("v1", 0, 1), ("v2", 1, 1)]
    i.pipeInput("x", "x", 3)
    assert drain(raw) == [("x", 1, 3)]
    assert drain(sup) == [("v1", 1, 2)]


A = 1 << 40      # KTableSuppressProcessorTest.ARBITRARY_LONG


def _harness(suppressed):
    """KTableSuppressProcessorTest's Harness: String keys, Long values, record topic ""."""
    sup, out = SuppressProcessor("buf", suppressed, key_serde=S, value_serde=L), Collect()
    task = Task("app", 0, [sup.store_spec()])
    task.source = ("", 0, 0)
    return chain(task, sup, out), out


def test_suppress_should_emit_when_over_byte_capacity():
    head, out = _harness(Suppressed.untilTimeLimit(100 * 86_400_000, BufferConfig.maxBytes(60)))
    head.process(Record("hey", Change(None, A), 100))
    head.process(Record("dummyKey", Change(None, A), 101))
    assert out.records == [Record("hey", Change(None, A), 100)]


def test_suppress_should_shut_down_when_over_byte_capacity():
    head, out = _harness(Suppressed.untilTimeLimit(100 * 86_400_000, BufferConfig.maxBytes(60).shutDownWhenFull()))
    head.process(Record("hey", Change(None, A), 100))
    with pytest.raises(SuppressionBufferFullError, match="exceeded its max capacity"):
        head.process(Record("dummyKey", Change(None, A), 100))
