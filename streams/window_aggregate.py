"""Windowed aggregations: Kafka's ``KStreamWindowAggregate``, ``KStreamSlidingWindowAggregate`` and
``KStreamSessionWindowAggregate`` as push processors over the task's stores.

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

from streams.errors import StreamsError, TopologyError
from streams.processor import Processor
from streams.record import Change, Record, Windowed
from streams.stores import StoreSpec
from streams.topology import changelog_topic
from streams.windows import SessionWindows, SlidingWindows, TimeWindows

ON_WINDOW_UPDATE, ON_WINDOW_CLOSE = "onWindowUpdate", "onWindowClose"
_SEQNUM = bytes(4)     # TimeFirstWindowKeySchema's key ends with a 4-byte seqnum (0 without duplicates)


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


_SAME = object()


def _vt(agg, ts):
    """Kafka's ``ValueAndTimestamp.make``: no aggregate, no entry."""
    return None if agg is None else (agg, ts)


class _WindowedAggregate(Processor):
    """Stream time, store time, retention, dropping and emission shared by the three processors."""
    min_retention_name = "size + grace"

    def __init__(self, store_name: str, windows, initializer, aggregator, emit: str = ON_WINDOW_UPDATE):
        if emit not in (ON_WINDOW_UPDATE, ON_WINDOW_CLOSE):
            raise TopologyError(f"emit strategy {emit!r}: use {ON_WINDOW_UPDATE!r} or {ON_WINDOW_CLOSE!r}",
                                argument="emit")
        self.store_name, self.windows, self.emit = store_name, windows, emit
        self.initializer, self.aggregator = initializer, aggregator

    kind = "window"

    def store_spec(self, retention: int | None = None) -> StoreSpec:
        spec = StoreSpec(self.store_name, self.kind, retention or self.windows.retentionMs())
        if self.kind == "window":
            spec.window_size = self.windows.size()
        return spec

    def init(self, context) -> None:
        super().init(context)
        self.store = context.store(self.store_name)
        self.retention = self.store.retention or self.windows.retentionMs()
        if self.retention < self.windows.retentionMs():
            raise TopologyError(f"The retention period of the store {self.store_name!r} must be no smaller than "
                                f"{self.min_retention_name} ({self.windows.retentionMs()} ms), got {self.retention} ms",
                                argument="retention")

    def _key_bytes(self, key) -> bytes:
        """``key`` as the store's key serde writes it: the order of Kafka's time-first schemas."""
        serde = self.context.store_key_serde(self.store_name)
        if serde is None:
            return repr(key).encode()
        return serde.serialize(key, changelog_topic(self.context.application_id, self.store_name)) or b""

    def _drop(self) -> None:
        self.context.set_meta("dropped", (self.context.meta("dropped") or 0) + 1)

    def _observe_store_time(self, t: int) -> None:
        """Kafka's store-side stream time (largest window start / session end written) and the
        retention it implies, applied eagerly: what Kafka's fetches no longer see is deleted."""
        seen = self.context.meta("storeTime")
        if seen is None or t > seen:
            self.context.set_meta("storeTime", t)
            self.store.expire_all(t - self.retention + (0 if self.emit == ON_WINDOW_CLOSE else 1))

    def _forward_update(self, window: Windowed, old, new, ts: int, headers=(), before=_SAME) -> None:
        """Forward an update at once, or through the task's record cache (Kafka's caching window
        and session stores): the window's latest update at commit. ``before`` is what the store
        held for the window (if not ``old``): the cached change's old value, as Kafka's flush
        reads it from the store, so a window nothing downstream saw is never retracted."""
        if self.emit != ON_WINDOW_UPDATE:
            return
        record = Record(window, Change(new, old), ts, headers)
        cache = self.context.record_cache(self.store_name)
        if cache is None:
            self.forward(record)
        else:
            cache.put(self.store_name, window, new, old if before is _SAME else before, ts, record,
                      self.context.source(), self._flush)

    def _flush(self, entry) -> None:
        if entry.new is not None or entry.old is not None:   # a session created and merged away unseen: nothing
            self.forward(entry.record.with_(value=Change(entry.new, entry.old)))

    def _should_emit_final(self, close: int) -> bool:
        last = self.context.meta("lastEmitCloseTime")
        return self.emit == ON_WINDOW_CLOSE and (last is None or last < close)


class TimeWindowAggregate(_WindowedAggregate):
    """Hopping and tumbling windows (Kafka's ``KStreamWindowAggregate``)."""

    def __init__(self, store_name: str, windows: TimeWindows, initializer, aggregator, emit: str = ON_WINDOW_UPDATE):
        if not isinstance(windows, TimeWindows):
            raise TopologyError("TimeWindowAggregate needs TimeWindows", argument="windows")
        super().__init__(store_name, windows, initializer, aggregator, emit)

    def process(self, record: Record) -> None:
        key, ts = record.key, record.timestamp
        if key is None:
            self._drop()
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
                self._drop()
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


class SlidingWindowAggregate(_WindowedAggregate):
    """Sliding windows (Kafka's ``KStreamSlidingWindowAggregate``, its reverse-iterator path): each
    record creates its left window ``[ts − d, ts]`` and, when a later record exists within d, its
    right window ``[ts + 1, ts + 1 + d]``; records before d share the window ``[0, d]``."""
    min_retention_name = "2 * time difference + grace"

    def __init__(self, store_name: str, windows: SlidingWindows, initializer, aggregator,
                 emit: str = ON_WINDOW_UPDATE):
        if not isinstance(windows, SlidingWindows):
            raise TopologyError("SlidingWindowAggregate needs SlidingWindows", argument="windows")
        super().__init__(store_name, windows, initializer, aggregator, emit)
        self.diff = windows.timeDifferenceMs()

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            self._drop()
            return
        ts = record.timestamp
        close = self.observe_stream_time("streamTime", ts) - self.windows.gracePeriodMs()
        if ts + self.diff < close:
            self._drop()
            return
        if ts < self.diff:
            self._process_early(record, close)
            return
        self._process_reverse(record, close)
        self._maybe_emit_final(record, close)

    def _process_reverse(self, record: Record, close: int) -> None:
        key, ts, d = record.key, record.timestamp, self.diff
        starts, left_agg, right_agg = set(), None, None
        left_created = right_created = False
        previous_ts = None
        for start, vt in reversed(self.store.fetch_range(key, max(0, ts - 2 * d), ts + 1)):
            starts.add(start)
            end, max_ts = start + d, vt[1]
            if start == ts + 1:
                right_created = True
            elif end > ts:
                if right_agg is None:
                    right_agg = vt
                self._update(start, vt, record, close)
            elif end == ts:
                left_created = True
                self._update(start, vt, record, close)
                if max_ts < ts:
                    previous_ts = max_ts
                else:
                    return
            else:                                  # end < ts: the previous record's window
                left_agg, previous_ts = vt, max_ts
                break
        self._create_windows(record, close, starts, right_agg, left_agg, left_created, right_created, previous_ts)

    def _process_early(self, record: Record, close: int) -> None:
        """Records with ts < d: their left window would start before 0, so they all go into
        ``[0, d]``; their right windows are made as later records arrive (Kafka's processEarly)."""
        key, ts = record.key, record.timestamp
        combined = right_agg = previous_ts = None
        right_created, starts = False, set()
        for start, vt in self.store.fetch_range(key, 0, ts + 1):
            starts.add(start)
            if start == 0:
                combined = vt
                if vt[1] < ts:
                    previous_ts = vt[1]
            elif start <= ts:
                right_agg = vt
                self._update(start, vt, record, close)
            elif start == ts + 1:
                right_created = True
            else:
                raise StreamsError(f"unexpected sliding window starting at {start} for a record at {ts}")
        if right_agg is None and combined is not None and combined[1] > ts:
            right_agg = combined
        if not right_created and right_agg is not None and right_agg[1] > ts:
            self._create_current_right(record, right_agg)
        if previous_ts is not None and previous_ts + 1 not in starts:
            self._update(previous_ts + 1, _vt(self.initializer(), ts), record, close)
        self._update(0, combined if combined is not None else _vt(self.initializer(), ts), record, close)

    def _create_windows(self, record, close, starts, right_agg, left_agg, left_created, right_created,
                        previous_ts) -> None:
        ts, d = record.timestamp, self.diff
        if previous_ts is not None:
            previous_right = previous_ts + 1
            if previous_right not in starts and previous_right + d >= ts:
                self._update(previous_right, _vt(self.initializer(), ts), record, close)
        if not left_created:
            if previous_ts is not None and ts - d <= previous_ts:
                vt = _vt(left_agg[0], ts)
            else:
                vt = _vt(self.initializer(), ts)
            self._update(ts - d, vt, record, close)
        if not right_created and right_agg is not None and right_agg[1] > ts:
            self._create_current_right(record, right_agg)

    def _create_current_right(self, record: Record, right_agg) -> None:
        start = record.timestamp + 1
        self.store.put(record.key, right_agg, start)
        self._observe_store_time(start)
        self._forward_update(Windowed(record.key, start, start + self.diff), None, right_agg[0], right_agg[1],
                             record.headers)

    def _update(self, start: int, vt, record: Record, close: int) -> None:
        end = start + self.diff
        if end < close:
            self._drop()
            return
        old = None if vt is None else vt[0]
        new = self.aggregator(record.key, record.value, old)
        new_ts = record.timestamp if old is None else max(record.timestamp, vt[1])
        self.store.put(record.key, _vt(new, new_ts), start)
        self._observe_store_time(start)
        self._forward_update(Windowed(record.key, start, end), old, new, new_ts, record.headers)

    def _maybe_emit_final(self, record: Record, close: int) -> None:
        if not self._should_emit_final(close):
            return
        last = self.context.meta("lastEmitCloseTime")
        upper = close - self.diff - 1              # inclusive ends: end < close
        if upper < 0:
            return
        lower = 0 if last is None else max(0, last - self.diff)
        closed = self.store.fetch_all(lower, upper)
        for key, start, (agg, ts) in sorted(closed, key=lambda e: (e[1], self._key_bytes(e[0]) + _SEQNUM)):
            self.forward(Record(Windowed(key, start, start + self.diff), Change(agg, None), ts, record.headers))
        self.context.set_meta("lastEmitCloseTime", close)


class SessionWindowAggregate(_WindowedAggregate):
    """Session windows (Kafka's ``KStreamSessionWindowAggregate``). A record merges every session of
    its key that ends at or after ``ts − gap`` and starts at or before ``ts + gap``; the merged-away
    sessions are retracted (``Change(None, old)`` at their end) before the merged one is forwarded."""
    kind = "session"
    min_retention_name = "inactivity gap + grace"

    def __init__(self, store_name: str, windows: SessionWindows, initializer, aggregator, merger,
                 emit: str = ON_WINDOW_UPDATE):
        if not isinstance(windows, SessionWindows):
            raise TopologyError("SessionWindowAggregate needs SessionWindows", argument="windows")
        if merger is None:
            raise TopologyError("session aggregations need a merger", argument="merger")
        super().__init__(store_name, windows, initializer, aggregator, emit)
        self.merger = merger

    def process(self, record: Record) -> None:
        key, ts = record.key, record.timestamp
        if key is None:
            self._drop()
            return
        gap = self.windows.inactivityGap()
        close = self.observe_stream_time("streamTime", ts) - self.windows.gracePeriodMs() - gap
        merged, agg, start, end = [], self.initializer(), ts, ts
        for window, value in self._live_sessions(key, ts - gap, ts + gap):
            merged.append((window, value))
            agg = self.merger(key, agg, value)
            start, end = min(start, window.start), max(end, window.end)
        if end < close:
            self._drop()
        else:
            if (start, end) != (ts, ts):
                for window, value in merged:
                    self.store.remove(window)
                    self._observe_store_time(window.end)
                    self._forward_update(window, value, None, window.end, record.headers)
            agg = self.aggregator(key, record.value, agg)
            session = Windowed(key, start, end)
            self.store.put(session, agg)
            self._observe_store_time(end)
            same = next((value for window, value in merged if window == session), None)
            self._forward_update(session, None, agg, end, record.headers, before=same)
        self._maybe_emit_final(record, close)

    def _observe_store_time(self, t: int) -> None:
        """Kafka's time-ordered session store finds closed sessions by end time without the
        retention filter its key lookups apply; so with emit-on-close a session is deleted only
        once emitted, and key lookups skip what Kafka's would not see."""
        if self.emit == ON_WINDOW_UPDATE:
            super()._observe_store_time(t)
            return
        seen = self.context.meta("storeTime")
        if seen is None or t > seen:
            self.context.set_meta("storeTime", t)
            last = self.context.meta("lastEmitCloseTime")
            if last is not None:
                self.store.expire_all(min(t - self.retention + 1, last))

    def _live_sessions(self, key, earliest_end: int, latest_start: int):
        store_time = self.context.meta("storeTime")
        if store_time is not None:
            earliest_end = max(earliest_end, store_time - self.retention + 1)
        return self.store.find_sessions(key, earliest_end, latest_start)

    def _maybe_emit_final(self, record: Record, close: int) -> None:
        if not self._should_emit_final(close):
            return
        last = self.context.meta("lastEmitCloseTime")
        upper = close - 1                          # inclusive ends: end < close
        lower = max(0, -1 if last is None else last)
        if upper < 0 or upper < lower:
            return
        closed = self.store.find_sessions_ending(lower, upper)
        for window, agg in sorted(closed, key=lambda e: (e[0].end, e[0].start, self._key_bytes(e[0].key))):
            self.forward(Record(window, Change(agg, None), window.end, record.headers))
        self.context.set_meta("lastEmitCloseTime", close)
