"""Kafka's FileStream connectors: ``FileStreamSource`` tails one file line by line, and
``FileStreamSink`` appends each record's value to a file, with Kafka's class names and configs.

The source reads through the ``connect-file`` Spark data source (a simple stream reader on the
driver: one file is read by one reader, as Kafka's one task reads it). Its Spark offset is
``{"position": <byte after the last whole line read>}``; Connect's source partition and offset are
Kafka's ``{"filename": <file>}`` -> ``{"position": <n>}``, ``<file>`` being the ``file`` setting
exactly as written (as Kafka's ``FileStreamSourceTask`` keys it, so offsets a Kafka worker stored
are found, and a ``PATCH`` written as Kafka's docs show is read); a relative setting is opened
from the worker's working directory. Earlier Riverlog versions keyed them by the absolute path:
such an offset is still read when none is stored under the setting, and new ones go under the
setting. Lines end as ``FileStreamSourceTask.extractLine`` ends them (``\\n``, ``\\r\\n`` or a lone
``\\r``), and a line is read only once its end has been written, so a writer caught mid-line is
never split into two records. The position counts bytes (Kafka's counts UTF-16 characters, then
skips that many bytes when it restarts, which only agree for ASCII).

    {"name": "lines", "config": {"connector.class": "FileStreamSource", "file": "/tmp/in.txt",
                                 "topic": "lines", "value.converter": "StringConverter"}}
"""
from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.types import (ArrayType, DataType, DecimalType, DoubleType, FloatType, MapType, StructField,
                               StructType, VariantType, VariantVal)

from connect.config_def import NO_DEFAULT, ConfigDef, ConfigKey, Importance, Type, Width
from connect.config_validators import non_empty_string
from connect.connect_types import OPTIONAL
from connect.connector import SinkConnector, SourceConnector, register_connector
from connect.errors import ConnectError
from connect.java_text import java_double
from connect.record_frame import HEADERS_TYPE

FILE_SOURCE_FORMAT = "connect-file"
FILE, FILENAME, POSITION = "file", "filename", "position"
"""Kafka's ``FILE_CONFIG`` and the source partition's and offset's keys."""
_LONG_MIN, _LONG_MAX = -(2 ** 63), 2 ** 63 - 1
_CHUNK = 1 << 16


def _line_end(buf: bytes, start: int = 0) -> tuple[int, int] | None:
    """(end of the line, start of the next) for the first line in ``buf`` from ``start``, or None
    while no line is complete: Kafka's ``extractLine`` rule (``\\n``, ``\\r\\n`` or a lone ``\\r``;
    a trailing ``\\r`` is not known to be lone yet)."""
    lf, cr = buf.find(b"\n", start), buf.find(b"\r", start)
    if lf >= 0 and (cr < 0 or lf < cr):
        return lf, lf + 1
    if cr < 0 or cr + 1 >= len(buf):
        return None
    return cr, cr + 2 if buf[cr + 1] == 0x0A else cr + 1


class FileLinesDataSource(DataSource):
    """``spark.readStream.format("connect-file").option("path", f)``: rows (value, position) where
    position is the byte after the line; options ``batchSize`` (lines per micro-batch) and
    ``startingPosition`` (where a new query starts)."""

    @classmethod
    def name(cls) -> str:
        return FILE_SOURCE_FORMAT

    def schema(self) -> str:
        return "value string, position long"

    def simpleStreamReader(self, schema):
        return _FileLinesReader(self.options)


class _FileLinesReader(SimpleDataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]):
        self.path = options["path"]
        # Kafka's poll returns once it holds batch.size records, so 0 or less means one a poll
        self.batch_size = max(1, int(options.get("batchSize", "2000")))
        self.start = int(options.get("startingPosition", "0"))

    def initialOffset(self) -> dict:
        return {"position": self.start}

    def _lines(self, start: int, end: int | None, limit: int | None):
        """Whole lines from byte ``start`` (up to ``end``, at most ``limit``), as Kafka's
        ``FileStreamSourceTask.extractLine`` splits them: a line ends at ``\\n``, ``\\r`` or
        ``\\r\\n`` (exactly one terminator is removed, so empty lines are records), and a ``\\r``
        that is the last byte written so far waits for the next one, which decides whether the
        terminator is one byte or two."""
        rows, pos = [], start
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return rows, pos
        with f:
            f.seek(start)
            buf, at, eof = b"", 0, False
            while limit is None or len(rows) < limit:
                if end is not None and pos >= end:
                    break
                cut = _line_end(buf, at)
                if cut is None:
                    if eof:
                        break
                    chunk = f.read(_CHUNK)
                    eof = not chunk
                    buf, at = buf[at:] + chunk, 0
                    continue
                until, after = cut
                pos += after - at
                rows.append((buf[at:until].decode("utf-8", errors="replace"), pos))
                at = after
        return rows, pos

    def read(self, start: dict):
        rows, pos = self._lines(int(start["position"]), None, self.batch_size)
        return iter(rows), {"position": pos}

    def readBetweenOffsets(self, start: dict, end: dict):
        rows, _ = self._lines(int(start["position"]), int(end["position"]), None)
        return iter(rows)


def _file_key(required: bool) -> ConfigKey:
    return ConfigKey("file", Type.STRING, NO_DEFAULT if required else None,
                     non_empty_string if required else None, Importance.HIGH,
                     "Source filename." if required else "Destination filename.", None, -1, Width.NONE, "file")


@register_connector
class FileStreamSource(SourceConnector):
    """Kafka's ``FileStreamSourceConnector`` (``file``, ``topic``, ``batch.size``). Kafka reads
    stdin when ``file`` is unset; a connector here runs as a Spark query with no terminal to read,
    so ``file`` is required. ``batch.size`` below 1 reads one line per micro-batch, as Kafka's
    ``poll`` returns once it holds ``batch.size`` records."""
    class_name = "org.apache.kafka.connect.file.FileStreamSourceConnector"
    aliases = ("FileStreamSource", "FileStreamSourceConnector")
    config_def = ConfigDef([
        _file_key(True),
        ConfigKey("topic", Type.STRING, NO_DEFAULT, non_empty_string, Importance.HIGH,
                  "The topic to publish data to", None, -1, Width.NONE, "topic"),
        ConfigKey("batch.size", Type.INT, 2000, None, Importance.LOW,
                  "The maximum number of records the source task can read from the file each time it is polled",
                  None, -1, Width.NONE, "batch.size"),
    ])

    def output_topics(self) -> list[str]:
        return [self.values["topic"]]

    @property
    def filename(self) -> str:
        """The source partition's ``filename``: the ``file`` setting unchanged (Kafka's key)."""
        return self.values["file"]

    @property
    def file(self) -> str:
        """Where the file is opened: the setting, from the worker's working directory."""
        return os.path.abspath(self.values["file"])

    def stored_position(self) -> int:
        """Where a new query starts: the offset stored under the setting, else one an earlier
        Riverlog stored under the absolute path, else the file's start."""
        def stored(filename: str) -> dict | None:
            return next((o for p, o in self.context.stored_offsets if p.get("filename") == filename and o), None)
        found = stored(self.filename)
        if found is None and self.file != self.filename:
            found = stored(self.file)
        return int((found or {}).get("position", 0))

    def read_stream(self) -> DataFrame:
        spark = self.context.spark
        spark.dataSource.register(FileLinesDataSource)
        lines = (spark.readStream.format(FILE_SOURCE_FORMAT).option("path", self.file)
                 .option("batchSize", str(self.values["batch.size"]))
                 .option("startingPosition", str(self.stored_position())).load())
        return lines.select(F.lit(self.values["topic"]).alias("topic"), F.lit(None).cast("int").alias("partition"),
                            F.lit(None).cast("long").alias("offset"), F.lit(None).cast("timestamp").alias("timestamp"),
                            F.lit(None).cast("string").alias("key"), F.col("value"),
                            F.array().cast(HEADERS_TYPE).alias("headers"))

    def source_offsets(self, end_offset: Mapping[str, Any]) -> list[tuple[dict, dict]]:
        return [({"filename": self.filename}, {"position": int(end_offset["position"])})]

    @classmethod
    def alter_offsets(cls, config: Mapping[str, str], offsets: list[tuple[dict, dict | None]]) -> bool:
        """Kafka's ``FileStreamSourceConnector.alterOffsets`` checks, with its messages: a
        tombstone is always allowed (to clean up whatever is stored), any other offset needs a
        non-negative integer ``position`` and a partition with ``filename``. Whether the
        position fits the file is left to the query, as Kafka leaves it to the task."""
        if not config.get("file"):
            raise ConnectError(f"Offsets cannot be modified if the '{FILE}' configuration is unspecified. "
                               "This is because stdin is used for input and offsets are not tracked.")
        for partition, offset in offsets:
            if offset is None:
                continue
            if POSITION not in offset:
                raise ConnectError(f"Offset objects should either be null or contain the key '{POSITION}'")
            position = offset[POSITION]
            if not isinstance(position, int) or isinstance(position, bool) or not _LONG_MIN <= position <= _LONG_MAX:
                raise ConnectError(f"The value for the '{POSITION}' key in the offset is expected to be a Long value")
            if position < 0:
                raise ConnectError(f"The value for the '{POSITION}' key in the offset should be a non-negative value")
            if partition is None:
                raise ConnectError("Partition objects cannot be null")
            if FILENAME not in partition:
                raise ConnectError(f"Partition objects should contain the key '{FILENAME}'")
        return True

    def task_configs(self, tasks_max: int) -> list[dict[str, str]]:
        """One file has one reader (Kafka's connector makes one task whatever ``tasks.max`` says)."""
        return [{"file": self.values["file"], "topic": self.values["topic"],
                 "batch.size": str(self.values["batch.size"])}]


def _java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), spread as ``HashMap.hash`` spreads it."""
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _hash_map_order(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Entries in the order a ``java.util.HashMap`` of string keys iterates them (JsonConverter
    builds maps as HashMaps): by bucket of the spread hash in the table the map grew to (16, doubled
    past 0.75 full), entries of one bucket in the order given. Other keys keep the order given."""
    if not all(isinstance(k, str) for k, _ in items):
        return items
    capacity = 16
    while len(items) > capacity * 3 // 4:
        capacity *= 2
    return sorted(items, key=lambda kv: _java_string_hash(kv[0]) & (capacity - 1))


def java_string(value: Any, data_type: DataType, schemaless: bool = False) -> str:
    """``String.valueOf`` of the Connect value a Spark value of ``data_type`` stands for, as
    Kafka's ``FileStreamSinkTask`` prints it: ``Struct.toString`` (``Struct{name=ann,age=3}``,
    null fields left out), ``AbstractMap.toString`` (``{a=1, b=x}``), ``AbstractCollection.toString``
    (``[1, 2]``), ``Double.toString`` (``3.0``), a string bare, null as ``null``. A VARIANT and, with
    ``schemaless``, a struct are JsonConverter's schemaless values: maps of longs, doubles, strings,
    booleans and lists; a decimal in them is a number the batch's inference widened, written as the
    ``Long`` (scale 0) or ``Double`` JsonConverter reads for it. Where Java prints no value
    (``byte[]``'s ``[B@1b6d3586``), the bytes are decoded as UTF-8; dates and timestamps are
    ``java.util.Date.toString`` in UTC (Kafka's uses the worker's zone)."""
    if value is None:
        return "null"
    if isinstance(data_type, VariantType) or isinstance(value, VariantVal):
        return _java_plain(value.toPython() if isinstance(value, VariantVal) else value, variant=True)
    if isinstance(data_type, StructType):
        fields = [(f, value[i]) for i, f in enumerate(data_type.fields)]
        if schemaless:
            return _java_map([(f.name, java_string(v, f.dataType, True)) for f, v in fields if v is not None])
        return "Struct{" + ",".join(f"{f.name}={java_string(v, f.dataType)}" for f, v in fields if v is not None) + "}"
    if isinstance(data_type, MapType):
        return _java_map([(java_string(k, data_type.keyType, schemaless), java_string(v, data_type.valueType,
                                                                                        schemaless))
                          for k, v in value.items()])
    if isinstance(data_type, ArrayType):
        return "[" + ", ".join(java_string(v, data_type.elementType, schemaless) for v in value) + "]"
    if isinstance(data_type, (DoubleType, FloatType)):
        return java_double(value, isinstance(data_type, FloatType))
    if schemaless and isinstance(data_type, DecimalType):
        return str(int(value)) if data_type.scale == 0 else java_double(float(value))
    return _java_plain(value)


def _java_map(entries: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in _hash_map_order(entries)) + "}"


def _java_plain(v: Any, variant: bool = False) -> str:
    """A Python value as the Java object JsonConverter reads for it: ``Boolean``, ``Long``,
    ``Double``, a ``BigDecimal`` for a decimal column's value; in a VARIANT (schemaless JSON) every
    fraction is a ``Double``, as JsonConverter reads a schemaless number that is not integral."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return java_double(v)
    if isinstance(v, Decimal):
        return java_double(float(v)) if variant else str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    if isinstance(v, dict):
        return _java_map([(_java_plain(k, variant), _java_plain(x, variant)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_java_plain(x, variant) for x in v) + "]"
    if isinstance(v, datetime.datetime):
        utc = v.astimezone(datetime.timezone.utc) if v.tzinfo else \
            datetime.datetime.fromtimestamp(v.timestamp(), datetime.timezone.utc)
        return utc.strftime("%a %b %d %H:%M:%S UTC %Y")
    if isinstance(v, datetime.date):
        return v.strftime("%a %b %d 00:00:00 UTC %Y")
    return str(v)


@register_connector
class FileStreamSink(SinkConnector):
    """Kafka's ``FileStreamSinkConnector``: each record's value as one line (``str`` of the
    Connect value, as Kafka's ``toString``), appended in offset order per partition. As Kafka's,
    it is at-least-once: a batch replayed after a crash is appended again."""
    class_name = "org.apache.kafka.connect.file.FileStreamSinkConnector"
    aliases = ("FileStreamSink", "FileStreamSinkConnector")
    config_def = ConfigDef([_file_key(False)])

    @classmethod
    def alter_offsets(cls, config: Mapping[str, str], offsets: Mapping[tuple[str, int], int | None]) -> bool:
        """As Kafka's: the group's offsets are all this sink keeps."""
        return True

    def write_batch(self, frame: DataFrame, batch_id: int) -> None:
        """Each value as :func:`java_string` renders it from the value's own schema, never from the
        rest of the batch; an empty batch writes nothing (Kafka's ``put`` of no records prints
        nothing)."""
        path = self.values.get("file")
        field = frame.schema["value"]
        schemaless = _schemaless(field)
        rows = frame.orderBy("topic", "partition", "offset").select("value").toLocalIterator()
        lines = [java_string(r.value, field.dataType, schemaless) for r in rows]
        if not lines:
            return
        if path is None:
            print("\n".join(lines))
            return
        with open(path, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


def _schemaless(field: StructField) -> bool:
    """Whether ``value`` stands for JsonConverter's schemaless data (a type Riverlog inferred from
    plain JSON, whose column carries no Connect schema metadata: a struct is then a map) rather
    than data read with a schema (which marks the column with ``connect.optional``)."""
    return OPTIONAL not in (field.metadata or {})


__all__ = ["FILE_SOURCE_FORMAT", "FileLinesDataSource", "FileStreamSink", "FileStreamSource"]
