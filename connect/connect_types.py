"""Kafka Connect's schemas as Spark types, and the form each type takes in Connect's JSON.

int8/16/32/64 ↔ tinyint/smallint/int/bigint, float32/64 ↔ float/double (``"float"``/``"double"``
in JsonConverter's schemas), boolean, string, bytes ↔ binary (base64 in the JSON), array, map
(string keys only), struct; logical types Timestamp ↔ timestamp (int64 epoch ms), Date ↔ date
(int32 epoch days), Decimal ↔ decimal(38, scale) as a number or base64 of the unscaled value
(Java's ``BigInteger.toByteArray``). The wire conversions are column expressions, so a record is
converted inside Spark's plan.
"""
from __future__ import annotations

import json

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampNTZType, TimestampType)

from connect.errors import DataError

# JsonConverter's names (JsonSchema: Connect's FLOAT32/FLOAT64 are "float"/"double" in its JSON)
_PRIMITIVES = {"int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
               "float": FloatType(), "double": DoubleType(), "boolean": BooleanType(),
               "string": StringType(), "bytes": BinaryType()}
_READ = {**_PRIMITIVES, "float32": FloatType(), "float64": DoubleType()}   # Connect's type names read too
_UNSCALED = DecimalType(38, 0)
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
    if kind in _READ:
        return _READ[kind]
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


def check_names(t: DataType) -> None:
    """Refuse fields that differ only in case where the session cannot tell them apart (Spark's
    ``spark.sql.caseSensitive`` is false by default; ``riverlog connect standalone`` sets it)."""
    from pyspark.sql import SparkSession
    if isinstance(t, (ArrayType, MapType)):
        return check_names(t.elementType if isinstance(t, ArrayType) else t.valueType)
    if not isinstance(t, StructType):
        return None
    seen: dict[str, str] = {}
    for f in t.fields:
        check_names(f.dataType)
        other = seen.setdefault(f.name.lower(), f.name)
        if other != f.name:
            spark = SparkSession.getActiveSession()
            if spark is None or spark.conf.get("spark.sql.caseSensitive", "false").lower() != "true":
                raise DataError(f"fields {other!r} and {f.name!r} differ only in case, which Spark tells apart only "
                                "with spark.sql.caseSensitive=true: set it in the worker's session")


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
    """Types whose JSON form is another type: epoch numbers, base64 strings."""
    return isinstance(t, (TimestampType, TimestampNTZType, DateType, DecimalType, BinaryType))


def wire_type(t: DataType, numeric: bool) -> DataType:
    """How a Spark type travels in Connect's JSON: timestamps as epoch ms, dates as epoch days,
    decimals as numbers or base64 strings."""
    if isinstance(t, (TimestampType, TimestampNTZType)):
        return LongType()
    if isinstance(t, DateType):
        return IntegerType()
    if isinstance(t, DecimalType):
        return t if numeric else StringType()
    if isinstance(t, BinaryType):
        return StringType()
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
    """Java's ``new BigDecimal(new BigInteger(bytes), scale)``: big-endian two's complement of any
    length (leading sign bytes allowed). Null, which the converter reports as a mismatch, for no
    bytes or a value ``t`` cannot hold."""
    raw = F.unbase64(s)
    n, hexs = F.length(raw), F.hex(raw)
    negative = F.conv(hexs.substr(F.lit(1), F.lit(1)), 16, 10).cast("int") >= 8
    octets = F.transform(F.sequence(F.lit(1), n), lambda i: F.conv(hexs.substr(i * 2 - 1, F.lit(2)), 16, 10).cast("int"))
    # Horner in decimal(38,0) over the bytes, each inverted when negative: ~v = -v - 1 is the magnitude less one.
    zero = F.lit(0).cast(_UNSCALED)
    folded = F.aggregate(octets, zero, lambda acc, b: F.try_add(
        F.try_multiply(acc, F.lit(256)), F.when(negative, 255 - b).otherwise(b)).cast(_UNSCALED))
    magnitude = F.when(negative, F.try_add(folded, F.lit(1)).cast(_UNSCALED)).otherwise(folded)
    digits = magnitude.cast("string")
    sign = F.when(negative, F.lit("-")).otherwise(F.lit(""))
    if t.scale == 0:
        text = F.concat(sign, digits)
    else:   # the unscaled digits with the point put back: exact at any scale, unlike a decimal division
        padded = F.when(F.length(digits) > t.scale, digits).otherwise(F.lpad(digits, t.scale + 1, "0"))
        whole = F.length(padded) - t.scale
        text = F.concat(sign, padded.substr(F.lit(1), whole), F.lit("."), padded.substr(whole + 1, F.lit(t.scale)))
    return F.when(n > 0, text.try_cast(t))


def _decimal_to_base64(d: Column, t: DecimalType) -> Column:
    """Java's ``BigInteger.toByteArray`` of the unscaled value (minimal two's complement), base64,
    for the whole decimal(38) range: the unscaled digits are folded into four 32-bit limbs, nine
    digits at a time, in 64-bit arithmetic (a decimal division would round at scale 6)."""
    negative = d < 0
    magnitude = F.regexp_replace(d.cast("string"), "[-.]", "").cast(_UNSCALED)
    # two's complement of -m is the bits of m - 1 inverted
    w = F.when(negative, magnitude - F.lit(1)).otherwise(magnitude).cast(_UNSCALED)
    padded = F.lpad(w.cast("string"), 45, "0")
    chunks = F.transform(F.sequence(F.lit(0), F.lit(4)), lambda i: padded.substr(i * 9 + 1, F.lit(9)).cast("long"))
    limbs = ("l0", "l1", "l2", "l3")   # least significant first

    def times_1e9_plus(acc, chunk):
        out, carry = [], chunk
        for name in limbs:
            v = acc.getField(name) * F.lit(10 ** 9) + carry   # < 2^32 · 10^9 + 2^32: fits a long
            out.append(v.bitwiseAND(F.lit(0xFFFFFFFF)).alias(name))
            carry = F.shiftright(v, 32)
        return F.struct(*out)

    zero = F.struct(*[F.lit(0).cast("long").alias(name) for name in limbs])
    acc = F.aggregate(chunks, zero, times_1e9_plus)
    hexs = F.concat(*[F.lpad(F.hex(acc.getField(name)), 8, "0") for name in reversed(limbs)])
    hexs = F.when(negative, F.translate(hexs, "0123456789ABCDEF", "FEDCBA9876543210")).otherwise(hexs)
    trimmed = F.when(~negative, F.regexp_replace(hexs, "^(00)+(?=[0-7])", "")).otherwise(
        F.regexp_replace(hexs, "^(FF)+(?=[89A-F])", ""))
    return F.when(d.isNotNull(), F.base64(F.unhex(trimmed)))


MAX_TIMESTAMP_MILLIS = (1 << 63) // 1000 - 1   # Spark keeps microseconds in a long (about year 294247)


def timestamp_from_millis(ms: Column) -> Column:
    """Spark's timestamp of epoch ``ms``; null past Spark's range, where ``timestamp_millis`` would
    fail the whole job (Java's ``Date`` holds any long)."""
    return F.when(ms.between(-MAX_TIMESTAMP_MILLIS, MAX_TIMESTAMP_MILLIS), F.timestamp_millis(ms))


def from_wire(c: Column, t: DataType, numeric: bool) -> Column:
    def leaf(x, lt):
        if isinstance(lt, (TimestampType, TimestampNTZType)):
            return timestamp_from_millis(x).cast(lt)
        if isinstance(lt, DateType):
            return F.date_add(F.lit("1970-01-01").cast("date"), x)
        if isinstance(lt, DecimalType):
            return x if numeric else _decimal_from_base64(x, lt)
        if isinstance(lt, BinaryType):   # Jackson's binaryValue(): base64, null (a mismatch) if it is not
            return F.try_to_binary(x, F.lit("base64"))
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
        if isinstance(lt, BinaryType):
            return F.base64(x)
        return x
    return _map_type(c, t, leaf)


def ddl(t: DataType) -> str:
    """``t`` as Spark's DDL parser reads it: field names back-quoted (``simpleString`` leaves
    ``user-id`` or ``a b`` bare, which the parser refuses)."""
    if isinstance(t, StructType):
        return "STRUCT<" + ", ".join("`" + f.name.replace("`", "``") + "`: " + ddl(f.dataType)
                                     for f in t.fields) + ">"
    if isinstance(t, ArrayType):
        return f"ARRAY<{ddl(t.elementType)}>"
    if isinstance(t, MapType):
        return f"MAP<{ddl(t.keyType)}, {ddl(t.valueType)}>"
    return t.simpleString()


def merge_types(a: DataType, b: DataType) -> DataType | None:
    """``a`` with the fields of ``b`` it lacks added at the end (in nested structs, arrays and maps
    too), or None where a field of both has two types."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        fields = {f.name: f.dataType for f in a.fields}
        for f in b.fields:
            if f.name in fields:
                t = merge_types(fields[f.name], f.dataType)
                if t is None:
                    return None
                fields[f.name] = t
            else:
                fields[f.name] = f.dataType
        return StructType([StructField(n, t) for n, t in fields.items()])
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        t = merge_types(a.elementType, b.elementType)
        return None if t is None else ArrayType(t)
    if isinstance(a, MapType) and isinstance(b, MapType) and same_type(a.keyType, b.keyType):
        t = merge_types(a.valueType, b.valueType)
        return None if t is None else MapType(a.keyType, t)
    return a if same_type(a, b) else None


def same_type(a: DataType | None, b: DataType | None) -> bool:
    """Equal ignoring nullability (Connect's ``optional`` does not change the Spark type)."""
    return a is not None and b is not None and a.simpleString() == b.simpleString()


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
