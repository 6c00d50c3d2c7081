"""Window definitions, as Kafka Streams' ``TimeWindows``, ``SlidingWindows``, ``SessionWindows`` and
``JoinWindows``: immutable descriptions, validated when made, with window assignment a pure function.

Durations are int milliseconds, :class:`datetime.timedelta`, or the interval strings PySpark users
write for ``window()`` ("10 seconds", "1 minute", "1 hour 30 minutes", "500 milliseconds").
Bounds follow Kafka: a time window is ``[start, end)``; sliding and session windows include their
end. ``retentionMs()`` is the default retention of the backing store (Kafka's materializers).

    TimeWindows.ofSizeAndGrace("5 minutes", "30 seconds").advanceBy("1 minute").windowsFor(90_000)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from streams.errors import TopologyError

NO_GRACE_PERIOD = 0

_UNITS_MS = {
    "microsecond": None, "microseconds": None, "us": None,
    "millisecond": 1, "milliseconds": 1, "ms": 1,
    "second": 1_000, "seconds": 1_000, "sec": 1_000, "secs": 1_000, "s": 1_000,
    "minute": 60_000, "minutes": 60_000, "min": 60_000, "mins": 60_000, "m": 60_000,
    "hour": 3_600_000, "hours": 3_600_000, "h": 3_600_000,
    "day": 86_400_000, "days": 86_400_000, "d": 86_400_000,
    "week": 604_800_000, "weeks": 604_800_000,
}
_PART = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([a-zA-Z]+)")


def duration_ms(value, argument: str = "duration") -> int:
    """Milliseconds from an int, a ``timedelta`` or a Spark interval string; ``argument`` names
    what was being parsed in the error, as Kafka's ``validateMillisecondDuration`` does."""
    if isinstance(value, bool):
        raise TopologyError(f"{argument}: expected a duration, got {value!r}", argument=argument)
    if isinstance(value, int):
        return value
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if micros % 1_000:
            raise TopologyError(f"{argument}: {value!r} is not a whole number of milliseconds", argument=argument)
        return micros // 1_000
    if isinstance(value, str):
        return _parse_interval(value, argument)
    raise TopologyError(f"{argument}: expected int milliseconds, a timedelta or a string such as "
                        f"'10 seconds', got {type(value).__name__} {value!r}", argument=argument)


def _parse_interval(text: str, argument: str) -> int:
    body = text.strip().lower()
    if body.startswith("interval"):
        body = body[len("interval"):]
    pos, total_us, parts = 0, 0, 0
    while pos < len(body):
        if body[pos:].strip() == "":
            break
        m = _PART.match(body, pos)
        unit = m and m.group(2)
        if not m or unit not in _UNITS_MS:
            raise TopologyError(f"{argument}: cannot read {text!r} as a duration; write e.g. '10 seconds', "
                                "'1 minute', '500 milliseconds' or '1 hour 30 minutes'", argument=argument)
        scale_us = 1 if _UNITS_MS[unit] is None else _UNITS_MS[unit] * 1_000
        number = m.group(1)
        if "." in number:
            whole, frac = number.split(".")
            sign = -1 if whole.startswith("-") else 1
            us = int(whole) * scale_us + sign * (int(frac) * scale_us) // 10 ** len(frac)
            if (int(frac) * scale_us) % 10 ** len(frac):
                raise TopologyError(f"{argument}: {text!r} is finer than a microsecond", argument=argument)
        else:
            us = int(number) * scale_us
        total_us += us
        pos, parts = m.end(), parts + 1
    if not parts:
        raise TopologyError(f"{argument}: empty duration {text!r}", argument=argument)
    if total_us % 1_000:
        raise TopologyError(f"{argument}: {text!r} is not a whole number of milliseconds", argument=argument)
    return total_us // 1_000


def _non_negative(ms: int, argument: str, what: str) -> int:
    if ms < 0:
        raise TopologyError(f"{what} ({argument}) must not be negative, got {ms} ms", argument=argument)
    return ms


@dataclass(frozen=True, slots=True)
class TimeWindows:
    """Fixed-size windows ``[start, start + size)`` every ``advance`` ms: tumbling when advance ==
    size (the default), hopping when smaller. A record belongs to every window containing it."""
    sizeMs: int
    advanceMs: int
    graceMs: int

    def __post_init__(self):
        if self.sizeMs <= 0:
            raise TopologyError(f"Window size (size) must be larger than zero, got {self.sizeMs} ms", argument="size")
        if self.advanceMs <= 0 or self.advanceMs > self.sizeMs:
            raise TopologyError(f"Window advancement interval (advance) must be more than zero and at most the "
                                f"window size {self.sizeMs} ms, got {self.advanceMs} ms", argument="advance")
        _non_negative(self.graceMs, "afterWindowEnd", "Grace period")

    @classmethod
    def ofSizeWithNoGrace(cls, size) -> "TimeWindows":
        return cls.ofSizeAndGrace(size, NO_GRACE_PERIOD)

    @classmethod
    def ofSizeAndGrace(cls, size, afterWindowEnd) -> "TimeWindows":
        size_ms = duration_ms(size, "size")
        return cls(size_ms, size_ms, duration_ms(afterWindowEnd, "afterWindowEnd"))

    def advanceBy(self, advance) -> "TimeWindows":
        return TimeWindows(self.sizeMs, duration_ms(advance, "advance"), self.graceMs)

    def windowsFor(self, timestamp: int) -> dict[int, int]:
        """{start: end} of the windows containing ``timestamp``, by start (Kafka's arithmetic: no
        window starts before 0)."""
        start = (max(0, timestamp - self.sizeMs + self.advanceMs) // self.advanceMs) * self.advanceMs
        out = {}
        while start <= timestamp:
            out[start] = start + self.sizeMs
            start += self.advanceMs
        return out

    def size(self) -> int:
        return self.sizeMs

    def gracePeriodMs(self) -> int:
        return self.graceMs

    def retentionMs(self) -> int:
        """Kafka's default store retention: size + grace."""
        return self.sizeMs + self.graceMs

    def closeGraceMs(self) -> int:
        """What suppress(untilWindowCloses) waits after a window's end: the grace period."""
        return self.graceMs


@dataclass(frozen=True, slots=True)
class SlidingWindows:
    """Windows of ``timeDifference`` ms whose both ends are inclusive, one per distinct set of
    records: Kafka creates them at record timestamps instead of on a fixed grid."""
    differenceMs: int
    graceMs: int

    def __post_init__(self):
        _non_negative(self.differenceMs, "timeDifference", "Window time difference")
        _non_negative(self.graceMs, "afterWindowEnd", "Window grace period")

    @classmethod
    def ofTimeDifferenceWithNoGrace(cls, timeDifference) -> "SlidingWindows":
        return cls.ofTimeDifferenceAndGrace(timeDifference, NO_GRACE_PERIOD)

    @classmethod
    def ofTimeDifferenceAndGrace(cls, timeDifference, afterWindowEnd) -> "SlidingWindows":
        return cls(duration_ms(timeDifference, "timeDifference"), duration_ms(afterWindowEnd, "afterWindowEnd"))

    def timeDifferenceMs(self) -> int:
        return self.differenceMs

    def size(self) -> int:
        return self.differenceMs

    def gracePeriodMs(self) -> int:
        return self.graceMs

    def retentionMs(self) -> int:
        """Kafka's default: 2 × time difference + grace, so the windows a new record's right and
        left windows are built from are still there."""
        return 2 * self.differenceMs + self.graceMs

    def closeGraceMs(self) -> int:
        return self.graceMs


@dataclass(frozen=True, slots=True)
class SessionWindows:
    """Sessions: a key's records closer than ``inactivityGap`` ms belong to one window ``[first,
    last]``; a record bridging two sessions merges them."""
    gapMs: int
    graceMs: int

    def __post_init__(self):
        if self.gapMs <= 0:
            raise TopologyError(f"Gap time (inactivityGap) cannot be zero or negative, got {self.gapMs} ms",
                                argument="inactivityGap")
        _non_negative(self.graceMs, "afterWindowEnd", "Grace period")

    @classmethod
    def ofInactivityGapWithNoGrace(cls, inactivityGap) -> "SessionWindows":
        return cls.ofInactivityGapAndGrace(inactivityGap, NO_GRACE_PERIOD)

    @classmethod
    def ofInactivityGapAndGrace(cls, inactivityGap, afterWindowEnd) -> "SessionWindows":
        return cls(duration_ms(inactivityGap, "inactivityGap"), duration_ms(afterWindowEnd, "afterWindowEnd"))

    def inactivityGap(self) -> int:
        return self.gapMs

    def gracePeriodMs(self) -> int:
        return self.graceMs

    def retentionMs(self) -> int:
        """Kafka's default: gap + grace."""
        return self.gapMs + self.graceMs

    def closeGraceMs(self) -> int:
        """A session can still grow until stream time passes end + gap + grace, so suppression
        waits gap + grace after its end (Kafka's ``findAndVerifyWindowGrace``)."""
        return self.gapMs + self.graceMs


@dataclass(frozen=True, slots=True)
class JoinWindows:
    """For stream–stream joins: records join when ``other.ts - before <= ts <= other.ts + after``
    (both inclusive). ``before``/``after`` make the window asymmetric."""
    beforeMs: int
    afterMs: int
    graceMs: int

    def __post_init__(self):
        if self.beforeMs + self.afterMs < 0:
            raise TopologyError(f"Window interval (timeDifference before + after) must not be negative, got "
                                f"before={self.beforeMs} ms, after={self.afterMs} ms", argument="timeDifference")
        _non_negative(self.graceMs, "afterWindowEnd", "Grace period")

    @classmethod
    def ofTimeDifferenceWithNoGrace(cls, timeDifference) -> "JoinWindows":
        return cls.ofTimeDifferenceAndGrace(timeDifference, NO_GRACE_PERIOD)

    @classmethod
    def ofTimeDifferenceAndGrace(cls, timeDifference, afterWindowEnd) -> "JoinWindows":
        ms = duration_ms(timeDifference, "timeDifference")
        return cls(ms, ms, duration_ms(afterWindowEnd, "afterWindowEnd"))

    def before(self, timeDifference) -> "JoinWindows":
        return JoinWindows(duration_ms(timeDifference, "timeDifference"), self.afterMs, self.graceMs)

    def after(self, timeDifference) -> "JoinWindows":
        return JoinWindows(self.beforeMs, duration_ms(timeDifference, "timeDifference"), self.graceMs)

    def windowsFor(self, timestamp: int):
        raise TopologyError("windowsFor() is not supported by JoinWindows")

    def size(self) -> int:
        return self.beforeMs + self.afterMs

    def gracePeriodMs(self) -> int:
        return self.graceMs

    def retentionMs(self) -> int:
        return self.beforeMs + self.afterMs + self.graceMs
