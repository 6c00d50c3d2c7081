"""Stream–stream windowed joins: Kafka's ``KStreamJoinWindow`` and ``KStreamKStreamJoin`` (left
and right side) with the outer-join store of the spurious-result fix (KAFKA-10847, KIP-633).

Each side's records are kept in a window store (one list of values per key and timestamp, so
many-to-many joins keep duplicates) for ``before + after + grace``. A record of one side joins
every record of the other side with the same key and a timestamp in
``[ts - before, ts + after]`` (the other side looks ``[ts - after, ts + before]``); the result's
timestamp is the larger of the two. A left/outer record with no match yet waits in the shared
outer store, keyed ``(timestamp, side, key)``, until its window closes — stream time (the largest
timestamp either side has seen) passes ``ts + after + grace`` for a left record,
``ts + before + grace`` for a right one — and is then emitted joined with None, unless a match
arrived meanwhile (which deletes it). A record whose window has already closed when it arrives
(``ts + after < stream time``) is emitted at once.

Stream time and the outer store's minimum timestamp live in the task's meta, so a restored task
emits exactly what the original would have. Kafka keeps them in memory and throttles the emission
scan to once per second of wall-clock time (``emit.interval.ms.kstreams.outer.join.spurious.results.fix``);
Riverlog is event-time only, so every record that advances stream time scans (Kafka's tests set
the interval to 0 for the same reason).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from streams.processor import Processor
from streams.record import Record
from streams.windows import JoinWindows

log = logging.getLogger(__name__)

LEFT, RIGHT = 1, 0     # Kafka's TimestampedKeyAndJoinSide orders right before left at one timestamp
_MIN = -(2 ** 63)


class JoinWindowStore:
    """A join side's window store: ``(key, ts) -> tuple of values`` over a
    :class:`~streams.stores.WindowStore`, with the in-memory window store's retention rule: a
    record at or before ``observed stream time - retention`` is not stored, fetches never see
    such records, and each put drops them, whatever their key."""

    def __init__(self, context, name: str, retention: int):
        self.store, self.retention, self.context, self.name = context.store(name), retention, context, name

    def _observed(self) -> int:
        seen = self.store.backing.get(("o", "observed"))
        return _MIN if seen is None else seen

    def put(self, key, value, ts: int) -> None:
        observed = max(self._observed(), ts)
        if observed != self._observed():
            self.store.backing.put(("o", "observed"), observed)
        if ts <= observed - self.retention:
            log.warning("Skipping record for expired segment: store %s timestamp %d", self.name, ts)
            return
        self.store.put(key, (self.store.fetch(key, ts) or ()) + (value,), ts)
        # every key's expired records, as Kafka's segmented store drops whole segments: a key that
        # never comes again must not stay in the store and its compacted changelog for ever
        self.store.expire_all(observed - self.retention + 1)

    def fetch(self, key, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        lo = max(time_from, self._observed() - self.retention + 1)
        return [(ts, v) for ts, values in self.store.fetch_range(key, lo, time_to) for v in values]


class JoinWindow(Processor):
    """``KSTREAM-WINDOWED-``: forward the record, then remember it in this side's window store."""

    def __init__(self, store: str, windows: JoinWindows):
        self.store_name, self.retention = store, windows.retentionMs()

    def init(self, context) -> None:
        super().init(context)
        self.window = JoinWindowStore(context, self.store_name, self.retention)

    def process(self, record: Record) -> None:
        self.forward(record)
        if record.key is not None and record.value is not None:
            self.window.put(record.key, record.value, record.timestamp)


class StreamStreamJoin(Processor):
    """``KSTREAM-JOINTHIS-``/``-JOINOTHER-`` (``-OUTERTHIS-``/``-OUTEROTHER-`` on a side whose
    unmatched records are emitted). ``joiner(key, this, other)`` — the other side's processor gets
    the reversed joiner. ``outer_store`` is the shared store of left/outer joins (None: inner)."""

    def __init__(self, side: int, other_store: str, windows: JoinWindows, joiner: Callable, outer: bool,
                 outer_store: str | None):
        self.side, self.other_store, self.windows, self.joiner = side, other_store, windows, joiner
        self.outer, self.outer_store_name = outer, outer_store
        self.before = windows.beforeMs if side == LEFT else windows.afterMs
        self.after = windows.afterMs if side == LEFT else windows.beforeMs
        self.grace = windows.graceMs

    def init(self, context) -> None:
        super().init(context)
        self.other = JoinWindowStore(context, self.other_store, self.windows.retentionMs())
        self.pending = context.store(self.outer_store_name) if self.outer_store_name else None

    # Kafka's shared TimeTracker (stream time of both sides, least timestamp in the outer store),
    # kept in the outer store so both sides' processors and a restored task see the same
    def _get(self, name, default):
        v = self.pending.backing.get(("o", name)) if self.pending is not None else None
        return default if v is None else v

    def _set(self, name, value) -> None:
        if self.pending is not None and self.pending.backing.get(("o", name)) != value:
            self.pending.backing.put(("o", name), value)

    def process(self, record: Record) -> None:
        ts = record.timestamp
        stream_time = max(self._get("streamTime", _MIN), ts)
        self._set("streamTime", stream_time)
        if self.outer and record.key is None and record.value is not None:
            self.forward(record.with_(value=self.joiner(record.key, record.value, None)))
            return
        if record.key is None or record.value is None:
            log.warning("Skipping record due to null key or value. topic=[%s] partition=[%s] offset=[%s]",
                        *self.context.source())
            return
        if ts == stream_time and self.pending is not None:
            self._emit_closed(record, stream_time)
        matches = self.other.fetch(record.key, max(0, ts - self.before), max(0, ts + self.after))
        for other_ts, other_value in matches:
            if self.pending is not None:
                self.pending.put([1 - self.side, record.key], None, other_ts)
            self.forward(record.with_(value=self.joiner(record.key, record.value, other_value),
                                      timestamp=max(ts, other_ts)))
        if self.outer and not matches:
            if self.pending is None or max(0, ts + self.after) < stream_time:
                self.forward(record.with_(value=self.joiner(record.key, record.value, None)))
            else:
                self._set("minTime", min(self._get("minTime", 2 ** 63 - 1), ts))
                entry = [self.side, record.key]
                self.pending.put(entry, (self.pending.fetch(entry, ts) or ()) + (record.value,), ts)

    def _emit_closed(self, record: Record, stream_time: int) -> None:
        """Kafka's ``emitNonJoinedOuterRecords``: walk the outer store by timestamp, emitting and
        deleting each side's records whose window closed, until both sides reach an open one."""
        min_time = self._get("minTime", 2 ** 63 - 1)
        if min_time + self.after + self.grace >= stream_time:
            return
        min_time = 2 ** 63 - 1
        open_side = {LEFT: False, RIGHT: False}
        for ts, entries in _by_time(self.pending):
            for side, key, values in entries:
                min_time = ts
                if open_side[LEFT] and open_side[RIGHT]:
                    self._set("minTime", min_time)
                    return
                look = self.windows.afterMs if side == LEFT else self.windows.beforeMs
                if ts + look + self.grace >= stream_time:
                    open_side[side] = True
                    continue
                for v in values:
                    this, other = (v, None) if side == self.side else (None, v)
                    self.forward(Record(key, self.joiner(key, this, other), ts, record.headers))
                self.pending.put([side, key], None, ts)
        self._set("minTime", min_time)


def _by_time(store) -> list[tuple[int, list[tuple[int, Any, tuple]]]]:
    """The outer store's entries grouped by timestamp, right side first at one timestamp."""
    groups: dict[int, list] = {}
    for key, ts, values in store.fetch_all(_MIN, 2 ** 63 - 1):
        groups.setdefault(ts, []).append((key[0], key[1], values))
    return [(ts, sorted(groups[ts], key=lambda e: e[0])) for ts in sorted(groups)]
