"""The shapes and orders docs/streams.md gives the read-only store views: a session store's
``all()`` (Riverlog's own; Kafka's ``ReadOnlySessionStore`` has none) by start, then end, then
key, its key-range fetches by key, then end; a window store's ``fetch(key, start)`` the value."""
from __future__ import annotations

from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Materialized
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from streams.windows import SessionWindows

S = Serdes.String()


def test_session_all_is_by_start_and_key_range_fetches_are_by_key():
    b = StreamsBuilder()
    (b.stream("s", Consumed.with_(S, S)).groupByKey()
     .windowedBy(SessionWindows.ofInactivityGapAndGrace(5, 1000)).count(Materialized.as_("ss")))
    d = TopologyTestDriver(b.build(), {"application.id": "a"})
    topic = d.createInputTopic("s", S, S)
    for key, t in (("b", 1), ("a", 2), ("a", 20), ("b", 30)):
        topic.pipeInput(key, "x", t)
    store = d.getSessionStore("ss")
    by_start = [("b", 1), ("a", 2), ("a", 20), ("b", 30)]
    by_key = [("a", 2), ("a", 20), ("b", 1), ("b", 30)]
    assert [(w.key, w.start) for w, _ in store.all()] == by_start
    assert [(w.key, w.start) for w, _ in store.fetch("a", "b")] == by_key
    assert [(w.key, w.start) for w, _ in store.findSessions("a", "b", 0, 100)] == by_key
    assert [(w.key, w.start) for w, _ in store.backwardFindSessions("a", "b", 0, 100)] == by_key[::-1]


def test_window_fetch_at_a_start_is_the_value_and_a_time_range_gives_starts_and_values():
    from streams.windows import TimeWindows
    b = StreamsBuilder()
    (b.stream("s", Consumed.with_(S, S)).groupByKey()
     .windowedBy(TimeWindows.ofSizeAndGrace(10, 1000)).count(Materialized.as_("w")))
    d = TopologyTestDriver(b.build(), {"application.id": "a"})
    topic = d.createInputTopic("s", S, S)
    for t in (1, 3, 12):
        topic.pipeInput("a", "x", t)
    store = d.getWindowStore("w")
    assert (store.fetch("a", 0), store.fetch("a", 10), store.fetch("a", 5)) == (2, 1, None)
    assert store.fetch("a", 0, 10) == [(0, 2), (10, 1)]
    assert store.backwardFetch("a", 0, 10) == [(10, 1), (0, 2)]
