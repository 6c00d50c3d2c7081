"""Kafka's TimestampConverter transform (``org.apache.kafka.connect.transforms.TimestampConverter``):
a timestamp between a formatted string, unix time, Date, Time and Timestamp, through epoch
milliseconds as Kafka's ``java.util.Date``. The ``$Key``/``$Value`` variants are made in
:mod:`connect.transforms`.
"""
from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import DateType, IntegerType, LongType, StringType, TimestampNTZType, TimestampType

from connect import timestamp_formats
from connect.cast import _INTEGRAL
from connect.errors import DataError
from connect.field_transforms import P, RNWD
from connect.logical_types import MAX_TIMESTAMP_MILLIS, timestamp_from_millis
from connect.transform_base import (OPTIONAL, REQUIRED, TIME, TIME_METADATA, Plan, Setting, Transformation,
                                    connect_name, field_optional, has_schema, one_of, rebuild, require_struct,
                                    schema_basics, schema_string, with_metadata)


def _saturating_times(c, k: int):
    """``c * k`` as Java's ``TimeUnit`` conversions: saturated at the long's range, never overflowing."""
    top = ((1 << 63) - 1) // k
    return F.when(c > top, F.lit((1 << 63) - 1)).when(c < -top, F.lit(-(1 << 63))).otherwise(c * k)


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
    record without ``field`` gets it as null (``applySchemaless``: ``Map.get`` is null). The
    converted field (or key/value) keeps its optionality (``typeSchema(isOptional())``), and a
    struct its schema's name, version, doc, parameters and optionality."""
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

    def _meta(self, metadata=None):
        """The converted value's metadata: a Connect Time when the target is Time (the converters'
        convention), with the optionality of the value it replaces."""
        return {**(TIME_METADATA if self.values["target.type"] == "Time" else {}), **(field_optional(metadata) or {})}

    def _out(self, c, name, metadata=None):
        return with_metadata(c, name, self._meta(metadata)).alias(name)

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
            return Plan({self.target: self._out(out, self.target, f.metadata)}, failed=failed, message=message)
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
        meta = self._meta(field_t.metadata)
        fields = [(f.name, out, meta) if f.name == name else (f.name, col.getField(f.name)) for f in t.fields]
        value = with_metadata(rebuild(col, fields, t), self.target, schema_basics(frame, self.target, OPTIONAL))
        return Plan({self.target: value}, failed=col.isNotNull() & failed, message=message)
