"""Kafka Connect's schemas as Spark types, and the form each type takes in Connect's JSON.

int8/16/32/64 ↔ tinyint/smallint/int/bigint, float32/64 ↔ float/double, boolean, string, bytes ↔
binary, array, map (string keys only), struct; logical types Timestamp ↔ timestamp (int64 epoch
ms), Date ↔ date (int32 epoch days), Decimal ↔ decimal(38, scale) as a number or base64 of the
unscaled value (Java's ``BigInteger.toByteArray``). The wire conversions are column expressions,
so a record is converted inside Spark's plan.
"""
from __future__ import annotations

import json

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampNTZType, TimestampType)

from connect.errors import DataError

_PRIMITIVES = {"int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
               "float32": FloatType(), "float64": DoubleType(), "boolean": BooleanType(),
               "string": StringType(), "bytes": BinaryType()}
_TIMESTAMP, _DATE, _TIME, _DECIMAL = ("org.apache.kafka.connect.data." + n for n in ("Timestamp", "Date", "Time", "Decimal"))


def connect_to_spark(schema: dict) -> DataType:
    """The Spark type for a Connect schema as JsonConverter writes it in an envelope."""
    if not isinstance(schema, dict) or "type" not in schema:
        raise DataError(f"not a Connect schema: {schema!r}")
    kind, name = schema["type"], schema.get("name")
    if name == _TIMESTAMP:
        return TimestampType()
    if name == _DATE:
        return DateType()
    if name == _DECIMAL:
        return DecimalType(38, int((schema.get("parameters") or {}).get("scale", 0)))
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "array":
        return ArrayType(connect_to_spark(schema["items"]))
    if kind == "map":
        keys = connect_to_spark(schema["keys"])
        if not isinstance(keys, StringType):
            raise DataError("maps with non-string keys (written as [[key, value], …]) are not supported")
        return MapType(keys, connect_to_spark(schema["values"]))
    if kind == "struct":
        return StructType([StructField(f["field"], connect_to_spark(f)) for f in schema.get("fields", [])])
    raise DataError(f"unknown Connect schema type {kind!r}")


def spark_to_connect(data_type: DataType, optional: bool = True) -> dict:
    """The Connect schema JsonConverter writes for a Spark type (every field optional: Spark's
    nullability is not a contract the way Connect's is)."""
    t = data_type
    if isinstance(t, (TimestampType, TimestampNTZType)):
        out = {"type": "int64", "name": _TIMESTAMP, "version": 1}
    elif isinstance(t, DateType):
        out = {"type": "int32", "name": _DATE, "version": 1}
    elif isinstance(t, DecimalType):
        out = {"type": "bytes", "name": _DECIMAL, "version": 1, "parameters": {"scale": str(t.scale)}}
    elif isinstance(t, ArrayType):
        out = {"type": "array", "items": spark_to_connect(t.elementType)}
    elif isinstance(t, MapType):
        if not isinstance(t.keyType, StringType):
            raise DataError(f"cannot write {t.simpleString()} as JSON: only string map keys are supported")
        out = {"type": "map", "keys": spark_to_connect(t.keyType), "values": spark_to_connect(t.valueType)}
    elif isinstance(t, StructType):
        out = {"type": "struct", "fields": [{**spark_to_connect(f.dataType), "field": f.name} for f in t.fields]}
    else:
        kind = next((k for k, v in _PRIMITIVES.items() if v == t), None)
        if kind is None:
            raise DataError(f"JsonConverter cannot write Spark type {t.simpleString()}")
        out = {"type": kind}
    out["optional"] = optional
    return out


def canonical(schema) -> str:
    """The schema JSON as Spark's ``to_json`` of a VARIANT writes it (keys sorted, no spaces)."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def needs(t: DataType, pred) -> bool:
    if pred(t):
        return True
    if isinstance(t, StructType):
        return any(needs(f.dataType, pred) for f in t.fields)
    if isinstance(t, ArrayType):
        return needs(t.elementType, pred)
    if isinstance(t, MapType):
        return needs(t.valueType, pred)
    return False


def is_logical(t):
    return isinstance(t, (TimestampType, TimestampNTZType, DateType, DecimalType))


def wire_type(t: DataType, numeric: bool) -> DataType:
    """How a Spark type travels in Connect's JSON: timestamps as epoch ms, dates as epoch days,
    decimals as numbers or base64 strings."""
    if isinstance(t, (TimestampType, TimestampNTZType)):
        return LongType()
    if isinstance(t, DateType):
        return IntegerType()
    if isinstance(t, DecimalType):
        return t if numeric else StringType()
    if isinstance(t, StructType):
        return StructType([StructField(f.name, wire_type(f.dataType, numeric)) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(wire_type(t.elementType, numeric))
    if isinstance(t, MapType):
        return MapType(t.keyType, wire_type(t.valueType, numeric))
    return t


def _map_type(c: Column, t: DataType, leaf) -> Column:
    """Rebuild ``c`` of type ``t`` with ``leaf(col, type)`` applied where ``leaf`` returns a column."""
    if not needs(t, is_logical):
        return c
    if isinstance(t, StructType):
        return F.when(c.isNotNull(), F.struct(*[_map_type(c.getField(f.name), f.dataType, leaf).alias(f.name)
                                                for f in t.fields]))
    if isinstance(t, ArrayType):
        return F.transform(c, lambda x: _map_type(x, t.elementType, leaf))
    if isinstance(t, MapType):
        return F.transform_values(c, lambda _, v: _map_type(v, t.valueType, leaf))
    return leaf(c, t)


def _decimal_from_base64(s: Column, t: DecimalType) -> Column:
    raw = F.unbase64(s)
    n = F.length(raw)
    unsigned = F.conv(F.hex(raw), 16, 10).cast("decimal(38,0)")
    negative = F.conv(F.substring(F.hex(raw), 1, 1), 16, 10).cast("int") >= 8
    unscaled = F.when(negative, unsigned - F.pow(F.lit(2), n * 8).cast("decimal(38,0)")).otherwise(unsigned)
    return F.when(n <= 8, (unscaled / F.lit(10 ** t.scale).cast("decimal(38,0)")).cast(t))


def _decimal_to_base64(d: Column, t: DecimalType) -> Column:
    """Java's ``BigInteger.toByteArray`` of the unscaled value (minimal two's complement), base64."""
    unscaled = (d * F.lit(10 ** t.scale).cast("decimal(38,0)")).cast("long")
    padded = F.lpad(F.hex(unscaled), 16, "0")
    trimmed = F.when(unscaled >= 0, F.regexp_replace(padded, "^(00)+(?=[0-7])", "")).otherwise(
        F.regexp_replace(padded, "^(FF)+(?=[89A-F])", ""))
    return F.base64(F.unhex(trimmed))


def from_wire(c: Column, t: DataType, numeric: bool) -> Column:
    def leaf(x, lt):
        if isinstance(lt, (TimestampType, TimestampNTZType)):
            return F.timestamp_millis(x).cast(lt)
        if isinstance(lt, DateType):
            return F.date_add(F.lit("1970-01-01").cast("date"), x)
        if isinstance(lt, DecimalType):
            return x if numeric else _decimal_from_base64(x, lt)
        return x
    return _map_type(c, t, leaf)


def to_wire(c: Column, t: DataType, numeric: bool) -> Column:
    def leaf(x, lt):
        if isinstance(lt, (TimestampType, TimestampNTZType)):
            return F.unix_millis(x.cast("timestamp"))
        if isinstance(lt, DateType):
            return F.unix_date(x)
        if isinstance(lt, DecimalType):
            return x if numeric else _decimal_to_base64(x, lt)
        return x
    return _map_type(c, t, leaf)


def same_type(a: DataType, b: DataType) -> bool:
    """Equal ignoring nullability (Connect's ``optional`` does not change the Spark type)."""
    return a.simpleString() == b.simpleString()


def as_type(schema) -> DataType | None:
    if schema is None or isinstance(schema, DataType):
        return schema
    if isinstance(schema, dict):
        return connect_to_spark(schema)
    from pyspark.sql.types import _parse_datatype_string
    try:
        return _parse_datatype_string(schema)
    except Exception:
        from pyspark.sql import SparkSession
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise
        return spark.createDataFrame([], schema).schema  # DDL with backquoted names needs the parser
