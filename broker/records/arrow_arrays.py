"""Arrow arrays and scalars built from numpy buffers, not by ``pa.array`` or ``pa.scalar``.

pyarrow's converters first ask whether a value is a pandas object, and asking imports pandas: a
third of a second of CPU in every process that converts anything, including the processes that
never touch pandas — a broker, the ``riverlog`` command, and each Python worker Spark starts to
plan, read or write a ``riverlog`` query (dozens in a streaming application's life). The
constructors here give the same arrays from buffers, so the paths that read, list and write
records, and a broker's own records, leave pandas unloaded. Large record lists from Python
objects still go through ``pa.array`` (``record_batch``): it is several times faster per record
than anything built in Python, and a process that builds them has records to pay with.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

_NUMPY = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64}


def integers(values, type_: pa.DataType = pa.int64()) -> pa.Array:
    """An integer array without nulls from a numpy array or a sequence of ints."""
    data = np.ascontiguousarray(values, dtype=_NUMPY[type_])
    return pa.Array.from_buffers(type_, len(data), [None, pa.py_buffer(data)])


def full(n: int, value: int, type_: pa.DataType = pa.int64()) -> pa.Array:
    """``n`` copies of one integer."""
    return integers(np.full(n, value, dtype=_NUMPY[type_]), type_)


def scalar(value: int, type_: pa.DataType = pa.int64()) -> pa.Scalar:
    """One integer as an Arrow scalar (as ``pa.scalar(value, type_)``)."""
    return integers([value], type_)[0]


def repeated_string(text: str, n: int) -> pa.Array:
    """``n`` copies of one string."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(data)
    if offsets[-1] > np.iinfo(np.int32).max:
        return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
                                     ).cast(pa.string())   # raises as pa.array would: too large for string
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(data * n)])


def binary(values) -> pa.Array:
    """A binary array from a list of ``bytes`` and ``None`` (null). Meant for a few values (a
    broker's markers and coordinator records): per value it costs several times ``pa.array``'s."""
    n = len(values)
    present = [v for v in values if v is not None]
    if not all(type(v) is bytes for v in present):
        raise TypeError("binary() takes bytes and None only")
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=n)
    lengths = np.zeros(n, dtype=np.int64)
    lengths[valid] = np.fromiter(map(len, present), dtype=np.int64, count=len(present))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError(f"{offsets[-1]} bytes do not fit one binary array (at most 2 GiB)")
    nulls = n - len(present)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(b"".join(present))], null_count=nulls)


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A batch of ``schema`` with no rows."""
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
