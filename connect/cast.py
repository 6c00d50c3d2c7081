"""Kafka's Cast transform (``org.apache.kafka.connect.transforms.Cast``) and the Java conversions it
follows: narrowing with wrap-around, ``Values.dateFormatFor``, ``BigDecimal.toString`` and base64,
which SimpleHeaderConverter's header strings share (:mod:`connect.headers`). The ``$Key``/``$Value``
variants are made in :mod:`connect.transforms`.
"""
from __future__ import annotations

import json
import math
import re
import struct

from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DateType, DecimalType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, ShortType, StringType, StructType,
                               TimestampNTZType, TimestampType)

from connect import timestamp_formats
from connect.errors import DataError
from connect.field_transforms import P, RNWD, _first_message, _or
from connect.java_text import java_double
from connect.transform_base import (OPTIONAL, REQUIRED, TIME, Plan, Setting, Transformation, connect_name,
                                    field_optional, has_schema, rebuild, require_struct, schema_basics,
                                    with_metadata)


_CAST_TYPES = {"int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
               "float32": FloatType(), "float64": DoubleType(), "boolean": BooleanType(), "string": StringType()}
_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def _wrap(long_col, bits):
    """Java's narrowing of a long to ``bits`` (two's complement wrap-around)."""
    if bits == 64:
        return long_col
    m = 1 << bits
    low = F.pmod(long_col, F.lit(m))
    return F.when(low >= m // 2, low - m).otherwise(low)


def _java_long(c, bits):
    """Java's ``(int)``/``(long)`` of a float, double or decimal: truncate, saturate, NaN → 0."""
    limit = (1 << 31) if bits < 64 else (1 << 63)
    d = c.cast("double")
    return (F.when(F.isnan(d), F.lit(0)).when(d >= float(limit - 1), F.lit(limit - 1))
            .when(d <= float(-limit), F.lit(-limit))
            .otherwise((F.signum(d) * F.floor(F.abs(d))).cast("long"))).cast("long")


def kafka_date_string(ts):
    """Kafka's ``Values.dateFormatFor`` (how Cast writes a Timestamp or Date as a string), in UTC:
    a time of day below one day after the epoch (so before 1970 too), a date at an exact
    midnight, else the ISO-8601 timestamp."""
    day = 86_400_000

    def pick(ms):   # the instant and its ISO-8601 form each bound once: the plan stays small
        return timestamp_formats.let(
            timestamp_formats.format_ms(ms, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), lambda full:
            F.when(ms < day, F.substring_index(full, "T", -1))
             .when(F.pmod(ms, F.lit(day)) == 0, F.substring_index(full, "T", 1))
             .otherwise(full))
    return F.when(ts.isNotNull(), timestamp_formats.let(F.unix_millis(ts), pick))


def base64_string(c):
    """Java's ``Base64.getEncoder().encodeToString``: one line, where Spark's ``base64`` breaks
    long output into CRLF-separated lines of 76 characters."""
    return F.regexp_replace(F.base64(c), "\r\n", "")


def _decimal_long(c):
    """Java's ``BigDecimal.longValue()``: the integer part's low 64 bits (it wraps; a double saturates)."""
    big = lambda n: F.lit(str(n)).cast("decimal(38,0)")  # noqa: E731 - past a long: py4j would refuse the int
    whole = F.when(c < 0, F.ceil(c)).otherwise(F.floor(c)).cast("decimal(38,0)")
    low = F.pmod(whole, big(1 << 64))
    return F.when(low >= big(1 << 63), low - big(1 << 64)).otherwise(low).cast("long")


def decimal_string(c, t: DecimalType):
    """Java's ``BigDecimal.toString()``: plain unless the adjusted exponent is below -6, then
    scientific (``1.000E-7``, ``0E-10``), as Kafka's Cast writes a Decimal as a string."""
    plain = c.cast("string")
    if t.scale == 0:
        return plain
    digits = F.regexp_replace(F.regexp_replace(plain, "[-.]", ""), "^0+(?=.)", "")   # the unscaled magnitude
    adjusted = F.length(digits) - 1 - t.scale
    mantissa = F.concat(digits.substr(F.lit(1), F.lit(1)),
                        F.when(F.length(digits) > 1, F.concat(F.lit("."), digits.substr(F.lit(2), F.length(digits))))
                        .otherwise(F.lit("")))
    scientific = F.concat(F.when(c < 0, F.lit("-")).otherwise(F.lit("")), mantissa, F.lit("E"), adjusted.cast("string"))
    return F.when(adjusted < -6, scientific).otherwise(plain)


def cast_column(c, from_t, to: str, where: str, metadata: dict | None = None):
    """(cast value, failed) for Kafka's Cast of one value of Spark type ``from_t`` to Connect type ``to``
    (``metadata``: the field's, naming a Connect logical type such as Time)."""
    target = _CAST_TYPES[to]
    no = F.lit(False)
    if connect_name(metadata) == TIME and to == "string":   # Values.dateFormatFor: a Time is below one day
        return timestamp_formats.format_utc(F.timestamp_millis(c.cast("long")), "HH:mm:ss.SSS'Z'"), no
    if isinstance(from_t, (StructType, ArrayType, MapType)):
        raise DataError(f"Cast transformation does not support casting {where} of type {from_t.simpleString()}")
    if isinstance(from_t, BinaryType):
        if to != "string":
            raise DataError(f"Cast: {where} is bytes and can only be cast to string (base64)")
        return base64_string(c), no
    if isinstance(from_t, StringType):
        if to in _BITS:
            ok = c.rlike(r"^[+-]?[0-9]+$")
            out = F.when(ok, c.try_cast(target))
        elif to in ("float32", "float64"):   # Java's Float.parseFloat: NaN and Infinity spelt so, no "inf"
            text = F.regexp_replace(c, r"^[\x00-\x20]+|[\x00-\x20]+$", "")
            ok = text.rlike(r"^[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)$")
            out = F.when(ok, F.regexp_replace(text, "[fFdD]$", "").try_cast(target))
        elif to == "boolean":
            return F.lower(c) == "true", no
        else:
            return c, no
        return out, c.isNotNull() & out.isNull()
    if isinstance(from_t, DateType) and to == "string":   # a Date's instant is its UTC midnight
        return kafka_date_string(F.timestamp_millis(F.unix_date(c).cast("long") * 86_400_000)), no
    if isinstance(from_t, (TimestampType, TimestampNTZType)) and to == "string":
        return kafka_date_string(c.cast("timestamp")), no
    if isinstance(from_t, (TimestampType, TimestampNTZType)):
        c, from_t = F.unix_millis(c.cast("timestamp")), LongType()
    if isinstance(from_t, DateType):
        c, from_t = F.unix_date(c), IntegerType()
    if isinstance(from_t, BooleanType):   # null stays null, as Kafka casts no null
        return (c if to in ("boolean", "string") else F.when(c, 1).when(~c, 0)).cast(target), no
    if to == "string":
        return (decimal_string(c, from_t) if isinstance(from_t, DecimalType) else c.cast("string")), no
    if to in ("float32", "float64"):
        return c.cast(target), no
    if isinstance(from_t, _INTEGRAL):
        as_long = c.cast("long")
    elif isinstance(from_t, DecimalType):
        as_long = _decimal_long(c)
    else:
        as_long = _java_long(c, _BITS.get(to, 64))
    if to == "boolean":
        return as_long != 0, no
    return _wrap(as_long, _BITS[to]).cast(target), no


_DEFAULT = "connect.default"


def _java_narrow(x: float, bits: int) -> int:
    """Java's ``(byte)``/``(short)``/``(int)``/``(long)`` of a double: truncate, saturate at the int's
    (the long's for 64 bits) range, NaN → 0, then wrap to ``bits``."""
    top = 63 if bits == 64 else 31
    n = 0 if math.isnan(x) else max(-(1 << top), min((1 << top) - 1, int(x) if math.isfinite(x) else
                                                      (1 << top) if x > 0 else -(1 << top)))
    low = n % (1 << bits)
    return low - (1 << bits) if low >= 1 << (bits - 1) else low


def cast_default(text: str, from_t, to: str):
    """Kafka's ``castValueToType`` of a field's default (JSON text in its metadata) to Connect type
    ``to``, as JSON text; None where the default has no plain JSON value (a logical type) or is
    not finite. A string that does not parse raises :class:`DataError`, as Kafka fails the schema."""
    if not isinstance(from_t, (_INTEGRAL, FloatType, DoubleType, BooleanType, StringType)):
        return None
    v = json.loads(text)
    if isinstance(from_t, (FloatType, DoubleType)) and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)   # a Float or Double, whichever way the JSON spelt it
    if isinstance(v, str) and to in _BITS:
        if not re.fullmatch(r"[+-]?[0-9]+", v) or not -(1 << _BITS[to] - 1) <= int(v) < 1 << _BITS[to] - 1:
            raise DataError(f"Cast: the default ({v}) of a field cannot be cast to {to}")
        v = int(v)
    elif isinstance(v, str) and to in ("float32", "float64"):
        try:
            v = float(v.strip("".join(chr(c) for c in range(0x21))).rstrip("fFdD"))
        except ValueError:
            raise DataError(f"Cast: the default ({v}) of a field cannot be cast to {to}") from None
    if to == "string":
        out = v if isinstance(v, str) else ("true" if v else "false") if isinstance(v, bool) else \
            java_double(v, isinstance(from_t, FloatType)) if isinstance(v, float) else str(v)
        return json.dumps(out, ensure_ascii=False)
    if to == "boolean":
        return json.dumps(v.lower() == "true" if isinstance(v, str) else
                          _java_narrow(v, 64) != 0 if isinstance(v, float) else v != 0)
    if isinstance(v, bool):
        v = int(v)
    if to in _BITS:
        return str(_java_narrow(float(v), _BITS[to]) if isinstance(v, float) else _wrap_int(v, _BITS[to]))
    x = float(struct.unpack("f", struct.pack("f", v))[0]) if to == "float32" else float(v)
    return java_double(x, to == "float32") if math.isfinite(x) else None


def _wrap_int(n: int, bits: int) -> int:
    low = n % (1 << bits)
    return low - (1 << bits) if low >= 1 << (bits - 1) else low


def _cast_field_metadata(metadata: dict | None, from_t, to: str) -> dict | None:
    """A cast field's schema, as Kafka's ``getOrBuildSchema`` builds it: its optionality, and its
    default cast to the new type."""
    out = dict(field_optional(metadata) or {})
    if metadata and metadata.get(_DEFAULT) is not None:
        default = cast_default(metadata[_DEFAULT], from_t, to)
        if default is not None:
            out[_DEFAULT] = default
    return out or None


class Cast(Transformation):
    """Casts fields (``spec=a:int32,b:string``) or the whole key/value (``spec=int64``) to Connect's
    types int8…int64, float32/64, boolean, string. Numbers narrow with Java's wrap-around; a string
    that does not parse is flagged per row; bytes go to base64 strings; timestamps/dates cast
    through epoch ms/days, as Kafka casts their logical types. Top-level fields only, as Kafka; a
    schemaless value without a field of the spec gets it as null (``applySchemaless``' ``Map.put``). As
    Kafka's ``getOrBuildSchema``, a cast field keeps its optionality and its default (cast too, see
    :func:`cast_default`), other fields their schemas, and
    the key/value its schema's name, version, doc, parameters and optionality."""
    class_name = P + "Cast"
    SETTINGS = [Setting("spec", "list", REQUIRED), RNWD]

    def validate(self, v):
        problems, whole = [], 0
        if not v["spec"]:
            problems.append("Must specify at least one field to cast.")
        for m in v["spec"]:
            parts = m.split(":")
            if len(parts) > 2:
                problems.append(f"Invalid rename mapping: {m}")
                continue
            kind = parts[-1].strip().lower()
            whole += len(parts) == 1
            if kind not in _CAST_TYPES:
                problems.append(f"Invalid type found in casting spec: {parts[-1].strip()}" if kind not in (
                    "bytes", "array", "map", "struct") else f"Cast transformation does not support casting to "
                    f"{kind.upper()}; supported types are {sorted(t.upper() for t in _CAST_TYPES)}")
        if whole and len(v["spec"]) > 1:
            problems.append("Cast transformations that specify a type to cast the entire value to may only "
                            "specify a single cast in their spec")
        return {"spec": problems} if problems else {}

    def plan(self, frame):
        col, t = F.col(self.target), frame.schema[self.target].dataType
        spec = [m.split(":") for m in self.values["spec"]]
        if len(spec[0]) == 1:
            out, failed = cast_column(col, t, spec[0][0].strip().lower(), self.target,
                                      frame.schema[self.target].metadata)
            meta = frame.schema[self.target].metadata
            basics = schema_basics(frame, self.target, OPTIONAL)
            if str(basics.get("connect.name", "")).startswith("org.apache.kafka.connect.data."):
                basics.pop("connect.name")   # a logical type's name does not fit the cast type
            try:
                basics.update(_cast_field_metadata(meta, t, spec[0][0].strip().lower()) or {})
            except DataError as e:   # Kafka fails building the schema: every record
                return Plan(failed=col.isNotNull(), message=F.lit(str(e)))
            return Plan({self.target: with_metadata(out, self.target, basics)}, failed=failed,
                        message=F.concat(F.lit(f"Cast: {self.target} ("), col.cast("string"),
                                         F.lit(f") cannot be cast to {spec[0][0].strip()}")))
        t = require_struct(frame, self.target, "cast types")
        casts = {f.strip(): k.strip().lower() for f, k in spec}
        fields, fails = [], []
        for f in t.fields:
            c = col.getField(f.name)
            if f.name in casts:
                c, failed = cast_column(c, f.dataType, casts[f.name], f"field {f.name!r}", f.metadata)
                fails.append((failed, F.concat(F.lit(f"Cast: field {f.name} ("), col.getField(f.name).cast("string"),
                                               F.lit(f") cannot be cast to {casts[f.name]}"))))
            if f.name in casts:
                try:
                    meta = _cast_field_metadata(f.metadata, f.dataType, casts[f.name])
                except DataError as e:   # Kafka fails building the schema: every record
                    meta = None
                    fails.append((F.lit(True), F.lit(str(e))))
            fields.append((f.name, c, meta if f.name in casts else f.metadata))
        if not has_schema(frame, self.target):   # applySchemaless: Map.put(field, cast(Map.get(field))), a null
            fields += [(n, F.lit(None).cast(_CAST_TYPES[k]), None) for n, k in casts.items() if n not in t.names]
        value = with_metadata(rebuild(col, fields), self.target, schema_basics(frame, self.target, OPTIONAL))
        return Plan({self.target: value}, failed=col.isNotNull() & _or(f for f, _ in fails),
                    message=_first_message(fails))
