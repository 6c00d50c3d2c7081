"""Columns of Kafka-shaped Arrow rows read without a Python object per nested value.

Pure; used by :func:`~spark_sink.delta.records.records_from_arrow`."""
from __future__ import annotations

import pyarrow as pa


def header_pairs(column) -> list:
    """Per row, its headers as ``(key, value)`` tuples, from the list<struct<key, value>> column's
    flat children (no dict per header); any other shape as ``to_pylist`` gives it."""
    type_ = column.type
    if not (pa.types.is_list(type_) and pa.types.is_struct(type_.value_type)
            and [f.name for f in type_.value_type] == ["key", "value"]):
        return column.to_pylist()
    out: list = []
    for chunk in column.chunks:
        items = chunk.values   # offsets index it as it is, whatever the chunk's slice
        if items.null_count:
            return column.to_pylist()
        pairs = list(zip(items.field("key").to_pylist(), items.field("value").to_pylist()))
        offsets, valid = chunk.offsets.to_pylist(), chunk.is_valid().to_pylist()
        out.extend(tuple(pairs[offsets[i]:offsets[i + 1]]) if valid[i] else () for i in range(len(chunk)))
    return out

