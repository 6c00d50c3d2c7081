"""Java ``SimpleDateFormat`` patterns (Kafka's TimestampConverter and TimestampRouter) as Spark
datetime patterns.

Most letters mean the same in both (y M d H h k K m s S E a z Z X G D). Quoting (``'T'``) is the
same. They differ on week-based fields: SimpleDateFormat's ``Y`` (week year), ``w``/``W`` (week of
year/month), ``u`` (day number of week) and ``F`` (day of week in month) have no Spark counterpart
since Spark 3's datetime patterns, so a pattern using them is refused when the transform is
configured. ``S`` is milliseconds in SimpleDateFormat and a fraction of a second in Spark: equal for
``SSS``, the form Kafka's examples use; ``SSSS`` and longer are the milliseconds zero-padded, as in
SimpleDateFormat, and ``S``/``SS`` (the milliseconds unpadded) are refused. Letter counts Spark
refuses are written as SimpleDateFormat reads them: a numeric field past Spark's width is padded with
zeros (``ddd`` → ``014``), a text field past four letters is the full form (``EEEEE`` → ``Friday``),
``aa`` is ``a``. Spark cannot parse a day of week (``E``): such a pattern formats, and is refused
for parsing. Times are UTC, as Kafka's transforms set.
"""
from __future__ import annotations

_SAME = set("GyMdHhkKmsSEazZXDL")
_UNSUPPORTED = {"Y": "week year", "w": "week in year", "W": "week in month", "u": "day number of week",
                "F": "day of week in month"}


def _letters(pattern: str):
    """Each unquoted pattern letter."""
    for _, ch, n in _tokens(pattern):
        if ch is not None:
            yield from ch * n


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
    for _, ch, n in _tokens(pattern):
        if ch == "S" and n < 3:
            return (f"pattern '{'S' * n}' is the milliseconds unpadded in SimpleDateFormat, which Spark cannot "
                    "write (its 'S' is a fraction of a second); use 'SSS'")
    return None


_WIDTH = {**dict.fromkeys("dHhkKms", 2), "D": 3, "y": 6}   # Spark's widest numeric field
_TEXT = {**dict.fromkeys("EMLz", 4), "G": 1, "a": 1}     # Spark's longest text field


def _tokens(pattern: str):
    """The pattern as (text, letter, count): a run of one unquoted letter (text empty), or any
    other text (quotes included, letter None)."""
    i, quoted = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if quoted or ch == "'" or not (ch.isascii() and ch.isalpha()):
            quoted ^= ch == "'"
            yield ch, None, 0
            i += 1
            continue
        n = 1
        while i + n < len(pattern) and pattern[i + n] == ch:
            n += 1
        yield "", ch, n
        i += n


def to_spark(pattern: str) -> str:
    """The Spark datetime pattern for a checked SimpleDateFormat pattern (the module docstring)."""
    out = []
    for text, ch, n in _tokens(pattern):
        if ch is None:
            out.append(text)
        elif ch in _WIDTH and n > _WIDTH[ch]:
            out.append("'" + "0" * (n - _WIDTH[ch]) + "'" + ch * _WIDTH[ch])
        elif ch in _TEXT and n > _TEXT[ch]:
            out.append(ch * _TEXT[ch])
        elif ch == "S" and n > 3:
            out.append("'" + "0" * (n - 3) + "'SSS")
        else:
            out.append(ch * n)
    return "".join(out)


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

    from connect.errors import DataError
    if "E" in set(_letters(pattern)):
        raise DataError(f"cannot parse with pattern '{pattern}': Spark parses no day of week ('E'); "
                        "leave it out of the pattern")
    parsed = F.try_to_timestamp(text, F.lit(to_spark(pattern)))
    return parsed if _has_zone(pattern) else F.from_utc_timestamp(parsed, F.current_timezone())
