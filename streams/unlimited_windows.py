"""Kafka's ``UnlimitedWindows``: one window per key from a start time on, never closed, so a
windowed aggregation over it keeps a running total since the start (a record before the start
is in no window and changes nothing).

    totals = grouped.windowedBy(UnlimitedWindows.of().startOn(start_ms)).count()
    # keys Windowed(key, start_ms, 2**63 - 1)
"""
from __future__ import annotations

from dataclasses import dataclass

from streams.errors import TopologyError
from streams.window_aggregate import TimeWindowAggregate
from streams.abstract_window_aggregate import ON_WINDOW_CLOSE, ON_WINDOW_UPDATE, _WindowedAggregate

LONG_MAX = 2 ** 63 - 1


@dataclass(frozen=True, slots=True)
class UnlimitedWindows:
    """The window ``[startMs, Long.MAX_VALUE]`` for every key (Kafka's ``UnlimitedWindows``)."""
    startMs: int = 0

    def __post_init__(self):
        if isinstance(self.startMs, bool) or not isinstance(self.startMs, int):
            raise TopologyError(f"Window start time (startMs) must be milliseconds, got {self.startMs!r}",
                                argument="start")
        if self.startMs < 0:
            raise TopologyError("Window start time (startMs) cannot be negative.", argument="start")

    @staticmethod
    def of() -> "UnlimitedWindows":
        return UnlimitedWindows(0)

    def startOn(self, start) -> "UnlimitedWindows":
        """From ``start`` (ms, a ``datetime`` or a duration since the epoch) on."""
        from datetime import datetime
        if isinstance(start, datetime):
            return UnlimitedWindows(int(start.timestamp() * 1000))
        from streams.windows import duration_ms
        return UnlimitedWindows(duration_ms(start, "start"))

    def windowsFor(self, timestamp: int) -> dict[int, int]:
        return {self.startMs: LONG_MAX} if timestamp >= self.startMs else {}

    def size(self) -> int:
        return LONG_MAX

    def gracePeriodMs(self) -> int:
        return 0

    def retentionMs(self) -> int:
        return LONG_MAX

    def closeGraceMs(self) -> int:
        return 0

    def store_window_size(self) -> int:
        """What the window store adds to a start to give the window's end: Long.MAX_VALUE."""
        return LONG_MAX - self.startMs


class UnlimitedWindowAggregate(TimeWindowAggregate):
    """``TimeWindowAggregate``'s rules over the one unlimited window: it never closes, so nothing is
    dropped as late and nothing is emitted on close (refused, as Kafka refuses it)."""

    def __init__(self, store_name: str, windows: UnlimitedWindows, initializer, aggregator,
                 emit: str = ON_WINDOW_UPDATE):
        check_emit(windows, emit)
        _WindowedAggregate.__init__(self, store_name, windows, initializer, aggregator, emit)

    def store_spec(self, retention: int | None = None):
        spec = super().store_spec(retention)
        spec.window_size = self.windows.store_window_size()
        return spec


def store_window_size(windows) -> int:
    """The window store's size for ``windows``: the windows' size, but Long.MAX_VALUE's end for
    unlimited windows."""
    own = getattr(windows, "store_window_size", None)
    return own() if own is not None else windows.size()


def check_emit(windows, emit: str) -> None:
    """Kafka's ``TimeWindowedKStreamImpl.doAggregate``: windows that never close have no close to
    emit on."""
    if isinstance(windows, UnlimitedWindows) and emit == ON_WINDOW_CLOSE:
        raise TopologyError("ON_WINDOW_CLOSE emit strategy cannot be used for UnlimitedWindows", argument="emit")
