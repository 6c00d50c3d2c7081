"""Time as a dependency: storage and protocol logic ask a Clock, so tests can drive it."""
from __future__ import annotations

import threading
import time


class Clock:
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, segment.ms, retention)."""
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, for deadlines and timeouts."""
        return time.monotonic()


SYSTEM_CLOCK = Clock()


class ManualClock(Clock):
    """A clock that moves only when told to."""

    def __init__(self, time_ms: int = 1_700_000_000_000):
        self._ms = time_ms
        self._lock = threading.Lock()

    def time_ms(self) -> int:
        return self._ms

    def monotonic(self) -> float:
        return self._ms / 1000.0

    def advance(self, ms: int) -> None:
        with self._lock:
            self._ms += ms
