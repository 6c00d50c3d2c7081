"""Kafka's transforms that rewrite the fields of a key or value: InsertField, ReplaceField,
MaskField, ExtractField (with KIP-821's field paths), HoistField, Flatten, ValueToKey. Each is the
base class; the ``$Key``/``$Value`` variants are made in :mod:`connect.transforms`. A null value
(tombstone) stays null, except where Kafka does otherwise (HoistField wraps it; ValueToKey fails the
record). Cast is in :mod:`connect.cast`, TimestampConverter in :mod:`connect.timestamp_converter`.
"""
from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BooleanType, ByteType, DateType, DecimalType, DoubleType, FloatType,
                               IntegerType, LongType, MapType, ShortType, StringType, StructField, StructType,
                               TimestampNTZType, TimestampType)

from connect.errors import DataError
from connect.transform_base import (OPTIONAL, REQUIRED, TIME, Plan, Setting, Transformation, connect_name,
                                    has_schema, non_empty_list, non_empty_string, null_with_schema, one_of, rebuild,
                                    require_struct, require_struct_or_map, schema_basics, tombstones_fail,
                                    with_metadata)


P = "org.apache.kafka.connect.transforms."
RNWD = Setting("replace.null.with.default", "boolean", True, doc="accepted; Spark types have no defaults")


def _or(conditions):
    out = F.lit(False)
    for c in conditions:
        out = out | F.coalesce(c, F.lit(False))
    return out


def _first_message(pairs):
    out = None
    for failed, message in pairs:
        out = F.when(F.coalesce(failed, F.lit(False)), message) if out is None else out.when(
            F.coalesce(failed, F.lit(False)), message)
    return out if out is not None else F.lit(None).cast("string")


class InsertField(Transformation):
    """Adds the record's topic, partition, offset, timestamp and/or a static string to a struct,
    after its fields and in that order. The timestamp is a Timestamp on a value with a schema and
    epoch milliseconds (a long) on a schemaless one, as Kafka puts ``record.timestamp()`` into the
    map. On a value with a schema, a ``!`` suffix makes the added
    field required in the schema the converter writes (no suffix or ``?``: optional), and the
    struct keeps its schema's name, version, doc and parameters (``SchemaUtil.copySchemaBasics``).
    ``offset.field`` fails a source record (its offset is null), as Kafka's ``requireSinkRecord``."""
    class_name = P + "InsertField"
    SETTINGS = [Setting(n) for n in ("topic.field", "partition.field", "offset.field", "timestamp.field",
                                     "static.field", "static.value")] + [RNWD]

    def validate(self, v):
        if not any(v.get(n) for n in ("topic.field", "partition.field", "offset.field", "timestamp.field",
                                      "static.field")):
            return {"topic.field": ["No field insertion configured"]}
        if v.get("static.field") and v.get("static.value") is None:
            return {"static.value": [f"No value specified for static field: {v['static.field']}"]}
        return {}

    def plan(self, frame):
        t = require_struct(frame, self.target, "field insertion")
        col = F.col(self.target)
        schema = has_schema(frame, self.target)
        added = []
        # applySchemaless puts record.timestamp(), a Long of epoch ms; with a schema, a Timestamp
        timestamp = F.col("timestamp") if schema else F.unix_millis(F.col("timestamp"))
        for name, source in (("topic.field", F.col("topic")), ("partition.field", F.col("partition")),
                             ("offset.field", F.col("offset")), ("timestamp.field", timestamp),
                             ("static.field", F.lit(self.values.get("static.value")))):
            spec = self.values.get(name)
            if spec:   # InsertionSpec: one trailing "!" required, "?" or nothing optional
                meta = {OPTIONAL: spec[-1:] != "!"} if schema else None
                added.append((spec[:-1] if spec[-1:] in ("!", "?") else spec, source, meta))
        clash = [n for n, _, _ in added if n in t.names]
        if clash and schema:   # SchemaBuilder.field refuses a second field of a name
            return Plan(failed=col.isNotNull(), message=F.lit(
                f"Cannot create field because of field name duplication {clash[0]}"))
        new = {n: c for n, c, _ in added}   # schemaless: Map.put overwrites the field
        kept = [(f.name, new.pop(f.name) if f.name in new else col.getField(f.name)) for f in t.fields]
        value = rebuild(col, kept + [a for a in added if a[0] in new], t)
        plan = Plan({self.target: with_metadata(value, self.target, schema_basics(frame, self.target, OPTIONAL))})
        if self.values.get("offset.field"):   # a source record has no Kafka offset
            plan.failed = col.isNotNull() & F.col("offset").isNull()
            plan.message = F.lit("Only SinkRecord supported for [field insertion], found: "
                                 "org.apache.kafka.connect.source.SourceRecord")
        return plan


class ReplaceField(Transformation):
    """Keeps ``include`` (all when empty), drops ``exclude``, renames ``renames`` (``old:new``). Kept
    fields keep their schemas; the struct keeps its schema's name, version, doc and parameters."""
    class_name = P + "ReplaceField"
    SETTINGS = [Setting("exclude", "list", ""), Setting("include", "list", ""), Setting("renames", "list", ""), RNWD]

    def validate(self, v):
        bad = [m for m in v["renames"] if len(m.split(":")) != 2 or not all(m.split(":"))]
        return {"renames": [f"Invalid rename mapping: {m}" for m in bad]} if bad else {}

    def plan(self, frame):
        t = require_struct(frame, self.target, "field replacement")
        col = F.col(self.target)
        renames = dict(m.split(":") for m in self.values["renames"])
        inc, exc = self.values["include"], self.values["exclude"]
        kept = [f.name for f in t.fields if f.name not in exc and (not inc or f.name in inc)]
        names = [renames.get(n, n) for n in kept]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:   # Kafka's SchemaBuilder refuses a struct with a field twice
            raise DataError(f"ReplaceField: {self.target} would have field(s) {twice} twice: "
                            "rename or exclude the field that is already there")
        value = rebuild(col, [(new, col.getField(n), t[n].metadata) for new, n in zip(names, kept)])
        return Plan({self.target: with_metadata(value, self.target, schema_basics(frame, self.target, OPTIONAL))})


_NUMERIC = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)


class MaskField(Transformation):
    """Replaces ``fields`` with their type's empty value (0, false, "", epoch, empty array/map) or
    with ``replacement`` (numbers and strings only, as in Kafka: a Connect Time, a ``java.util.Date``
    there, fails its record). The value keeps its schema, fields included (``new Struct(value.schema())``)."""
    class_name = P + "MaskField"
    SETTINGS = [Setting("fields", "list", REQUIRED, non_empty_list),
                Setting("replacement", default=None, validator=non_empty_string), RNWD]

    def _mask(self, c, t, name, schema=True, metadata=None):
        r = self.values.get("replacement")
        if r is not None:
            if connect_name(metadata) == TIME:   # maskWithCustomReplacement has no mapping for a Date
                raise DataError(f"MaskField: cannot mask field {name!r} of type Time (java.util.Date) "
                                "with custom replacement")
            if isinstance(t, StringType):
                return F.lit(r)
            if isinstance(t, _NUMERIC):
                return F.lit(_replacement_number(r, t, name)).cast(t)
            raise DataError(f"MaskField: cannot mask field {name!r} of type {t.simpleString()} with custom replacement")
        if isinstance(t, _NUMERIC):
            return F.lit(0).cast(t)
        if isinstance(t, BooleanType):
            return F.lit(False)
        if isinstance(t, StringType):
            return F.lit("")
        if isinstance(t, TimestampType):
            return F.timestamp_millis(F.lit(0))
        if isinstance(t, TimestampNTZType):   # the epoch's wall clock, whatever the session time zone
            return F.lit("1970-01-01 00:00:00").cast(t)
        if isinstance(t, DateType):
            return F.lit("1970-01-01").cast("date")
        if isinstance(t, (ArrayType, MapType)):
            return F.array().cast(t) if isinstance(t, ArrayType) else F.create_map().cast(t)
        if isinstance(t, StructType) and not schema:   # a schemaless nested object is a Map: masked to {}
            return F.create_map().cast("map<string,string>")
        raise DataError(f"MaskField: cannot mask field {name!r} of type {t.simpleString()}")

    def plan(self, frame):
        t = require_struct(frame, self.target, "mask fields")
        col = F.col(self.target)
        schema = has_schema(frame, self.target)
        missing = [f for f in self.values["fields"] if f not in t.names]
        if missing and schema:   # Struct.get of a field the schema lacks
            return Plan(failed=F.lit(True), message=F.lit(f"{missing[0]} is not a valid field name"))
        fields, fails = [], []
        for f in t.fields:
            c = col.getField(f.name)
            if f.name in self.values["fields"]:
                try:
                    c = F.when(c.isNotNull(), self._mask(c, f.dataType, f.name, schema, f.metadata))
                except DataError as e:   # Kafka's maskWithNullValue/maskWithCustomReplacement throw per record
                    fails.append((c.isNotNull(), F.lit(str(e))))
            fields.append((f.name, c, f.metadata))
        # schemaless: Map.get of an absent field is null, and masking null gives null
        fields += [(n, F.lit(None).cast("string")) for n in missing]
        tomb = tombstones_fail(frame, self.target, "mask fields")
        failed = tomb["failed"] | _or(f for f, _ in fails)
        message = F.when(tomb["failed"], tomb["message"]).otherwise(_first_message(fails))
        value = with_metadata(rebuild(col, fields), self.target, dict(frame.schema[self.target].metadata))
        return Plan({self.target: value}, failed=failed, message=message)


def _replacement_number(r: str, t, name: str):
    """Kafka's ``Values.convertTo<Type>`` of the replacement text: ``new BigDecimal(r)``, then
    ``longValue()`` narrowed with wrap-around for an integer field (``1e3`` → 1000, ``1.5`` → 1,
    ``300`` on an int8 → 44)."""
    from decimal import Decimal, InvalidOperation
    try:
        d = Decimal(r)
    except InvalidOperation:
        d = None
    if d is None or not d.is_finite():
        raise DataError(f"MaskField: unable to convert {r} to number for field {name!r}")
    if isinstance(t, (FloatType, DoubleType)):
        return float(d)
    if isinstance(t, DecimalType):
        return str(d)
    bits = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}[type(t)]
    low = int(d) % (1 << bits)
    return low - (1 << bits) if low >= 1 << (bits - 1) else low


def field_path(path: str, version: str) -> list[str]:
    """KIP-821: V1 is one top-level name. V2 splits on dots; a step that starts with a backtick
    runs to the next backtick followed by a dot (or ending the path), so it may hold dots and other
    backticks; ``\\``` before such a closing backtick keeps it in the name. A trailing dot adds an
    empty step. An unclosed backtick raises :class:`ValueError`, as Kafka refuses the config."""
    if version == "V1":
        return [path]
    steps, i, n = [], 0, len(path)
    while i < n:
        if path[i] != "`":
            dot = path.find(".", i)
            steps.append(path[i:] if dot < 0 else path[i:dot])
            i = n if dot < 0 else dot + 1
            continue
        opened, i, name, start = i, i + 1, "", i + 1
        while True:
            close = path.find("`", i)
            if close < 0 or (close == n - 1 and path[close - 1] == "\\" and close - 1 >= start):
                raise ValueError(f"Incomplete backtick pair in path: [{path}], consider adding a backslash "
                                 f"before backtick at position {opened} to escape it")
            if close == n - 1:                       # the last character closes the step
                steps.append(name + path[start:close])
                i = n
                break
            if path[close + 1] != ".":               # a backtick inside the name
                i = close + 1
                continue
            if path[close - 1] == "\\" and close - 1 >= start:   # escaped: the name goes on
                name += path[start:close - 1] + "`"
                i = start = close + 1
                continue
            steps.append(name + path[start:close])
            i = close + 2
            break
    if path.endswith("."):
        steps.append("")
    return steps


class ExtractField(Transformation):
    """Replaces the key/value with one of its fields (a nested one with ``field.syntax.version=V2``);
    a map value is looked up by key. The field keeps its schema (metadata) on the new column, and a
    null field of a record with a schema is a null with that schema, not a tombstone (Kafka's
    ``newRecord(record, field.schema(), null)``): the JsonConverter writes it."""
    class_name = P + "ExtractField"
    SETTINGS = [Setting("field", default=REQUIRED), Setting("field.syntax.version", default="V1",
                                                            validator=one_of("V1", "V2", case=False)), RNWD]

    def validate(self, v):
        try:
            field_path(v["field"] or "", str(v["field.syntax.version"]).upper())
        except ValueError as e:
            return {"field": [str(e)]}
        return {}

    def plan(self, frame):
        t = require_struct_or_map(frame, self.target, "field extraction")
        out = F.col(self.target)
        path = field_path(self.values["field"], self.values["field.syntax.version"].upper())
        meta = None
        for name in path:
            if isinstance(t, MapType):
                out, t, meta = out.getItem(name), t.valueType, None
            elif isinstance(t, StructType) and name in t.names:
                out, t, meta = out.getField(name), t[name].dataType, t[name].metadata
            elif has_schema(frame, self.target):   # schema.field(name) is null: every record fails
                return Plan({self.target: F.lit(None).cast("string")}, failed=F.lit(True),
                            message=F.lit(f"Unknown field: {self.values['field']}"))
            else:   # schemaless: Map.get of an absent key is null
                return Plan({self.target: F.lit(None).cast("string")})
        columns = {self.target: out.alias(self.target, metadata=meta) if meta else out}
        if has_schema(frame, self.target):   # a null field is a null with the field's schema, no tombstone
            columns.update(null_with_schema(frame, self.target, out))
        return Plan(columns)


class HoistField(Transformation):
    """Wraps the key/value in a struct with one field ``field`` (a null is wrapped too, as Kafka does).
    The field has the key's/value's schema; the struct is a new, unnamed, required one."""
    class_name = P + "HoistField"
    SETTINGS = [Setting("field", default=REQUIRED)]

    def plan(self, frame):
        value = F.struct(F.col(self.target).alias(self.values["field"]))
        required = {OPTIONAL: False} if has_schema(frame, self.target) else None
        return Plan({self.target: with_metadata(value, self.target, required)})


class Flatten(Transformation):
    """Nested structs become top-level fields named by their path joined with ``delimiter``; arrays
    are kept as they are. A map field fails every record, as Kafka's ``buildUpdatedSchema`` throws
    for MAP with schemas (a schemaless nested object is a struct here, and is flattened). As
    ``buildUpdatedSchema``, a field under an optional struct (or an optional value) becomes optional,
    and the value keeps its schema's name, version, doc, parameters and optionality."""
    class_name = P + "Flatten"
    SETTINGS = [Setting("delimiter", default=".")]

    def _leaves(self, c, t, prefix, optional):
        for f in t.fields:
            name = prefix + f.name
            if isinstance(f.dataType, StructType):
                yield from self._leaves(c.getField(f.name), f.dataType, name + self.values["delimiter"],
                                        optional or f.metadata.get(OPTIONAL) is True)
            elif optional and f.metadata.get(OPTIONAL) is False:   # null whenever a parent is
                yield name, c.getField(f.name), StructField(f.name, f.dataType, True, {**f.metadata, OPTIONAL: True})
            else:
                yield name, c.getField(f.name), f

    def plan(self, frame):
        t = require_struct(frame, self.target, "flattening")
        col = F.col(self.target)
        fields = list(self._leaves(col, t, "", frame.schema[self.target].metadata.get(OPTIONAL) is True))
        names = [n for n, _, _ in fields]
        maps = [n for n, _, f in fields if isinstance(f.dataType, MapType)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise DataError(f"Flatten: flattened field names collide: {dup}")
        if maps:   # Kafka's buildUpdatedSchema throws for a MAP field, so every record fails
            return Plan(failed=F.lit(True), message=F.lit(
                f"Flatten transformation does not support MAP for record with schemas (for field {maps[0]})."))
        value = rebuild(col, [(n, c, f.metadata) for n, c, f in fields])
        return Plan({self.target: with_metadata(value, self.target, schema_basics(frame, self.target, OPTIONAL))})


class ValueToKey(Transformation):
    """Replaces the key with a struct of the value's ``fields`` (with their schemas). A tombstone
    has no fields to copy: it is flagged, as Kafka fails it."""
    class_name = P + "ValueToKey"
    SETTINGS = [Setting("fields", "list", REQUIRED, non_empty_list), RNWD]

    def plan(self, frame):
        t = require_struct(frame, "value", "copying fields from value to key")
        missing = [f for f in self.values["fields"] if f not in t.names]
        v = F.col("value")
        if missing and has_schema(frame, "value"):   # valueSchema.field(name) is null: every record fails
            return Plan(failed=F.lit(True), message=F.lit(f"Field does not exist: {missing[0]}"))
        key = rebuild(v, [(f, v.getField(f), t[f].metadata) if f in t.names else (f, F.lit(None).cast("string"))
                          for f in self.values["fields"]])   # schemaless: Map.get of an absent field is null
        if has_schema(frame, "value"):   # SchemaBuilder.struct(): a new, unnamed, required key schema
            key = with_metadata(key, "key", {OPTIONAL: False})
        return Plan({"key": key}, **tombstones_fail(frame, "value", "copying fields from value to key"))
