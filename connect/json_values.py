"""JSON values as Spark columns, as Kafka's JsonConverter reads and writes a payload against its
schema: :func:`parse_json` is its ``JsonDeserializer``, then the per-row checks of
``convertToConnect`` (a value that does not fit the bound type, a null required field) and the
schema defaults it fills (``replace.null.with.default``); :func:`default_value` serves
``SetSchemaMetadata`` too. Used by :class:`connect.json_converter.JsonConverter`.
"""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, DecimalType, MapType, StructField, StructType

from connect.connect_types import DEFAULT, OPTIONAL, ddl, needs, spark_to_connect
from connect.logical_types import exact_type, from_wire, read_type


def _json_literal(c: Column, t: DataType) -> Column:
    """Any column of type ``t`` as JSON text (``to_json`` takes only structs, maps and arrays at
    the top: anything else is wrapped in a struct and cut out of its text)."""
    if isinstance(t, (StructType, MapType, ArrayType)):
        return F.to_json(c, {"ignoreNullFields": "false"})
    wrapped = F.to_json(F.struct(c.alias("p")), {"ignoreNullFields": "false"})
    return F.substring(wrapped, F.lit(6), F.length(wrapped) - 6)


def _present(v: Column) -> Column:
    return v.isNotNull() & ~F.call_function("is_variant_null", v)


def _mismatch(v: Column, typed: Column, t: DataType) -> Column:
    """True where the JSON ``v`` holds a value that did not fit ``t`` (it came out null)."""
    here = _present(v) & typed.isNull()
    if isinstance(t, StructType) and t.fields:
        inner = [_mismatch(F.try_variant_get(v, "$['" + f.name.replace("'", "\\'") + "']", "variant"),
                           typed.getField(f.name), f.dataType) for f in t.fields]
        nested = inner[0]
        for m in inner[1:]:
            nested = nested | m
        return here | (typed.isNotNull() & F.coalesce(nested, F.lit(False)))
    return here


_LEADING_ZEROS = r'("(?:[^"\\]|\\.)*")|(?<![\w.])(-?)0+(?=\d)'


def parse_json(text: Column) -> Column:
    """Kafka's ``JsonDeserializer`` (``ALLOW_LEADING_ZEROS_FOR_NUMBERS``): JSON text as a VARIANT,
    ``0012`` read as 12; null where the text is not JSON. Only text that fails as it is is read again
    with the zeros taken out of its numbers (never inside strings)."""
    return F.coalesce(F.try_parse_json(text), F.try_parse_json(F.regexp_replace(text, _LEADING_ZEROS, "$1$2")))


def default_value(text: str, t: DataType, meta: dict | None) -> Column:
    """A schema's ``default`` (JSON text, as ``connect.default`` holds it and the converter reads a
    payload) as a value of ``t``."""
    wire = F.try_variant_get(F.try_parse_json(F.lit(text)), "$", ddl(read_type(t, meta)))
    exact = None
    if needs(t, lambda x: isinstance(x, DecimalType)):
        exact = F.from_json(F.lit('{"payload":' + text + '}'), StructType([StructField("payload", exact_type(t))]),
                            {"allowNumericLeadingZeros": "true"}).getField("payload")
    return from_wire(wire, t, meta, exact)


def _has_default(t: DataType, meta: dict | None) -> bool:
    return (meta or {}).get(DEFAULT) is not None or (
        isinstance(t, StructType) and any(_has_default(f.dataType, f.metadata) for f in t.fields))


def _with_defaults(c: Column, t: DataType, meta: dict | None) -> Column:
    """Kafka's ``convertToConnect`` under ``replace.null.with.default``: a null or missing value
    whose schema has a default reads as the default (struct fields at any depth)."""
    if not _has_default(t, meta):
        return c
    if isinstance(t, StructType):
        c = F.when(c.isNotNull(), F.struct(*[_with_defaults(c.getField(f.name), f.dataType, f.metadata).alias(f.name)
                                             for f in t.fields]))
    default = (meta or {}).get(DEFAULT)
    return c if default is None else F.coalesce(c, default_value(default, t, meta))


_TYPE_NAMES = {"float": "FLOAT32", "double": "FLOAT64"}


def _required_nulls(c: Column, t: DataType, meta: dict | None) -> list[tuple[Column, str]]:
    """(condition, message) for each required (``optional: false``) value that is null, where its
    parent is not: Kafka's ``convertToConnect`` throws "Invalid null value for required … field"."""
    out = []
    if (meta or {}).get(OPTIONAL) is False:
        kind = spark_to_connect(t, meta)["type"]
        out.append((c.isNull(), f"Invalid null value for required {_TYPE_NAMES.get(kind, kind.upper())} field"))
    if isinstance(t, StructType):
        for f in t.fields:
            out += [(c.isNotNull() & cond, msg) for cond, msg in _required_nulls(c.getField(f.name), f.dataType,
                                                                                f.metadata)]
    return out


def _has_metadata(t: DataType) -> bool:
    if isinstance(t, StructType):
        return any(f.metadata or _has_metadata(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return _has_metadata(t.elementType)
    if isinstance(t, MapType):
        return _has_metadata(t.valueType)
    return False
