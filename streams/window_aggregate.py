"""Windowed aggregations: Kafka's ``KStreamWindowAggregate``, ``KStreamSlidingWindowAggregate`` and
``KStreamSessionWindowAggregate`` as push processors over the task's stores. This module has the
time windows' processor and the DSL's aggregation functions; the sliding and session processors are
in :mod:`streams.sliding_window_aggregate` and :mod:`streams.session_window_aggregate`, what the
three share in :mod:`streams.abstract_window_aggregate`.

Each forwards ``Record(Windowed(key, start, end), Change(new, old), ts)`` as Kafka does with old
values on: ``old`` is the aggregate the update started from (the initializer's value for a new time
or sliding window, ``None`` for a new session). A result's timestamp is the largest record
timestamp in the window (time, sliding) or the session's end. With the task's record cache, a
window's updates wait there and its latest is forwarded at commit, ``old`` being what the store
held for it at the last commit (None for a new window, as Kafka's caching stores forward).

Rules mirrored from Kafka (``close`` = stream time − grace; stream time = largest timestamp seen):

- time window ``[start, end)``: updated iff ``end > close``;
- sliding window ``[start, end]``: a record is dropped iff ``ts + timeDifference < close``, a
  window updated iff ``end >= close``;
- session ``[start, end]``: dropped iff the merged session's ``end < stream time − grace − gap``.

With ``emit="onWindowClose"`` (KIP-825) nothing is forwarded per update; after each record the
windows that closed since the last emission are forwarded once, ``old`` = None, in the order of
Kafka's time-first store keys: by window start, then serialized key (``TimeFirstWindowKeySchema``:
time, key bytes, seqnum), or for sessions by end, start, then serialized key
(``TimeFirstSessionKeySchema``); without a key serde, ``repr`` stands in for the key's bytes.
Kafka throttles that check by wall clock; here it runs on every record (its interval-0 setting),
since processing must not read the clock.

Retention mirrors Kafka's segmented stores: a store's time is the largest window start (session
end) put; entries older than store time − retention (+1 with emit-on-update's key-first stores)
are gone (sessions with emit-on-close: see ``SessionWindowAggregate``). So with the default retention (size + grace), a window that closes *and* expires on the
same jump of stream time is never emitted on close — as in Kafka; give the store a longer
retention to avoid it.

    agg = TimeWindowAggregate("counts", TimeWindows.ofSizeWithNoGrace("1 minute"), *count_functions()[:2])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from streams.abstract_window_aggregate import (_SEQNUM, ON_WINDOW_CLOSE, ON_WINDOW_UPDATE,  # noqa: F401
                                               _vt, _WindowedAggregate)
from streams.errors import TopologyError
from streams.record import Change, Record, Windowed
from streams.session_window_aggregate import SessionWindowAggregate  # noqa: F401 (public here too)
from streams.sliding_window_aggregate import SlidingWindowAggregate  # noqa: F401 (public here too)
from streams.windows import TimeWindows


@dataclass(frozen=True)
class Aggregation:
    """The functions an aggregation runs: how the DSL's count/reduce/aggregate reach one processor."""
    initializer: Callable[[], Any]
    aggregator: Callable[[Any, Any, Any], Any]
    merger: Callable[[Any, Any, Any], Any] | None = None   # sessions only


def _zero():
    return 0


def _plus_one(key, value, aggregate):
    return aggregate + 1


def _add(key, one, two):
    return one + two


def _none():
    return None


class _ReduceAggregator:
    """Kafka's ``aggregatorForReducer``: the first value is the aggregate, then ``reducer(agg, v)``."""
    def __init__(self, reducer):
        self.reducer = reducer

    def __call__(self, key, value, aggregate):
        return value if aggregate is None else self.reducer(aggregate, value)


class _MergerForAggregator:
    """Kafka's ``mergerForAggregator``: merging sessions folds the second into the first."""
    def __init__(self, aggregator):
        self.aggregator = aggregator

    def __call__(self, key, one, two):
        return self.aggregator(key, two, one)


def count_functions() -> Aggregation:
    return Aggregation(_zero, _plus_one, _add)


def reduce_functions(reducer: Callable[[Any, Any], Any]) -> Aggregation:
    aggregator = _ReduceAggregator(reducer)
    return Aggregation(_none, aggregator, _MergerForAggregator(aggregator))


def aggregate_functions(initializer, aggregator, merger=None) -> Aggregation:
    return Aggregation(initializer, aggregator, merger)


class TimeWindowAggregate(_WindowedAggregate):
    """Hopping and tumbling windows (Kafka's ``KStreamWindowAggregate``)."""

    def __init__(self, store_name: str, windows: TimeWindows, initializer, aggregator, emit: str = ON_WINDOW_UPDATE):
        if not isinstance(windows, TimeWindows):
            raise TopologyError("TimeWindowAggregate needs TimeWindows", argument="windows")
        super().__init__(store_name, windows, initializer, aggregator, emit)

    def process(self, record: Record) -> None:
        key, ts = record.key, record.timestamp
        if key is None:
            self._drop_null()
            return
        close = self.observe_stream_time("streamTime", ts) - self.windows.gracePeriodMs()
        for start, end in self.windows.windowsFor(ts).items():
            if end > close:
                stored = self.store.fetch(key, start)
                if stored is None:
                    old, new_ts = self.initializer(), ts
                else:
                    old, new_ts = stored[0], max(ts, stored[1])
                new = self.aggregator(key, record.value, old)
                self.store.put(key, _vt(new, new_ts), start)
                self._observe_store_time(start)
                self._forward_update(Windowed(key, start, end), old, new, new_ts, record.headers,
                                     before=None if stored is None else old)
            else:
                self._drop_expired(ts, f"[{start},{end})", close)
        self._maybe_emit_final(record, close)

    def add_counted(self, key, start: int, count: int, ts: int, headers=()) -> None:
        """``count`` records of one window at once (:mod:`streams.window_combine`), ``ts`` the
        largest of their timestamps. The batch's own stream time already dropped those it closes;
        the stream time before the batch decides for the rest, so it is advanced only after every
        window (:meth:`observe_counted`)."""
        seen = self.context.meta("streamTime")
        end = start + self.windows.size()
        if seen is not None and end <= seen - self.windows.gracePeriodMs():
            self.context.set_meta("dropped", (self.context.meta("dropped") or 0) + count)
            return
        stored = self.store.fetch(key, start)
        old, new_ts = (self.initializer(), ts) if stored is None else (stored[0], max(ts, stored[1]))
        new = old + count
        self.store.put(key, _vt(new, new_ts), start)
        self._observe_store_time(start)
        self._forward_update(Windowed(key, start, end), old, new, new_ts, headers,
                             before=None if stored is None else old)

    def observe_counted(self, stream_time: int | None, dropped: int) -> None:
        """The end of a combined batch: the records it dropped before the task, its stream time."""
        if dropped:
            self.context.set_meta("dropped", (self.context.meta("dropped") or 0) + dropped)
        if stream_time is not None:
            self.observe_stream_time("streamTime", stream_time)

    def _maybe_emit_final(self, record: Record, close: int) -> None:
        if not self._should_emit_final(close):
            return
        size, last = self.windows.size(), self.context.meta("lastEmitCloseTime")
        upper = close - size                       # windows with start <= upper have end <= close
        if upper < 0:
            return
        lower = 0 if last is None else max(0, last - size) + 1
        if last is not None and self.windows.windowsFor(upper) == self.windows.windowsFor(lower - 1):
            return                                 # no window start in [lower, upper]
        closed = self.store.fetch_all(lower, upper)
        for key, start, (agg, ts) in sorted(closed, key=lambda e: (e[1], self._key_bytes(e[0]) + _SEQNUM)):
            self.forward(Record(Windowed(key, start, start + size), Change(agg, None), ts, record.headers))
        self.context.set_meta("lastEmitCloseTime", close)
