"""What every transform and predicate shares: Kafka's ConfigDef-style config parsing (every bad
field listed in one :class:`~connect.errors.ConfigError`), the :class:`Plan` a transform returns,
and the struct helpers the field transforms are built from.

A transform does not rewrite the frame itself: :meth:`Transformation.plan` says which record
columns it replaces, which rows it keeps and which rows it fails, all as expressions over the frame
before the step. That one description serves both ``apply`` (unconditional) and
:func:`connect.transforms.chain` (gated per row by a predicate), so no transform is written twice.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, MapType, StructType

from connect import record_frame
from connect.errors import ConfigError, DataError

REQUIRED = object()


@dataclass(frozen=True)
class Setting:
    """One config of a transform: Kafka's name, type (string, list, boolean, int), default
    (``REQUIRED`` for ``NO_DEFAULT_VALUE``), a validator returning a problem or None, and a doc line."""
    name: str
    type: str = "string"
    default: object = None
    validator: object = None
    doc: str = ""


def one_of(*allowed: str, case: bool = True):
    def check(v):
        if v is None:
            return None
        ok = v in allowed if case else v.lower() in {a.lower() for a in allowed}
        return None if ok else f"String must be one of: {', '.join(allowed)}"
    return check


def non_empty_list(v):
    return "Empty list" if not v else None


def non_empty_string(v):
    return "String must be non-empty" if v is not None and v == "" else None


def valid_regex(v):
    """A problem with ``v`` as a Java regex (Spark runs it with Java's engine), or None. Checked
    with Python's engine after Java's named groups are spelt Python's way; Python's own ``(?P``
    syntax is refused, as Java refuses it."""
    if isinstance(v, str) and "(?P" in v:
        return "Invalid regex: (?P...) is Python's syntax; Java names a group (?<name>...)"
    try:
        re.compile(re.sub(r"\(\?<(?=[A-Za-z])", "(?P<", re.sub(r"\\k<([A-Za-z][A-Za-z0-9]*)>", r"(?P=\1)", v)))
    except (re.error, TypeError) as e:
        return f"Invalid regex: {e}"
    return None


def parse_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    text = str(value).strip()
    return [] if not text else [p.strip() for p in text.split(",")]


def parse_config(kind: str, settings: list[Setting], config: dict, extra=None) -> dict:
    """Typed values for ``settings`` from ``config``; raises one ConfigError naming every bad field
    (``extra(values) -> {field: [problems]}`` adds cross-field checks, run when fields parsed)."""
    values, errors = {}, {}
    for s in settings:
        raw = config.get(s.name, s.default)
        if raw is REQUIRED:
            errors.setdefault(s.name, []).append(f'Missing required configuration "{s.name}" which has no default value.')
            continue
        try:
            if s.type == "list":
                value = parse_list(raw)
            elif s.type == "boolean":
                if isinstance(raw, bool):
                    value = raw
                elif str(raw).strip().lower() in ("true", "false"):
                    value = str(raw).strip().lower() == "true"
                else:
                    raise ValueError(f"Expected value to be either true or false, got {raw!r}")
            elif s.type == "int":   # ConfigDef's INT: a null default stays null
                try:
                    text = None if raw is None else str(raw).strip()
                    if text is not None and not re.fullmatch(r"[+-]?[0-9]+", text):   # Integer.parseInt
                        raise ValueError
                    value = None if text is None else int(text)
                    if value is not None and not -(1 << 31) <= value < (1 << 31):
                        raise ValueError
                except ValueError:
                    raise ValueError(f"Invalid value {raw} for configuration {s.name}: Not a number of type INT") \
                        from None
            else:
                value = None if raw is None else str(raw)
        except (TypeError, ValueError) as e:
            errors.setdefault(s.name, []).append(str(e))
            continue
        problem = s.validator(value) if s.validator else None
        if problem:
            errors.setdefault(s.name, []).append(f"Invalid value {raw} for configuration {s.name}: {problem}")
            continue
        values[s.name] = value
    if not errors and extra is not None:
        for name, problems in extra(values).items():
            errors.setdefault(name, []).extend(problems)
    if errors:
        listed = "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items())
        raise ConfigError(f"invalid {kind} config: {listed}", errors=errors)
    return values


@dataclass
class Plan:
    """What a transform does to a frame, as expressions over the frame before it: replaced record
    columns, a row filter (``keep``, null = keep all), and rows that failed with their message."""
    columns: dict[str, Column] = field(default_factory=dict)
    keep: Column | None = None
    failed: Column | None = None
    message: Column | None = None


class Transformation:
    """Base of the SMTs: config parsed at construction, ``plan`` for the runtime, ``apply`` for
    direct use. ``target`` is ``"key"`` or ``"value"`` for the ``$Key``/``$Value`` variants."""
    class_name = ""
    SETTINGS: list[Setting] = []
    target = "value"
    gateable = True   # False: changes column-wide metadata, so a predicate cannot pick rows

    def __init__(self, config: dict | None = None):
        self.config = dict(config or {})
        self.values = parse_config(self.class_name or type(self).__name__, self.SETTINGS, self.config, self.validate)

    def validate(self, values: dict) -> dict:
        """Cross-field checks: {field: [problems]}."""
        return {}

    def plan(self, frame: DataFrame) -> Plan:
        raise NotImplementedError

    def apply(self, frame: DataFrame) -> DataFrame:
        """The transformed frame (rows this transform cannot handle are flagged, not failed)."""
        return execute(frame, self.plan(frame), stage=self.class_name, cls=self.class_name)

    def __repr__(self):
        return f"{type(self).__name__}({self.config!r})"


def execute(frame: DataFrame, plan: Plan, stage: str, cls: str, gate: Column | None = None) -> DataFrame:
    """Run a plan, optionally only where ``gate`` holds (a predicate). Rows flagged by an earlier
    stage are never dropped: they must reach the dead-letter queue."""
    columns = dict(plan.columns)
    if gate is not None:
        markers = {record_frame.typed_null(c) for c in ("key", "value")}
        columns = {c: F.when(gate, col).otherwise(F.col(c) if c in frame.columns else F.lit(False)) if c in markers
                   else gated(frame, gate, col, c) for c, col in columns.items()}
    failed = plan.failed if plan.failed is not None else F.lit(False)
    if gate is not None:
        failed = gate & failed
    if plan.keep is not None:
        keep = plan.keep if gate is None else (~gate | plan.keep)
        columns["__connect_keep"] = F.coalesce(keep, F.lit(True)) | F.coalesce(failed, F.lit(False))
    message = plan.message if plan.message is not None else F.lit(None).cast("string")
    out = record_frame.flag(frame, F.coalesce(failed, F.lit(False)), stage, cls, message, columns)
    if plan.keep is not None:
        out = out.where(F.col("__connect_keep") | F.col(record_frame.ERROR).isNotNull()).drop("__connect_keep")
    return out


def column_type(frame: DataFrame, col: Column) -> DataType:
    """The type of an expression over ``frame`` (analysis only, no Spark job)."""
    return frame.select(col.alias("c")).schema["c"].dataType


def gated(frame: DataFrame, gate: Column, new: Column, name: str) -> Column:
    """``when(gate, new).otherwise(old)`` with both branches made one type. Spark gives a column one
    type where Kafka lets each record have its own schema: structs are widened to the union of
    their fields (the transformed record's first, missing ones null); other type changes under a
    predicate are refused, naming both types. The column keeps the transformed schema's metadata."""
    old = F.col(name)
    new_f, old_t = frame.select(new.alias("c")).schema["c"], frame.schema[name].dataType
    new_t = new_f.dataType
    if new_t.simpleString() == old_t.simpleString():
        return with_metadata(F.when(gate, new).otherwise(old), name, new_f.metadata)
    if isinstance(new_t, StructType) and isinstance(old_t, StructType):
        union = list(new_t.fields) + [f for f in old_t.fields if f.name not in new_t.names]
        for f in union:
            if f.name in new_t.names and f.name in old_t.names and \
                    new_t[f.name].dataType.simpleString() != old_t[f.name].dataType.simpleString():
                raise DataError(f"a predicate gates a transform that changes field {name}.{f.name} from "
                                f"{old_t[f.name].dataType.simpleString()} to {new_t[f.name].dataType.simpleString()}; "
                                "a Spark column has one type, so both branches must agree")

        def widen(c, t):
            return F.when(c.isNotNull(), F.struct(*[
                (c.getField(f.name) if f.name in t.names else F.lit(None).cast(f.dataType)).alias(f.name)
                for f in union]))
        return with_metadata(F.when(gate, widen(new, new_t)).otherwise(widen(old, old_t)), name, new_f.metadata)
    raise DataError(f"a predicate gates a transform that changes column {name!r} from {old_t.simpleString()} to "
                    f"{new_t.simpleString()}: a Spark column has one type; apply it without a predicate or split "
                    "the connector")


def null_with_schema(frame: DataFrame, name: str, new: Column) -> dict[str, Column]:
    """``Plan`` columns marking where ``new`` (the step's ``name``) is a null that keeps a schema,
    the record having had one (a value, or a null with a schema): Kafka's ``newRecord(record,
    field.schema(), null)``. A tombstone stays one (see :func:`connect.record_frame.typed_null`)."""
    had = F.col(name).isNotNull() | record_frame.is_typed_null(frame, name)
    return {record_frame.typed_null(name): had & new.isNull()}


# ------------------------------------------------------------------ struct helpers
def require_struct(frame: DataFrame, name: str, purpose: str) -> StructType:
    t = frame.schema[name].dataType
    if not isinstance(t, StructType):
        raise DataError(f"Only Struct objects supported for [{purpose}], found: {t.simpleString()} in column {name!r}")
    return t


def tombstones_fail(frame: DataFrame, name: str, purpose: str) -> dict:
    """``Plan`` arguments failing a record whose ``name`` is null, as Kafka's transforms with no
    null guard (MaskField, HeaderFrom, ValueToKey) fail it, with Kafka's message: a tombstone has no
    schema, so ``requireMap`` refuses it; a null with a schema reaches ``requireStruct``."""
    return {"failed": F.col(name).isNull(), "message": null_message(frame, name, purpose)}


def null_message(frame: DataFrame, name: str, purpose: str) -> Column:
    """Kafka's ``Requirements`` message for a null ``name``: ``requireMap``'s for a tombstone
    (no schema), ``requireStruct``'s for a null with a schema."""
    return F.when(record_frame.is_typed_null(frame, name),
                  F.lit(f"Only Struct objects supported for [{purpose}], found: null")).otherwise(
        F.lit(f"Only Map objects supported in absence of schema for [{purpose}], found: null"))


def require_struct_or_map(frame: DataFrame, name: str, purpose: str) -> DataType:
    t = frame.schema[name].dataType
    if not isinstance(t, (StructType, MapType)):
        raise DataError(f"Only Struct or Map objects supported for [{purpose}], found: {t.simpleString()} "
                        f"in column {name!r}")
    return t


def rebuild(value: Column, fields: list[tuple], source: StructType | None = None) -> Column:
    """A struct of ``fields`` (``(name, column)`` or ``(name, column, metadata)``) that stays null
    where ``value`` is null (a tombstone stays one). A field without metadata of its own keeps the
    metadata of ``source``'s field of that name, so a Connect logical type or schema parameter the
    converter recorded there (``connect.name``) survives a transform that only moves the field."""
    def named(f):
        n, c = f[0], f[1]
        meta = f[2] if len(f) > 2 else (source[n].metadata if source is not None and n in source.names else None)
        return c.alias(n, metadata=meta) if meta else c.alias(n)
    return F.when(value.isNotNull(), F.struct(*[named(f) for f in fields]))


# ------------------------------------------------------------------ Connect schema metadata
CONNECT_NAME = "connect.name"
OPTIONAL = "connect.optional"
SCHEMA_BASICS = (CONNECT_NAME, "connect.version", "connect.doc", "connect.parameters")


def schema_basics(frame: DataFrame, name: str, *also: str) -> dict:
    """The metadata of ``frame[name]``'s Connect schema that Kafka's ``SchemaUtil.copySchemaBasics``
    copies into a rebuilt schema (name, version, doc, parameters), plus the keys ``also`` names
    (``connect.optional`` where Kafka keeps it). Empty for a schemaless column."""
    meta = frame.schema[name].metadata
    return {k: meta[k] for k in SCHEMA_BASICS + also if k in meta}


def with_metadata(col: Column, name: str, metadata: dict | None) -> Column:
    """``col`` named ``name`` carrying ``metadata`` (the key's or value's schema, which the
    converter writes), or plain ``col`` when there is none."""
    return col.alias(name, metadata=metadata) if metadata else col


def field_optional(metadata: dict | None) -> dict | None:
    """A rebuilt field's metadata keeping only its optionality, as Kafka's builders keep
    ``isOptional()`` when they replace a field's type (Cast, TimestampConverter)."""
    return {OPTIONAL: metadata[OPTIONAL]} if metadata and OPTIONAL in metadata else None


TIME = "org.apache.kafka.connect.data.Time"
TIME_METADATA = {CONNECT_NAME: TIME, "connect.version": 1}


def connect_name(metadata: dict | None) -> str | None:
    """The Connect schema name a converter recorded in a Spark field's metadata (``connect.name``):
    how a Time (an int of milliseconds of the day) is told from a plain int32."""
    return (metadata or {}).get(CONNECT_NAME)


def has_schema(frame: DataFrame, name: str) -> bool:
    """Whether ``name`` came from a Connect schema (the converter left ``connect.*`` metadata on
    it, or on one of its fields) rather than from a schemaless value's inferred type. Kafka's
    transforms take their ``applyWithSchema`` path for the first and ``applySchemaless`` for the
    second, and the two treat a missing field differently."""
    f = frame.schema[name]
    if any(k.startswith("connect.") for k in f.metadata):
        return True
    return isinstance(f.dataType, StructType) and any(
        any(k.startswith("connect.") for k in sub.metadata) for sub in f.dataType.fields)


_CONNECT_TYPES = {"tinyint": "INT8", "smallint": "INT16", "int": "INT32", "bigint": "INT64", "float": "FLOAT32",
                  "double": "FLOAT64", "boolean": "BOOLEAN", "string": "STRING", "binary": "BYTES"}


def schema_string(t: DataType, metadata: dict | None = None) -> str:
    """Kafka's ``ConnectSchema.toString()`` for a Spark type: ``Schema{INT32}``,
    ``Schema{org.apache.kafka.connect.data.Time:INT32}``."""
    kind = _CONNECT_TYPES.get(t.simpleString()) or t.typeName().upper()
    if kind.startswith("DECIMAL"):
        return "Schema{org.apache.kafka.connect.data.Decimal:BYTES}"
    name = connect_name(metadata)
    return f"Schema{{{name}:{kind}}}" if name else f"Schema{{{kind}}}"


def with_target(cls, target: str, suffix: str):
    """The ``$Key``/``$Value`` variant class of a transform."""
    return type(f"{cls.__name__}{suffix}", (cls,), {"target": target, "class_name": f"{cls.class_name}${suffix}"})
