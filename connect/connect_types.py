"""Kafka Connect's schemas as Spark types, and the form each type takes in Connect's JSON.

int8/16/32/64 ↔ tinyint/smallint/int/bigint, float32/64 ↔ float/double (``"float"``/``"double"``
in JsonConverter's schemas), boolean, string, bytes ↔ binary (base64 in the JSON), array, map
(string keys only), struct; logical types Timestamp ↔ timestamp (int64 epoch ms), Date ↔ date
(int32 epoch days), Time ↔ int (ms of day), Decimal ↔ decimal(38, scale) as a number or base64 of
the unscaled value (Java's ``BigInteger.toByteArray``). The wire conversions are column
expressions, so a record is converted inside Spark's plan.

Schema metadata a Spark type cannot hold travels in the metadata of the ``StructField`` that holds
the value — a struct's field, or the record frame's ``key``/``value`` column itself for the record's
top-level schema:

=====================  =============================================================================
key                    Connect schema's
=====================  =============================================================================
``connect.name``       ``name()`` (``org.apache.kafka.connect.data.Time`` on an int of ms of day,
                       ``…Envelope`` on a Debezium struct)
``connect.optional``   ``isOptional()`` (bool; absent: written as optional)
``connect.default``    ``defaultValue()`` as JsonConverter writes it in a schema (JSON text)
``connect.version``    ``version()`` (int)
``connect.doc``        ``doc()`` (string)
``connect.parameters`` ``parameters()`` (string → string)
=====================  =============================================================================

A step that keeps a field keeps its metadata; one that builds a new field leaves it empty, and the
field is then written as Kafka writes a schema built from the Spark type alone. Element and value
schemas of arrays and maps have no StructField: they are written as optional, without metadata.
"""
from __future__ import annotations

import json

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampNTZType, TimestampType, VariantType)

from connect.errors import DataError

# JsonConverter's names (JsonSchema: Connect's FLOAT32/FLOAT64 are "float"/"double" in its JSON)
_PRIMITIVES = {"int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
               "float": FloatType(), "double": DoubleType(), "boolean": BooleanType(),
               "string": StringType(), "bytes": BinaryType()}
_READ = {**_PRIMITIVES, "float32": FloatType(), "float64": DoubleType()}   # Connect's type names read too
_UNSCALED = DecimalType(38, 0)
_TIMESTAMP, _DATE, _TIME, _DECIMAL = ("org.apache.kafka.connect.data." + n for n in ("Timestamp", "Date", "Time", "Decimal"))


NAME, OPTIONAL, DEFAULT, VERSION, DOC, PARAMETERS = (
    "connect." + k for k in ("name", "optional", "default", "version", "doc", "parameters"))


def schema_metadata(schema: dict) -> dict:
    """The StructField metadata (see the module docstring) that keeps what ``schema`` says beyond
    its Spark type. ``optional`` is true only when written as ``true`` (Kafka's ``asConnectSchema``:
    a schema without it is required)."""
    out = {OPTIONAL: schema.get("optional") is True}
    if isinstance(schema.get("name"), str):
        out[NAME] = schema["name"]
    if isinstance(schema.get("version"), int) and not isinstance(schema.get("version"), bool):
        out[VERSION] = schema["version"]
    if isinstance(schema.get("doc"), str):
        out[DOC] = schema["doc"]
    if isinstance(schema.get("parameters"), dict):
        out[PARAMETERS] = {str(k): str(v) for k, v in schema["parameters"].items()}
    if schema.get("default") is not None:
        out[DEFAULT] = json.dumps(schema["default"], separators=(",", ":"), ensure_ascii=False)
    return out


def connect_to_spark(schema: dict) -> DataType:
    """The Spark type for a Connect schema as JsonConverter writes it in an envelope; each struct
    field's :func:`schema_metadata` in its StructField's metadata."""
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
        return StructType([StructField(f["field"], connect_to_spark(f), metadata=schema_metadata(f))
                           for f in schema.get("fields", [])])
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


class RawJson(str):
    """JSON text to be written as it is (a schema's default, kept as it was read)."""


def spark_to_connect(data_type: DataType, metadata: dict | None = None) -> dict:
    """The Connect schema JsonConverter writes for a Spark type and its StructField ``metadata``,
    keys in the order of Kafka's ``JsonConverter.asJsonSchema``: type, items / keys, values /
    fields, optional, name, version, doc, parameters, default; a struct field's own schema first,
    then ``field``. Without metadata a schema is optional (Spark's nullability is not a contract
    the way Connect's is)."""
    t, meta = data_type, dict(metadata or {})
    name = version = params = None
    if isinstance(t, (TimestampType, TimestampNTZType)):
        out, name, version = {"type": "int64"}, _TIMESTAMP, 1
    elif isinstance(t, DateType):
        out, name, version = {"type": "int32"}, _DATE, 1
    elif isinstance(t, DecimalType):
        out, name, version, params = {"type": "bytes"}, _DECIMAL, 1, {"scale": str(t.scale)}
    elif isinstance(t, ArrayType):
        out = {"type": "array", "items": spark_to_connect(t.elementType)}
    elif isinstance(t, MapType):
        if not isinstance(t.keyType, StringType):
            raise DataError(f"cannot write {t.simpleString()} as JSON: only string map keys are supported")
        out = {"type": "map", "keys": spark_to_connect(t.keyType), "values": spark_to_connect(t.valueType)}
    elif isinstance(t, StructType):
        out = {"type": "struct", "fields": [{**spark_to_connect(f.dataType, f.metadata), "field": f.name}
                                            for f in t.fields]}
    else:
        kind = next((k for k, v in _PRIMITIVES.items() if v == t), None)
        if kind is None:
            raise DataError(f"JsonConverter cannot write Spark type {t.simpleString()}")
        out = {"type": kind}
    out["optional"] = meta.get(OPTIONAL, True) is not False
    name = meta.get(NAME, name)
    version = meta.get(VERSION, version)
    if name is not None:
        out["name"] = name
    if version is not None:
        out["version"] = version
    if meta.get(DOC) is not None:
        out["doc"] = meta[DOC]
    params = {**(params or {}), **dict(meta.get(PARAMETERS) or {})} if params or meta.get(PARAMETERS) else None
    if params is not None:
        out["parameters"] = params
    if meta.get(DEFAULT) is not None:
        out["default"] = RawJson(meta[DEFAULT])
    return out


def _write(o) -> str:
    if isinstance(o, RawJson):
        return str(o)
    if isinstance(o, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + _write(v) for k, v in o.items()) + "}"
    if isinstance(o, list):
        return "[" + ",".join(_write(v) for v in o) + "]"
    return json.dumps(o, ensure_ascii=False)


def schema_json(schema: dict) -> str:
    """A :func:`spark_to_connect` schema as JsonConverter writes it (its key order, no spaces)."""
    return _write(schema)


def _plain(o):
    if isinstance(o, RawJson):
        return json.loads(o)
    if isinstance(o, dict):
        return {k: _plain(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_plain(v) for v in o]
    return o


def canonical(schema) -> str:
    """The schema JSON as Spark's ``to_json`` of a VARIANT writes it (keys sorted, no spaces)."""
    return json.dumps(_plain(schema), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


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


def is_time(t: DataType, meta: dict | None) -> bool:
    """An int of ms of day named ``org.apache.kafka.connect.data.Time`` in its metadata."""
    return isinstance(t, IntegerType) and (meta or {}).get(NAME) == _TIME


def _read_as_variant(t: DataType, meta: dict | None) -> bool:
    return isinstance(t, (TimestampType, TimestampNTZType, DateType, DecimalType)) or is_time(t, meta)


def _needs_read(t: DataType, meta: dict | None) -> bool:
    if _read_as_variant(t, meta) or isinstance(t, BinaryType):
        return True
    if isinstance(t, StructType):
        return any(_needs_read(f.dataType, f.metadata) for f in t.fields)
    if isinstance(t, ArrayType):
        return _needs_read(t.elementType, None)
    if isinstance(t, MapType):
        return _needs_read(t.valueType, None)
    return False


def read_type(t: DataType, meta: dict | None = None) -> DataType:
    """The type a JSON payload is first read into (``try_variant_get``) before :func:`from_wire`:
    bytes as base64 strings, and every logical type as the VARIANT leaf itself, so that its
    converter sees the JSON value's own kind (a number or a string for a Decimal, an integral
    number for Timestamp, Date and Time: Kafka's ``LOGICAL_CONVERTERS``) rather than a cast."""
    if _read_as_variant(t, meta):
        return VariantType()
    if isinstance(t, BinaryType):
        return StringType()
    if isinstance(t, StructType):
        return StructType([StructField(f.name, read_type(f.dataType, f.metadata)) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(read_type(t.elementType))
    if isinstance(t, MapType):
        return MapType(t.keyType, read_type(t.valueType))
    return t


def exact_type(t: DataType) -> DataType:
    """The type ``from_json`` reads a payload into for the Decimal numbers a VARIANT holds only as
    doubles (exponent form, more than 38 digits): decimal leaves as decimal(38, s), read from the
    JSON text exactly (Jackson's ``decimalValue()``); every other leaf as a string, which never fails."""
    if isinstance(t, DecimalType):
        return t
    if isinstance(t, StructType):
        return StructType([StructField(f.name, exact_type(f.dataType)) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(exact_type(t.elementType))
    if isinstance(t, MapType):
        return MapType(t.keyType, exact_type(t.valueType))
    return StringType()


_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def _kind(x: Column) -> Column:
    return F.call_function("schema_of_variant", x)


def _decimal_leaf(x: Column, t: DecimalType, exact: Column | None) -> Column:
    """Kafka's Decimal ``toConnect``: a JSON number is the decimal itself (whatever
    ``decimal.format`` says), a string is base64 of the unscaled bytes. Null (so the record is
    flagged) for anything else, for bad base64, and for a number with more fractional digits than
    ``t``'s scale: Kafka keeps such a BigDecimal as it is, Spark's decimal(38, s) would round it."""
    kind = _kind(x)
    text = F.try_variant_get(x, "$", "string")
    as_decimal = F.try_variant_get(x, "$", t.simpleString())
    decimal_kind = kind.startswith("DECIMAL")
    fraction = F.length(F.regexp_extract(text, r"\.(\d*?)0*$", 1))
    from_bytes = _decimal_from_bytes(F.try_to_binary(text, F.lit("base64")), t)
    out = F.when(kind == "STRING", from_bytes).when(kind.isin(*_INTEGRAL), as_decimal) \
        .when(decimal_kind & (fraction <= t.scale), as_decimal)
    if exact is not None:   # a double in the VARIANT: the exact value from the JSON text, if it lost nothing
        out = out.when(kind.isin("DOUBLE", "FLOAT") & (exact.cast("double") == F.try_variant_get(x, "$", "double")),
                       exact)
    return out


def _integral_leaf(x: Column, int32: bool) -> Column:
    """Kafka's Timestamp (``isIntegralNumber``), Date and Time (``isInt``) ``toConnect``: a JSON
    number with a fraction or an exponent is refused (null, so the record is flagged), not truncated."""
    n = F.try_variant_get(x, "$", "bigint")
    ok = _kind(x).isin(*_INTEGRAL)
    if int32:
        ok = ok & n.between(_INT_MIN, _INT_MAX)
    return F.when(ok, n)


def _map_read(c: Column, t: DataType, meta: dict | None, exact: Column | None) -> Column:
    if not _needs_read(t, meta):
        return c
    if isinstance(t, StructType):
        return F.when(c.isNotNull(), F.struct(*[
            _map_read(c.getField(f.name), f.dataType, f.metadata,
                      None if exact is None else exact.getField(f.name)).alias(f.name) for f in t.fields]))
    if isinstance(t, ArrayType):
        return F.transform(c, lambda x, i: _map_read(x, t.elementType, None, None if exact is None else exact[i]))
    if isinstance(t, MapType):
        return F.transform_values(c, lambda k, v: _map_read(v, t.valueType, None,
                                                            None if exact is None else exact[k]))
    if isinstance(t, (TimestampType, TimestampNTZType)):
        return timestamp_from_millis(_integral_leaf(c, False)).cast(t)
    if isinstance(t, DateType):
        return F.date_add(F.lit("1970-01-01").cast("date"), _integral_leaf(c, True).cast("int"))
    if is_time(t, meta):
        return _integral_leaf(c, True).cast("int")
    if isinstance(t, DecimalType):
        return _decimal_leaf(c, t, exact)
    if isinstance(t, BinaryType):   # Jackson's binaryValue(): base64, null (a mismatch) if it is not
        return F.try_to_binary(c, F.lit("base64"))
    return c


def _decimal_from_bytes(raw: Column, t: DecimalType) -> Column:
    """Java's ``new BigDecimal(new BigInteger(bytes), scale)``: big-endian two's complement of any
    length (leading sign bytes allowed). Null, which the converter reports as a mismatch, for no
    bytes or a value ``t`` cannot hold."""
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
    text = d.cast("string")   # plain digits; ``d < 0`` rounds -1E-38 to 0 when Spark widens decimal(38, 38)
    negative = text.startswith("-")
    magnitude = F.regexp_replace(text, "[-.]", "").cast(_UNSCALED)
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
    return F.when(d.isNotNull(), _base64(F.unhex(trimmed)))


MAX_TIMESTAMP_MILLIS = (1 << 63) // 1000 - 1   # Spark keeps microseconds in a long (about year 294247)


def timestamp_from_millis(ms: Column) -> Column:
    """Spark's timestamp of epoch ``ms``; null past Spark's range, where ``timestamp_millis`` would
    fail the whole job (Java's ``Date`` holds any long)."""
    return F.when(ms.between(-MAX_TIMESTAMP_MILLIS, MAX_TIMESTAMP_MILLIS), F.timestamp_millis(ms))


def from_wire(c: Column, t: DataType, meta: dict | None = None, exact: Column | None = None) -> Column:
    """A payload read as :func:`read_type` converted to ``t``: logical types rebuilt from their
    JSON forms, null where the JSON value does not fit. ``exact``: the payload read as
    :func:`exact_type`, for Decimal numbers that a VARIANT holds only as doubles."""
    return _map_read(c, t, meta, exact)


def _base64(x: Column) -> Column:
    """Jackson's base64 of a byte[] (``MIME_NO_LINEFEEDS``): one line, where Spark's ``base64``
    breaks long output into CRLF-separated lines."""
    return F.regexp_replace(F.base64(x), "\r\n", "")


def to_wire(c: Column, t: DataType, numeric: bool) -> Column:
    def leaf(x, lt):
        if isinstance(lt, (TimestampType, TimestampNTZType)):
            return F.unix_millis(x.cast("timestamp"))
        if isinstance(lt, DateType):
            return F.unix_date(x)
        if isinstance(lt, DecimalType):
            return x if numeric else _decimal_to_base64(x, lt)
        if isinstance(lt, BinaryType):
            return _base64(x)
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
    too), or None where a field of both has two types. A field keeps its metadata; whether it is
    required and its default only where both schemas have the field and agree on them (a record of
    the schema without it must not fail for it)."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        fields = {f.name: f for f in a.fields}
        added = set()
        for f in b.fields:
            if f.name in fields:
                t = merge_types(fields[f.name].dataType, f.dataType)
                if t is None:
                    return None
                meta = dict(fields[f.name].metadata)
                for k in (OPTIONAL, DEFAULT):
                    if meta.get(k) != f.metadata.get(k):
                        meta.pop(k, None)
                fields[f.name] = StructField(f.name, t, metadata=meta)
            else:
                fields[f.name] = f
                added.add(f.name)
        missing = {f.name for f in a.fields} - {f.name for f in b.fields}
        return StructType([StructField(n, f.dataType, metadata=_loosened(f.metadata))
                           if n in added or n in missing else f for n, f in fields.items()])
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        t = merge_types(a.elementType, b.elementType)
        return None if t is None else ArrayType(t)
    if isinstance(a, MapType) and isinstance(b, MapType) and same_type(a.keyType, b.keyType):
        t = merge_types(a.valueType, b.valueType)
        return None if t is None else MapType(a.keyType, t)
    return a if same_type(a, b) else None


def _loosened(meta: dict) -> dict:
    return {k: v for k, v in meta.items() if k not in (OPTIONAL, DEFAULT)}


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
