"""Spark 4's ANSI ``CAST(v AS t)`` on plain Python values, for :mod:`streams.expressions`.

What text reads as which number, boolean, date or timestamp, and which casts overflow or are
malformed (``CAST_INVALID_INPUT``, ``CAST_OVERFLOW``), is its own body of rules, apart from the
types and text forms in :mod:`streams.sql_values` that it builds on.
"""
from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_DOWN, Decimal, InvalidOperation

from streams.sql_values import (EPOCH, INTEGRAL_BITS, double_str, fail, is_decimal, is_integral, is_numeric,
                                to_decimal, to_str, type_name)

_INTEGER_TEXT = re.compile(r"[+-]?\d+")
_DOUBLE_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?")
_SPECIAL_DOUBLES = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf,
                    "inf": math.inf, "+inf": math.inf, "-inf": -math.inf}
_TRUE = {"t", "true", "y", "yes", "1"}
_FALSE = {"f", "false", "n", "no", "0"}
_DATE_TEXT = re.compile(r"([+-]?\d{4,})(?:-(\d{1,2})(?:-(\d{1,2}))?)?(?:[T ].*)?")
_TIMESTAMP_TEXT = re.compile(r"(\d{4,})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?"
                             r"\s*(Z|UTC|[+-]\d{2}:?\d{2})?")


def _malformed(v, source: str, target: str):
    fail("CAST_INVALID_INPUT", f"the value {v!r} of the type {source.upper()} cannot be cast to "
         f"{type_name(target)} because it is malformed")


def cast(v, source, target):
    """CAST(v AS target) with Spark 4's ANSI rules; ``v`` is not None."""
    if source == target or source == "null":
        return v
    if target == "string":
        return to_str(v, source)
    if is_integral(target):
        return _to_integral(v, source, target)
    if target == "double":
        return _to_double(v, source)
    if is_decimal(target):
        return _to_decimal(v, source, target)
    if target == "boolean":
        return _to_boolean(v, source)
    if target == "date":
        return _to_date(v, source)
    if target == "timestamp":
        return _to_timestamp(v, source)
    if target == "binary" and source == "string":
        return v.encode("utf-8")
    fail("DATATYPE_MISMATCH", f"cannot cast {type_name(source)} to {type_name(target)}")


def _to_integral(v, source, target):
    if source == "string":
        text = v.strip()
        if not _INTEGER_TEXT.fullmatch(text):
            _malformed(v, source, target)
        n = int(text)
    elif source == "boolean":
        return int(v)
    elif source == "double":
        if math.isnan(v) or math.isinf(v):
            fail("CAST_OVERFLOW", f"the value {double_str(v)} cannot be cast to {target.upper()}")
        n = int(v)
    elif is_decimal(source) or is_integral(source):
        n = int(v)
    elif source == "timestamp":
        n = math.floor((v - EPOCH).total_seconds()) if v.tzinfo else math.floor((v - EPOCH.replace(tzinfo=None)).total_seconds())
    else:
        fail("DATATYPE_MISMATCH", f"cannot cast {type_name(source)} to {target.upper()}")
    bits = INTEGRAL_BITS[target]
    if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
        fail("CAST_OVERFLOW", f"the value {to_str(v, source)} cannot be cast to {target.upper()} due to an overflow")
    return n


def _to_double(v, source):
    if source == "string":
        text = v.strip()
        special = _SPECIAL_DOUBLES.get(text.lower())
        if special is not None:
            return special
        if not _DOUBLE_TEXT.fullmatch(text):
            _malformed(v, source, "double")
        return float(text.rstrip("dDfF"))
    if source == "timestamp":
        delta = v - EPOCH
        return (delta.days * 86400 + delta.seconds) + delta.microseconds / 1e6
    if source in ("boolean",) or is_integral(source) or is_decimal(source):
        return float(v)
    fail("DATATYPE_MISMATCH", f"cannot cast {type_name(source)} to DOUBLE")


def _to_decimal(v, source, target):
    if source == "string":
        try:
            d = Decimal(v.strip())
        except InvalidOperation:
            _malformed(v, source, target)
        if not d.is_finite():
            _malformed(v, source, target)
    elif source == "double":
        if math.isnan(v) or math.isinf(v):
            fail("CAST_OVERFLOW", f"the value {double_str(v)} cannot be cast to {type_name(target)}")
        d = Decimal(repr(v))
    elif source == "boolean":
        d = Decimal(int(v))
    elif is_integral(source) or is_decimal(source):
        d = Decimal(v)
    else:
        fail("DATATYPE_MISMATCH", f"cannot cast {type_name(source)} to {type_name(target)}")
    return to_decimal(d, target)


def _to_boolean(v, source):
    if source == "string":
        text = v.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        _malformed(v, source, "boolean")
    if is_numeric(source):
        return v != 0
    fail("DATATYPE_MISMATCH", f"cannot cast {type_name(source)} to BOOLEAN")


def _to_date(v, source):
    if source == "timestamp":
        return v.astimezone(timezone.utc).date() if v.tzinfo else v.date()
    if source == "string":
        m = _DATE_TEXT.fullmatch(v.strip())
        try:
            if m:
                return date(int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
        except ValueError:
            pass
        _malformed(v, source, "date")
    fail("DATATYPE_MISMATCH", f"cannot cast {type_name(source)} to DATE")


def _to_timestamp(v, source):
    if source == "date":
        return datetime(v.year, v.month, v.day, tzinfo=timezone.utc)
    if source == "string":
        return _parse_timestamp(v)
    if is_integral(source) or is_decimal(source) or source == "double":
        if source == "double" and (math.isnan(v) or math.isinf(v)):
            fail("CAST_OVERFLOW", f"the value {double_str(v)} cannot be cast to TIMESTAMP")
        micros = (Decimal(repr(v)) if source == "double" else Decimal(v)) * 1_000_000
        return EPOCH + timedelta(microseconds=int(micros.to_integral_value(rounding=ROUND_DOWN)))
    fail("DATATYPE_MISMATCH", f"cannot cast {type_name(source)} to TIMESTAMP")


def _parse_timestamp(text: str) -> datetime:
    m = _TIMESTAMP_TEXT.fullmatch(text.strip())
    if not m:
        d = _DATE_TEXT.fullmatch(text.strip())
        if d and not text.strip()[len(d.group(1)):].strip(" -0123456789"):
            return _to_timestamp(_to_date(text, "string"), "date")
        _malformed(text, "string", "timestamp")
    y, mo, d, h, mi, s, frac, zone = m.groups()
    try:
        ts = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0),
                      int((frac or "0").ljust(6, "0")[:6]), tzinfo=timezone.utc)
    except ValueError:
        _malformed(text, "string", "timestamp")
    if zone and zone not in ("Z", "UTC"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        ts -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return ts
