"""Interactive-query reads on the view both ``TopologyTestDriver`` and ``StreamsApp.store`` return:
Kafka's ``ReadOnlyKeyValueStore.range/reverseRange/reverseAll`` (inclusive bounds, None open) and
``ReadOnlyWindowStore.fetch/backwardFetch/fetchAll/backwardFetchAll``."""
from __future__ import annotations

import pytest

from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Materialized
from streams.record import Windowed
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from streams.windows import TimeWindows

pytestmark = pytest.mark.unit

S = Serdes.String()


def _driver(build):
    b = StreamsBuilder()
    build(b.stream("in", Consumed.with_(S, S)))
    d = TopologyTestDriver(b.build(), {"application.id": "iq"})
    return d, d.createInputTopic("in", S, S)


def test_a_session_aggregate_that_is_a_pair_is_read_whole_and_timestamped_views_give_value_and_timestamp():
    """Session stores keep the aggregate alone: a pair was read as its first element, taken for
    a (value, timestamp); a timestamped view gives Kafka's ValueAndTimestamp; null keys refused."""
    from streams.windows import SessionWindows

    def build(s):
        s.toTable(materialized=Materialized.as_("kv"))
        s.groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(5, 1000)).aggregate(
            lambda: (0, ""), lambda k, v, agg: (agg[0] + 1, agg[1] + v), lambda k, a, c: (a[0] + c[0], a[1] + c[1]),
            materialized=Materialized.as_("sessions"))
    d, t = _driver(build)
    t.pipeInput("a", "y", 2)
    t.pipeInput("a", "w", 4)
    sessions = d.getSessionStore("sessions")
    assert sessions.fetch("a") == [(Windowed("a", 2, 4), (2, "yw"))]
    assert sessions.findSessions("a", 0, 100) == [(Windowed("a", 2, 4), (2, "yw"))]
    stamped = d.getTimestampedKeyValueStore("kv").get("a")
    assert (stamped.value, stamped.timestamp) == ("w", 4)
    assert d.getKeyValueStore("kv").get("a") == "w"
    for read in (lambda: d.getKeyValueStore("kv").get(None), lambda: sessions.fetch(None)):
        with pytest.raises(ValueError, match="key cannot be null"):
            read()


def test_key_value_range_is_inclusive_ordered_by_key_and_open_on_none():
    d, t = _driver(lambda s: s.toTable(materialized=Materialized.as_("latest")))
    for i, k in enumerate(["d", "a", "c", "e", "b"]):
        t.pipeInput(k, k.upper(), i)
    t.pipeInput("c", None, 9)   # a tombstone leaves the range
    store = d.getKeyValueStore("latest")
    assert store.range("b", "d") == [("b", "B"), ("d", "D")]
    assert store.range(None, "b") == [("a", "A"), ("b", "B")]
    assert store.range("d", None) == [("d", "D"), ("e", "E")]
    assert store.range("x", "z") == []
    assert store.reverseRange("a", "d") == [("d", "D"), ("b", "B"), ("a", "A")]
    assert [k for k, _ in store.reverseAll()] == ["e", "d", "b", "a"]


def test_window_fetch_backward_fetch_and_fetch_all_by_window_start():
    d, t = _driver(lambda s: s.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, 1_000)).count(
        materialized=Materialized.as_("counts")))
    for k, ts in [("a", 1), ("a", 2), ("b", 5), ("a", 12), ("b", 25), ("a", 31)]:
        t.pipeInput(k, "x", ts)
    store = d.getWindowStore("counts")
    assert store.fetch("a", 0, 20) == [(0, 2), (10, 1)]
    assert store.backwardFetch("a", 0, 40) == [(30, 1), (10, 1), (0, 2)]
    assert store.fetchAll(0, 19) == [(Windowed("a", 0, 10), 2), (Windowed("b", 0, 10), 1), (Windowed("a", 10, 20), 1)]
    assert store.backwardFetchAll(20, 30) == [(Windowed("a", 30, 40), 1), (Windowed("b", 20, 30), 1)]


def test_window_fetch_over_a_key_range():
    """ReadOnlyWindowStore.fetch(keyFrom, keyTo, timeFrom, timeTo): the windows of the keys in the
    range (inclusive, None open) that start in the time range, as (Windowed, value); by key, then
    start (Kafka's order within one segment)."""
    d, t = _driver(lambda s: s.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, 1_000)).count(
        materialized=Materialized.as_("counts")))
    for k, ts in [("c", 3), ("a", 1), ("b", 5), ("a", 12), ("b", 25), ("a", 2)]:
        t.pipeInput(k, "x", ts)
    store = d.getWindowStore("counts")
    assert store.fetch("a", "b", 0, 20) == [(Windowed("a", 0, 10), 2), (Windowed("a", 10, 20), 1),
                                            (Windowed("b", 0, 10), 1), (Windowed("b", 20, 30), 1)]
    assert store.fetch("b", None, 0, 100) == [(Windowed("b", 0, 10), 1), (Windowed("b", 20, 30), 1),
                                              (Windowed("c", 0, 10), 1)]
    assert store.backwardFetch(None, "a", 5, 15) == [(Windowed("a", 10, 20), 1)]
    with pytest.raises(TypeError, match="window store fetch takes"):
        store.fetch("a")


def test_session_fetch_over_a_key_range_and_fetch_session():
    """ReadOnlySessionStore.fetch(keyFrom, keyTo) by key, then end; fetchSession(key, start, end)
    one session's aggregate; findSessions over a key range."""
    from streams.windows import SessionWindows
    d, t = _driver(lambda s: s.groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(5, 1_000)).count(
        materialized=Materialized.as_("sessions")))
    for k, ts in [("b", 30), ("a", 10), ("a", 15), ("c", 1), ("a", 40)]:
        t.pipeInput(k, "x", ts)
    store = d.getSessionStore("sessions")
    assert store.fetch("a", "b") == [(Windowed("a", 10, 15), 2), (Windowed("a", 40, 40), 1), (Windowed("b", 30, 30), 1)]
    assert store.fetchSession("a", 10, 15) == 2
    assert store.fetchSession("a", 10, 14) is None
    assert store.findSessions("a", "c", 20, 35) == [(Windowed("b", 30, 30), 1)]
    assert store.findSessions(None, None, 20, 35) == [(Windowed("b", 30, 30), 1)]
    assert store.backwardFetch("b", "c") == [(Windowed("c", 1, 1), 1), (Windowed("b", 30, 30), 1)]
