"""Spark SQL's values as plain Python values: types, coercion, casts and text, with Spark 4's
ANSI rules (``spark.sql.ansi.enabled=true``), so :mod:`streams.expressions` computes what Spark
computes.

A value's Spark type is known statically for literals and everything built from them, and is
read from the Python value for record fields, whose schema the interpreter does not have:

=====================  ==================================================================
Python value           Spark type it is read as
=====================  ==================================================================
``bool``               BOOLEAN
``int``                BIGINT (JSON numbers and Kafka longs)
``float``              DOUBLE
``Decimal``            DECIMAL(p, s), p and s from its digits (``Decimal('1.50')``: (3, 2))
``str`` / ``bytes``    STRING / BINARY
``datetime``/``date``  TIMESTAMP (UTC) / DATE
``dict``               STRUCT (a MAP field reads the same; only its ``CAST AS STRING`` differs)
``list`` / ``tuple``   ARRAY
=====================  ==================================================================

Types are strings (``"int"``, ``"double"``, ...) or ``("decimal", precision, scale)``.
"""
from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_DOWN, ROUND_HALF_UP, Context, Decimal, InvalidOperation

from broker.errors import RiverlogError

INTEGRAL_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
INTEGRAL_DECIMAL = {"tinyint": ("decimal", 3, 0), "smallint": ("decimal", 5, 0),
                    "int": ("decimal", 10, 0), "bigint": ("decimal", 20, 0)}
MAX_PRECISION = 38
_EXACT = Context(prec=200, rounding=ROUND_HALF_UP)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class UnsupportedExpressionError(RiverlogError):
    """An expression the plain-Python interpreter cannot evaluate exactly as Spark does; raised
    when the expression is read, never while records flow."""
    code, name, retriable, grpc_status = 1201, "UNSUPPORTED_EXPRESSION", False, "INVALID_ARGUMENT"


class ExpressionEvaluationError(RiverlogError):
    """An expression failed on one record where Spark's query would fail too (ANSI mode): division
    by zero, overflow, a malformed cast, an index out of bounds. ``details['error_class']`` is
    Spark's error class (``DIVIDE_BY_ZERO``, ``CAST_INVALID_INPUT``, ...)."""
    code, name, retriable, grpc_status = 1202, "EXPRESSION_EVALUATION_FAILED", False, "INVALID_ARGUMENT"


def fail(error_class: str, message: str):
    raise ExpressionEvaluationError(f"[{error_class}] {message}", error_class=error_class)


# ------------------------------------------------------------------------------------------ types
def is_decimal(t) -> bool:
    return type(t) is tuple


def is_integral(t) -> bool:
    return t in INTEGRAL_BITS


def is_numeric(t) -> bool:
    return t in INTEGRAL_BITS or t == "double" or type(t) is tuple


class TypedDecimal(Decimal):
    """A DECIMAL result whose type was worked out per row (its operands' types were not known
    when the expression was compiled): the type goes with the value, so an enclosing operation
    types it as Spark does (``(a - 2.5)`` with ``a`` BIGINT is DECIMAL(22,1), not the DECIMAL(4,1)
    its digits alone would suggest)."""
    spark_type: tuple

    @classmethod
    def of(cls, value: Decimal, spark_type: tuple) -> "TypedDecimal":
        d = cls(value)
        d.spark_type = spark_type
        return d


def decimal_type_of(d: Decimal) -> tuple:
    sign, digits, exp = d.as_tuple()
    scale = max(0, -exp)
    return ("decimal", max(len(digits) + max(exp, 0), scale, 1), scale)


def type_of(v):
    """The Spark type a record field's Python value is read as (table in the module docstring)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "bigint"
    if isinstance(v, float):
        return "double"
    if isinstance(v, Decimal):
        return getattr(v, "spark_type", None) or decimal_type_of(v)
    if isinstance(v, str):
        return "string"
    if isinstance(v, (bytes, bytearray)):
        return "binary"
    if isinstance(v, datetime):
        return "timestamp"
    if isinstance(v, date):
        return "date"
    if isinstance(v, dict):
        return "struct"
    if isinstance(v, (list, tuple)):
        return "array"
    raise ExpressionEvaluationError(f"a record holds a {type(v).__name__}, which has no Spark SQL type",
                                    error_class="DATATYPE_MISMATCH")


def as_decimal_type(t, literal: "int | None" = None) -> tuple:
    """``t`` widened to DECIMAL; an integer literal takes only the digits it has, as Spark's
    DecimalPrecision rule does (``1.0 / 3`` is DECIMAL(7,6), not DECIMAL(13,12))."""
    if is_decimal(t):
        return t
    if literal is not None:
        return ("decimal", max(len(str(abs(literal))), 1), 0)
    return INTEGRAL_DECIMAL[t]


def bounded(precision: int, scale: int) -> tuple:
    """Spark's result decimal with ``allowPrecisionLoss``: over 38 digits, keep the integer part
    and at least 6 (or the original) fraction digits."""
    if precision <= MAX_PRECISION:
        return ("decimal", precision, scale)
    int_digits = precision - scale
    return ("decimal", MAX_PRECISION, max(MAX_PRECISION - int_digits, min(scale, 6)))


def wider(a, b):
    """Spark's common type of two types (for comparison, CASE, COALESCE, IN, arrays...)."""
    if a == b or b == "null":
        return a
    if a == "null":
        return b
    if is_numeric(a) and is_numeric(b):
        if a == "double" or b == "double":
            return "double"
        if is_decimal(a) or is_decimal(b):
            (_, p1, s1), (_, p2, s2) = as_decimal_type(a), as_decimal_type(b)
            scale = max(s1, s2)
            return ("decimal", min(MAX_PRECISION, max(p1 - s1, p2 - s2) + scale), scale)
        return a if INTEGRAL_BITS[a] >= INTEGRAL_BITS[b] else b
    if a == "string" and is_numeric(b):
        return "bigint" if is_integral(b) else "double"
    if b == "string" and is_numeric(a):
        return "bigint" if is_integral(a) else "double"
    if {a, b} == {"date", "timestamp"}:
        return "timestamp"
    if a == "string" and b in ("date", "timestamp", "boolean"):
        return b
    if b == "string" and a in ("date", "timestamp", "boolean"):
        return a
    return a


# ---------------------------------------------------------------------------------- numbers
def check_integral(v: int, t: str, what: str = "overflow") -> int:
    bits = INTEGRAL_BITS[t]
    if -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        return v
    fail("ARITHMETIC_OVERFLOW", f"{what}: {v} does not fit {t.upper()}")


def to_decimal(v: Decimal, t: tuple, error_class: str = "NUMERIC_VALUE_OUT_OF_RANGE") -> Decimal:
    """``v`` rounded HALF_UP to ``t``'s scale; more integer digits than ``t`` holds fail (ANSI)."""
    _, precision, scale = t
    q = v.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_EXACT)
    if q.adjusted() >= precision - scale and q != 0:
        fail(error_class, f"{v} cannot be represented as DECIMAL({precision}, {scale})")
    return q


def java_int_rem(a: int, b: int) -> int:
    """Java's ``%``: the sign of the dividend."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def java_int_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def double_str(d: float) -> str:
    """Java's ``Double.toString`` (what Spark's CAST(double AS STRING) prints): plain between
    1e-3 and 1e7, else ``d.dddE±n``; always a fraction digit."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1, d) < 0 else "0.0"
    dec = Decimal(repr(d))
    if 1e-3 <= abs(d) < 1e7:
        s = format(dec, "f")
        return s if "." in s else s + ".0"
    sign, digits, _ = dec.as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{dec.adjusted()}"


# ---------------------------------------------------------------------------------- to string
def to_str(v, t=None) -> str:
    """CAST(v AS STRING) as Spark prints it."""
    t = t or type_of(v)
    if t == "string":
        return v
    if t == "boolean":
        return "true" if v else "false"
    if t == "double":
        return double_str(v)
    if is_decimal(t):
        return str(v)
    if is_integral(t):
        return str(v)
    if t == "timestamp":
        return timestamp_str(v)
    if t == "date":
        return v.isoformat()
    if t == "binary":
        return bytes(v).decode("utf-8", "replace")
    if t == "array":
        return "[" + ", ".join("null" if x is None else to_str(x) for x in v) + "]"
    if t == "struct":
        return "{" + ", ".join("null" if x is None else to_str(x) for x in v.values()) + "}"
    return str(v)


def timestamp_str(ts: datetime) -> str:
    ts = ts.astimezone(timezone.utc) if ts.tzinfo else ts
    s = ts.strftime("%Y-%m-%d %H:%M:%S")
    return s + (f".{ts.microsecond:06d}".rstrip("0") if ts.microsecond else "")


# ---------------------------------------------------------------------------------- casts
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


def type_name(t) -> str:
    return f"DECIMAL({t[1]},{t[2]})" if is_decimal(t) else str(t).upper()


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
