"""Sliding windows' aggregation: Kafka's ``KStreamSlidingWindowAggregate`` as a push processor over
the task's window store (the rules: :mod:`streams.window_aggregate`).
"""
from __future__ import annotations

from streams.abstract_window_aggregate import _SEQNUM, ON_WINDOW_UPDATE, _vt, _WindowedAggregate
from streams.errors import StreamsError, TopologyError
from streams.record import Change, Record, Windowed
from streams.windows import SlidingWindows


class SlidingWindowAggregate(_WindowedAggregate):
    """Sliding windows (Kafka's ``KStreamSlidingWindowAggregate``, its reverse-iterator path): each
    record creates its left window ``[ts − d, ts]`` and, when a later record exists within d, its
    right window ``[ts + 1, ts + 1 + d]``; records before d share the window ``[0, d]``."""
    min_retention_name = "2 * time difference + grace"
    null_skip_reason = "null key or value"

    def __init__(self, store_name: str, windows: SlidingWindows, initializer, aggregator,
                 emit: str = ON_WINDOW_UPDATE):
        if not isinstance(windows, SlidingWindows):
            raise TopologyError("SlidingWindowAggregate needs SlidingWindows", argument="windows")
        super().__init__(store_name, windows, initializer, aggregator, emit)
        self.diff = windows.timeDifferenceMs()

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            self._drop_null()
            return
        ts = record.timestamp
        close = self.observe_stream_time("streamTime", ts) - self.windows.gracePeriodMs()
        if ts + self.diff < close:
            self._drop_expired(ts, f"[{ts},{ts + self.diff}]", close)
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
            self._drop_expired(record.timestamp, f"[{start},{end}]", close)
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
