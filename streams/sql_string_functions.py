"""Spark SQL's built-in string functions over Python values: upper, lower, concat, concat_ws,
length, substring, trim, split, regexp_extract, rlike, replace, startswith, endswith, contains,
lpad/rpad and format_string. NULL in gives NULL out unless Spark says otherwise (``concat_ws``).
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

from sqlglot import exp

from streams import sql_values as sv
from streams.sql_compiler import Compiled, handler, value_type
from streams.sql_function_base import _strict
from streams.sql_values import fail


def _args(self, node, *names):
    return [self.compile(node.args[n]) for n in names if node.args.get(n) is not None]


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
