"""Vectorised callables: a Python function over whole columns (pandas Series), as ``pandas_udf``.

``vectorized(fn, returnType)`` marks a function for ``filter``, ``filterNot``, ``mapValues``,
``selectKey``, ``map`` and ``flatMapValues``. It takes the same arguments as the Kafka interface
it stands for, by arity, but as columns: ``predicate(keys, values)``, ``mapper(values)`` or
``mapper(keys, values)``, and returns one result per row (a Series, an array or a list; ``map``: a
DataFrame with columns ``key`` and ``value``, or a pair of Series). As in ``pandas_udf``, a struct
column (a JSON value) arrives as a DataFrame and a struct result may be returned as one.
``returnType`` is a Spark type (DDL or ``DataType``): the new column's type, which Spark needs
before any row exists.

On Spark a vectorised step in the sub-topology's leading stateless line
(:mod:`streams.spark_plan`) is an Arrow UDF (``arrow_udf``) of only the columns it takes: one call
per Arrow batch, never one per record. The reference interpreter (and so ``TopologyTestDriver``)
processes records one at a time and calls the function with one-row Series, typed as Spark's
columns would be where the stream's serdes say. Both build the Series from Arrow the same way and
convert the result to ``returnType`` through Arrow, so an elementwise function gives the same
values on both.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from broker.errors import InvalidConfigError
from streams.errors import StreamsError, TopologyError

OPERATIONS = ("filter", "filterNot", "mapValues", "selectKey", "map", "flatMapValues")
_PREDICATES = ("filter", "filterNot")


class VectorizedFunctionError(TopologyError):
    """A vectorised function that cannot serve its operation (no ``returnType``, a type that does
    not fit, an operation that takes none); raised when the operation is defined."""
    code, name, retriable, grpc_status = 1220, "VECTORIZED_FUNCTION_INVALID", False, "INVALID_ARGUMENT"


class VectorizedResultError(StreamsError):
    """A vectorised function returned the wrong number of values, or values its ``returnType``
    cannot hold; the message names the operation."""
    code, name, retriable, grpc_status = 1221, "VECTORIZED_RESULT_INVALID", False, "INVALID_ARGUMENT"


class Vectorized:
    """A function over columns and the Spark type of what it returns. Calling it calls the function."""

    def __init__(self, fn: Callable, returnType=None):
        if not callable(fn):
            raise VectorizedFunctionError(f"vectorized(): expected a callable, got {type(fn).__name__}")
        self.fn = fn
        self.returnType = returnType
        self.__name__ = getattr(fn, "__name__", "vectorized")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self) -> str:
        return f"vectorized({self.__qualname__}, {self.returnType!r})"

    def bind(self, op: str, what: str):
        """The Spark type ``op`` produces with this function (None for a predicate), checked now."""
        from pyspark.sql import types as T
        from streams.serdes_schema import struct_schema
        if op not in OPERATIONS:
            raise VectorizedFunctionError(f"{what}: {op} does not take a vectorized function; "
                                          f"{', '.join(OPERATIONS)} do")
        rt = self.returnType
        try:
            if op in _PREDICATES:
                if rt is not None and not isinstance(_spark_type(rt, f"{what} returnType"), T.BooleanType):
                    raise VectorizedFunctionError(f"{what}: a predicate returns booleans, not {rt}")
                return None
            if rt is None:
                raise VectorizedFunctionError(
                    f"{what}: a vectorized {op} needs a returnType, the Spark type of its result "
                    f"(e.g. vectorized(fn, 'bigint')), as pandas_udf does")
            if op == "map":
                t = struct_schema(rt, f"{what} returnType")
                if [f.name for f in t.fields] != ["key", "value"]:
                    raise VectorizedFunctionError(f"{what}: map's returnType is 'key <type>, value <type>', "
                                                  f"got {rt!r}")
                return t
            t = _spark_type(rt, f"{what} returnType")
            if op == "flatMapValues" and not isinstance(t, T.ArrayType):
                t = T.ArrayType(t)   # the element type given: each row returns a list of those
            return t
        except VectorizedFunctionError:
            raise
        except InvalidConfigError as e:
            raise VectorizedFunctionError(str(e)) from e


def _spark_type(rt, what: str):
    """A type in DDL (``"bigint"``, ``"array<string>"``) or, as pandas_udf reads it, a list of
    struct fields (``"user string, gross bigint"``)."""
    from streams.serdes_schema import data_type, struct_schema
    try:
        return data_type(rt, what)
    except InvalidConfigError:
        if isinstance(rt, str) and ("," in rt or " " in rt.strip()):
            return struct_schema(rt, what)
        raise


def vectorized(fn=None, returnType=None):
    """Mark ``fn`` as vectorised, as ``pandas_udf`` does: ``vectorized(fn, "bigint")``,
    ``@vectorized("bigint")`` or ``@vectorized`` (predicates need no type)."""
    if fn is not None and not callable(fn):
        fn, returnType = None, fn
    if fn is None:
        return lambda f: Vectorized(f, returnType)
    return Vectorized(fn, returnType)


# ------------------------------------------------------------------------------ columns
def series(array):
    """An Arrow column as the function sees it, as ``pandas_udf`` gives it: a struct as a DataFrame
    (a column per field), anything else as pyarrow's ``to_pandas`` (numbers as numpy dtypes, NULL
    as NaN or None, strings as str, lists as numpy arrays, nested structs as dicts). A column of
    NULLs only is float NaN, so one-row Series of the interpreter behave as Spark's batches do."""
    import pyarrow as pa
    if pa.types.is_struct(array.type):
        import pandas as pd
        return pd.DataFrame({f.name: _plain(array.field(i)) for i, f in enumerate(array.type)})
    return _plain(array)


def _plain(array):
    import pyarrow as pa
    if pa.types.is_null(array.type):
        import numpy as np
        import pandas as pd
        return pd.Series(np.full(len(array), np.nan))
    return array.to_pandas()


def python_series(values: list, spark_type=None):
    """Python values (the interpreter's and the task's) as the Series Spark's Arrow gives: in
    ``spark_type`` when it is known, else in the type Arrow infers; values Arrow cannot hold (a
    windowed key) as an object Series."""
    import pandas as pd
    import pyarrow as pa
    bad = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError)
    if spark_type is not None:
        try:
            return series(pa.array(values, type=_arrow_type(spark_type)))
        except bad:
            pass
    try:
        return series(pa.array(values))
    except bad:
        return pd.Series(values, dtype=object)


def _arrow_type(spark_type):
    from pyspark.sql.pandas.types import to_arrow_type
    return to_arrow_type(spark_type, timezone="UTC")


def _column(out, n: int, spark_type, what: str):
    """One returned column as an Arrow array of ``spark_type``, checked."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    if isinstance(out, (pa.ChunkedArray,)):
        out = out.combine_chunks()
    if not isinstance(out, (pd.Series, pd.DataFrame, np.ndarray, pa.Array, list, tuple)):
        raise VectorizedResultError(f"{what}: the vectorized function returned {type(out).__name__}; "
                                    f"expected a pandas Series (one value per record)")
    if len(out) != n:
        raise VectorizedResultError(f"{what}: the vectorized function returned {len(out)} value(s) for "
                                    f"{n} record(s); it must return one per record")
    target = pa.bool_() if spark_type is None else _arrow_type(spark_type)
    try:
        if isinstance(out, pa.Array):
            return out.cast(target)
        if isinstance(out, pd.DataFrame):
            if not pa.types.is_struct(target):
                raise TypeError("a DataFrame where a Series was expected")
            missing = [f.name for f in target if f.name not in out.columns]
            if missing:
                raise TypeError(f"the DataFrame has no column(s) {missing}")
            return pa.StructArray.from_arrays(
                [pa.array(out[f.name], type=f.type, from_pandas=True) for f in target], fields=list(target))
        return pa.array(out, type=target, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
            OverflowError) as e:
        wanted = "boolean" if spark_type is None else spark_type.simpleString()
        raise VectorizedResultError(f"{what}: the vectorized function's result does not fit {wanted}: {e}") from e


def evaluate(fn, keys, values, n: int):
    """Call ``fn`` (a :class:`streams.functions.Fn` bound to its operation) on columns of ``n``
    rows; returns the Arrow result: a boolean mask (NULL as false), the new column, or for ``map``
    the pair (keys, values)."""
    import pandas as pd
    import pyarrow.compute as pc
    out = fn.fn(values) if fn.arity == 1 else fn.fn(keys, values)
    what = fn.what
    if fn.op in _PREDICATES:
        return pc.fill_null(_column(out, n, None, what), False)
    if fn.op == "map":
        t = fn.return_type
        if isinstance(out, pd.DataFrame):
            if "key" not in out.columns or "value" not in out.columns:
                raise VectorizedResultError(f"{what}: the DataFrame returned must have columns key and value, "
                                            f"not {list(out.columns)}")
            out = (out["key"], out["value"])
        if not isinstance(out, tuple) or len(out) != 2:
            raise VectorizedResultError(f"{what}: a vectorized map returns a DataFrame with columns key and "
                                        f"value, or a pair (keys, values); got {type(out).__name__}")
        return (_column(out[0], n, t["key"].dataType, what), _column(out[1], n, t["value"].dataType, what))
    return _column(out, n, fn.return_type, what)


def call_record(fn, key: Any, value: Any):
    """One record through ``fn`` with one-row Series (the interpreter, and a task after a stateful
    step): a bool for a predicate, the new value or key, a (key, value) pair for ``map``, a list
    (or None) for ``flatMapValues``."""
    key_type, value_type = fn.types or (None, None)
    out = evaluate(fn, python_series([key], key_type), python_series([value], value_type), 1)
    if isinstance(out, tuple):
        return out[0][0].as_py(), out[1][0].as_py()
    return out[0].as_py()


# ------------------------------------------------------------------------------ Spark
def result_type(fn):
    """The Spark type of the column ``fn`` gives: boolean for a predicate, ``struct<key, value>``
    for ``map``, else its ``returnType``."""
    from pyspark.sql import types as T
    return T.BooleanType() if fn.op in _PREDICATES else fn.return_type


def arrow_function(fn):
    """What Spark's Arrow UDF runs for ``fn``: Arrow arrays in (the values, or the keys and the
    values, by arity), one Arrow array out."""
    def run(*arrays):
        import pyarrow as pa
        n = len(arrays[-1])
        if n == 0:
            return pa.array([], type=_arrow_type(result_type(fn)))
        keys = series(arrays[0]) if len(arrays) == 2 else None
        out = evaluate(fn, keys, series(arrays[-1]), n)
        if isinstance(out, tuple):
            return pa.StructArray.from_arrays(list(out), names=["key", "value"])
        return out
    return run


def spark_column(fn):
    """``fn`` as a Spark column: a scalar Arrow UDF of the key and value columns it takes (its
    kind told by type hints, as ``arrow_udf`` prefers)."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    run = arrow_function(fn)
    names = ["values"] if fn.arity == 1 else ["keys", "values"]

    def udf(*arrays):
        return run(*arrays)
    # Real classes, not the strings ``from __future__ import annotations`` would leave.
    udf.__annotations__ = {**{n: pa.Array for n in names}, "return": pa.Array}
    udf.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=pa.Array) for n in names],
        return_annotation=pa.Array)
    return F.arrow_udf(udf, result_type(fn))(*[F.col(n[:-1]) for n in names])


def apply_batch(batch, steps):
    """``steps`` ((op, Fn) pairs) on one Arrow record batch (columns key, value, ...), with the
    function Spark's UDFs run and the same plan around it (filter, replace, explode): the Arrow
    semantics of the fast path without Spark. None when no row is left."""
    import pyarrow as pa
    import pyarrow.compute as pc
    for op, fn in steps:
        names = batch.schema.names
        if batch.num_rows == 0:
            return None
        args = [batch.column("value")] if fn.arity == 1 else [batch.column("key"), batch.column("value")]
        out = arrow_function(fn)(*args)
        if op in _PREDICATES:
            batch = batch.filter(pc.invert(out) if op == "filterNot" else out)
            continue
        columns = {name: batch.column(name) for name in names}
        if op == "flatMapValues":
            idx = pc.list_parent_indices(out)
            columns = {name: pc.take(col, idx) for name, col in columns.items()}
            columns["value"] = pc.list_flatten(out)
        elif op == "mapValues":
            columns["value"] = out
        elif op == "selectKey":
            columns["key"] = out
        else:
            columns["key"], columns["value"] = out.field("key"), out.field("value")
        batch = pa.RecordBatch.from_arrays([columns[name] for name in names], names=names)
    return batch
