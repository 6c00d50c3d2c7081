"""An operation's argument: a SQL expression (a string or a PySpark ``Column``) or a Python callable.

SQL is the fast path: in a query Spark evaluates it with no Python per record, and the reference
interpreter evaluates the same text with :mod:`streams.expressions`. A callable is called as
Kafka Streams calls the matching Java interface (``Predicate.test(key, value)``,
``ValueMapper.apply(value)`` or ``ValueMapperWithKey.apply(key, value)`` by its arity, ...).
A :func:`streams.column_functions.vectorized` callable takes and returns whole columns (pandas Series).
In SQL, a record is the columns ``key``, ``value``, ``timestamp``, ``topic``, ``partition``,
``offset``, ``headers``; aggregations add ``agg`` (the aggregate so far) and mergers ``agg1``/``agg2``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from streams.errors import TopologyError
from streams.column_functions import Vectorized, VectorizedFunctionError


def _is_column(arg) -> bool:
    return type(arg).__name__ == "Column" and type(arg).__module__.startswith("pyspark")


def _positional_arity(fn: Callable) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


class Fn:
    """One argument, checked when the operation is defined. ``sql`` is the text Spark compiles
    (None for a callable); calling it evaluates in Python."""
    __slots__ = ("what", "sql", "column", "fn", "arity", "_expr", "op", "return_type", "types")

    def __init__(self, arg: Any, what: str, arities: tuple[int, ...], vectorized: str | None = None,
                 types: tuple = (None, None)):
        self.what, self.sql, self.column, self.fn, self.arity, self._expr = what, None, None, None, None, None
        # A vectorised function (streams.column_functions): its operation, result type and the key and value
        # types it is given, where known.
        self.op, self.return_type, self.types = None, None, types
        if isinstance(arg, Vectorized):
            if vectorized is None:
                raise VectorizedFunctionError(f"{what}: takes no vectorized function; filter, filterNot, mapValues, "
                                              "selectKey, map and flatMapValues do (pass a plain callable)")
            self.op, self.return_type = vectorized, arg.bind(vectorized, what)
            arg = arg.fn
        if isinstance(arg, str):
            if not arg.strip():
                raise TopologyError(f"{what}: empty SQL expression")
            self.sql = arg
        elif _is_column(arg):
            self.column = arg
            self.sql = _column_sql(arg)
        elif callable(arg):
            self.fn = arg
            arity = _positional_arity(arg)
            if arity is not None and arity not in arities:
                want = " or ".join(str(a) for a in arities)
                raise TopologyError(f"{what}: the callable takes {arity} argument(s); expected {want}")
            self.arity = arity if arity is not None else max(arities)
        else:
            raise TopologyError(f"{what}: expected a SQL expression string, a pyspark Column or a callable, "
                                f"got {type(arg).__name__}")
        if self.sql is not None:
            from streams.expressions import expression
            self._expr = expression(self.sql)   # fails now, naming the expression, if it cannot be read

    @property
    def is_sql(self) -> bool:
        return self.sql is not None

    @property
    def is_vectorized(self) -> bool:
        return self.op is not None

    def evaluate(self, row: dict) -> Any:
        return self._expr.evaluate(row)

    def describe(self) -> str:
        return self.sql if self.sql is not None else getattr(self.fn, "__qualname__", repr(self.fn))

    def __getstate__(self):
        # Columns hold a JVM handle: a pickled Fn (sent to Spark's Python workers) keeps only the text.
        return {"what": self.what, "sql": self.sql, "fn": self.fn, "arity": self.arity, "op": self.op,
                "return_type": self.return_type, "types": self.types}

    def __setstate__(self, state):
        self.what, self.sql, self.fn, self.arity = state["what"], state["sql"], state["fn"], state["arity"]
        self.op, self.return_type, self.types = state.get("op"), state.get("return_type"), state.get("types")
        self.column = None
        self._expr = None
        if self.sql is not None:
            from streams.expressions import expression
            self._expr = expression(self.sql)


def _column_sql(col) -> str:
    try:
        text = col._jc.toString()
    except Exception:
        text = str(col)
        if text.startswith("Column<'") and text.endswith("'>"):
            text = text[len("Column<'"):-2]
    return text


def fn_or_none(arg, what: str, arities: tuple[int, ...]) -> Fn | None:
    return None if arg is None else Fn(arg, what, arities)
