"""Java ``SimpleDateFormat`` patterns (Kafka's TimestampConverter and TimestampRouter) as Spark
datetime patterns.

Most letters mean the same in both (y M d H h k K m s S E a z Z X G D). Quoting (``'T'``) is the
same. They differ on week-based fields: SimpleDateFormat's ``Y`` (week year), ``w``/``W`` (week of
year/month), ``u`` (day number of week) and ``F`` (day of week in month) have no Spark counterpart
since Spark 3's datetime patterns, so a pattern using them is refused when the transform is
configured. ``S`` is milliseconds in SimpleDateFormat and a fraction of a second in Spark: equal for
``SSS``, the form Kafka's examples use. Times are UTC, as Kafka's transforms set.
"""
from __future__ import annotations

_SAME = set("GyMdHhkKmsSEazZXDL")
_UNSUPPORTED = {"Y": "week year", "w": "week in year", "W": "week in month", "u": "day number of week",
                "F": "day of week in month"}


def _letters(pattern: str):
    quoted = False
    for ch in pattern:
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch.isascii() and ch.isalpha():
            yield ch


def check(pattern: str | None) -> str | None:
    """A problem with the pattern, or None."""
    if pattern is None or pattern == "":
        return None
    if pattern.count("'") % 2:
        return "unterminated quote in SimpleDateFormat pattern"
    for ch in _letters(pattern):
        if ch in _UNSUPPORTED:
            return (f"pattern letter '{ch}' ({_UNSUPPORTED[ch]}) has no Spark datetime counterpart; "
                    "use y/M/d/E instead")
        if ch not in _SAME:
            return f"Illegal pattern character '{ch}' (not a SimpleDateFormat-compatible pattern)"
    return None


def to_spark(pattern: str) -> str:
    """The Spark datetime pattern for a checked SimpleDateFormat pattern."""
    return pattern


def _has_zone(pattern: str) -> bool:
    return any(ch in "zZX" for ch in _letters(pattern))


def format_utc(ts, pattern: str):
    """``ts`` written with ``pattern`` in UTC whatever the session time zone (Spark formats in the
    session's zone; Kafka in UTC). Zone letters print the session zone: keep it UTC for those."""
    from pyspark.sql import functions as F
    return F.date_format(F.to_utc_timestamp(ts, F.current_timezone()), to_spark(pattern))


def parse_utc(text, pattern: str):
    """``text`` parsed with ``pattern`` as UTC (null where it does not parse)."""
    from pyspark.sql import functions as F
    parsed = F.try_to_timestamp(text, F.lit(to_spark(pattern)))
    return parsed if _has_zone(pattern) else F.from_utc_timestamp(parsed, F.current_timezone())
