"""``DirectorySink``: each micro-batch's records as JSON lines or Parquet under a directory, exactly
once per batch.

A batch is written by Spark (``tasks.max`` part files per topic-partition) into a hidden ``_tmp-…``
directory, one subdirectory per topic-partition, each then renamed into place as
``<topic>+<partition>+<offset>`` — Confluent's naming, the offset being where the batch starts in
that partition (the runtime's ``batch_start``: the previous batch's end in Spark's offset log, or
where the query started). Every attempt at a batch starts each partition at the same offset, whether
it is replayed from Spark's checkpoint or, after the checkpoint was lost, read again from the
consumer group's committed offsets — even when the second attempt holds more or fewer partitions
than the first — so a partition's directory is replaced, not added to. A reader sees each
topic-partition's part of a batch whole or not at all. Read it back with
``spark.read.option("recursiveFileLookup", "true").json(path)`` (or ``.parquet``).

Columns: the fields of the value when the (converted, transformed) value is a struct, else one
``value`` column; tombstones are skipped.

    {"connector.class": "DirectorySink", "topics": "orders", "path": "/data/orders", "format": "jsonl",
     "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false"}
"""
from __future__ import annotations

import os
import re
import shutil
import uuid
from urllib.parse import unquote

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from connect.config_def import NO_DEFAULT, ConfigDef, ConfigKey, Importance, Type, Width
from connect.config_validators import non_empty_string, one_of
from connect.connector import SinkConnector, register_connector

_TOPIC, _PARTITION = "__connect_topic", "__connect_partition"
_SPARK_FORMAT = {"jsonl": "json", "parquet": "parquet"}


@register_connector
class DirectorySink(SinkConnector):
    """JSON lines or Parquet files under ``path``, one directory per batch and topic-partition (see
    the module docstring)."""
    class_name = "io.riverlog.connect.file.DirectorySinkConnector"
    aliases = ("DirectorySink", "DirectorySinkConnector")
    wants_batch_start = True
    config_def = ConfigDef([
        ConfigKey("path", Type.STRING, NO_DEFAULT, non_empty_string, Importance.HIGH,
                  "Directory the batches are written under (created if missing).", None, -1, Width.LONG, "Path"),
        ConfigKey("format", Type.STRING, "jsonl", one_of("jsonl", "parquet"), Importance.MEDIUM,
                  "File format: jsonl (one JSON object per line) or parquet.", None, -1, Width.SHORT, "Format"),
    ])

    @classmethod
    def alter_offsets(cls, config, offsets) -> bool:
        """The group's offsets are all it keeps (a batch's files are named after them)."""
        return True

    @staticmethod
    def batch_name(topic: str, partition: int, offset: int) -> str:
        return f"{re.sub(r'[^A-Za-z0-9._-]', '_', topic)}+{partition}+{offset:020d}"

    def prepare(self, frame: DataFrame) -> DataFrame:
        """Tombstones out; the topic-partition and the value's fields (or the value) kept."""
        value = frame.schema["value"].dataType
        return frame.where(F.col("value").isNotNull()).select(
            F.col("topic").alias(_TOPIC), F.col("partition").alias(_PARTITION),
            *(["value.*"] if isinstance(value, StructType) else ["value"]))

    def write_batch(self, rows: DataFrame, batch_id: int) -> None:
        root = self.values["path"]
        os.makedirs(root, exist_ok=True)
        tmp = os.path.join(root, f"_tmp-{uuid.uuid4().hex}")
        try:
            if len(self.batch_partitions) == 1:
                # One topic-partition (the common case): no partitionBy, whose sort and directory
                # per value cost a small batch about a sixth of its write.
                written = self._write_one(rows.drop(_TOPIC, _PARTITION), tmp)
            else:
                self._writer(rows).partitionBy(_TOPIC, _PARTITION).save(tmp)
                written = self._written(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for (topic, partition), directory in sorted(written.items()):
            for name in os.listdir(directory):
                if name.startswith((".", "_")):
                    os.remove(os.path.join(directory, name))
            start = self.batch_start.get((topic, partition), 0)
            _replace(directory, os.path.join(root, self.batch_name(topic, partition, start)), root)
        shutil.rmtree(tmp, ignore_errors=True)

    def _writer(self, rows: DataFrame):
        return rows.coalesce(max(1, self.config.tasks_max)).write.mode("overwrite") \
            .format(_SPARK_FORMAT[self.values["format"]])

    def _write_one(self, rows: DataFrame, tmp: str) -> dict[tuple[str, int], str]:
        """The batch's one topic-partition written straight into ``tmp``; as with ``partitionBy``,
        no directory when no record was written (tombstones, an aborted transaction's records)."""
        directory = os.path.join(tmp, "one")
        self._writer(rows).save(directory)
        parts = [os.path.join(directory, n) for n in os.listdir(directory) if not n.startswith((".", "_"))]
        if self.values["format"] == "parquet":
            import pyarrow.parquet as pq
            empty = all(pq.read_metadata(p).num_rows == 0 for p in parts)
        else:
            empty = all(os.path.getsize(p) == 0 for p in parts)
        return {} if empty else {self.batch_partitions[0]: directory}

    @staticmethod
    def _written(tmp: str) -> dict[tuple[str, int], str]:
        """The (topic, partition) directories Spark wrote under ``tmp`` (``partitionBy`` names them
        ``<column>=<escaped value>``)."""
        out = {}
        for t in os.listdir(tmp):
            if not t.startswith(_TOPIC + "="):
                continue
            for p in os.listdir(os.path.join(tmp, t)):
                if p.startswith(_PARTITION + "="):
                    out[(unquote(t.split("=", 1)[1]), int(p.split("=", 1)[1]))] = os.path.join(tmp, t, p)
        return out


def _replace(src: str, final: str, root: str) -> None:
    """Rename ``src`` to ``final``, replacing what a previous attempt at the batch left there."""
    if os.path.exists(final):
        trash = os.path.join(root, f"_old-{uuid.uuid4().hex}")
        os.replace(final, trash)
        os.replace(src, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(src, final)


__all__ = ["DirectorySink"]
