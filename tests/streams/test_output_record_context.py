"""The timestamp and headers of every output record, operation by operation, against Kafka Streams'
rules (``kstream/internals``): stateless steps keep the record's; aggregations take the largest
timestamp of the records that made the row (``KStreamAggregate``, ``KTableAggregate``,
``KTableReduce``, ``KStreamWindowAggregate``, ``KStreamSlidingWindowAggregate``); sessions their
end (``KStreamSessionWindowAggregate``); joins the larger of the two sides (stream–stream,
table–table, foreign key: ``SubscriptionJoinProcessorSupplier``) or the stream record's
(stream–table, stream–GlobalKTable); a right-side update of a foreign-key join its own
(``ForeignTableJoinProcessorSupplier``); outer-join leftovers their own timestamp with the headers
of the record that closed their window; suppress the buffered record's. Headers are those of the
record being processed, except session updates with caching disabled: Kafka forwards them as a new
record, without headers (``maybeForwardUpdate``), and only its caching store's flush gives the
putting record's context back.

Each scenario runs with the record cache off (``statestore.cache.max.bytes=0``, which Kafka's
``rewriteTopology`` turns into caching disabled on every store) and on; the test driver commits
after every record, so both give the same records, but for the headers of session updates."""
from __future__ import annotations

import pytest

from streams import (BufferConfig, Consumed, JoinWindows, Materialized, Produced, Serdes, SessionWindows,
                     SlidingWindows, StreamsBuilder, Suppressed, TimeWindows)
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S, L = Serdes.String(), Serdes.Long()
C = Consumed.with_(S, S)
CONFIGS = {"uncached": {"statestore.cache.max.bytes": 0}, "cached": {}}
DEFAULTS = {"application.id": "app", "default.key.serde": "String", "default.value.serde": "String"}


def h(n: int) -> tuple:
    return (("h", f"h{n}".encode()),)


def joiner(a, b) -> str:
    return f"{a}+{b}"


def windowed(k, v):
    return f"{k.key}@{k.start}-{k.end}", v


def count_to(table):
    table.toStream().to("out", Produced.with_(S, L))


# (topology, inputs [(topic, key, value, ts, header n)], expected [(key, value, ts, header n or 0: none)],
# or expected per cache configuration)
SCENARIOS = {
    "stateless keeps the record's": (
        lambda b: b.stream("in", C).mapValues(str.upper).flatMapValues(lambda v: [v, v]).selectKey(lambda k, v: v)
        .to("out", Produced.with_(S, S)),
        [("in", "k", "a", 7, 1)],
        [("A", "A", 7, 1), ("A", "A", 7, 1)]),
    "stream count: max of row and record": (
        lambda b: count_to(b.stream("in", C).groupByKey().count()),
        [("in", "k", "a", 10, 1), ("in", "k", "b", 5, 2)],
        [("k", 1, 10, 1), ("k", 2, 10, 2)]),
    "through a repartition topic": (
        lambda b: count_to(b.stream("in", C).selectKey(lambda k, v: v).groupByKey().count()),
        [("in", "a", "g", 50, 1), ("in", "b", "g", 20, 2)],
        [("g", 1, 50, 1), ("g", 2, 50, 2)]),
    "table groupBy count: subtraction keeps the row's": (
        lambda b: count_to(b.table("in", C).groupBy(lambda k, v: (v, k)).count()),
        [("in", "a", "g", 50, 1), ("in", "b", "g", 20, 2), ("in", "a", "x", 10, 3), ("in", "b", None, 5, 4)],
        [("g", 1, 50, 1), ("g", 2, 50, 2), ("g", 1, 50, 3), ("x", 1, 10, 3), ("g", 0, 50, 4)]),
    "tumbling window: max within the window": (
        lambda b: b.stream("in", C).groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(100)).count()
        .toStream().map(windowed).to("out", Produced.with_(S, L)),
        [("in", "k", "a", 50, 1), ("in", "k", "b", 20, 2)],
        [("k@0-100", 1, 50, 1), ("k@0-100", 2, 50, 2)]),
    "sliding windows: a new right window takes its source window's": (
        lambda b: b.stream("in", C).groupByKey().windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(100)).count()
        .toStream().map(windowed).to("out", Produced.with_(S, L)),
        [("in", "k", "a", 150, 1), ("in", "k", "b", 120, 2)],
        [("k@50-150", 1, 150, 1), ("k@50-150", 2, 150, 2), ("k@121-221", 1, 150, 2)]),
    # Kafka turns caching off on every store when statestore.cache.max.bytes=0 (rewriteTopology)
    "sessions: the session's end, a merge retracts at the old end": (
        lambda b: b.stream("in", C).groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(100)).count()
        .toStream().map(windowed).to("out", Produced.with_(S, L)),
        [("in", "k", "a", 150, 1), ("in", "k", "b", 120, 2)],
        {"cached": [("k@150-150", 1, 150, 1), ("k@150-150", None, 150, 2), ("k@120-150", 2, 150, 2)],
         "uncached": [("k@150-150", 1, 150, 0), ("k@150-150", None, 150, 0), ("k@120-150", 2, 150, 0)]}),
    "sessions with caching disabled: no headers": (
        lambda b: b.stream("in", C).groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(100))
        .count(materialized=Materialized.as_("s").withCachingDisabled())
        .toStream().map(windowed).to("out", Produced.with_(S, L)),
        [("in", "k", "a", 150, 1), ("in", "k", "b", 120, 2)],
        [("k@150-150", 1, 150, 0), ("k@150-150", None, 150, 0), ("k@120-150", 2, 150, 0)]),
    "suppress: the buffered record's": (
        lambda b: b.stream("in", C).groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(100)).count()
        .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded())).toStream().map(windowed)
        .to("out", Produced.with_(S, L)),
        [("in", "k", "a", 50, 1), ("in", "k", "b", 20, 2), ("in", "x", "c", 300, 3)],
        [("k@0-100", 2, 50, 2)]),
    "stream-stream join: the larger side": (
        lambda b: b.stream("l", C).join(b.stream("r", C), joiner, JoinWindows.ofTimeDifferenceWithNoGrace(100))
        .to("out", Produced.with_(S, S)),
        [("l", "k", "a", 50, 1), ("r", "k", "b", 20, 2), ("r", "k", "c", 90, 3)],
        [("k", "a+b", 50, 2), ("k", "a+c", 90, 3)]),
    "outer join leftovers: their own, the closing record's headers": (
        lambda b: b.stream("l", C).outerJoin(b.stream("r", C), joiner, JoinWindows.ofTimeDifferenceWithNoGrace(10))
        .to("out", Produced.with_(S, S)),
        [("l", "k", "a", 50, 1), ("r", "j", "b", 55, 2), ("r", "z", "c", 200, 3)],
        [("k", "a+None", 50, 3), ("j", "None+b", 55, 3)]),
    "stream-table join: the stream record's": (
        lambda b: b.stream("l", C).join(b.table("r", C), joiner).to("out", Produced.with_(S, S)),
        [("r", "k", "b", 90, 2), ("l", "k", "a", 50, 1)],
        [("k", "a+b", 50, 1)]),
    "stream-GlobalKTable join: the stream record's": (
        lambda b: b.stream("l", C).join(b.globalTable("r", C), lambda k, v: k, joiner).to("out", Produced.with_(S, S)),
        [("r", "k", "b", 90, 2), ("l", "k", "a", 50, 1)],
        [("k", "a+b", 50, 1)]),
    "table-table left join: the larger row, a lone row its own": (
        lambda b: b.table("l", C).leftJoin(b.table("r", C), joiner).toStream().to("out", Produced.with_(S, S)),
        [("r", "k", "b", 90, 2), ("l", "k", "a", 50, 1), ("r", "k", None, 60, 3), ("l", "k", None, 70, 4)],
        [("k", "a+b", 90, 1), ("k", "a+None", 60, 3), ("k", None, 70, 4)]),
    "chained table joins: the largest of the three rows": (
        lambda b: b.table("a", C).join(b.table("b", C), joiner).join(b.table("c", C), joiner)
        .toStream().to("out", Produced.with_(S, S)),
        [("a", "k", "A", 10, 1), ("b", "k", "B", 90, 2), ("c", "k", "C", 20, 3)],
        [("k", "A+B+C", 90, 3)]),
    "foreign-key join: larger of both rows, a right update its own": (
        lambda b: b.table("l", C).join(b.table("r", C), lambda v: v.split(":")[0], joiner)
        .toStream().to("out", Produced.with_(S, S)),
        [("r", "f", "b", 90, 2), ("l", "k", "f:a", 50, 1), ("r", "f", "c", 60, 3), ("l", "k", None, 30, 5)],
        [("k", "f:a+b", 90, 1), ("k", "f:a+c", 60, 3), ("k", None, 60, 5)]),
}


@pytest.mark.parametrize("cache", CONFIGS)
@pytest.mark.parametrize("name", SCENARIOS)
def test_output_timestamp_and_headers(name, cache):
    build, inputs, expected = SCENARIOS[name]
    if isinstance(expected, dict):
        expected = expected[cache]
    b = StreamsBuilder()
    build(b)
    d = TopologyTestDriver(b.build(), {**DEFAULTS, **CONFIGS[cache]})
    topics = {}
    for topic, k, v, ts, n in inputs:
        if topic not in topics:
            topics[topic] = d.createInputTopic(topic, S, S)
        topics[topic].pipeInput(k, v, ts, headers=h(n))
    out = d.createOutputTopic("out", S, L if any(isinstance(e[1], int) for e in expected) else S)
    got = [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in out.readRecordsToList()]
    assert got == [(k, v, ts, h(n) if n else ()) for k, v, ts, n in expected]


# ---------------------------------------------------------------- the position a held record is forwarded at
def by_offset(k, v, ctx) -> str:
    """A TopicNameExtractor reading Kafka's RecordContext: the position of the record forwarded."""
    return f"out-{ctx.topic}-{ctx.offset}"


def position_driver(build, config=None):
    b = StreamsBuilder()
    build(b)
    return TopologyTestDriver(b.build(), {**DEFAULTS, **(config or {})})


def written(d, *topics) -> dict:
    return {t: [(r.key, r.value) for r in d.createOutputTopic(t, S, S).readRecordsToList()] for t in topics}


def test_a_suppressed_record_is_forwarded_at_its_own_position():
    """KTableSuppressProcessor.emit sets the buffered record's context (setRecordContext) before
    forwarding: a topic name extractor below reads the offset of the record that was buffered."""
    d = position_driver(lambda b: b.table("in", C).suppress(Suppressed.untilTimeLimit(50, BufferConfig.unbounded()))
                        .toStream().to(by_offset, Produced.with_(S, S)))
    i = d.createInputTopic("in", S, S)
    i.pipeInput("k", "a", 0)       # offset 0, buffered
    i.pipeInput("x", "b", 100)     # offset 1: evicts k
    assert written(d, "out-in-0", "out-in-1") == {"out-in-0": [("k", "a")], "out-in-1": []}


def test_a_record_held_by_a_stream_table_join_grace_is_joined_at_its_own_position():
    """KStreamKTableJoinProcessor.emit (KIP-923) sets the held record's context before joining."""
    from streams import Joined
    from streams.versioned import Stores
    d = position_driver(lambda b: b.stream("l", C).leftJoin(
        b.table("r", C, Materialized.as_(Stores.persistentVersionedKeyValueStore("rv", 1000))), joiner,
        Joined.with_(S, S, S).withGracePeriod(100)).to(by_offset, Produced.with_(S, S)))
    left = d.createInputTopic("l", S, S)
    left.pipeInput("k", "a", 50)      # offset 0, held
    left.pipeInput("x", "z", 300)     # offset 1: releases k (and is held itself)
    assert written(d, "out-l-0", "out-l-1") == {"out-l-0": [("k", "a+None")], "out-l-1": []}


def test_a_cache_eviction_does_not_move_the_current_records_position():
    """An eviction while a record is processed forwards the evicted entry at its own position, then
    puts the current record's back (CachingKeyValueStore.putAndMaybeForward restores the context),
    so the record's next child (here a sink with a topic name extractor) reads its own offset. Two
    records in one commit (the interpreter with a cache of room for one count)."""
    from streams.interpreter import Interpreter

    def build(b):
        s = b.stream("in", C)
        s.groupByKey().count().toStream().to(lambda k, v, ctx: f"count-{ctx.offset}", Produced.with_(S, L))
        s.to(by_offset, Produced.with_(S, S))
    b = StreamsBuilder()
    build(b)
    interp = Interpreter(b.build(), DEFAULTS, cache_bytes=200)
    interp.pipe("in", S.serialize("a"), S.serialize("1"), 0)     # offset 0: a's count cached
    interp.pipe("in", S.serialize("b"), S.serialize("2"), 1)     # offset 1: its put evicts a's count
    sent = {t: [S.deserialize(r[0]) for part in parts for r in part] for t, parts in interp.topics.items() if t != "in"}
    assert sent == {"out-in-0": ["a"], "out-in-1": ["b"], "count-0": ["a"]}
