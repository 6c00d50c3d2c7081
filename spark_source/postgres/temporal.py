"""PostgreSQL's text output of dates, times, timestamps and intervals as Debezium's numbers and
strings, by integer arithmetic so that BC dates and timestamps convert too.

Inputs are in ``DateStyle=ISO`` (``2018-06-20 15:13:16.945104``, ``… BC``, ``infinity``), with a
UTC offset for timestamptz/timetz (``+02``, ``+05:30``), and intervals in ``IntervalStyle``
``postgres`` (``1 year 2 mons 3 days 04:05:06.78``) or ``iso_8601`` (``P1Y2M3DT4H5M6.78S``).
"""
from __future__ import annotations

import re
from datetime import time
from decimal import Decimal

TIMESTAMP_POS_INFINITY_MICROS = 9223372036825200000
"""Debezium's (and pgjdbc's) value for TIMESTAMP 'infinity'."""
TIMESTAMP_NEG_INFINITY_MICROS = -9223372036832400000
DAYS_PER_MONTH_AVG = 365.25 / 12.0
"""Debezium's MicroDuration month."""


def _bc(text: str) -> tuple:
    return (text[:-3], True) if text.endswith(" BC") else (text, False)


def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (year 0 = 1 BC), for BC dates too."""
    y -= m <= 2
    era = y // 400   # Python's // floors: negative years need no C-style adjustment
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


DATE_POS_INFINITY_DAYS = -2147472692
"""Debezium's DATE 'infinity' when streaming: ``POSITIVE_INFINITY_LOCAL_DATE`` is
``LocalDate.parse("-5877611-06-21")`` (``DateTimeFormat.ISODateTimeFormat.date``), so its epoch
day is this large negative number, not a far future."""
DATE_NEG_INFINITY_DAYS = -2147472691
"""Debezium's DATE '-infinity': ``NEGATIVE_INFINITY_LOCAL_DATE``, ``LocalDate.parse("-5877611-06-22")``."""


def date_days(text: str) -> int:
    """Days since 1970-01-01; ``infinity``/``-infinity`` as Debezium's streaming path gives them
    (its snapshot reads pgjdbc's ``Date`` instead; both of Riverlog's paths give these)."""
    if text == "infinity":
        return DATE_POS_INFINITY_DAYS
    if text == "-infinity":
        return DATE_NEG_INFINITY_DAYS
    body, bc = _bc(text)
    y, m, d = (int(p) for p in body.split("-"))
    return days_from_civil(1 - y if bc else y, m, d)


def time_micros(text: str) -> int:
    hms, _, frac = text.partition(".")
    h, m, s = (int(p) for p in hms.split(":"))
    return ((h * 60 + m) * 60 + s) * 1_000_000 + int((frac + "000000")[:6])


def timestamp_micros(text: str) -> int:
    if text == "infinity":
        return TIMESTAMP_POS_INFINITY_MICROS
    if text == "-infinity":
        return TIMESTAMP_NEG_INFINITY_MICROS
    body, bc = _bc(text)
    day, _, clock = body.partition(" ")
    y, m, d = (int(p) for p in day.split("-"))
    return days_from_civil(1 - y if bc else y, m, d) * 86_400_000_000 + time_micros(clock)


_OFFSET = re.compile(r"([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?$")


def _split_offset(text: str) -> tuple:
    """``'12:00:00.5+05:30'`` -> (``'12:00:00.5'``, offset seconds)."""
    match = _OFFSET.search(text)
    if match is None:
        raise ValueError(f"no UTC offset in {text!r}")
    sign = -1 if match.group(1) == "-" else 1
    seconds = int(match.group(2)) * 3600 + int(match.group(3) or 0) * 60 + int(match.group(4) or 0)
    return text[:match.start()], sign * seconds


def _iso_fraction(micros: int) -> str:
    return "" if micros == 0 else "." + f"{micros:06d}".rstrip("0")


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01, proleptic Gregorian, year 0 = 1 BC:
    the inverse of :func:`days_from_civil`, for years Python's ``date`` cannot hold."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, doy - (153 * mp + 2) // 5 + 1


def _iso_year(y: int) -> str:
    """java.time's ISO year: four digits, a sign beyond 9999 or before year 0 (``+21016``, ``-4713``)."""
    return f"{y:04d}" if 0 <= y <= 9999 else (f"+{y}" if y > 0 else f"-{-y:04d}")


def zoned_timestamp(text: str, scale: int = 6) -> str:
    """Debezium's ZonedTimestamp: UTC, the fraction as wide as the column's precision (6 when it
    has none), the year as java.time writes it."""
    if text in ("infinity", "-infinity"):
        return text
    body, bc = _bc(text)
    local, offset = _split_offset(body)
    micros = timestamp_micros(local + (" BC" if bc else "")) - offset * 1_000_000
    days, rem = divmod(micros, 86_400_000_000)
    seconds, frac = divmod(rem, 1_000_000)
    y, m, d = civil_from_days(days)
    fraction = "." + f"{frac:06d}"[:scale] if scale > 0 else ""
    return f"{_iso_year(y)}-{m:02d}-{d:02d}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{fraction}Z"


def zoned_time(text: str) -> str:
    local, offset = _split_offset(text)
    micros = (time_micros(local) - offset * 1_000_000) % 86_400_000_000
    seconds, frac = divmod(micros, 1_000_000)
    return f"{time(seconds // 3600, seconds // 60 % 60, seconds % 60).isoformat()}{_iso_fraction(frac)}Z"


_UNITS = {"year": 0, "years": 0, "mon": 1, "mons": 1, "day": 2, "days": 2}
_PG_INTERVAL_PART = re.compile(r"([+-]?\d+) (years?|mons?|days?)|([+-]?)(\d+):(\d\d):(\d\d)(?:\.(\d+))?")
_ISO_INTERVAL = re.compile(r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)D)?(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?[\d.]+)S)?)?$")


def interval_parts(text: str) -> tuple:
    """(years, months, days, microseconds of the time part)."""
    iso = _ISO_INTERVAL.match(text)
    if iso and text.startswith("P"):
        y, mo, d, h, mi, s = iso.groups()
        seconds = Decimal(s or 0)
        micros = (int(h or 0) * 3600 + int(mi or 0) * 60) * 1_000_000 + int(seconds * 1_000_000)
        return int(y or 0), int(mo or 0), int(d or 0), micros
    parts = [0, 0, 0]
    micros = 0
    pos = 0
    for match in _PG_INTERVAL_PART.finditer(text):
        if text[pos:match.start()].strip():
            raise ValueError(f"unexpected {text[pos:match.start()]!r}")
        pos = match.end()
        if match.group(2):
            parts[_UNITS[match.group(2)]] += int(match.group(1))
        else:
            sign = -1 if match.group(3) == "-" else 1
            h, m, s = int(match.group(4)), int(match.group(5)), int(match.group(6))
            micros += sign * (((h * 60 + m) * 60 + s) * 1_000_000 + int((match.group(7) or "").ljust(6, "0")[:6]))
    if text[pos:].strip():
        raise ValueError(f"unexpected {text[pos:]!r}")
    return parts[0], parts[1], parts[2], micros


_INFINITE = {"infinity": (1 << 63) - 1, "-infinity": -(1 << 63)}


def micro_duration(text: str) -> int:
    """Debezium's MicroDuration: months of 365.25/12 days, in the double arithmetic of
    ``MicroDuration.durationMicros`` over pgjdbc's ``PGInterval`` fields (hours, minutes and
    seconds, the fraction as ``wholeSeconds + microSeconds / 1e6``), so the value is Debezium's to
    the microsecond (``1 year 1 mon 7 days 18:20:27.8`` is ``34858227799999``, the double just under ``.8``
    truncated), saturated at the int64 range as Java's double-to-long cast saturates. PostgreSQL
    17's ``infinity``/``-infinity`` are the ends of that range (see :func:`iso_interval`)."""
    if text in _INFINITE:
        return _INFINITE[text]
    years, months, days, micros = interval_parts(text)
    sign = -1 if micros < 0 else 1
    hours, rem = divmod(abs(micros), 3_600_000_000)
    minutes, rem = divmod(rem, 60_000_000)
    whole, fraction = divmod(rem, 1_000_000)
    seconds = sign * whole + sign * fraction / 1_000_000
    total_days = (years * 12 + months) * DAYS_PER_MONTH_AVG + days
    total_seconds = ((total_days * 24 + sign * hours) * 60 + sign * minutes) * 60 + seconds
    return max(-(1 << 63), min((1 << 63) - 1, int(total_seconds * 1e6)))


def iso_interval(text: str) -> str:
    """Debezium's Interval string, ``P<y>Y<m>M<d>DT<h>H<m>M<s>S``; PostgreSQL 17's infinite
    intervals stay ``infinity``/``-infinity``, as a ZonedTimestamp's do. (Debezium reads them
    through pgjdbc's ``PGInterval``, which has no infinity and parses them as zero: a sink would
    take an unbounded interval for an empty one.)"""
    if text in _INFINITE:
        return text
    years, months, days, micros = interval_parts(text)
    sign = -1 if micros < 0 else 1
    hours, rem = divmod(abs(micros), 3_600_000_000)
    minutes, rem = divmod(rem, 60_000_000)
    seconds = Decimal(rem) / Decimal(1_000_000)
    sec = format(seconds.normalize(), "f") if rem else "0"
    s = "-" if sign < 0 else ""   # per field, as pgjdbc's PGInterval negates each: -0 is 0
    return f"P{years}Y{months}M{days}DT{s if hours else ''}{hours}H{s if minutes else ''}{minutes}M{s if rem else ''}{sec}S"
