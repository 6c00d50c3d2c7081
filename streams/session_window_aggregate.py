"""Session windows' aggregation: Kafka's ``KStreamSessionWindowAggregate`` as a push processor over
the task's session store (the rules: :mod:`streams.window_aggregate`).
"""
from __future__ import annotations

from streams.abstract_window_aggregate import ON_WINDOW_UPDATE, _WindowedAggregate
from streams.errors import TopologyError
from streams.record import Change, Record, Windowed
from streams.windows import SessionWindows


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
            self._drop_null()
            return
        gap = self.windows.inactivityGap()
        close = self.observe_stream_time("streamTime", ts) - self.windows.gracePeriodMs() - gap
        merged, agg, start, end = [], self.initializer(), ts, ts
        for window, value in self._live_sessions(key, ts - gap, ts + gap):
            merged.append((window, value))
            agg = self.merger(key, agg, value)
            start, end = min(start, window.start), max(end, window.end)
        if end < close:
            self._drop_expired(ts, f"[{start},{end}]", close)
        else:
            if (start, end) != (ts, ts):
                for window, value in merged:
                    self.store.remove(window)
                    self._observe_store_time(window.end)
                    self._forward_update(window, value, None, window.end, self._update_headers(record))
            agg = self.aggregator(key, record.value, agg)
            session = Windowed(key, start, end)
            self.store.put(session, agg)
            self._observe_store_time(end)
            same = next((value for window, value in merged if window == session), None)
            self._forward_update(session, None, agg, end, self._update_headers(record), before=same)
        self._maybe_emit_final(record, close)

    def _update_headers(self, record: Record) -> tuple:
        """The headers of an update: Kafka's ``maybeForwardUpdate`` forwards a new record, which
        has none; only a caching store's flush gives it the context (so the headers) of the record
        that put it. So a session store with caching disabled (``withCachingDisabled``, or
        ``statestore.cache.max.bytes=0``) forwards its updates without headers, where time and
        sliding windows forward the record's."""
        return record.headers if self.context.caching(self.store_name) else ()

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
            self._expire_emitted()

    def _expire_emitted(self) -> None:
        """Delete the sessions both emitted and out of retention: what Kafka's key lookups and
        store views no longer see once they are forwarded."""
        store_time, last = self.context.meta("storeTime"), self.context.meta("lastEmitCloseTime")
        if store_time is not None and last is not None:
            self.store.expire_all(min(store_time - self.retention + 1, last))

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
        self._expire_emitted()
