"""Spark SQL's operators over Python values: arithmetic with Spark's result types (an integer
``/`` gives DOUBLE, decimals follow DecimalPrecision) and ANSI errors, comparisons with NaN
equal to itself and above every number, three-valued logic, IN, BETWEEN, LIKE, CASE, COALESCE.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal

from sqlglot import exp

from streams import sql_values as sv
from streams.sql_compiler import Compiled, coerce, handler, value_type
from streams.sql_values import fail, type_of

_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.IntDiv: "div", exp.Mod: "%"}


def _operand(t, other):
    """A STRING operand's numeric type under ANSI coercion (``'1' + 2`` is BIGINT arithmetic)."""
    if t != "string":
        return t
    return "bigint" if sv.is_integral(other) else "double"


def arith_type(op, ta, tb, la=None, lb=None):
    ta, tb = _operand(ta, tb), _operand(tb, ta)
    if not (sv.is_numeric(ta) and sv.is_numeric(tb)):
        fail("DATATYPE_MISMATCH", f"{op} needs numbers, not {sv.type_name(ta)} and {sv.type_name(tb)}")
    if op == "div":
        if ta == "double" or tb == "double":
            fail("DATATYPE_MISMATCH", "div needs integers or decimals, not DOUBLE")
        return "bigint"
    if ta == "double" or tb == "double":
        return "double"
    if sv.is_decimal(ta) or sv.is_decimal(tb):
        (_, p1, s1), (_, p2, s2) = sv.as_decimal_type(ta, la), sv.as_decimal_type(tb, lb)
        if op in "+-":
            scale = max(s1, s2)
            return sv.bounded(max(p1 - s1, p2 - s2) + scale + 1, scale)
        if op == "*":
            return sv.bounded(p1 + p2 + 1, s1 + s2)
        if op == "/":
            scale = max(6, s1 + p2 + 1)
            return sv.bounded(p1 - s1 + s2 + scale, scale)
        scale = max(s1, s2)
        return sv.bounded(min(p1 - s1, p2 - s2) + scale, scale)
    if op == "/":
        return "double"
    return ta if sv.INTEGRAL_BITS[ta] >= sv.INTEGRAL_BITS[tb] else tb


def arith(op, a, ta, b, tb, rt):
    """``a op b`` in result type ``rt``, both operands not None."""
    if op == "div":
        work = "bigint" if sv.is_integral(_operand(ta, tb)) and sv.is_integral(_operand(tb, ta)) else "decimal"
        a = coerce(a, ta, "bigint" if work == "bigint" else _decimal_of(ta, a))
        b = coerce(b, tb, "bigint" if work == "bigint" else _decimal_of(tb, b))
        if b == 0:
            fail("DIVIDE_BY_ZERO", "division by zero")
        q = sv.java_int_div(a, b) if work == "bigint" else int(Decimal(a) / Decimal(b))
        return sv.check_integral(q, "bigint")
    if rt == "double":
        a, b = float(coerce(a, ta, "double")), float(coerce(b, tb, "double"))
        return _double_op(op, a, b)
    if sv.is_decimal(rt):
        a, b = Decimal(coerce(a, ta, _decimal_of(ta, a))), Decimal(coerce(b, tb, _decimal_of(tb, b)))
        if op in "/%" and b == 0:
            fail("DIVIDE_BY_ZERO" if op == "/" else "REMAINDER_BY_ZERO", "division by zero")
        ctx = sv._EXACT
        r = (ctx.add(a, b) if op == "+" else ctx.subtract(a, b) if op == "-" else ctx.multiply(a, b) if op == "*"
             else ctx.divide(a, b) if op == "/" else ctx.remainder(a, b))
        return sv.to_decimal(r, rt)
    a, b = int(coerce(a, ta, "bigint")), int(coerce(b, tb, "bigint"))
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    else:
        if b == 0:
            fail("REMAINDER_BY_ZERO", "remainder by zero")
        r = sv.java_int_rem(a, b)
    return sv.check_integral(r, rt)


def _decimal_of(t, v):
    return t if sv.is_decimal(t) else sv.as_decimal_type(t) if sv.is_integral(t) else "double"


def _double_op(op, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        fail("DIVIDE_BY_ZERO" if op == "/" else "REMAINDER_BY_ZERO", "division by zero")
    if op == "/":
        return a / b
    return math.fmod(a, b)


@handler(*_ARITH)
def _arithmetic(self, node):
    op = _ARITH[type(node)]
    left, right = self.compile(node.this), self.compile(node.expression)
    lf, rf, lt, rt_ = left.fn, right.fn, left.type, right.type
    la, lb = left.int_literal, right.int_literal
    if "null" in (lt, rt_):   # Spark's NullPropagation folds it to NULL: the other side never runs
        return Compiled(lambda row: None, "null", const=True)
    divisor_first = op in ("/", "%", "div")   # Spark's DivModLike evaluates the divisor first
    try:
        static = arith_type(op, lt, rt_, la, lb) if lt and rt_ and "null" not in (lt, rt_) else None
    except sv.ExpressionEvaluationError as e:
        self.unsupported(node, f"is refused by Spark too ({e.message})")

    def f(row):
        if divisor_first:
            b = rf(row)
            if b is None:
                return None
            a = lf(row)
            if a is None:
                return None
        else:
            a = lf(row)
            if a is None:
                return None
            b = rf(row)
            if b is None:
                return None
        ta, tb = lt or type_of(a), rt_ or type_of(b)
        if static is not None:
            return arith(op, a, ta, b, tb, static)
        t = arith_type(op, ta, tb, la, lb)
        r = arith(op, a, ta, b, tb, t)
        return sv.TypedDecimal.of(r, t) if sv.is_decimal(t) else r
    if left.const and right.const:
        return _folded(self, f, static)
    if op not in "+*":
        return Compiled(f, static)
    here = Compiled(f, static, chain=(op, left, right))
    leaves = _leaves(op, here)
    reorderable = static is None or sv.is_integral(static)   # a typed DOUBLE or DECIMAL chain never is
    if reorderable and len(leaves) > 2 and any(c.const for c in leaves):   # Spark reorders this chain (below)
        return Compiled(_reordering(op, here, leaves, f), static, chain=(op, left, right))
    return here


def _leaves(op, c: Compiled) -> list:
    """The operands of the ``op`` tree rooted at ``c``, left to right."""
    if c.chain and c.chain[0] == op:
        return _leaves(op, c.chain[1]) + _leaves(op, c.chain[2])
    return [c]


def _reordering(op, root: Compiled, leaves: list, plain):
    """Spark's ReorderAssociativeOperator: an integral ``+`` or ``*`` chain (operands of its own
    type, flattened through nested ``op`` of that type; a cast ends it) that holds constants is
    computed as its other operands left to right, then the constants folded into one. The value
    is the same; an overflow is not: ``a + (a + -3)`` runs as ``(a + a) + -3``, which overflows
    for ``a = 2^62``, and Spark raises what its reordered plan raises. Types come from the values
    where the schema does not give them, so the chain is typed per row; a chain that is not all
    integral is computed as written."""
    def f(row):
        values = []
        for c in leaves:
            v = c.fn(row)
            if v is None:
                return None
            t = c.type or type_of(v)
            if not sv.is_integral(t):
                return plain(row)
            values.append((v, t, c.const))
        it = iter(values)

        def typed(c):
            if c.chain and c.chain[0] == op:
                left, right = typed(c.chain[1]), typed(c.chain[2])
                return ("node", left, right, arith_type(op, left[2] if left[0] == "leaf" else left[3],
                                                        right[2] if right[0] == "leaf" else right[3]))
            v, t, const = next(it)
            return ("leaf", v, t, const)
        return _solve(op, typed(root))[0]
    return f


def _solve(op, n):
    """(value, type) of a typed chain (``("leaf", v, t, const)`` / ``("node", l, r, t)``) as Spark runs it."""
    if n[0] == "leaf":
        return n[1], n[2]
    _, left, right, t = n
    operands: list = []

    def flat(m):
        if m[0] == "node" and m[3] == t:
            flat(m[1])
            flat(m[2])
        else:
            operands.append(m)
    flat(n)
    constants = [m for m in operands if m[0] == "leaf" and m[3]]
    others = [m for m in operands if not (m[0] == "leaf" and m[3])]
    if not constants or not others:
        lv, lt = _solve(op, left)
        rv, rt = _solve(op, right)
        return arith(op, lv, lt, rv, rt, t), t
    acc = None
    for m in others:
        v, vt = _solve(op, m)
        acc = (v, vt) if acc is None else (arith(op, acc[0], acc[1], v, vt, t), t)
    k, kt = constants[0][1], constants[0][2]
    for m in constants[1:]:
        k, kt = arith(op, k, kt, m[1], m[2], t), t
    return arith(op, acc[0], acc[1], k, kt, t), t


def _folded(self, f, t) -> Compiled:
    """A constant computed once, as Spark's ConstantFolding does; one that fails fails every
    record, wherever it sits (Spark fails the query while planning it)."""
    try:
        value = f({})
    except sv.ExpressionEvaluationError as e:
        error = e
        self.folding_errors.append(e)

        def fails(row):
            raise sv.ExpressionEvaluationError(error.message, **error.details)
        return Compiled(fails, t, const=True)
    return Compiled(lambda row: value, t, value if sv.is_integral(t) else None, const=True)


@handler(exp.Neg)
def _neg(self, node):
    if isinstance(node.this, exp.Literal) and not node.this.is_string:   # Spark reads -7 as one literal
        return self.compile(exp.Literal(this="-" + node.this.this, is_string=False))
    inner = self.compile(node.this)
    get = inner.fn

    def f(row):
        v = get(row)
        if v is None:
            return None
        t = value_type(inner, v)
        if sv.is_integral(t):
            return sv.check_integral(-v, t)
        if t == "string":
            return -sv.cast(v, t, "double")
        return -v
    return Compiled(f, inner.type)


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
