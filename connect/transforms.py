"""Kafka Connect's built-in transforms (SMTs) as Spark column expressions, under Kafka's class
names and config names, plus :func:`chain` that runs a connector's ``transforms`` list with
``transforms.<alias>.predicate`` and ``negate``.

Differences from Kafka, all because a Spark column has one type where a Kafka record carries its
own schema: field transforms need a struct value (a map works where noted); a transform that
changes a column's type can be gated by a predicate only when both branches can be made one type
(structs are widened, see :func:`connect.transform_base.gated`); schema-level problems (a missing
field, a struct where a number is needed) fail when the query is planned, not per record, since
every record of the frame has that schema. Rows a transform cannot handle (a string that does not
parse, a record with no timestamp) are flagged in the frame's error column. ``replace.null.with.default``
is accepted everywhere and has no effect but on :class:`SetSchemaMetadata` (the converter fills a
schema's defaults when it reads a record). Header values are written as SimpleHeaderConverter writes
them (:func:`connect.headers.header_string`).
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from connect import record_frame
from connect.cast import Cast
from connect.converters import default_value
from connect.errors import ConfigError, DataError
from connect.field_transforms import ExtractField, Flatten, HoistField, InsertField, MaskField, ReplaceField, ValueToKey
from connect.headers import header_bytes, header_string, literal_header  # noqa: F401 (header_string: public here too)
from connect.timestamp_converter import TimestampConverter
from connect.transform_base import (OPTIONAL, REQUIRED, Plan, Setting, Transformation, execute, has_schema,
                                    non_empty_list, one_of, parse_list, rebuild, require_struct, schema_basics,
                                    tombstones_fail, valid_regex, with_metadata, with_target)
from connect import timestamp_formats

P = "org.apache.kafka.connect.transforms."
RNWD = Setting("replace.null.with.default", "boolean", True, doc="accepted; Spark types have no defaults")


class RegexRouter(Transformation):
    """Topic renamed when it matches ``regex`` as a whole, with Java's ``$1`` replacement syntax
    (Spark's ``regexp_replace`` is Java's regex engine, so patterns mean the same). As Kafka's
    ``matcher.matches()`` then ``replaceFirst``: the replaced text is the *first* match found from the
    start, which may be shorter than the whole topic (``a|ab`` on ``ab`` gives ``Xb``); the rest of
    the topic is kept."""
    class_name = P + "RegexRouter"
    SETTINGS = [Setting("regex", default=REQUIRED, validator=valid_regex), Setting("replacement", default=REQUIRED)]

    def plan(self, frame):
        pattern = "^(?:" + self.values["regex"] + ")\\z"
        topic = F.col("topic")
        first = "^(?:" + self.values["regex"] + ")"   # a match at 0 exists; ^ admits only that one
        return Plan({"topic": F.when(topic.rlike(pattern),
                                     F.regexp_replace(topic, first, self.values["replacement"])).otherwise(topic)})


class TimestampRouter(Transformation):
    """Topic from ``topic.format`` with ``${topic}`` and ``${timestamp}`` (the record time in UTC in
    ``timestamp.format``, a SimpleDateFormat pattern). A record without a timestamp is flagged."""
    class_name = P + "TimestampRouter"
    SETTINGS = [Setting("topic.format", default="${topic}-${timestamp}"),
                Setting("timestamp.format", default="yyyyMMdd", validator=timestamp_formats.check)]

    def plan(self, frame):
        pattern = self.values["timestamp.format"]
        parts, text = [], self.values["topic.format"]
        for i, piece in enumerate(text.split("${topic}")):
            if i:
                parts.append(F.col("topic"))
            for j, sub in enumerate(piece.split("${timestamp}")):
                if j:
                    parts.append(timestamp_formats.format_utc(F.col("timestamp"), pattern))
                if sub:
                    parts.append(F.lit(sub))
        missing = F.col("timestamp").isNull()
        return Plan({"topic": F.when(~missing, F.concat(*parts)).otherwise(F.col("topic"))}, failed=missing,
                    message=F.concat(F.lit("Timestamp missing on record: "), F.col("topic")))


class Filter(Transformation):
    """Drops every record it is applied to: meant to be used with a predicate."""
    class_name = P + "Filter"

    def plan(self, frame):
        return Plan(keep=F.lit(False))


class InsertHeader(Transformation):
    """Adds header ``header`` with ``value.literal`` as Kafka stores it: ``Values.parseString`` gives
    it a schema and value, and SimpleHeaderConverter writes that back with ``Values.convertToString``
    (``1.50`` → ``1.5``, ``007`` → ``7``, ``[1, 2]`` → ``[1,2]``, ``null`` → a null header)."""
    class_name = P + "InsertHeader"
    SETTINGS = [Setting("header", default=REQUIRED), Setting("value.literal", default=REQUIRED)]

    def plan(self, frame):
        text = literal_header(self.values["value.literal"])
        header = F.struct(F.lit(self.values["header"]).alias("key"),
                          F.encode(F.lit(text).cast("string"), "UTF-8").alias("value"))
        return Plan({"headers": F.concat(F.coalesce(F.col("headers"), F.array().cast(record_frame.HEADERS_TYPE)),
                                         F.array(header))})


class DropHeaders(Transformation):
    """Removes every header whose key is in ``headers``."""
    class_name = P + "DropHeaders"
    SETTINGS = [Setting("headers", "list", REQUIRED, non_empty_list)]

    def plan(self, frame):
        names = F.array(*[F.lit(h) for h in self.values["headers"]])
        return Plan({"headers": F.filter(F.col("headers"), lambda h: ~F.array_contains(names, h["key"]))})


class HeaderFrom(Transformation):
    """Copies (``operation=copy``) or moves (``move``) key/value fields into headers, pairing
    ``fields`` with ``headers`` in order, written as :func:`header_string`. A field the value lacks
    gives a null header on a schemaless value (``applySchemaless`` reads a map) and fails when the
    query is planned on a value with a Connect schema (``applyWithSchema`` cannot find its schema).
    ``move`` keeps the other fields' schemas and the value's name, version, doc and parameters."""
    class_name = P + "HeaderFrom"
    SETTINGS = [Setting("fields", "list", REQUIRED, non_empty_list), Setting("headers", "list", REQUIRED, non_empty_list),
                Setting("operation", default=REQUIRED, validator=one_of("move", "copy")), RNWD]

    def validate(self, values):
        if len(values["fields"]) != len(values["headers"]):
            return {"headers": ["'fields' config must have the same number of elements as 'headers' config."]}
        return {}

    def plan(self, frame):
        t = require_struct(frame, self.target, "header " + self.values["operation"])
        col = F.col(self.target)
        missing = [f for f in self.values["fields"] if f not in t.names]
        if missing and has_schema(frame, self.target):
            raise DataError(f"HeaderFrom: field(s) {missing} not in {self.target} {t.simpleString()}")
        def value(f):
            return F.lit(None).cast("binary") if f in missing else header_bytes(col.getField(f), t[f].dataType,
                                                                                t[f].metadata)
        new = [F.struct(F.lit(h).alias("key"), value(f).alias("value"))
               for f, h in zip(self.values["fields"], self.values["headers"])]
        headers = F.concat(F.coalesce(F.col("headers"), F.array().cast(record_frame.HEADERS_TYPE)),
                           F.when(col.isNotNull(), F.array(*new)).otherwise(F.array().cast(record_frame.HEADERS_TYPE)))
        out = {"headers": headers}
        if self.values["operation"] == "move":
            kept = [(f.name, col.getField(f.name)) for f in t.fields if f.name not in self.values["fields"]]
            out[self.target] = with_metadata(rebuild(col, kept, t), self.target,   # moveSchema: copySchemaBasics
                                             schema_basics(frame, self.target, OPTIONAL))
        return Plan(out, **tombstones_fail(frame, self.target, "header " + self.values["operation"]))


class SetSchemaMetadata(Transformation):
    """Sets the key's or value's Connect schema name (``schema.name``) and/or version
    (``schema.version``), kept as the column's ``connect.name`` / ``connect.version`` metadata,
    which the JsonConverter writes in the envelope's schema (see :mod:`connect.connect_types`).
    As Kafka's ``requireSchema``, a record without a schema fails ("Schema required for
    [updating schema metadata]") unless it is null; with ``replace.null.with.default`` (true) a
    null top-level field reads as its schema's default, as Kafka's rebuilt ``Struct.get`` does.
    A Spark column's metadata is one for all its rows, so it cannot be gated by a predicate.

    >>> SetSchemaMetadata({"schema.name": "com.example.Order", "schema.version": "2"})  # doctest: +SKIP
    """
    class_name = P + "SetSchemaMetadata"
    gateable = False
    SETTINGS = [Setting("schema.name", default=None, doc="Schema name to set."),
                Setting("schema.version", "int", None, doc="Schema version to set."), RNWD]

    def validate(self, values):
        if values["schema.name"] is None and values["schema.version"] is None:
            return {"schema.name": ["Neither schema name nor version configured"]}
        return {}

    def plan(self, frame):
        from connect.connect_types import NAME, VERSION
        field, col = frame.schema[self.target], F.col(self.target)
        if not has_schema(frame, self.target):
            return Plan(failed=col.isNotNull(), message=F.lit("Schema required for [updating schema metadata]"))
        meta = dict(field.metadata)
        if self.values["schema.name"] is not None:
            meta[NAME] = self.values["schema.name"]
        if self.values["schema.version"] is not None:
            meta[VERSION] = self.values["schema.version"]
        out = col
        t = field.dataType
        if self.values["replace.null.with.default"] and isinstance(t, StructType) and \
                any(f.metadata.get("connect.default") is not None for f in t.fields):
            def field(f):
                c, default = col.getField(f.name), f.metadata.get("connect.default")
                c = c if default is None else F.coalesce(c, default_value(default, f.dataType, f.metadata))
                return c.alias(f.name, metadata=f.metadata)
            out = F.when(col.isNotNull(), F.struct(*[field(f) for f in t.fields])).cast(t)
        return Plan({self.target: out.alias(self.target, metadata=meta)})


# ------------------------------------------------------------------ registry, chain
def _variants(cls):
    return {f"{cls.class_name}$Key": with_target(cls, "key", "Key"),
            f"{cls.class_name}$Value": with_target(cls, "value", "Value")}


TRANSFORMS: dict[str, type[Transformation]] = {}
for _cls in (InsertField, ReplaceField, MaskField, Cast, TimestampConverter, ExtractField, HoistField, Flatten,
             HeaderFrom, SetSchemaMetadata):
    TRANSFORMS.update(_variants(_cls))
for _cls in (ValueToKey, RegexRouter, TimestampRouter, Filter, InsertHeader, DropHeaders):
    TRANSFORMS[_cls.class_name] = _cls


def _debezium():
    from connect.debezium import ExtractNewRecordState
    return {ExtractNewRecordState.class_name: ExtractNewRecordState}


TRANSFORMS.update(_debezium())


def transform(class_name: str, config: dict | None = None) -> Transformation:
    """A transform by Kafka's class name."""
    try:
        cls = TRANSFORMS[class_name]
    except KeyError:
        raise ConfigError(f"unknown transformation class {class_name!r}",
                          errors={"type": [f"Class {class_name} could not be found."]}) from None
    return cls(config)


@dataclass(frozen=True)
class Step:
    """One entry of a connector's ``transforms``: the transform, its predicate and ``negate``."""
    alias: str
    transform: Transformation
    predicate: object = None
    negate: bool = False


def chain(frame: DataFrame, steps: list[Step]) -> DataFrame:
    """Apply ``steps`` in order. A step with a predicate changes only the rows where the predicate
    (negated with ``negate``) holds; ``Filter`` with a predicate drops only those rows. Each step's
    failures are flagged under stage ``transforms.<alias>``."""
    for step in steps:
        gate = None
        if step.predicate is not None:
            if not step.transform.gateable:
                raise DataError(f"transforms.{step.alias}: {step.transform.class_name} changes the schema of "
                                "every record of the column and cannot be gated by a predicate")
            gate = F.coalesce(step.predicate.condition(frame), F.lit(False))
            if step.negate:
                gate = ~gate
        frame = execute(frame, step.transform.plan(frame), f"transforms.{step.alias}",
                        step.transform.class_name, gate)
    return frame


def from_connector_config(config: dict) -> list[Step]:
    """The steps a connector config names (``transforms``, ``transforms.<alias>.type``/``.predicate``/
    ``.negate``, ``predicates``, ``predicates.<alias>.type`` …); every problem is listed in one
    ConfigError under the connector config's key."""
    from connect.predicates import predicate as make_predicate
    errors: dict[str, list[str]] = {}
    preds = {}
    for alias in parse_list(config.get("predicates")):
        prefix = f"predicates.{alias}."
        sub = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
        try:
            preds[alias] = make_predicate(sub.get("type", ""), sub)
        except ConfigError as e:
            for k, v in e.details.get("errors", {}).items():
                errors.setdefault(prefix + k, []).extend(v)
    steps = []
    for alias in parse_list(config.get("transforms")):
        prefix = f"transforms.{alias}."
        sub = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
        pred_alias, negate = sub.get("predicate"), str(sub.get("negate", "false")).lower()
        if negate not in ("true", "false"):
            errors.setdefault(prefix + "negate", []).append(f"Invalid value {sub['negate']}: expected true or false")
        if pred_alias and pred_alias not in preds and f"predicates.{pred_alias}.type" not in config:
            errors.setdefault(prefix + "predicate", []).append(f"Predicate alias {pred_alias!r} is not in 'predicates'")
        if "type" not in sub:
            errors.setdefault(prefix + "type", []).append("Missing required configuration \"type\"")
            continue
        try:
            t = transform(sub["type"], sub)
        except ConfigError as e:
            for k, v in e.details.get("errors", {}).items():
                errors.setdefault(prefix + k, []).extend(v)
            continue
        steps.append(Step(alias, t, preds.get(pred_alias), negate == "true"))
    if errors:
        raise ConfigError("invalid transforms config: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()),
                          errors=errors)
    return steps
