"""What Kafka's three windowed aggregation processors share (Kafka's
``AbstractKStreamTimeWindowAggregateProcessor`` and its session sibling): the emit strategy
(``onWindowUpdate`` or KIP-825's ``onWindowClose``), stream and store time, retention, dropped
records, forwarding through the task's record cache, and the time-first key order of emission.

The rules each processor applies are in :mod:`streams.window_aggregate`; the processors are
:class:`~streams.window_aggregate.TimeWindowAggregate`,
:class:`~streams.sliding_window_aggregate.SlidingWindowAggregate` and
:class:`~streams.session_window_aggregate.SessionWindowAggregate`.
"""
from __future__ import annotations

import logging

from streams.errors import TopologyError
from streams.processor import Processor
from streams.record import Change, Record, Windowed
from streams.stores import StoreSpec
from streams.topology import changelog_topic

ON_WINDOW_UPDATE, ON_WINDOW_CLOSE = "onWindowUpdate", "onWindowClose"
_SEQNUM = bytes(4)     # TimeFirstWindowKeySchema's key ends with a 4-byte seqnum (0 without duplicates)


_SAME = object()
log = logging.getLogger("streams.windows")


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

    null_skip_reason = "null key"

    def _drop(self) -> None:
        self.context.set_meta("dropped", (self.context.meta("dropped") or 0) + 1)

    def _drop_null(self) -> None:
        """A record without a key (or, for sliding windows, a value): logged and dropped, as Kafka."""
        topic, partition, offset = self.context.source()
        if topic is None:
            log.warning("Skipping record due to %s. Topic, partition, and offset not known.", self.null_skip_reason)
        else:
            log.warning("Skipping record due to %s. topic=[%s] partition=[%s] offset=[%s]",
                        self.null_skip_reason, topic, partition, offset)
        self._drop()

    def _drop_expired(self, timestamp: int, window: str, expiration: int) -> None:
        """A record for a window already closed by the grace period: Kafka's warning, then dropped."""
        topic, partition, offset = self.context.source()
        stream_time = self.context.meta("streamTime")
        if topic is None:
            log.warning("Skipping record for expired window. Topic, partition, and offset not known. "
                        "timestamp=[%s] window=%s expiration=[%s] streamTime=[%s]",
                        timestamp, window, expiration, stream_time)
        else:
            log.warning("Skipping record for expired window. topic=[%s] partition=[%s] offset=[%s] "
                        "timestamp=[%s] window=%s expiration=[%s] streamTime=[%s]",
                        topic, partition, offset, timestamp, window, expiration, stream_time)
        self._drop()

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
