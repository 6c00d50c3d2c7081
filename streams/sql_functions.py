"""Spark SQL's built-in functions over Python values: math, structs and collections, and a few
date parts; string functions are in :mod:`streams.sql_string_functions`. NULL in gives NULL out
unless Spark says otherwise (``coalesce``)."""
from __future__ import annotations

import math
import re
from datetime import timezone
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal

from sqlglot import exp

from streams import sql_values as sv
from streams.sql_casts import cast
from streams.sql_compiler import Compiled, coerce, handler, value_type
from streams.sql_function_base import _strict
from streams.sql_operators import compare
from streams.sql_values import fail


# ------------------------------------------------------------------------------ math
@handler(exp.Abs)
def _abs(self, node):
    inner = self.compile(node.this)

    def f(row):
        v = inner.fn(row)
        if v is None:
            return None
        t = value_type(inner, v)
        return sv.check_integral(abs(v), t) if sv.is_integral(t) else abs(v)
    return Compiled(f, inner.type)


def _round_type(t, d):
    if sv.is_decimal(t):
        _, p, s = t
        scale = max(0, min(s, d))
        return ("decimal", min(sv.MAX_PRECISION, p - s + scale + 1 if d < s else p), scale)
    return t


@handler(exp.Round)
def _round(self, node):
    inner = self.compile(node.this)
    digits = node.args.get("decimals")
    if digits is not None and not (isinstance(digits, exp.Literal) or isinstance(digits, exp.Neg)):
        self.unsupported(node, "(round to a non-literal scale) is not supported")
    d = int(digits.sql()) if digits is not None else 0

    def f(row):
        v = inner.fn(row)
        if v is None:
            return None
        t = value_type(inner, v)
        q = Decimal(1).scaleb(-d)
        if t == "double":
            if math.isnan(v) or math.isinf(v):
                return v
            return float(Decimal(repr(v)).quantize(q, rounding=ROUND_HALF_UP, context=sv._EXACT))
        if sv.is_integral(t):
            r = int(Decimal(v).quantize(q, rounding=ROUND_HALF_UP, context=sv._EXACT)) if d < 0 else v
            return sv.check_integral(r, t)
        if sv.is_decimal(t):
            return sv.to_decimal(Decimal(v).quantize(q, rounding=ROUND_HALF_UP, context=sv._EXACT), _round_type(t, d))
        fail("DATATYPE_MISMATCH", f"round needs a number, not {sv.type_name(t)}")
    return Compiled(f, _round_type(inner.type, d) if inner.type else None)


def _floor_ceil(rounding):
    def compile_(self, node):
        if node.args.get("decimals"):
            self.unsupported(node, "(floor/ceil to a scale) is not supported")
        inner = self.compile(node.this)

        def f(row):
            v = inner.fn(row)
            if v is None:
                return None
            t = value_type(inner, v)
            if sv.is_decimal(t):
                return Decimal(v).to_integral_value(rounding=rounding)
            if t == "double":
                if math.isnan(v) or math.isinf(v):
                    fail("ARITHMETIC_OVERFLOW", f"{v} has no integer floor or ceiling")
                r = math.floor(v) if rounding == ROUND_FLOOR else math.ceil(v)
                return max(min(r, 2**63 - 1), -2**63)   # Java's double-to-long conversion saturates
            return int(v)
        t = inner.type
        return Compiled(f, ("decimal", min(sv.MAX_PRECISION, t[1] - t[2] + 1), 0) if sv.is_decimal(t)
                        else "bigint" if t else None)
    return compile_


handler(exp.Floor)(_floor_ceil(ROUND_FLOOR))
handler(exp.Ceil)(_floor_ceil(ROUND_CEILING))


def _extreme(pick):
    def compile_(self, node):
        args = self.many([node.this, *node.expressions])
        from streams.sql_operators import _common, _in_type
        common = _common(args)

        def f(row):
            best, best_t = None, None
            for a in args:
                v = a.fn(row)
                if v is None:
                    continue
                t = value_type(a, v)
                if best is None or pick(compare(v, t, best, best_t)):
                    best, best_t, best_arg = v, t, a
            return None if best is None else _in_type(best_arg, best, common)
        return Compiled(f, common.type)
    return compile_


handler(exp.Greatest)(_extreme(lambda c: c > 0))
handler(exp.Least)(_extreme(lambda c: c < 0))


def _double_fn(body):
    def compile_(self, node):
        args = self.many([node.this] + ([node.expression] if node.args.get("expression") else []))

        def as_double(*vals):
            try:
                return body(*(float(coerce(v, sv.type_of(v), "double")) for v in vals))
            except OverflowError:
                return math.inf
        return _strict(args, as_double, "double")
    return compile_


def _sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def _pow(x, y):
    try:
        return math.pow(x, y)
    except ValueError:
        return math.nan


handler(exp.Sqrt)(_double_fn(_sqrt))
handler(exp.Pow)(_double_fn(_pow))


# ------------------------------------------------------------------------------ structs and collections
@handler(exp.Struct)
def _struct(self, node):
    fields = []
    for i, e in enumerate(node.expressions, 1):
        if isinstance(e, exp.PropertyEQ):
            name = e.this.this if isinstance(e.this, exp.Identifier) else e.this.name
            fields.append((name, self.compile(e.expression)))
        elif isinstance(e, exp.Alias):
            fields.append((e.alias, self.compile(e.this)))
        else:
            c = self.compile(e)
            fields.append((c.name or f"col{i}", c))
    return Compiled(lambda row: {name: c.fn(row) for name, c in fields}, "struct")


@handler(exp.Array)
def _array(self, node):
    items = self.many(node.expressions)
    from streams.sql_operators import _common, _in_type
    common = _common(items)

    def f(row):
        vals = [(i, i.fn(row)) for i in items]
        return [_in_type(i, v, common) for i, v in vals]
    return Compiled(f, "array")


@handler(exp.VarMap)
def _map(self, node):
    keys, values = self.many(node.args["keys"].expressions), self.many(node.args["values"].expressions)

    def f(row):
        out = {}
        for k, v in zip(keys, values):
            key = k.fn(row)
            if key is None:
                fail("NULL_MAP_KEY", "a map key cannot be NULL")
            out[key] = v.fn(row)
        return out
    return Compiled(f, "struct")


@handler(exp.Bracket)
def _bracket(self, node):
    if len(node.expressions) != 1:
        self.unsupported(node)
    base, index = self.compile(node.this), self.compile(node.expressions[0])
    one_based, safe = node.args.get("offset") == 1, bool(node.args.get("safe"))

    def f(row):
        c, i = base.fn(row), index.fn(row)
        if c is None or i is None:
            return None
        if isinstance(c, dict):
            return c.get(i)
        n = len(c)
        if one_based:
            if i == 0:
                fail("INVALID_INDEX_OF_ZERO", "element_at's index starts at 1, not 0")
            pos = i - 1 if i > 0 else n + i
            if not 0 <= pos < n:
                return None if safe else fail("INVALID_ARRAY_INDEX_IN_ELEMENT_AT",
                                              f"the index {i} is out of bounds; the array has {n} elements")
            return c[pos]
        if not 0 <= i < n:
            fail("INVALID_ARRAY_INDEX", f"the index {i} is out of bounds; the array has {n} elements")
        return c[i]
    return Compiled(f)


@handler(exp.ArraySize)
def _size(self, node):
    return _strict([self.compile(node.this)], len, "int")


@handler(exp.ArrayContains)
def _array_contains(self, node):
    arr, item = self.compile(node.this), self.compile(node.expression)

    def body(a, v):
        t = value_type(item, v)
        saw_null = False
        for x in a:
            if x is None:
                saw_null = True
            elif compare(x, sv.type_of(x), v, t) == 0:
                return True
        return None if saw_null else False
    return _strict([arr, item], body, "boolean")


# ------------------------------------------------------------------------------ dates and times
def _as_timestamp(v, t):
    ts = cast(v, t, "timestamp") if t != "timestamp" else v
    return ts.astimezone(timezone.utc) if ts.tzinfo else ts


def _part(attr, from_date=False):
    def compile_(self, node):
        inner = node.this
        if from_date and isinstance(inner, exp.TsOrDsToDate):
            inner = inner.this
        c = self.compile(inner)
        return _strict([c], lambda v: getattr(_as_timestamp(v, sv.type_of(v)), attr), "int")
    return compile_


for _cls, _attr, _from_date in [(exp.Year, "year", True), (exp.Month, "month", True), (exp.Day, "day", True),
                                (exp.Hour, "hour", False), (exp.Minute, "minute", False),
                                (exp.Second, "second", False)]:
    handler(_cls)(_part(_attr, _from_date))


@handler(exp.TsOrDsToDate)
def _to_date(self, node):
    if node.args.get("format"):
        self.unsupported(node, "(to_date with a format) is not supported")
    c = self.compile(node.this)
    return _strict([c], lambda v: cast(v, sv.type_of(v), "date"), "date")


@handler(exp.StrToUnix)
def _unix_timestamp(self, node):
    if node.this is None or isinstance(node.this, exp.CurrentTimestamp):
        self.unsupported(node, "(the wall clock) is not deterministic and is not supported")
    c = self.compile(node.this)

    def body(v):
        t = sv.type_of(v)
        if t == "string":
            self.unsupported(node, "(unix_timestamp of a string) is not supported")
        return cast(_as_timestamp(v, t), "timestamp", "bigint")
    if c.type == "string":
        self.unsupported(node, "(unix_timestamp of a string) is not supported")
    return _strict([c], body, "bigint")


_JAVA_FORMAT = re.compile(r"'[^']*'|yyyy|MM|dd|HH|mm|ss|S{1,6}|[A-Za-z]+|[^A-Za-z']+")


@handler(exp.TimeToStr)
def _date_format(self, node):
    """date_format with the pattern letters yyyy MM dd HH mm ss S..S and quoted text."""
    spark_sql = node.sql(dialect="spark")
    m = re.search(r",\s*'((?:[^']|'')*)'\)$", spark_sql)
    if not m or not isinstance(node.args.get("format"), exp.Literal):
        self.unsupported(node, "(date_format without a literal pattern) is not supported")
    tokens = _JAVA_FORMAT.findall(m.group(1))
    known = {"yyyy", "MM", "dd", "HH", "mm", "ss"}
    for tok in tokens:
        if tok[0].isalpha() and tok not in known and set(tok) != {"S"}:
            self.unsupported(node, f"(the pattern letters {tok!r}) are not supported")
    inner = node.this.this if isinstance(node.this, exp.TimeStrToTime) else node.this
    c = self.compile(inner)

    def body(v):
        ts = _as_timestamp(v, sv.type_of(v))
        out = []
        for tok in tokens:
            if tok.startswith("'"):
                out.append(tok[1:-1] or "'")
            elif tok in known:
                out.append({"yyyy": f"{ts.year:04d}", "MM": f"{ts.month:02d}", "dd": f"{ts.day:02d}",
                            "HH": f"{ts.hour:02d}", "mm": f"{ts.minute:02d}", "ss": f"{ts.second:02d}"}[tok])
            elif set(tok) == {"S"}:
                out.append(f"{ts.microsecond:06d}"[:len(tok)])
            else:
                out.append(tok)
        return "".join(out)
    return _strict([c], body, "string")
