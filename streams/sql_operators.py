"""Spark SQL's operators over Python values: comparisons with NaN equal to itself and above every
number, three-valued logic, IN, BETWEEN, LIKE, CASE, COALESCE. Arithmetic is in
:mod:`streams.sql_arithmetic`.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal

from sqlglot import exp

from streams import sql_values as sv
from streams.sql_compiler import Compiled, coerce, handler, value_type


# ------------------------------------------------------------------------------ comparisons
def _key(v):
    if isinstance(v, float) and math.isnan(v):
        return (1, 0.0)
    return (0, v)


def compare(a, ta, b, tb):
    """-1, 0 or 1 for two non-null values after Spark's coercion to their common type."""
    common = sv.wider(ta, tb)
    a, b = coerce(a, ta, common), coerce(b, tb, common)
    if common == "double":
        ka, kb = _key(float(a)), _key(float(b))
    elif sv.is_decimal(common):
        ka, kb = Decimal(a), Decimal(b)
    else:
        ka, kb = a, b
    return (ka > kb) - (ka < kb)


_COMPARE = {exp.EQ: lambda c: c == 0, exp.NEQ: lambda c: c != 0, exp.GT: lambda c: c > 0,
            exp.GTE: lambda c: c >= 0, exp.LT: lambda c: c < 0, exp.LTE: lambda c: c <= 0}


@handler(*_COMPARE, exp.NullSafeEQ)
def _comparison(self, node):
    left, right = self.compile(node.this), self.compile(node.expression)
    lf, rf = left.fn, right.fn
    if isinstance(node, exp.NullSafeEQ):
        def f(row):
            a, b = lf(row), rf(row)
            if a is None or b is None:
                return a is None and b is None
            return compare(a, value_type(left, a), b, value_type(right, b)) == 0
        return Compiled(f, "boolean")
    test = _COMPARE[type(node)]
    if "null" in (left.type, right.type):
        return Compiled(lambda row: None, "boolean", const=True)

    def f(row):
        a = lf(row)
        if a is None:
            return None
        b = rf(row)
        if b is None:
            return None
        return test(compare(a, value_type(left, a), b, value_type(right, b)))
    return Compiled(f, "boolean")


# ------------------------------------------------------------------------------ logic
def _boolean_constant(c: Compiled):
    return c.fn({}) if c.const else "unknown"


@handler(exp.And)
def _and(self, node):
    left, right = self.compile(node.this), self.compile(node.expression)
    if False in (_boolean_constant(left), _boolean_constant(right)):   # Spark's BooleanSimplification
        return Compiled(lambda row: False, "boolean", const=True)
    lf, rf = left.fn, right.fn

    def f(row):
        a = lf(row)
        if a is False:
            return False
        b = rf(row)
        if b is False:
            return False
        return None if a is None or b is None else True
    return Compiled(f, "boolean")


@handler(exp.Or)
def _or(self, node):
    left, right = self.compile(node.this), self.compile(node.expression)
    if True in (_boolean_constant(left), _boolean_constant(right)):
        return Compiled(lambda row: True, "boolean", const=True)
    lf, rf = left.fn, right.fn

    def f(row):
        a = lf(row)
        if a is True:
            return True
        b = rf(row)
        if b is True:
            return True
        return None if a is None or b is None else False
    return Compiled(f, "boolean")


@handler(exp.Not)
def _not(self, node):
    get = self.compile(node.this).fn

    def f(row):
        v = get(row)
        return None if v is None else not v
    return Compiled(f, "boolean")


@handler(exp.Is)
def _is(self, node):
    inner = self.compile(node.this)
    get = inner.fn
    target = node.expression
    if isinstance(target, exp.Null) and inner.type == "null":   # Spark's NullPropagation
        return Compiled(lambda row: True, "boolean", const=True)
    if isinstance(target, exp.Null):
        return Compiled(lambda row: get(row) is None, "boolean")
    if isinstance(target, exp.Boolean):
        want = bool(target.this)
        return Compiled(lambda row: get(row) is want, "boolean")
    self.unsupported(node)


@handler(exp.In)
def _in(self, node):
    if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
        self.unsupported(node, "(IN over a query) is not supported")
    needle, options = self.compile(node.this), self.many(node.expressions)

    def f(row):
        v = needle.fn(row)
        if v is None:
            return None
        t, saw_null = value_type(needle, v), False
        for o in options:
            w = o.fn(row)
            if w is None:
                saw_null = True
            elif compare(v, t, w, value_type(o, w)) == 0:
                return True
        return None if saw_null else False
    return Compiled(f, "boolean")


@handler(exp.Between)
def _between(self, node):
    return _and(self, exp.And(this=exp.GTE(this=node.this, expression=node.args["low"]),
                              expression=exp.LTE(this=node.this, expression=node.args["high"])))


def like_regex(pattern: str, escape: str = "\\") -> re.Pattern:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.S)


@handler(exp.Like, exp.ILike)
def _like(self, node):
    if node.args.get("escape"):
        self.unsupported(node, "(LIKE ... ESCAPE) is not supported")
    target, pattern = self.compile(node.this), node.expression
    flags = re.I if isinstance(node, exp.ILike) else 0
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        rx = re.compile(like_regex(pattern.this).pattern, re.S | flags)
        get = target.fn
        return Compiled(lambda row: None if (v := get(row)) is None else rx.fullmatch(v) is not None, "boolean")
    pat = self.compile(pattern)

    def f(row):
        v, p = target.fn(row), pat.fn(row)
        if v is None or p is None:
            return None
        return re.compile(like_regex(p).pattern, re.S | flags).fullmatch(v) is not None
    return Compiled(f, "boolean")


# ------------------------------------------------------------------------------ conditionals
class _Common:
    """The common type of branches (CASE, IF, COALESCE, GREATEST, arrays): complete when every
    branch's type is static, else widened at run time with the chosen value's own type (a NULL
    field's type is unknown without the schema, so it does not take part)."""
    __slots__ = ("known", "complete")

    def __init__(self, branches):
        self.known, self.complete = "null", True
        for b in branches:
            if b.type is None:
                self.complete = False
            else:
                self.known = sv.wider(self.known, b.type)

    @property
    def type(self):
        return self.known if self.complete else None

    def coerce(self, c: Compiled, v):
        if v is None:
            return v
        t = value_type(c, v)
        target = self.known if self.complete else sv.wider(self.known, t)
        return v if target == "null" else coerce(v, t, target)


def _common(branches):
    return _Common(branches)


def _in_type(c: Compiled, v, common):
    """A branch's value in the common type (``coalesce(null, 1, 2.5)`` gives ``1.0``)."""
    return common.coerce(c, v)


@handler(exp.Case)
def _case(self, node):
    subject = self.compile(node.this) if node.this else None
    whens = [(self.compile(i.this), self.compile(i.args["true"])) for i in node.args["ifs"]]
    default = self.compile(node.args["default"]) if node.args.get("default") else Compiled(lambda row: None, "null")
    common = _common([t for _, t in whens] + [default])

    def f(row):
        s = subject.fn(row) if subject else None
        for cond, then in whens:
            c = cond.fn(row)
            if subject is not None:
                hit = s is not None and c is not None and compare(s, value_type(subject, s), c, value_type(cond, c)) == 0
            else:
                hit = c is True
            if hit:
                return _in_type(then, then.fn(row), common)
        return _in_type(default, default.fn(row), common)
    return Compiled(f, common.type)


@handler(exp.If)
def _if(self, node):
    cond, then = self.compile(node.this), self.compile(node.args["true"])
    other = self.compile(node.args["false"]) if node.args.get("false") else Compiled(lambda row: None, "null")
    common = _common([then, other])

    def f(row):
        branch = then if cond.fn(row) is True else other
        return _in_type(branch, branch.fn(row), common)
    return Compiled(f, common.type)


@handler(exp.Coalesce)
def _coalesce(self, node):
    args = self.many([node.this, *node.expressions])
    common = _common(args)

    def f(row):
        for a in args:
            v = a.fn(row)
            if v is not None:
                return _in_type(a, v, common)
        return None
    return Compiled(f, common.type)


@handler(exp.Nullif)
def _nullif(self, node):
    a, b = self.compile(node.this), self.compile(node.expression)

    def f(row):
        x, y = a.fn(row), b.fn(row)
        if x is not None and y is not None and compare(x, value_type(a, x), y, value_type(b, y)) == 0:
            return None
        return x
    return Compiled(f, a.type)


@handler(exp.Nvl2)
def _nvl2(self, node):
    test, then, other = self.compile(node.this), self.compile(node.args["true"]), self.compile(node.args["false"])
    common = _common([then, other])

    def f(row):
        branch = then if test.fn(row) is not None else other
        return _in_type(branch, branch.fn(row), common)
    return Compiled(f, common.type)
