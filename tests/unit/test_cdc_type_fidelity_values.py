"""Column values against Debezium's PostgreSQL connector where its arithmetic or PostgreSQL's
wider values decide them: a MicroDuration in Debezium's double arithmetic, PostgreSQL 17's
infinite intervals, and numerics of thousands of digits or beyond the double range."""
from __future__ import annotations

import base64
import json
from decimal import Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spark_source.postgres import types as T
from spark_source.postgres.envelope import CdcConfig, EnvelopeBuilder
from spark_source.postgres.pgoutput import Column, Relation
from spark_source.postgres.types import TypeModes, column_type, convert_value

pytestmark = pytest.mark.unit


def conv(oid, text, **modes):
    return convert_value(column_type(oid, -1, TypeModes(**modes)), text.encode(), "c", oid)


def debezium_micros(years, months, days, hours, minutes, whole_seconds, micro_seconds) -> int:
    """``MicroDuration.durationMicros(...)`` of pgjdbc's ``PGInterval`` fields, as Java computes it
    (``getSeconds()`` is ``wholeSeconds + microSeconds / 1e6``; the last step a double-to-long cast)."""
    seconds = whole_seconds + micro_seconds / 1_000_000
    number_of_days = (years * 12 + months) * (365.25 / 12.0) + days
    number_of_seconds = ((number_of_days * 24 + hours) * 60 + minutes) * 60 + seconds
    return int(number_of_seconds * 1e6)


def test_a_micro_duration_is_debezium_s_to_the_microsecond():
    # 34858227.8 s has no exact double; Debezium's (long) cast truncates the one just below it.
    assert conv(T.INTERVAL, "1 year 1 mon 7 days 18:20:27.8") == 34858227799999
    assert conv(T.INTERVAL, "-1 years -2 mons -00:00:01.5") == debezium_micros(-1, -2, 0, 0, 0, -1, -500000)


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(-30, 30), st.integers(-11, 11), st.integers(-40, 40), st.integers(0, 99),
       st.integers(0, 59), st.integers(0, 59), st.integers(0, 999_999), st.booleans())
@example(2, 4, -37, 24, 45, 56, 180_000, True)
def test_micro_duration_matches_debezium_over_postgres_interval_output(y, mo, d, h, mi, s, us, negative):
    text = f"{y} years {mo} mons {d} days {'-' if negative else ''}{h:02d}:{mi:02d}:{s:02d}.{us:06d}"
    sign = -1 if negative else 1
    assert conv(T.INTERVAL, text) == debezium_micros(y, mo, d, sign * h, sign * mi, sign * s, sign * us)


def test_an_infinite_interval_is_the_end_of_its_range_not_an_error():
    # PostgreSQL 17 outputs 'infinity' / '-infinity' for an interval; Riverlog keeps them unbounded.
    assert conv(T.INTERVAL, "infinity") == 2 ** 63 - 1
    assert conv(T.INTERVAL, "-infinity") == -(2 ** 63)
    assert conv(T.INTERVAL, "infinity", interval_handling_mode="string") == "infinity"
    assert conv(T.INTERVAL, "-infinity", interval_handling_mode="string") == "-infinity"
    assert conv(1187, '{infinity,"1 day",-infinity}') == [2 ** 63 - 1, 86_400_000_000, -(2 ** 63)]


def _unscaled(b64: str) -> int:
    return int.from_bytes(base64.b64decode(b64), "big", signed=True)


def _exact(text: str, scale: int) -> int:
    """The unscaled integer of a decimal literal written with ``scale`` fractional digits."""
    sign, digits, exponent = Decimal(text).as_tuple()
    assert exponent == -scale
    return int(Decimal((sign, digits, 0)))


def test_a_numeric_of_thousands_of_digits_converts_exactly():
    # PostgreSQL's numeric holds up to 131072 digits before the point and 16383 after; BigDecimal
    # takes them all, so must the source (Python's int(str) stops at 4300 digits).
    big = "9" * 5000 + "." + "1234" * 1000
    out = conv(T.NUMERIC, big)
    assert out["scale"] == 4000 and _unscaled(out["value"]) == _exact(big, 4000)
    negative = conv(T.NUMERIC, "-" + "7" * 4500 + ".50")          # trailing zero stripped: scale 1
    assert negative["scale"] == 1 and _unscaled(negative["value"]) == _exact("-" + "7" * 4500 + ".5", 1)


def test_a_numeric_beyond_the_double_range_is_infinity_under_double_mode():
    # BigDecimal.doubleValue() is ±Infinity there; JsonConverter writes it as the string, as a float8's.
    assert conv(T.NUMERIC, "1" + "0" * 400, decimal_handling_mode="double") == "Infinity"
    assert conv(T.NUMERIC, "-1" + "0" * 400, decimal_handling_mode="double") == "-Infinity"
    assert conv(T.NUMERIC, "1" + "0" * 300, decimal_handling_mode="double") == 1e300
    record = EnvelopeBuilder(CdcConfig.from_options({"topic.prefix": "shop", "database.dbname": "shop",
                                                     "decimal.handling.mode": "double"}), now_us=lambda: 0) \
        .snapshot_record(Relation(16391, "public", "m", "d", (Column(True, "id", 23, -1), Column(False, "n", 1700, -1))),
                         (b"1", b"9" * 400), consistent_lsn=100, order=0)
    assert json.loads(record.value)["payload"]["after"] == {"id": 1, "n": "Infinity"}
