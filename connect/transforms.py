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
them (:func:`header_string`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (BinaryType, BooleanType, ByteType, DateType, DecimalType, DoubleType, FloatType,
                               IntegerType, LongType, MapType, ShortType, StringType, StructType, TimestampNTZType,
                               TimestampType)

from connect import record_frame
from connect.errors import ConfigError, DataError
from connect.field_transforms import (Cast, ExtractField, Flatten, HoistField, InsertField, MaskField, ReplaceField,
                                      TimestampConverter, ValueToKey, base64_string, decimal_string, kafka_date_string)
from connect.transform_base import (REQUIRED, TIME, Plan, Setting, Transformation, connect_name, execute, has_schema,
                                    non_empty_list, one_of, parse_list, require_struct, tombstones_fail, valid_regex,
                                    with_target)
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


def header_bytes(c, t, metadata: dict | None = None):
    """A value as header bytes, as SimpleHeaderConverter writes it: UTF-8 of
    :func:`header_string`; a null value is a null header."""
    return F.encode(header_string(c, t, metadata), "UTF-8")


def header_string(c, t, metadata: dict | None = None, embedded: bool = False):
    """Kafka's ``Values.convertToString`` (``Values.append``) of a value of Spark type ``t``
    (``metadata``: its StructField's, which marks a Connect Time). A string is itself, bytes are
    base64 on one line, a number is Java's ``toString`` (``1.0E10``, a Decimal ``1E-7``), a
    Timestamp, Date or Time is written by ``Values.dateFormatFor`` (by its instant, in UTC: a Date
    is ``2017-07-14``, a Time ``01:00:00.000Z``). A struct, map or array is ``{"a":1,"b":[…]}``:
    inside it strings and bytes are quoted with only ``\\`` and ``"`` escaped (a newline stays raw),
    temporal values are not quoted, null is ``null``. Top-level null stays null (no header value);
    a map keeps the order its entries were read in (Kafka's converter reads a JSON object into a
    ``HashMap``)."""
    if isinstance(t, (StructType, MapType)) or t.typeName() == "array":
        if isinstance(t, StructType):
            parts = []
            for i, f in enumerate(t.fields):
                parts += [F.lit(("," if i else "") + _quoted(f.name) + ":"),
                          header_string(c.getField(f.name), f.dataType, f.metadata, True)]
            body = F.concat(*parts) if parts else F.lit("")
        elif isinstance(t, MapType):
            body = F.array_join(F.transform(F.map_entries(c), lambda e: F.concat(
                header_string(e["key"], t.keyType, None, True), F.lit(":"),
                header_string(e["value"], t.valueType, None, True))), ",")
        else:
            body = F.array_join(F.transform(c, lambda x: header_string(x, t.elementType, None, True)), ",")
        open_, close = ("[", "]") if t.typeName() == "array" else ("{", "}")
        out = F.when(c.isNotNull(), F.concat(F.lit(open_), body, F.lit(close)))
    elif isinstance(t, (StringType, BinaryType)):
        out = c if isinstance(t, StringType) else base64_string(c)
        if embedded:
            out = F.concat(F.lit('"'), F.regexp_replace(F.regexp_replace(out, r"\\", r"\\\\"), '"', r'\\"'),
                           F.lit('"'))
    elif isinstance(t, (TimestampType, TimestampNTZType)):
        out = kafka_date_string(c.cast("timestamp"))
    elif isinstance(t, DateType):
        out = kafka_date_string(F.timestamp_millis(F.unix_date(c).cast("long") * 86_400_000))
    elif isinstance(t, IntegerType) and connect_name(metadata) == TIME:
        out = kafka_date_string(F.timestamp_millis(c.cast("long")))
    elif isinstance(t, DecimalType):
        out = decimal_string(c, t)
    else:   # integers, Float/Double.toString (Spark writes them as Java does), booleans
        out = c.cast("string")
    return F.coalesce(out, F.lit("null")) if embedded else out


def _quoted(name: str) -> str:
    """A struct field's name as ``Values.append`` writes it embedded: quoted, ``\\`` and ``"`` escaped."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


class HeaderFrom(Transformation):
    """Copies (``operation=copy``) or moves (``move``) key/value fields into headers, pairing
    ``fields`` with ``headers`` in order, written as :func:`header_string`. A field the value lacks
    gives a null header on a schemaless value (``applySchemaless`` reads a map) and fails when the
    query is planned on a value with a Connect schema (``applyWithSchema`` cannot find its schema)."""
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
            kept = [f for f in t.fields if f.name not in self.values["fields"]]
            out[self.target] = F.when(col.isNotNull(), F.struct(*[col.getField(f.name).alias(f.name) for f in kept]))
        return Plan(out, **tombstones_fail(self.target, "header " + self.values["operation"]))


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
            from connect.converters import _literal   # a schema's default (JSON text) as a Spark value
            def field(f):
                c, default = col.getField(f.name), f.metadata.get("connect.default")
                c = c if default is None else F.coalesce(c, _literal(default, f.dataType, f.metadata))
                return c.alias(f.name, metadata=f.metadata)
            out = F.when(col.isNotNull(), F.struct(*[field(f) for f in t.fields])).cast(t)
        return Plan({self.target: out.alias(self.target, metadata=meta)})


# ------------------------------------------------------------------ Values.parseString for InsertHeader
_DELIMS = set(':,{}[]"')


def _tokens(text: str) -> list[str]:
    """Values.Parser's tokens: runs between unescaped ``: , { } [ ] "``, and those delimiters."""
    out, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if ch == "\\":
            escaped = not escaped
            continue
        if ch in _DELIMS and not escaped:
            if start < i:
                out.append(text[start:i])
            out.append(ch)
            start = i + 1
        escaped = False
    if start < len(text):
        out.append(text[start:])
    return out


def _java_float(x: float, single: bool) -> str:
    """Java's ``Float.toString``/``Double.toString``: the shortest digits, ``1.0E10`` style outside
    [1e-3, 1e7)."""
    import numpy as np
    v = np.float32(x) if single else np.float64(x)
    digits, exp = np.format_float_scientific(v, trim="-", unique=True).split("e")
    exp = int(exp)
    if 1e-3 <= abs(float(v)) < 1e7:
        plain = np.format_float_positional(v, trim="0", unique=True)
        return plain if "." in plain else plain + ".0"
    return (digits if "." in digits else digits + ".0") + f"E{exp}"


class _Unparsed(Exception):
    pass


def _number(token: str):
    """ValueParser.parseAsNumber's (type, text): int8…int64 if exact, else float32/float64 when the
    scale is not 0, else a Decimal."""
    from decimal import Decimal, InvalidOperation
    try:
        d = Decimal(token)
    except InvalidOperation:
        raise _Unparsed from None
    if not d.is_finite() or not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", token):
        raise _Unparsed
    if d == d.to_integral_value() and -(1 << 63) <= int(d) < (1 << 63):
        return "int", str(int(d))
    import numpy as np
    scale = -d.as_tuple().exponent
    with np.errstate(over="ignore"):
        if scale != 0 and np.isfinite(np.float32(float(d))):
            return "float", _java_float(float(d), True)
        if scale != 0 and np.isfinite(float(d)):
            return "double", _java_float(float(d), False)
    return "decimal", _big_decimal_string(d)


def _big_decimal_string(d) -> str:
    """``BigDecimal.toString()``: plain unless the adjusted exponent is below -6 or the scale negative."""
    sign, digits, exp = d.as_tuple()
    coeff = "".join(map(str, digits)) or "0"
    adjusted = len(coeff) - 1 + exp
    if exp <= 0 and adjusted >= -6:
        return str(d)
    mantissa = coeff[0] + ("." + coeff[1:] if len(coeff) > 1 else "")
    return ("-" if sign else "") + mantissa + "E" + (f"+{adjusted}" if adjusted > 0 else str(adjusted))


_TEMPORAL = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}\.\d{3}Z)?|\d{2}:\d{2}:\d{2}\.\d{3}Z")


class _ValueParser:
    """Values.ValueParser over a token list; values come back already written as
    ``Values.convertToString`` writes them (``embedded``: inside an array or map, strings quoted)."""

    def __init__(self, text):
        self.text, self.toks, self.i = text, _tokens(text), 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def consume(self, tok):
        """Parser.canConsume: blank tokens before the next one are skipped for good."""
        while self.peek() is not None and not self.peek().strip() and self.i + 1 < len(self.toks):
            self.i += 1
        if self.peek() is not None and self.peek().strip() == tok:
            self.i += 1
            return True
        return False

    def parse(self, embedded):
        if self.peek() is None:
            return None
        if embedded and self.consume('"'):
            parts = []
            while self.peek() is not None and not self.consume('"'):
                parts.append(self.toks[self.i])
                self.i += 1
            content = "".join(parts)
            return '"' + content.replace("\\", "\\\\").replace('"', '\\"') + '"' if not _TEMPORAL.fullmatch(content) \
                else content
        for literal in ("null", "true", "false"):
            mark = self.i
            if self.consume(literal) and (embedded or self.peek() is None):
                return None if literal == "null" else literal
            self.i = mark
        mark = self.i
        try:
            if self.consume("["):
                return self.collection("]", lambda: self.parse(True))
            if self.consume("{"):
                return self.collection("}", self.entry)
        except _Unparsed:
            self.i = mark
        token = self.toks[self.i]
        self.i += 1
        if not token.strip():
            return token
        token = token.strip()
        if token[0].isdigit():   # a time or timestamp spans ':' tokens: try five tokens, then one
            five = token + "".join(self.toks[self.i:self.i + 4])
            if self.i + 4 <= len(self.toks) and _TEMPORAL.fullmatch(five.replace("\\:", ":")):
                self.i += 4
                return five.replace("\\:", ":")
            if _TEMPORAL.fullmatch(token):
                return token
        if token[0].isdigit() or token[0] in "+-":
            try:
                return _number(token)[1]
            except _Unparsed:
                pass
        if embedded:
            raise _Unparsed
        self.i = len(self.toks)
        return self.text

    def entry(self):
        key = self.parse(True)
        if key is None or key == "null" or not self.consume(":"):
            raise _Unparsed
        value = self.parse(True)
        return f"{key}={'null' if value is None else value}"

    def collection(self, end, element):
        items = []
        while self.peek() is not None:
            if self.consume(end):
                return ("[" if end == "]" else "{") + ",".join(items) + end
            if self.consume(","):
                raise _Unparsed
            item = element()
            items.append("null" if item is None else item)
            if self.peek() != end and not self.consume(","):
                raise _Unparsed
        raise _Unparsed


def literal_header(text: str) -> str | None:
    """InsertHeader's ``value.literal`` as SimpleHeaderConverter writes it: ``Values.parseString``
    then ``Values.convertToString`` (a whole literal that is not one value stays the string)."""
    if text == "":
        return ""
    return _ValueParser(text).parse(False)


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
