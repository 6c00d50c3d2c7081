"""Kafka's JsonConverter (``org.apache.kafka.connect.json.JsonConverter``) as Spark column
expressions: reads and writes the ``{"schema": …, "payload": …}`` envelope or plain JSON.

JSON in Spark needs one type per column before the query runs, where Kafka reads each record's
schema as it comes. So a :class:`JsonConverter` is *bound* to a Spark type:

- ``schemas.enable=true`` (Kafka's default; the ``{"schema": …, "payload": …}`` envelope): give the
  type (a Spark type, a DDL string or a Connect schema dict), or call :meth:`JsonConverter.bind` on
  a batch: it reads the batch's distinct envelope schemas (one small Spark job on the driver) and
  binds the first one's Spark type, merged with the later ones' fields where they agree (a schema
  that gained a field mid-batch). Rows whose envelope schema conflicts with it are flagged.
- ``schemas.enable=false``: with a type, plain JSON is read into it; without one the value is
  Spark's ``VARIANT`` (Spark's schemaless JSON, the counterpart of Connect's schemaless maps);
  :meth:`JsonConverter.bind` infers a struct from a batch with ``schema_of_variant_agg``.

A type bound from a batch is kept for the batches after it (:meth:`JsonConverter.carried`): rows
whose envelope schema, or whose JSON's shape (``schema_of_variant`` with decimals unsized), was not
seen by ``bind`` are flagged with the ``rebind`` stage and the runtime binds again from their
batch, so a schema change is learnt as per-batch inference would, without a job per batch. An
inferred type was merged from the shapes ``bind`` saw, so a value of one of them fits it: only
other values are checked field by field.

Connect ↔ Spark types (:mod:`connect.connect_types`, :mod:`connect.logical_types`): int8/16/32/64 ↔
tinyint/smallint/int/bigint, float32/64 ↔ float/double, boolean, string, bytes ↔ binary (base64 in
JSON, as Jackson writes byte[]), array, map (string keys only: Connect writes other keys as
``[[k, v], …]``), struct; logical types Timestamp ↔ timestamp (int64 epoch ms), Date ↔ date (int32
epoch days), Time ↔ int (ms of day, named Time in its field's metadata: Spark has no time-of-day type by
default), Decimal ↔ decimal(38, scale), written per ``decimal.format`` NUMERIC or BASE64 (Kafka's
default) and read from either form, over the whole decimal(38) range. Per-row checks: invalid UTF-8
or JSON, a missing envelope, a payload field of the wrong JSON type (nested inside arrays and maps
only when the whole element fails), a null required field (Kafka's "Invalid null value for required
… field"), a fractional Timestamp, Date or Time, a decimal number with more fractional digits than
its scale. Schema defaults fill null struct fields (``replace.null.with.default``). A null with a
schema is told from a tombstone by :func:`connect.record_frame.typed_null`'s column: read from
``{"schema": …, "payload": null}``, written back as ``fromConnectData`` writes it (null bytes only
for a null without a schema).
"""
from __future__ import annotations

import copy
import json
import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DecimalType, MapType, StringType, StructField, StructType, VariantType

from connect.config_def import message as config_message, parse_value, Invalid
from connect.connect_types import (DEFAULT, OPTIONAL, as_type, canonical, check_names, connect_to_spark, ddl,
                                   merge_types, needs, same_type, schema_json, schema_metadata, spark_to_connect)
from connect.converter_base import Converted, Converter, _bool, _config_errors
from connect.errors import ConfigError, DataError
from connect.json_values import (_has_default, _has_metadata, _json_literal, _mismatch, _required_nulls,
                                 _with_defaults, parse_json)
from connect.logical_types import exact_type, from_wire, read_type, to_wire, wire_type

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

_MAX_SHAPES = 64
# decode's hidden stages (see Converted): the JSON, the payload as read_type, as the bound type, defaults filled
_PARSED, _WIRE, _TYPED, _FILLED = "__connect_json", "__connect_json_wire", "__connect_json_typed", "__connect_json_filled"
# ... and the per-row flags read more than once (the value, the error, the message): kept in stages of
# their own so a row's UTF-8 check, shape and field checks run once, not once per reader
_BAD_JSON, _FAILED = "__connect_json_bad", "__connect_json_failed"


def _shape(v: Column) -> Column:
    """A JSON value's shape: its ``schema_of_variant`` with decimals unsized (0.25 and 12.5 alike)."""
    return F.regexp_replace(F.call_function("schema_of_variant", v), r"DECIMAL\(\d+,\s*\d+\)", "DECIMAL")


def _decimal_ddl(m: re.Match) -> str:
    """An inferred DECIMAL(p, s) as Spark reads it: DOUBLE (Kafka reads a schemaless fraction as a
    float64), unless it has more integral digits than a double holds exactly — a long past 2^53 in
    a field another record gives a fraction — then DECIMAL(38, s), which holds both exactly."""
    p, s = int(m.group(1)), int(m.group(2))
    return f"DECIMAL(38,{s})" if p - s > 15 else "DOUBLE"


# JSON object keys as schema_of_variant writes them (`quoted` when not a plain name)
_SHAPE_KEY = re.compile(r"(?<=[<,])\s*(`(?:[^`]|``)*`|[^:<>,`\s]+):")


def _case_clash(shapes) -> str | None:
    """A JSON key that another key of the batch's JSON equals but for case, if any: Spark's struct
    fields are matched without case, so one would hide the other, where Kafka reads each record as
    its own map."""
    seen: dict[str, str] = {}
    for shape in shapes:
        for key in _SHAPE_KEY.findall(shape or ""):
            other = seen.setdefault(key.lower(), key)
            if other != key:
                return f"{other!r} and {key!r}"
    return None


_VARIANT_TO_DDL = [(re.compile(r"\bOBJECT<"), "STRUCT<"), (re.compile(r"\bDECIMAL\((\d+),\s*(\d+)\)"), _decimal_ddl),
                   (re.compile(r"\bVOID\b"), "STRING")]


class NothingToBind(DataError):
    """A batch with no JSON value (empty, or only nulls) to learn a type from."""


class JsonConverter(Converter):
    """Kafka's JsonConverter. Configs (Kafka's names and defaults): ``schemas.enable`` (true),
    ``decimal.format`` (BASE64 | NUMERIC: how decimals are written; both forms are read),
    ``schemas.cache.size`` (validated as an int; Spark binds a type per batch, so nothing is cached)
    and ``replace.null.with.default`` (true). See the module docstring for how a type is bound and
    :mod:`connect.connect_types` for the schema metadata carried in StructField metadata.

    >>> conv = JsonConverter({"schemas.enable": "false"}, schema="id INT, name STRING")
    >>> frame = converters.decode(frame, conv, "value")   # value is now struct<id int, name string>
    """
    class_name = JSON_CONVERTER
    CONFIGS = {"schemas.enable": None, "decimal.format": {"BASE64", "NUMERIC"}, "schemas.cache.size": None,
               "replace.null.with.default": None, "converter.type": {"KEY", "VALUE", "HEADER"}}

    def __init__(self, config=None, is_key=False, schema: "DataType | str | dict | None" = None):
        super().__init__(config, is_key)
        errors = _config_errors(self.config, self.CONFIGS)
        self.schemas_enable = _bool(self.config, "schemas.enable", True, errors)
        self.replace_null_with_default = _bool(self.config, "replace.null.with.default", True, errors)
        self.numeric = str(self.config.get("decimal.format", "BASE64")).upper() == "NUMERIC"
        if "schemas.cache.size" in self.config:   # JsonConverterConfig's Type.INT
            from connect.config import JSON_CONVERTER_CONFIG
            key = JSON_CONVERTER_CONFIG.keys["schemas.cache.size"]
            try:
                parse_value(key, self.config[key.name])
            except Invalid as e:
                errors.setdefault(key.name, []).append(config_message(key.name, self.config[key.name], e))
        if errors:
            raise ConfigError("invalid JsonConverter config: " + "; ".join(f"{k}: {', '.join(v)}"
                                                                         for k, v in errors.items()), errors=errors)
        self.data_type = as_type(schema)
        self.metadata: dict = schema_metadata(schema) if isinstance(schema, dict) else {}   # the top-level schema's
        self.unbound_reason: str | None = None   # why bind() found no type, for the records' message
        self._accepted: frozenset[str] | None = None  # canonical envelope schemas seen by bind()
        self._shapes: frozenset[str] | None = None    # plain JSON shapes seen by bind()
        self.carried_over = False

    def unbound_because(self, reason: str) -> "JsonConverter":
        """This converter, unbound, with its records failing for ``reason`` (with envelopes;
        without, they are read as VARIANT)."""
        out = copy.copy(self)
        out.unbound_reason = reason
        return out

    def carriable(self) -> bool:
        """Whether the type came from a batch with a test of what fits it (see :meth:`carried`)."""
        return self._accepted is not None if self.schemas_enable else self._shapes is not None

    def fits_own_batch(self) -> bool:
        """Whether the batch this type was bound from reads the same through :meth:`carried`: plain
        JSON, whose every row's shape ``bind`` collected, so no row is a misfit and each skips the
        field-by-field check in either form. Not envelopes: a row whose schema conflicts is a bad
        record in its own batch, a misfit (a rebind) in a later one."""
        return not self.schemas_enable and self._shapes is not None

    def carried(self) -> "JsonConverter":
        """This bound converter for a later batch: rows that do not fit get a ``misfit`` flag."""
        out = copy.copy(self)
        out.carried_over = True
        return out

    # -- binding a type -------------------------------------------------------------------------
    def bind(self, frame: DataFrame, column: str = "value") -> "JsonConverter":
        """A converter bound to the Spark type of ``frame[column]``'s JSON (a driver-side job):
        with envelopes the first distinct schema's type; without, the merged inferred type."""
        v = parse_json(F.col(column).cast("string"))
        frame = frame.coalesce(1)  # one partition: the aggregate needs no shuffle, so one job, not two
        bound = JsonConverter(self.config, self.is_key)
        if self.schemas_enable:
            rows = (frame.select(F.to_json(F.try_variant_get(v, "$.schema", "variant")).alias("s"), "offset")
                    .where(F.col("s").isNotNull() & (F.col("s") != "null"))
                    .groupBy("s").agg(F.min("offset").alias("o")).orderBy("o", "s").limit(64).collect())
            if not rows:
                raise NothingToBind(f"no JSON envelope with a schema in column {column!r} to bind a type from")
            types, metas, problem = {}, {}, None
            for r in rows:   # in order of first appearance
                try:
                    schema = json.loads(r["s"])
                    t = connect_to_spark(schema)
                    check_names(t)
                    types[r["s"]], metas[r["s"]] = t, schema_metadata(schema)
                except DataError as e:   # its records are flagged; the others still convert
                    problem = problem or e
            if not types:
                raise problem
            # A schema that evolved within the batch (a field added) is read as one struct holding
            # every field: each record's fields, the others null. A conflicting one is flagged.
            merged = None
            for t in types.values():
                merged = t if merged is None else (merge_types(merged, t) or merged)
            bound.data_type = merged
            first = next(iter(metas.values()))
            bound.metadata = {k: v for k, v in first.items()
                              if k not in (OPTIONAL, DEFAULT) or all(m.get(k) == v for m in metas.values())}
            # What this converter writes for the type is accepted too, so it reads its own output.
            bound._accepted = frozenset([s for s, t in types.items() if same_type(merge_types(merged, t), merged)]
                                        + [canonical(spark_to_connect(bound.data_type, bound.metadata))])
        else:
            row = frame.select(F.call_function("schema_of_variant_agg", v).alias("t"),
                               F.collect_set(_shape(v)).alias("shapes")).first()
            if not set(row["shapes"] or ()) - {"VOID"}:   # no row, only nulls: nothing to learn a type from
                raise NothingToBind(f"no JSON value in column {column!r} to bind a type from")
            if _case_clash(row["shapes"]):   # no struct can hold both: read as VARIANT (schemaless JSON), as without a type
                bound.data_type = None
                return bound
            ddl = row["t"]
            if len(row["shapes"]) <= _MAX_SHAPES:
                bound._shapes = frozenset(row["shapes"])
            for pattern, repl in _VARIANT_TO_DDL:
                ddl = pattern.sub(repl, ddl)
            bound.data_type = as_type(ddl)
            check_names(bound.data_type)
        return bound

    def output_type(self):
        return self.data_type or (None if self.schemas_enable else VariantType())

    # -- bytes -> typed ---------------------------------------------------------------------------
    def to_column(self, binary):
        text = binary.cast("string")
        stages = ({_PARSED: parse_json(text)},)
        v = F.col(_PARSED)
        # Kafka's JSON deserializer reads empty bytes as null: without envelopes that is a null value
        present = binary.isNotNull() if self.schemas_enable else binary.isNotNull() & (F.length(binary) > 0)
        bad_json = present & (~F.call_function("is_valid_utf8", binary) | v.isNull())
        msg_json = F.lit("Converting byte[] to Kafka Connect data failed due to serialization error")
        if not self.schemas_enable and self.data_type is None:
            return Converted(F.when(~bad_json, v), bad_json, msg_json, stages=stages)
        misfit = seen = None
        bad_json_expr, bad_json = bad_json, F.col(_BAD_JSON)   # computed in the typed read's stage
        if self.schemas_enable:
            keys = F.coalesce(F.json_object_keys(text), F.json_object_keys(F.to_json(v)))  # 0012 read as 12
            envelope_ok = (F.size(keys) == 2) & F.array_contains(keys, "schema") & F.array_contains(keys, "payload")
            schema_json = F.to_json(F.try_variant_get(v, "$.schema", "variant"))
            # {"schema": null, "payload": null} is a null value (Kafka's SchemaAndValue.NULL)
            null_envelope = F.coalesce(envelope_ok & (schema_json == "null") & (
                F.to_json(F.try_variant_get(v, "$.payload", "variant")) == "null"), F.lit(False))
            if self.data_type is None:
                # Unbound: the batch held no envelope with a schema (null keys, say). Null bytes are
                # a null value, as Kafka's converter gives; anything else fails as a bad envelope.
                bad_json = bad_json_expr
                bad = present & ~bad_json & ~null_envelope
                return Converted(F.lit(None).cast("string"), bad_json | bad, F.when(bad_json, msg_json).otherwise(
                    F.lit(self.unbound_reason or 'JsonConverter with schemas.enable requires "schema" and "payload" '
                          'fields and may not contain additional fields. If you are trying to deserialize plain '
                          'JSON data, set schemas.enable=false in your converter configuration.')), stages=stages)
            bad_env = present & ~bad_json & ~F.coalesce(envelope_ok, F.lit(False))
            if self._accepted is not None:
                bad_schema = present & ~bad_json & ~bad_env & ~null_envelope & \
                    ~schema_json.isin(*sorted(self._accepted))
            else:
                bad_schema = F.lit(False)
            if self.carried_over:
                misfit, bad_schema = bad_schema, F.lit(False)
            payload = F.try_variant_get(v, "$.payload", "variant")
        else:
            bad_env = bad_schema = F.lit(False)
            schema_json = F.lit(None).cast("string")
            payload = v
            if self._shapes is not None:
                # The type was merged from these shapes, so a value of one of them fits it: only the
                # rest need the field-by-field check (CASE evaluates it for those rows alone).
                seen = F.coalesce(_shape(v).isin(*sorted(self._shapes)), F.lit(True))
                if self.carried_over:
                    misfit = present & ~bad_json & ~seen
        wire_t = read_type(self.data_type, self.metadata)
        stage = {_WIRE: F.try_variant_get(payload, "$", ddl(wire_t))}
        exact = None
        if needs(self.data_type, lambda x: isinstance(x, DecimalType)):
            # Decimals a VARIANT holds as doubles (1.2E-7), read from the text: computed only where one is
            envelope = text if self.schemas_enable else F.concat(F.lit('{"payload":'), text, F.lit("}"))
            exact = F.from_json(envelope, StructType([StructField("payload", exact_type(self.data_type))]),
                                {"allowNumericLeadingZeros": "true"}).getField("payload")
        stage[_BAD_JSON] = bad_json_expr
        stages += (stage,)
        wire = F.col(_WIRE)
        typed = from_wire(wire, self.data_type, self.metadata, exact)
        if typed is not wire:
            stages += ({_TYPED: typed},)
            typed = F.col(_TYPED)
        if self.carried_over and seen is not None:
            mismatch = F.lit(False)   # a row of an unseen shape is a misfit: bound again before it is read
        else:
            mismatch = _mismatch(payload, wire, wire_t)
            if stages[-1].get(_TYPED) is not None:   # a logical type (timestamp, date, decimal) rebuilt from its wire form
                mismatch = mismatch | (wire.isNotNull() & _mismatch(payload, typed, self.data_type))
            if seen is not None:
                mismatch = F.when(seen, F.lit(False)).otherwise(mismatch)
        bad_payload = present & ~bad_json & ~bad_env & ~bad_schema & mismatch
        if self.replace_null_with_default and _has_default(self.data_type, self.metadata):
            stages += ({_FILLED: _with_defaults(typed, self.data_type, self.metadata)},)
            typed = F.col(_FILLED)
        converted = present & ~bad_json & ~bad_env & ~bad_schema & ~bad_payload
        if self.schemas_enable:
            converted = converted & ~null_envelope
        required = [(converted & cond, msg) for cond, msg in _required_nulls(typed, self.data_type, self.metadata)]
        bad_required = F.lit(False)
        for cond, _ in required:
            bad_required = bad_required | F.coalesce(cond, F.lit(False))
        stages += ({_FAILED: bad_json | bad_env | bad_schema | bad_payload | bad_required},)
        failed = F.col(_FAILED)
        message = (F.when(bad_json, msg_json)
                   .when(bad_env, F.lit('JsonConverter with schemas.enable requires "schema" and "payload" fields '
                                        'and may not contain additional fields. If you are trying to deserialize '
                                        'plain JSON data, set schemas.enable=false in your converter configuration.'))
                   .when(bad_schema, F.concat(F.lit("record schema differs from the frame's bound schema: "),
                                              schema_json))
                   .when(bad_payload, F.concat(F.lit(f"JSON value does not match {self.data_type.simpleString()}: "),
                                               F.to_json(payload))))
        for cond, msg in required:
            message = message.when(cond, F.lit(msg))
        if _has_metadata(self.data_type):   # nested fields' schema metadata, for the steps after
            typed = typed.cast(self.data_type)
        # {"schema": {…}, "payload": null}: SchemaAndValue(schema, null), written back as it came
        typed_null = converted & ~failed & typed.isNull() if self.schemas_enable else None
        return Converted(F.when(~failed, typed), failed, message, misfit, stages, typed_null)

    # -- typed -> bytes ---------------------------------------------------------------------------
    def from_column(self, typed, data_type, metadata: dict | None = None, typed_null: Column | None = None):
        """``metadata``: the value's StructField metadata (its top-level schema; see
        :mod:`connect.connect_types`). As ``fromConnectData``, null bytes only for a null without a
        schema; a null with one (``typed_null``) is ``convertToJson``'s: the schema's default under
        ``replace.null.with.default``, else JSON ``null`` if the schema is optional, else a
        DataException."""
        if isinstance(data_type, VariantType):
            if self.schemas_enable:
                raise DataError("a VARIANT value has no Connect schema to write in an envelope; "
                                "set schemas.enable=false or cast the value to a struct")
            payload = F.to_json(typed)
        else:
            if isinstance(data_type, MapType) and not isinstance(data_type.keyType, StringType):
                raise DataError(f"cannot write {data_type.simpleString()} as JSON: only string map keys")
            payload = _json_literal(to_wire(typed, data_type, self.numeric), wire_type(data_type, self.numeric))
        if self.schemas_enable:
            schema = schema_json(spark_to_connect(data_type, metadata))
            text = F.concat(F.lit('{"schema":' + schema + ',"payload":'), payload, F.lit("}"))
        else:
            text = payload
        value = F.when(typed.isNotNull(), F.encode(text, "UTF-8"))
        if typed_null is None or isinstance(data_type, VariantType):   # a VARIANT is schemaless
            return Converted(value, F.lit(False), F.lit(None).cast("string"))
        meta = metadata or {}
        default = meta.get(DEFAULT) if self.replace_null_with_default else None
        null_payload = "null" if default is None else default
        null_text = '{"schema":' + schema + ',"payload":' + null_payload + '}' if self.schemas_enable else null_payload
        required = meta.get(OPTIONAL) is False and default is None
        typed_null = F.coalesce(typed_null, F.lit(False)) & typed.isNull()
        value = value.when(typed_null & F.lit(not required), F.encode(F.lit(null_text), "UTF-8"))
        return Converted(value, typed_null & F.lit(required), F.lit(
            "Conversion error: null value for field that is required and has no default value"))
