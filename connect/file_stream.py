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
setting. A line is read only once its newline has been written, so a writer caught mid-line is
never split into two records.

    {"name": "lines", "config": {"connector.class": "FileStreamSource", "file": "/tmp/in.txt",
                                 "topic": "lines", "value.converter": "StringConverter"}}
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from connect.config_def import NO_DEFAULT, ConfigDef, ConfigKey, Importance, Type, Width, at_least, non_empty_string
from connect.connector import SinkConnector, SourceConnector, register_connector
from connect.errors import ConnectError
from connect.record_frame import HEADERS_TYPE

FILE_SOURCE_FORMAT = "connect-file"
FILE, FILENAME, POSITION = "file", "filename", "position"
"""Kafka's ``FILE_CONFIG`` and the source partition's and offset's keys."""
_LONG_MIN, _LONG_MAX = -(2 ** 63), 2 ** 63 - 1


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
        self.batch_size = int(options.get("batchSize", "2000"))
        self.start = int(options.get("startingPosition", "0"))

    def initialOffset(self) -> dict:
        return {"position": self.start}

    def _lines(self, start: int, end: int | None, limit: int | None):
        rows, pos = [], start
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return rows, pos
        with f:
            f.seek(start)
            while limit is None or len(rows) < limit:
                if end is not None and pos >= end:
                    break
                line = f.readline()
                if not line.endswith(b"\n"):
                    break
                pos += len(line)
                rows.append((line.rstrip(b"\r\n").decode("utf-8", errors="replace"), pos))
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
    """Kafka's ``FileStreamSourceConnector`` (``file``, ``topic``, ``batch.size``)."""
    class_name = "org.apache.kafka.connect.file.FileStreamSourceConnector"
    aliases = ("FileStreamSource", "FileStreamSourceConnector")
    config_def = ConfigDef([
        _file_key(True),
        ConfigKey("topic", Type.STRING, NO_DEFAULT, non_empty_string, Importance.HIGH,
                  "The topic to publish data to", None, -1, Width.NONE, "topic"),
        ConfigKey("batch.size", Type.INT, 2000, at_least(1), Importance.LOW,
                  "The maximum number of records the source task can read from the file each time it is polled",
                  None, -1, Width.NONE, "batch.size"),
    ])

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
        path = self.values.get("file")
        value = frame.schema["value"].dataType
        text = F.col("value") if value.simpleString() == "string" else \
            F.col("value").cast("string") if value.simpleString() in ("binary",) else F.to_json(F.col("value")) \
            if value.typeName() in ("struct", "map", "array", "variant") else F.col("value").cast("string")
        rows = frame.orderBy("topic", "partition", "offset").select(F.coalesce(text, F.lit("null")).alias("line"))
        lines = [r.line for r in rows.toLocalIterator()]
        if path is None:
            print("\n".join(lines))
            return
        with open(path, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


__all__ = ["FILE_SOURCE_FORMAT", "FileLinesDataSource", "FileStreamSink", "FileStreamSource"]
