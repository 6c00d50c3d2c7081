"""sqlglot's tree of a Spark SQL expression compiled into Python closures (one per node), each
``row -> value``. A node's Spark type is fixed at compile time when its inputs are literals and
read from the value otherwise (:func:`streams.sql_values.type_of`); operators apply Spark's type
coercion and ANSI checks to whichever they get.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

from sqlglot import exp

from streams import sql_values as sv
from streams.sql_casts import cast
from streams.sql_values import UnsupportedExpressionError, fail, type_of

COLUMNS = ("key", "value", "timestamp", "topic", "partition", "offset", "headers", "agg", "agg1", "agg2",
           "left", "right")   # a joiner sees the two sides as left (also value) and right
_COLUMN_TYPES = {"timestamp": "timestamp", "topic": "string", "partition": "int", "offset": "bigint",
                 "headers": "array"}


@dataclass(frozen=True, slots=True)
class Compiled:
    fn: Callable[[dict], Any]
    type: Any = None          # the static Spark type; None: read it from each value
    int_literal: Any = None   # an integer literal's value (Spark narrows it in decimal arithmetic)
    name: str | None = None   # a column reference's field name (a struct field's default name)
    const: bool = False       # no column feeds it: Spark folds it once, at planning
    chain: tuple = ()         # a ``+`` / ``*``: (operator, left, right), for Spark's reordering of a chain


def constant(value, t) -> Compiled:
    return Compiled(lambda row: value, t, value if sv.is_integral(t) else None, const=True)


class _Compiler:
    def __init__(self, text: str):
        self.text = text
        self.folding_errors: list = []

    def unsupported(self, node, why: str = "is not supported"):
        part = node.sql(dialect="spark") if isinstance(node, exp.Expression) else str(node)
        raise UnsupportedExpressionError(
            f"expression {self.text!r}: {part!r} {why} by the plain-Python interpreter; "
            "use a Python callable instead", expression=self.text, part=part)

    def compile(self, node) -> Compiled:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            self.unsupported(node)
        return handler(self, node)

    def many(self, nodes) -> list[Compiled]:
        return [self.compile(n) for n in nodes]


def compile_node(node, text: str) -> Compiled:
    compiler = _Compiler(text)
    compiled = compiler.compile(node)
    if compiler.folding_errors:
        error = compiler.folding_errors[0]

        def fails(row):
            raise sv.ExpressionEvaluationError(error.message, **error.details)
        return Compiled(fails, compiled.type, const=True)
    return compiled


def handler(*classes):
    def register(f):
        for c in classes:
            _HANDLERS[c] = f
        return f
    return register


_HANDLERS: dict[type, Callable] = {}


def value_type(c: Compiled, v):
    return c.type or type_of(v)


# ------------------------------------------------------------------------------ literals, columns
@handler(exp.Literal)
def _literal(self, node):
    text = node.this
    if node.is_string:
        return constant(text, "string")
    if "e" in text.lower():
        return constant(float(text), "double")
    if "." in text:
        d = Decimal(text)
        return constant(d, sv.decimal_type_of(d))
    n = int(text)
    t = "int" if -2**31 <= n < 2**31 else "bigint" if -2**63 <= n < 2**63 else ("decimal", len(str(abs(n))), 0)
    return constant(n if t != "decimal" and not sv.is_decimal(t) else Decimal(n), t)


@handler(exp.Boolean)
def _boolean(self, node):
    return constant(bool(node.this), "boolean")


@handler(exp.Null)
def _null(self, node):
    return constant(None, "null")


@handler(exp.Paren)
def _paren(self, node):
    return self.compile(node.this)


@handler(exp.Column, exp.Dot)
def _column(self, node):
    parts = []
    cur = node
    while isinstance(cur, exp.Dot):
        if not isinstance(cur.expression, exp.Identifier):
            self.unsupported(node)
        parts.append(cur.expression.this)
        cur = cur.this
    if isinstance(cur, exp.Column):
        if isinstance(cur.this, exp.Star):
            self.unsupported(node, "(a star) is not supported")
        parts.extend(p.this for p in reversed(cur.parts))
        base = None
    else:
        base = self.compile(cur)
    parts.reverse()
    if base is None:
        top = parts[0].lower()
        if top not in COLUMNS:
            self.unsupported(node, f"names no column (a record has {', '.join(COLUMNS)})")
        getter = _top_getter(top)
        base = Compiled(getter, _COLUMN_TYPES.get(top) if len(parts) == 1 else None, name=top)
        parts = parts[1:]
    for name in parts:
        base = _field(base, name)
    return base


def _top_getter(name):
    return lambda row: row.get(name)


def _field(base: Compiled, name: str) -> Compiled:
    get, lower = base.fn, name.lower()

    def one(v):
        if name in v:
            return v[name]
        for k in v:
            if isinstance(k, str) and k.lower() == lower:
                return v[k]
        return None

    def f(row):
        v = get(row)
        if v is None:
            return None
        if isinstance(v, (list, tuple)):   # a field of an array of structs: one per element
            return [None if e is None else one(e) for e in v]
        return one(v)
    return Compiled(f, name=name)


@handler(exp.Alias)
def _alias(self, node):
    inner = self.compile(node.this)
    return Compiled(inner.fn, inner.type, inner.int_literal, node.alias)


# ------------------------------------------------------------------------------ casts
_TYPES = {exp.DataType.Type.TEXT: "string", exp.DataType.Type.VARCHAR: "string", exp.DataType.Type.CHAR: "string",
          exp.DataType.Type.INT: "int", exp.DataType.Type.BIGINT: "bigint", exp.DataType.Type.SMALLINT: "smallint",
          exp.DataType.Type.TINYINT: "tinyint", exp.DataType.Type.DOUBLE: "double",
          exp.DataType.Type.BOOLEAN: "boolean", exp.DataType.Type.DATE: "date",
          exp.DataType.Type.TIMESTAMP: "timestamp", exp.DataType.Type.TIMESTAMPTZ: "timestamp",
          exp.DataType.Type.TIMESTAMPLTZ: "timestamp", exp.DataType.Type.BINARY: "binary"}


def sql_type(self, dt: exp.DataType):
    if dt.this == exp.DataType.Type.DECIMAL:
        params = [int(p.this.this) for p in dt.expressions] or [10, 0]
        return ("decimal", params[0], params[1] if len(params) > 1 else 0)
    t = _TYPES.get(dt.this)
    if t is None:
        self.unsupported(dt, "(this cast target) is not supported")
    return t


@handler(exp.Cast, exp.TryCast)
def _cast(self, node):
    inner, target = self.compile(node.this), sql_type(self, node.to)
    safe = bool(node.args.get("safe"))
    get = inner.fn

    def f(row):
        v = get(row)
        if v is None:
            return None
        try:
            return cast(v, value_type(inner, v), target)
        except sv.ExpressionEvaluationError:
            if safe:
                return None
            raise
    literal = None
    if inner.int_literal is not None and sv.is_integral(target):
        literal = inner.int_literal
    return Compiled(f, target, literal)


def coerce(v, t, target):
    return v if v is None or t == target else cast(v, t, target)


# Operators and functions register their handlers when imported.
from streams import sql_arithmetic, sql_functions, sql_operators, sql_string_functions  # noqa: E402,F401
