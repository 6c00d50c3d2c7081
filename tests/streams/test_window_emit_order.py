"""The order ``emitStrategy(onWindowClose)`` forwards the windows that close together: Kafka reads
them from its time-first stores, so by window start (session: end, then start), then by the key's
serialized bytes (``PrefixedWindowKeySchemas.TimeFirstWindowKeySchema``,
``PrefixedSessionKeySchemas.TimeFirstSessionKeySchema``) — not by arrival."""
from __future__ import annotations

import pytest

from streams import Consumed, EmitStrategy, Grouped, Materialized, Produced, Serdes, StreamsBuilder
from streams.testing import TopologyTestDriver
from streams.windows import SessionWindows, SlidingWindows, TimeWindows

pytestmark = pytest.mark.unit
S, L = Serdes.String(), Serdes.Long()


def _closed(windows, key_serde, inputs):
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(key_serde, S)).groupByKey(Grouped.with_(key_serde, S)).windowedBy(windows)
     .emitStrategy(EmitStrategy.onWindowClose()).count(materialized=Materialized.as_("c").withRetention(100_000))
     .toStream().map(lambda k, v: (f"{k.key}@{k.start}/{k.end}", v)).to("out", Produced.with_(S, L)))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    i = d.createInputTopic("in", key_serde, S)
    for k, ts in inputs:
        i.pipeInput(k, "x", ts)
    return [k for k, _ in d.createOutputTopic("out", S, L).readKeyValuesToList()]


@pytest.mark.parametrize("windows", [TimeWindows.ofSizeWithNoGrace(10), SlidingWindows.ofTimeDifferenceWithNoGrace(10)],
                         ids=["time", "sliding"])
def test_windows_of_one_start_close_by_serialized_key(windows):
    # Long keys: -1 is 0xFF... and sorts after 7; "arrival" would be 7, -1, 3
    out = _closed(windows, L, [(7, 5), (-1, 5), (3, 5), (99, 100)])
    assert out == ["3@0/10", "7@0/10", "-1@0/10"]


def test_sessions_of_one_end_close_by_start_then_serialized_key():
    out = _closed(SessionWindows.ofInactivityGapWithNoGrace(10), S,
                  [("c", 5), ("b", 0), ("a", 5), ("b", 5), ("z", 100)])
    assert out == ["b@0/5", "a@5/5", "c@5/5"]
