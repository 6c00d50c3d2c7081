"""Spark SQL's built-in functions over Python values: strings, math, structs and collections,
and a few date parts. NULL in gives NULL out unless Spark says otherwise (``concat_ws``,
``coalesce``)."""
from __future__ import annotations

import math
import re
from datetime import timezone
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal

from sqlglot import exp

from streams import sql_values as sv
from streams.sql_compiler import Compiled, coerce, handler, value_type
from streams.sql_operators import compare
from streams.sql_values import fail


def _strict(args: list[Compiled], body, t=None, string_args=()):
    """A function that is NULL when any argument is; ``string_args`` are read as strings."""
    fns = [a.fn for a in args]

    def f(row):
        vals = []
        for i, g in enumerate(fns):
            v = g(row)
            if v is None:
                return None
            if i in string_args and not isinstance(v, str):
                v = sv.to_str(v, value_type(args[i], v))
            vals.append(v)
        return body(*vals)
    return Compiled(f, t)


def _args(self, node, *names):
    return [self.compile(node.args[n]) for n in names if node.args.get(n) is not None]


# ------------------------------------------------------------------------------ strings
@handler(exp.Upper)
def _upper(self, node):
    return _strict([self.compile(node.this)], str.upper, "string", (0,))


@handler(exp.Lower)
def _lower(self, node):
    return _strict([self.compile(node.this)], str.lower, "string", (0,))


@handler(exp.Concat, exp.DPipe)
def _concat(self, node):
    parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else node.expressions
    args = self.many(parts)
    return _strict(args, lambda *v: "".join(v), "string", tuple(range(len(args))))


@handler(exp.ConcatWs)
def _concat_ws(self, node):
    sep, *args = self.many(node.expressions)

    def f(row):
        s = sep.fn(row)
        if s is None:
            return None
        out = []
        for a in args:
            v = a.fn(row)
            if isinstance(v, (list, tuple)):
                out.extend(x for x in v if x is not None)
            elif v is not None:
                out.append(v if isinstance(v, str) else sv.to_str(v, value_type(a, v)))
        return s.join(out)
    return Compiled(f, "string")


@handler(exp.Length)
def _length(self, node):
    return _strict([self.compile(node.this)], len, "int")


def substring(s, pos, length=2**31 - 1):
    """Spark's 1-based SUBSTRING: position 0 acts as 1; negative counts from the end."""
    n = len(s)
    start = pos - 1 if pos > 0 else n + pos if pos < 0 else 0
    end = start + length if length >= 0 else start
    start, end = max(start, 0), max(min(end, n), 0)
    return s[start:end] if end > start else ""


@handler(exp.Substring)
def _substring(self, node):
    return _strict(_args(self, node, "this", "start", "length"), substring, "string")


@handler(exp.Trim)
def _trim(self, node):
    where = (node.args.get("position") or "BOTH").upper()
    args = _args(self, node, "this", "expression")

    def body(s, chars=None):
        chars = " " if chars is None else chars
        return s.strip(chars) if where == "BOTH" else s.lstrip(chars) if where == "LEADING" else s.rstrip(chars)
    return _strict(args, body, "string")


@handler(exp.RegexpSplit)
def _split(self, node):
    if node.args.get("limit"):
        self.unsupported(node, "(split with a limit) is not supported")
    return _strict(_args(self, node, "this", "expression"), lambda s, p: re.split(p, s) if s else [""], "array")


@handler(exp.RegexpExtract)
def _regexp_extract(self, node):
    args = _args(self, node, "this", "expression", "group")

    def body(s, pattern, group=1):
        m = re.search(pattern, s)
        if m is None:
            return ""
        if group > (m.re.groups):
            fail("INVALID_PARAMETER_VALUE.REGEX_GROUP_INDEX", f"the regex has {m.re.groups} groups, not {group}")
        return m.group(group) or ""
    return _strict(args, body, "string")


@handler(exp.RegexpLike)
def _rlike(self, node):
    return _strict(_args(self, node, "this", "expression"), lambda s, p: re.search(p, s) is not None, "boolean")


@handler(exp.Replace)
def _replace(self, node):
    args = _args(self, node, "this", "expression", "replacement")
    return _strict(args, lambda s, a, b="": s.replace(a, b) if a else s, "string")


@handler(exp.StartsWith)
def _startswith(self, node):
    return _strict(_args(self, node, "this", "expression"), str.startswith, "boolean")


@handler(exp.EndsWith)
def _endswith(self, node):
    return _strict(_args(self, node, "this", "expression"), str.endswith, "boolean")


@handler(exp.Contains)
def _contains(self, node):
    return _strict(_args(self, node, "this", "expression"), lambda s, p: p in s, "boolean")


@handler(exp.Pad)
def _pad(self, node):
    left = bool(node.args.get("is_left"))
    args = _args(self, node, "this", "expression", "fill_pattern")

    def body(s, n, fill=" "):
        if n <= len(s):
            return s[:max(n, 0)]
        if not fill:
            return s
        pad = (fill * (n // len(fill) + 1))[:n - len(s)]
        return pad + s if left else s + pad
    return _strict(args, body, "string", (0,))


_FORMAT = re.compile(r"%(-?0?\d*)(?:\.(\d+))?([sdfx%])")


@handler(exp.Format)
def _format_string(self, node):
    """Java's ``String.format`` for ``%s %d %f %x`` with flags and width: the conversions Spark's
    format_string is used with."""
    fmt, args = self.compile(node.this), self.many(node.expressions)
    if fmt.type != "string" or not isinstance(node.this, exp.Literal):
        self.unsupported(node, "(a format that is not a literal) is not supported")
    pattern = node.this.this
    if _FORMAT.sub("", pattern).count("%"):
        self.unsupported(node, "(this format conversion) is not supported")

    def f(row):
        vals = [(a.fn(row), a) for a in args]
        it = iter(vals)

        def one(m):
            flags, precision, conv = m.groups()
            if conv == "%":
                return "%"
            v, a = next(it, (None, None))
            if conv == "s":
                text = "null" if v is None else sv.to_str(v, value_type(a, v))
                return ("%" + flags + "s") % text
            if v is None:
                return "null"
            if conv in "dx":
                return ("%" + flags + conv) % int(v)
            return ("%" + flags + "." + (precision or "6") + "f") % Decimal(v).quantize(
                Decimal(1).scaleb(-int(precision or 6)), rounding=ROUND_HALF_UP)
        return _FORMAT.sub(one, pattern)
    return Compiled(f, "string")


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
    ts = sv.cast(v, t, "timestamp") if t != "timestamp" else v
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
    return _strict([c], lambda v: sv.cast(v, sv.type_of(v), "date"), "date")


@handler(exp.StrToUnix)
def _unix_timestamp(self, node):
    if node.this is None or isinstance(node.this, exp.CurrentTimestamp):
        self.unsupported(node, "(the wall clock) is not deterministic and is not supported")
    c = self.compile(node.this)

    def body(v):
        t = sv.type_of(v)
        if t == "string":
            self.unsupported(node, "(unix_timestamp of a string) is not supported")
        return sv.cast(_as_timestamp(v, t), "timestamp", "bigint")
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
