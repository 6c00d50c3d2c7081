"""Java ``SimpleDateFormat`` patterns (Kafka's TimestampConverter and TimestampRouter) as Spark
column expressions, in UTC as Kafka's transforms set.

Formatting goes through Spark's datetime patterns. Most letters mean the same in both
(y M d H h k K m s S E a z Z X G D). Quoting (``'T'``) is the same. They differ on week-based
fields: SimpleDateFormat's ``Y`` (week year), ``w``/``W`` (week of year/month), ``u`` (day number
of week) and ``F`` (day of week in month) have no Spark counterpart since Spark 3's datetime
patterns, so a pattern using them is refused when the transform is configured. ``S`` is the
milliseconds zero-padded to the letter count in SimpleDateFormat (``S`` → ``5``, ``SSSS`` →
``0005``) and a fraction of a second in Spark: it is written from the milliseconds directly.
Letter counts Spark refuses are written as SimpleDateFormat reads them: a numeric field past
Spark's width is padded with zeros (``ddd`` → ``014``), a text field past four letters is the full
form (``EEEEE`` → ``Friday``), ``aa`` is ``a``. A day before the Gregorian cutover (1582-10-15) is
written in the Julian calendar, as ``GregorianCalendar`` does (its day of week ``E`` is not).

Parsing is SimpleDateFormat's lenient ``parse`` (Kafka never calls ``setLenient(false)``), built
from regular expressions and arithmetic rather than Spark's strict parser: a prefix of the text is
enough (``2017-07-14T02:40Z`` with ``yyyy-MM-dd``), a numeric field takes any number of digits
unless the next field abuts it (``2017-7-4``; ``yyyyMMdd`` takes 4, 2, 2), blanks before a field are
skipped, out-of-range fields roll over (month 13 is January of the next year, ``hh`` 13 is 13:00),
``S`` is a count of milliseconds (``.5`` is 5 ms, ``.123456`` is 123.456 s), a two-digit ``yy`` year
falls in the 80 years before and 20 after today, month and day names match either form in any
case, dates before 1582-10-15 are Julian. Without ``d``, ``GregorianCalendar`` resolves the date from
``D`` (the day of the year, whatever ``M`` says) or else from ``E``: the first such weekday of the
month (``EEE yyyy`` reads ``Fri 2017`` as 2017-01-06); with ``d``, ``E`` is ignored. Zones:
``UTC``/``GMT``/``UT``, ``GMT+hh:mm``, ``+hhmm``, ``+hh:mm``, ``Z`` (``X``); a zone name such as
``PST`` does not parse (its record fails).
"""
from __future__ import annotations

_SAME = set("GyMdHhkKmsSEazZXDL")
_UNSUPPORTED = {"Y": "week year", "w": "week in year", "W": "week in month", "u": "day number of week",
                "F": "day of week in month"}
_DAY_MS = 86_400_000
_CUTOVER_JDN = 2299161       # 1582-10-15 (Gregorian), the first day GregorianCalendar counts Gregorian
_EPOCH_JDN = 2440588         # 1970-01-01


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
    if any(ch == "X" and n > 3 for _, ch, n in _tokens(pattern)):
        return f"invalid ISO 8601 format: length={max(n for _, ch, n in _tokens(pattern) if ch == 'X')}"
    for ch in _letters(pattern):
        if ch in _UNSUPPORTED:
            return (f"pattern letter '{ch}' ({_UNSUPPORTED[ch]}) has no Spark datetime counterpart; "
                    "use y/M/d/E instead")
        if ch not in _SAME:
            return f"Illegal pattern character '{ch}' (not a SimpleDateFormat-compatible pattern)"
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
    """The Spark datetime pattern for a checked SimpleDateFormat pattern without ``S`` (the module
    docstring); ``S`` runs are written by :func:`format_utc` itself."""
    out = []
    for text, ch, n in _tokens(pattern):
        if ch is None:
            out.append(text)
        elif ch in _WIDTH and n > _WIDTH[ch]:
            out.append("'" + "0" * (n - _WIDTH[ch]) + "'" + ch * _WIDTH[ch])
        elif ch in _TEXT and n > _TEXT[ch]:
            out.append(ch * _TEXT[ch])
        else:
            out.append(ch * n)
    return "".join(out)


def _floordiv(a, b: int):
    from pyspark.sql import functions as F
    return F.floor(a / F.lit(b)).cast("long")


def _jdn(y, m, d, julian: bool):
    """Julian day number of year ``y`` (astronomical), month ``m`` (1-12), day ``d`` (any, counted
    on from the month's first) in the Julian or the proleptic Gregorian calendar."""
    a = _floordiv(14 - m, 12)
    y2, m2 = y + 4800 - a, m + 12 * a - 3
    days = d + _floordiv(153 * m2 + 2, 5) + 365 * y2 + _floordiv(y2, 4)
    return days - 32083 if julian else days - _floordiv(y2, 100) + _floordiv(y2, 400) - 32045


def _civil_day(y, m, d):
    """Epoch day of a lenient (year, month, day), in GregorianCalendar's calendar: Julian before
    the cutover."""
    from pyspark.sql import functions as F
    y = y + _floordiv(m - 1, 12)
    m = F.pmod(m - 1, F.lit(12)) + 1
    greg = _jdn(y, m, F.lit(1), False) + d - 1
    return F.when(greg >= _CUTOVER_JDN, greg).otherwise(_jdn(y, m, F.lit(1), True) + d - 1) - _EPOCH_JDN


def _julian_shift_ms(ms):
    """Milliseconds to add to an instant before the cutover so that Spark's proleptic Gregorian
    fields read as the Julian date GregorianCalendar shows (zero from the cutover on). Each step is
    bound once (:func:`let`): written out, the steps' copies make a plan of thousands of nodes."""
    from pyspark.sql import functions as F

    def shift(jdn, d, e, m):
        day = e - _floordiv(153 * m + 2, 5) + 1
        month = m + 3 - 12 * _floordiv(m, 10)
        year = d - 4800 + _floordiv(m, 10)
        return F.when(jdn < _CUTOVER_JDN, (_jdn(year, month, day, False) - jdn) * _DAY_MS).otherwise(F.lit(0))
    return let(_floordiv(ms, _DAY_MS) + _EPOCH_JDN, lambda jdn:
               let(_floordiv(4 * (jdn + 32082) + 3, 1461), lambda d:
                   let(jdn + 32082 - _floordiv(1461 * d, 4), lambda e:
                       let(_floordiv(5 * e + 2, 153), lambda m: shift(jdn, d, e, m)))))


_TIME_OF_DAY = set("HkKhmsa")
_UTC_ZONE = {"z": lambda n: "UTC" if n < 4 else "Coordinated Universal Time", "Z": lambda n: "+0000",
             "X": lambda n: "Z"}   # SimpleDateFormat's zone letters for UTC


def _time_field(ch: str, n: int, ms_of_day):
    """A time-of-day letter written from the milliseconds of the day, as SimpleDateFormat does
    (numbers zero-padded to the letter count)."""
    from pyspark.sql import functions as F
    if ch == "a":
        return F.when(ms_of_day < 43_200_000, F.lit("AM")).otherwise(F.lit("PM"))
    if ch in "ms":
        value = F.pmod(F.floor(ms_of_day / (60_000 if ch == "m" else 1000)), F.lit(60))
    else:
        hour = F.floor(ms_of_day / 3_600_000)
        half = F.pmod(hour, F.lit(12))
        value = {"H": lambda: hour, "k": lambda: F.when(hour == 0, F.lit(24)).otherwise(hour),
                 "K": lambda: half, "h": lambda: F.when(half == 0, F.lit(12)).otherwise(half)}[ch]()
    return F.format_string(f"%0{n}d", value.cast("int"))


def format_utc(ts, pattern: str):
    """``ts`` written with ``pattern`` in UTC whatever the session time zone, as Kafka's
    SimpleDateFormat set to UTC. Spark formats in the session's zone, so only the date letters go
    through ``date_format``, at noon of the UTC day (a wall-clock time every zone has, where a
    time in a daylight-saving gap would move); time letters and ``S`` are written from the
    milliseconds of the day, zone letters as UTC's (``z`` UTC, ``Z`` +0000, ``X`` Z)."""
    from pyspark.sql import functions as F
    return F.when(ts.isNotNull(), let(F.unix_millis(ts), lambda ms: format_ms(ms, pattern)))


def let(value, body):
    """``body(v)`` with ``value`` computed once and bound to ``v`` (a lambda variable): an
    expression used many times is otherwise copied into the plan each time, and the copies of
    copies make a plan Spark takes minutes to optimise."""
    from pyspark.sql import functions as F
    return F.element_at(F.transform(F.array(value), body), 1)


def format_ms(ms, pattern: str):
    """:func:`format_utc` of the epoch milliseconds ``ms``, a column (a lambda variable: it is
    used several times) that is not null."""
    from pyspark.sql import functions as F
    ms_of_day = F.pmod(ms, F.lit(_DAY_MS))
    day = ms - ms_of_day + _julian_shift_ms(ms)
    noon = F.to_utc_timestamp(F.timestamp_millis(day + _DAY_MS // 2), F.current_timezone())
    parts, spark = [], []

    def flush():
        if spark:   # text alone (``:`` between time letters) is formatted once, from a constant
            literal = not any(letter for _, letter in spark)
            when = F.timestamp_millis(F.lit(0)) if literal else noon
            parts.append(F.date_format(when, to_spark("".join(text for text, _ in spark))))
            spark.clear()
    for text, ch, n in _tokens(pattern):
        if ch == "S":
            flush()
            parts.append(F.format_string(f"%0{n}d", F.pmod(ms, F.lit(1000)).cast("int")))
        elif ch in _TIME_OF_DAY:
            flush()
            parts.append(_time_field(ch, n, ms_of_day))
        elif ch in _UTC_ZONE:
            flush()
            parts.append(F.lit(_UTC_ZONE[ch](n)))
        else:
            spark.append((text, False) if ch is None else (ch * n, True))
    flush()
    return parts[0] if len(parts) == 1 else F.concat(*parts) if parts else F.lit("")


# ------------------------------------------------------------------ lenient parsing
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_NUMERIC = set("yMdHhkKmsSDL")
_ZONE = r"(?i:GMT[+-]\d{1,2}(?::?\d{2})?|UTC|GMT|UT|[+-]\d{2}:?\d{2}|[+-]\d{2}|Z)"


def _names(names):
    return "(?i:" + "|".join(names + [n[:3] for n in names]) + ")"


def _field_regex(ch: str, n: int, abutting: bool) -> str:
    """The capture group SimpleDateFormat's ``subParse`` accepts for one field (blanks before it
    skipped)."""
    if ch in "ML" and n >= 3:
        body = _names(_MONTHS)
    elif ch in _NUMERIC:
        body = rf"\d{{{n}}}" if abutting else r"-?\d+"
    elif ch == "E":
        body = _names(_DAYS)
    elif ch == "a":
        body = "(?i:AM|PM)"
    elif ch == "G":
        body = "(?i:AD|BC)"
    else:   # z Z X
        body = _ZONE
    return r"[ \t]*(" + body + ")"


def _regex(pattern: str):
    """(anchored regex, {letter: (group, count)}) for a checked pattern."""
    import re
    tokens = list(_tokens(pattern))
    out, groups, literal = ["^"], {}, []
    for i, (text, ch, n) in enumerate(tokens):
        if ch is None:
            if text != "'":
                literal.append(text)
            elif i and tokens[i - 1] == ("'", None, 0):   # '' is a quote
                literal.append("'")
            continue
        if literal:
            out.append(re.escape("".join(literal)))
            literal.clear()
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        abutting = ch in _NUMERIC and not (ch in "ML" and n >= 3) and nxt is not None and nxt[1] in _NUMERIC \
            and not (nxt[1] in "ML" and nxt[2] >= 3)
        out.append(_field_regex(ch, n, abutting))
        groups[ch] = (len(groups) + 1, n)
    if literal:
        out.append(re.escape("".join(literal)))
    return "".join(out), groups


def _offset_ms(zone):
    """Milliseconds east of UTC for a zone text the zone regex accepted."""
    from pyspark.sql import functions as F
    rx = r"^(?i:GMT|UTC|UT)?([+-])(\d{1,2}):?(\d{2})?$"
    sign = F.when(F.regexp_extract(zone, rx, 1) == "-", F.lit(-1)).otherwise(F.lit(1))
    hh = F.regexp_extract(zone, rx, 2).try_cast("long")
    mm = F.coalesce(F.nullif(F.regexp_extract(zone, rx, 3), F.lit("")).try_cast("long"), F.lit(0))
    return F.when(zone.rlike(r"^[+-]|^(?i:GMT|UTC|UT)[+-]"), sign * (hh * 60 + mm) * 60000).otherwise(F.lit(0))


def parse_millis(text, pattern: str):
    """``text`` parsed with ``pattern`` as SimpleDateFormat's lenient ``parse`` in UTC (the module
    docstring): epoch milliseconds, null where it does not parse."""
    from pyspark.sql import functions as F
    rx, groups = _regex(pattern)

    def grp(ch, default=None):
        if ch not in groups:
            return None if default is None else F.lit(default)
        return F.regexp_extract(text, rx, groups[ch][0])

    def num(ch, default=0):
        g = grp(ch)
        return F.lit(default).cast("long") if g is None else g.try_cast("long")

    year = num("y", 1970)
    if "y" in groups and groups["y"][1] <= 2:   # two digits: within 80 years before and 20 after now
        start = F.year(F.current_date()) - 80
        two = grp("y").rlike(r"^\d\d$")
        yy = year + _floordiv(start, 100) * 100
        year = F.when(two, F.when(yy < start, yy + 100).otherwise(yy)).otherwise(year)
    if "G" in groups:
        year = F.when(F.upper(grp("G")) == "BC", 1 - year).otherwise(year)
    month = num("M", 1) if "M" in groups else num("L", 1)
    for ch in "ML":
        if ch in groups and groups[ch][1] >= 3:
            name = F.lower(grp(ch).substr(1, 3))
            month = F.lit(None).cast("long")
            for i, m in enumerate(_MONTHS):
                month = F.when(name == m[:3].lower(), F.lit(i + 1)).otherwise(month)
    if "D" in groups and "d" not in groups:   # GregorianCalendar: DAY_OF_YEAR over a bare MONTH
        day = _civil_day(year, F.lit(1), num("D"))
    elif "E" in groups and "d" not in groups:   # MONTH + DAY_OF_WEEK_IN_MONTH (1) + DAY_OF_WEEK
        first = _civil_day(year, month, F.lit(1))
        name = F.lower(grp("E").substr(1, 3))
        dow = F.lit(None).cast("long")
        for i, d in enumerate(_DAYS):   # Sunday first, as Calendar.SUNDAY
            dow = F.when(name == d[:3].lower(), F.lit(i)).otherwise(dow)
        day = first + F.pmod(dow - F.pmod(first + 4, F.lit(7)), F.lit(7))   # epoch day 0 was a Thursday
    else:
        day = _civil_day(year, month, num("d", 1))
    if "H" in groups:
        hour = num("H")
    elif "k" in groups:
        hour = F.when(num("k") == 24, F.lit(0)).otherwise(num("k"))
    else:
        hour = F.when(num("h") == 12, F.lit(0)).otherwise(num("h")) if "h" in groups else num("K")
        if "a" in groups:
            hour = hour + F.when(F.upper(grp("a")) == "PM", F.lit(12)).otherwise(F.lit(0))
    ms = day * _DAY_MS + hour * 3_600_000 + num("m") * 60_000 + num("s") * 1000 + num("S")
    for ch in "zZX":
        if ch in groups:
            ms = ms - _offset_ms(grp(ch))
            break
    return F.when(text.rlike(rx), ms)


def parse_utc(text, pattern: str):
    """``text`` parsed with ``pattern`` as UTC (null where it does not parse), as a timestamp."""
    from pyspark.sql import functions as F
    return F.timestamp_millis(parse_millis(text, pattern))
