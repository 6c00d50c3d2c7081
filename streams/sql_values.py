"""Spark SQL's values as plain Python values: types, coercion and text, with Spark 4's
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
from datetime import date, datetime, timezone
from decimal import ROUND_HALF_UP, Context, Decimal

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


def type_name(t) -> str:
    return f"DECIMAL({t[1]},{t[2]})" if is_decimal(t) else str(t).upper()


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
