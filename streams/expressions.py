"""SQL expressions of the DSL (``filter("value.amount > 100")``, ``selectKey("value.user")``)
evaluated in plain Python over one record, with Spark SQL's semantics, so the reference
interpreter and ``TopologyTestDriver`` give what the Spark query gives.

The text is parsed once with sqlglot (Spark dialect) and compiled into nested closures; a
record is then only a function call. Anything the compiler does not know fails in
:func:`expression` with :class:`UnsupportedExpressionError`, never while records flow.

    >>> expression("struct(value.user, value.amount * 2 AS gross)").evaluate(
    ...     {"key": "k", "value": {"user": "ann", "amount": 2.5}})
    {'user': 'ann', 'gross': 5.0}

Spark 4's ANSI mode is followed: division by zero, overflow, malformed casts and indexes out of
bounds raise :class:`ExpressionEvaluationError` carrying Spark's error class. Where the result
depends on the record's schema, the Python value's type stands in for it
(:mod:`streams.sql_values`): an ``int`` field is a BIGINT, a ``Decimal`` field's precision is its
digit count. Struct fields are looked up by exact name, then case-insensitively; a missing field
is NULL (Spark would refuse the query at analysis).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable

import sqlglot
from sqlglot import exp

from streams.sql_compiler import compile_node
from streams.sql_values import ExpressionEvaluationError, TypedDecimal, UnsupportedExpressionError

__all__ = ["Expression", "expression", "UnsupportedExpressionError", "ExpressionEvaluationError"]

_COLUMN_WRAPPER = re.compile(r"^Column<'(.*)'>$", re.S)


@dataclass(frozen=True)
class Expression:
    """One compiled SQL expression; immutable and safe to share between tasks."""
    text: str
    _evaluate: Callable[[dict], Any] = field(repr=False, compare=False)

    def evaluate(self, row: dict) -> Any:
        """The expression's value for one record (``row`` as :meth:`streams.record.Record.row`)."""
        try:
            v = self._evaluate(row)
            return Decimal(v) if type(v) is TypedDecimal else v
        except ExpressionEvaluationError as e:
            raise ExpressionEvaluationError(f"{e.message} in expression {self.text!r}", **e.details) from None
        except (TypeError, AttributeError) as e:
            raise ExpressionEvaluationError(
                f"[DATATYPE_MISMATCH] expression {self.text!r} got a value of the wrong type: {e}",
                error_class="DATATYPE_MISMATCH") from None

    def __str__(self):
        return self.text


def expression(expr: "str | Any") -> Expression:
    """Compile a SQL expression (text, or a PySpark ``Column``) for plain-Python evaluation."""
    text = expr if isinstance(expr, str) else _column_text(expr)
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.SqlglotError as e:
        raise UnsupportedExpressionError(
            f"cannot read the expression {text!r}: {str(e).splitlines()[0]}; use a Python callable instead",
            expression=text) from None
    if isinstance(tree, exp.Alias):
        tree = tree.this
    compiled = compile_node(tree, text)
    return Expression(text, compiled.fn)


def _column_text(column) -> str:
    """A PySpark Column's SQL text: classic PySpark's JVM column, or Spark Connect's ``str``."""
    jc = getattr(column, "_jc", None)
    try:
        text = jc.toString() if jc is not None else None
    except Exception:   # a detached JVM: fall back to the Python-side text
        text = None
    if text is None:
        m = _COLUMN_WRAPPER.match(str(column))
        text = m.group(1) if m else None
    if not text:
        raise UnsupportedExpressionError(f"cannot read the SQL text of {column!r}; use a Python callable instead",
                                         expression=repr(column))
    return _infix(text)


_PREFIX_OPERATORS = {"+", "-", "*", "/", "%", ">", "<", ">=", "<=", "=", "==", "!=", "<=>", "and", "or"}


def _infix(text: str) -> str:
    """Spark 4's Column text writes operators as calls (``and(>(value.n, 1), value.flag)``):
    rewrite those calls as SQL infix; everything else is kept as written."""
    out, i = [], 0
    while i < len(text):
        m = re.match(r"(<=>|>=|<=|!=|==|and|or|[-+*/%<>=])\(", text[i:])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_`.")):
            args, end = _call_args(text, i + m.end())
            out.append("(" + f" {m.group(1)} ".join(_infix(a) for a in args) + ")")
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _call_args(text: str, i: int) -> tuple[list[str], int]:
    args, depth, quote, start = [], 0, None, i
    while i < len(text):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'`\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                args.append(text[start:i].strip())
                return args, i + 1
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return [text[start:]], i
