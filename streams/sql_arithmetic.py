"""Spark SQL's arithmetic operators over Python values (``+ - * / div %`` and unary ``-``): Spark's
result types (an integer ``/`` gives DOUBLE, decimals follow DecimalPrecision) and ANSI errors, with
Spark's ConstantFolding and its reordering of integral ``+`` and ``*`` chains, so that an overflow is
raised where Spark's plan raises it.
"""
from __future__ import annotations

import math
from decimal import Decimal

from sqlglot import exp

from streams import sql_values as sv
from streams.sql_casts import cast
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
            return -cast(v, t, "double")
        return -v
    return Compiled(f, inner.type)
