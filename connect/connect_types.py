"""Kafka Connect's schemas as Spark types, with what a Spark type cannot hold kept in field metadata.

int8/16/32/64 ↔ tinyint/smallint/int/bigint, float32/64 ↔ float/double (``"float"``/``"double"``
in JsonConverter's schemas), boolean, string, bytes ↔ binary, array, map (string keys only),
struct; logical types Timestamp ↔ timestamp, Date ↔ date, Time ↔ int (ms of day), Decimal ↔
decimal(38, scale). The form each type takes in Connect's JSON, and the column expressions that
convert to and from it, are in :mod:`connect.logical_types`.

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

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampNTZType, TimestampType)

from connect.errors import DataError

# JsonConverter's names (JsonSchema: Connect's FLOAT32/FLOAT64 are "float"/"double" in its JSON)
_PRIMITIVES = {"int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
               "float": FloatType(), "double": DoubleType(), "boolean": BooleanType(),
               "string": StringType(), "bytes": BinaryType()}
_READ = {**_PRIMITIVES, "float32": FloatType(), "float64": DoubleType()}   # Connect's type names read too
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


def is_time(t: DataType, meta: dict | None) -> bool:
    """An int of ms of day named ``org.apache.kafka.connect.data.Time`` in its metadata."""
    return isinstance(t, IntegerType) and (meta or {}).get(NAME) == _TIME


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
