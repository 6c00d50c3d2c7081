"""Kafka's transforms that reshape a key or value: InsertField, ReplaceField, MaskField, Cast,
TimestampConverter, ExtractField, HoistField, Flatten, ValueToKey. Each is the base class; the
``$Key``/``$Value`` variants are made in :mod:`connect.transforms`. A null value (tombstone) stays
null, except where Kafka does otherwise (HoistField wraps it; ValueToKey fails the record)."""
from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DateType, DecimalType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, ShortType, StringType, StructType,
                               TimestampNTZType, TimestampType)

from connect import timestamp_formats
from connect.connect_types import MAX_TIMESTAMP_MILLIS, timestamp_from_millis
from connect.errors import DataError
from connect.transform_base import (REQUIRED, TIME, TIME_METADATA, Plan, Setting, Transformation, connect_name,
                                    has_schema, non_empty_list, non_empty_string, null_with_schema, one_of, rebuild,
                                    require_struct, require_struct_or_map, schema_string, tombstones_fail)

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
    after its fields and in that order. A ``!``/``?`` suffix (required/optional) is accepted; Spark
    fields are always nullable. ``offset.field`` is null for source records (Kafka refuses it)."""
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
        added = []
        for name, source in (("topic.field", F.col("topic")), ("partition.field", F.col("partition")),
                             ("offset.field", F.col("offset")), ("timestamp.field", F.col("timestamp")),
                             ("static.field", F.lit(self.values.get("static.value")))):
            spec = self.values.get(name)
            if spec:
                added.append((spec.rstrip("!?") if spec[-1:] in "!?" else spec, source))
        clash = [n for n, _ in added if n in t.names]
        if clash and has_schema(frame, self.target):   # SchemaBuilder.field refuses a second field of a name
            return Plan(failed=col.isNotNull(), message=F.lit(
                f"Cannot create field because of field name duplication {clash[0]}"))
        new = dict(added)   # schemaless: Map.put overwrites the field
        kept = [(f.name, new.pop(f.name) if f.name in new else col.getField(f.name)) for f in t.fields]
        return Plan({self.target: rebuild(col, kept + [(n, c) for n, c in added if n in new], t)})


class ReplaceField(Transformation):
    """Keeps ``include`` (all when empty), drops ``exclude``, renames ``renames`` (``old:new``)."""
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
        return Plan({self.target: rebuild(col, [(new, col.getField(n), t[n].metadata) for new, n in zip(names, kept)])})


_NUMERIC = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)


class MaskField(Transformation):
    """Replaces ``fields`` with their type's empty value (0, false, "", epoch, empty array/map) or
    with ``replacement`` (numbers and strings only, as in Kafka)."""
    class_name = P + "MaskField"
    SETTINGS = [Setting("fields", "list", REQUIRED, non_empty_list),
                Setting("replacement", default=None, validator=non_empty_string), RNWD]

    def _mask(self, c, t, name, schema=True):
        r = self.values.get("replacement")
        if r is not None:
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
        if isinstance(t, (TimestampType, TimestampNTZType)):
            return F.timestamp_millis(F.lit(0)).cast(t)
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
                    c = F.when(c.isNotNull(), self._mask(c, f.dataType, f.name, schema))
                except DataError as e:   # Kafka's maskWithNullValue/maskWithCustomReplacement throw per record
                    fails.append((c.isNotNull(), F.lit(str(e))))
            fields.append((f.name, c, None if f.name in self.values["fields"] else f.metadata))
        # schemaless: Map.get of an absent field is null, and masking null gives null
        fields += [(n, F.lit(None).cast("string")) for n in missing]
        tomb = tombstones_fail(self.target, "mask fields")
        failed = tomb["failed"] | _or(f for f, _ in fails)
        message = F.when(tomb["failed"], tomb["message"]).otherwise(_first_message(fails))
        return Plan({self.target: rebuild(col, fields)}, failed=failed, message=message)


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
    ms, day = F.unix_millis(ts), 86_400_000
    full = timestamp_formats.format_utc(ts, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")   # formatted once: the plan stays small
    return (F.when(ms < day, F.substring_index(full, "T", -1))
            .when(F.pmod(ms, F.lit(day)) == 0, F.substring_index(full, "T", 1))
            .otherwise(full))


def base64_string(c):
    """Java's ``Base64.getEncoder().encodeToString``: one line, where Spark's ``base64`` breaks
    long output into CRLF-separated lines of 76 characters."""
    return F.regexp_replace(F.base64(c), "\r\n", "")


def _saturating_times(c, k: int):
    """``c * k`` as Java's ``TimeUnit`` conversions: saturated at the long's range, never overflowing."""
    top = ((1 << 63) - 1) // k
    return F.when(c > top, F.lit((1 << 63) - 1)).when(c < -top, F.lit(-(1 << 63))).otherwise(c * k)


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
    if isinstance(from_t, (TimestampType, TimestampNTZType, DateType)) and to == "string":
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


class Cast(Transformation):
    """Casts fields (``spec=a:int32,b:string``) or the whole key/value (``spec=int64``) to Connect's
    types int8…int64, float32/64, boolean, string. Numbers narrow with Java's wrap-around; a string
    that does not parse is flagged per row; bytes go to base64 strings; timestamps/dates cast
    through epoch ms/days, as Kafka casts their logical types. Top-level fields only, as Kafka."""
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
            return Plan({self.target: out}, failed=failed,
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
            fields.append((f.name, c, None if f.name in casts else f.metadata))
        return Plan({self.target: rebuild(col, fields)}, failed=col.isNotNull() & _or(f for f, _ in fails),
                    message=_first_message(fails))


_TARGET_TYPES = {"string": StringType(), "unix": LongType(), "Date": DateType(), "Time": IntegerType(),
                 "Timestamp": TimestampType()}
_UNIX = {"seconds": 1000, "milliseconds": 1, "microseconds": -1000, "nanoseconds": -1000000}


class TimestampConverter(Transformation):
    """Converts a timestamp (the whole key/value, or ``field``) between ``string`` (``format``, a
    SimpleDateFormat pattern parsed leniently, UTC), ``unix`` (``unix.precision``), ``Date`` (Spark
    date), ``Time`` (an int of milliseconds of the day marked ``connect.name`` Time, as the
    converters carry Connect's Time) and ``Timestamp``. The source kind is Kafka's
    ``timestampTypeFromSchema``: a Timestamp, Date or Time by logical type, a string, else an int64 is
    unix time; any other type (a plain int32) fails every record, as Kafka throws per record. Values
    pass through epoch milliseconds, as Kafka's ``java.util.Date`` does, so sub-millisecond digits
    are dropped as Kafka drops them. A string that does not parse is flagged per row. A schemaless
    record without ``field`` gets it as null (``applySchemaless``: ``Map.get`` is null)."""
    class_name = P + "TimestampConverter"
    SETTINGS = [Setting("field", default=""),
                Setting("target.type", default=REQUIRED, validator=one_of("string", "unix", "Date", "Time", "Timestamp")),
                Setting("format", default="", validator=timestamp_formats.check),
                Setting("unix.precision", default="milliseconds",
                        validator=one_of("nanoseconds", "microseconds", "milliseconds", "seconds")), RNWD]

    def validate(self, v):
        if v["target.type"] == "string" and not v["format"].strip():
            return {"format": ["TimestampConverter requires format option to be specified when using string timestamps"]}
        return {}

    def _to_millis(self, c, t, metadata):
        """(epoch ms, unparsed) or None where Kafka knows no timestamp kind for the type."""
        if isinstance(t, StringType):
            if not self.values["format"].strip():
                raise DataError("TimestampConverter requires format option to be specified when using string timestamps")
            ms = timestamp_formats.parse_millis(c, self.values["format"])
            return ms, c.isNotNull() & ms.isNull()
        if isinstance(t, (TimestampType, TimestampNTZType)):
            return F.unix_millis(c.cast("timestamp")), F.lit(False)
        if isinstance(t, DateType):
            return F.unix_date(c).cast("long") * 86400000, F.lit(False)
        if connect_name(metadata) == TIME and isinstance(t, _INTEGRAL):   # the Time translator: no precision
            return c.cast("long"), F.lit(False)
        if isinstance(t, LongType):
            k = _UNIX[self.values["unix.precision"]]
            return (_saturating_times(c, k) if k > 0 else (c.cast("decimal(38,0)") / -k).cast("long")), F.lit(False)
        return None

    def _from_millis(self, ms):
        kind = self.values["target.type"]
        ts = timestamp_from_millis(ms)
        if kind == "string":
            return timestamp_formats.format_utc(ts, self.values["format"])
        if kind == "unix":
            k = _UNIX[self.values["unix.precision"]]
            return (ms.cast("decimal(38,0)") / k).cast("long") if k > 0 else _saturating_times(ms, -k)
        if kind == "Date":
            return F.when(ts.isNotNull(), F.date_from_unix_date(F.floor(ms / 86400000).cast("int")))
        if kind == "Time":
            return F.pmod(ms, F.lit(86400000)).cast("int")
        return ts

    def _out(self, c, name):
        """``c`` named, marked a Connect Time when the target is Time (the converters' convention)."""
        return c.alias(name, metadata=TIME_METADATA) if self.values["target.type"] == "Time" else c.alias(name)

    def _convert(self, c, t, metadata, where, unknown):
        """(converted, failed, message); ``unknown``: where a type Kafka knows no timestamp kind for
        fails (every record with a schema; a non-null value without)."""
        found = self._to_millis(c, t, metadata)
        if found is None:
            return F.lit(None).cast(_TARGET_TYPES[self.values["target.type"]]), unknown, F.lit(f"Schema {schema_string(t, metadata)} does not correspond to a known "
                                         "timestamp type format")
        ms, unparsed = found
        beyond = F.lit(False) if self.values["target.type"] in ("unix", "Time") else \
            ms.isNotNull() & ~ms.between(-MAX_TIMESTAMP_MILLIS, MAX_TIMESTAMP_MILLIS)
        message = F.when(beyond, F.concat(F.lit(f"TimestampConverter: {where} ("), ms.cast("string"), F.lit(
            " ms since the epoch) is past Spark's timestamp range"))).otherwise(F.concat(
                F.lit(f"TimestampConverter: could not parse {where} '"), c.cast("string"),
                F.lit(f"' with format '{self.values['format']}'")))
        return self._from_millis(ms), unparsed | beyond, message

    def plan(self, frame):
        col, name = F.col(self.target), self.values["field"]
        schema = has_schema(frame, self.target)
        if not name:
            f = frame.schema[self.target]
            out, failed, message = self._convert(col, f.dataType, f.metadata, self.target,
                                                 F.lit(True) if schema else col.isNotNull())
            return Plan({self.target: self._out(out, self.target)}, failed=failed, message=message)
        t = require_struct(frame, self.target, "converting timestamp formats")
        if name not in t.names:
            if schema:   # Kafka's schema.field(name) is null: the record fails
                return Plan(failed=col.isNotNull(), message=F.lit(f"TimestampConverter: {self.target} has no field {name!r}"))
            out, _, _ = self._convert(F.lit(None).cast("long"), LongType(), None, f"field {name}", F.lit(False))
            return Plan({self.target: rebuild(col, [(f.name, col.getField(f.name)) for f in t.fields]
                                              + [(name, self._out(out, name), None)], t)})
        field_t = t[name]
        out, failed, message = self._convert(col.getField(name), field_t.dataType, field_t.metadata, f"field {name}",
                                             F.lit(True) if schema else col.getField(name).isNotNull())
        meta = TIME_METADATA if self.values["target.type"] == "Time" else {}
        fields = [(f.name, out, meta) if f.name == name else (f.name, col.getField(f.name)) for f in t.fields]
        return Plan({self.target: rebuild(col, fields, t)}, failed=col.isNotNull() & failed, message=message)


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
    """Wraps the key/value in a struct with one field ``field`` (a null is wrapped too, as Kafka does)."""
    class_name = P + "HoistField"
    SETTINGS = [Setting("field", default=REQUIRED)]

    def plan(self, frame):
        return Plan({self.target: F.struct(F.col(self.target).alias(self.values["field"]))})


class Flatten(Transformation):
    """Nested structs become top-level fields named by their path joined with ``delimiter``; arrays
    are kept as they are. A map field fails every record, as Kafka's ``buildUpdatedSchema`` throws
    for MAP with schemas (a schemaless nested object is a struct here, and is flattened)."""
    class_name = P + "Flatten"
    SETTINGS = [Setting("delimiter", default=".")]

    def _leaves(self, c, t, prefix):
        for f in t.fields:
            name = prefix + f.name
            if isinstance(f.dataType, StructType):
                yield from self._leaves(c.getField(f.name), f.dataType, name + self.values["delimiter"])
            else:
                yield name, c.getField(f.name), f

    def plan(self, frame):
        t = require_struct(frame, self.target, "flattening")
        col = F.col(self.target)
        fields = list(self._leaves(col, t, ""))
        names = [n for n, _, _ in fields]
        maps = [n for n, _, f in fields if isinstance(f.dataType, MapType)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise DataError(f"Flatten: flattened field names collide: {dup}")
        if maps:   # Kafka's buildUpdatedSchema throws for a MAP field, so every record fails
            return Plan(failed=F.lit(True), message=F.lit(
                f"Flatten transformation does not support MAP for record with schemas (for field {maps[0]})."))
        return Plan({self.target: rebuild(col, [(n, c, f.metadata) for n, c, f in fields])})


class ValueToKey(Transformation):
    """Replaces the key with a struct of the value's ``fields``. A tombstone has no fields to copy:
    it is flagged, as Kafka fails it."""
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
        return Plan({"key": key}, failed=v.isNull(),
                    message=F.lit("Only Struct objects supported for [copying fields from value to key], found: null"))
