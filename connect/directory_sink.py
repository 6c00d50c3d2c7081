"""``DirectorySink``: each micro-batch's records as JSON lines or Parquet under a directory, exactly
once per batch.

A batch is written by Spark (``tasks.max`` part files) into a hidden ``_tmp-…`` directory, which is
then renamed into place, so a reader sees a batch whole or not at all. The batch's directory is
named after its first record, Confluent's ``<topic>+<partition>+<offset>`` (the smallest
(topic, partition, offset) of the batch): a batch replayed from the same start, whether from
Spark's checkpoint or, after the checkpoint was lost, from the consumer group's committed offsets,
has the same first record and so replaces the directory instead of adding a copy. The first
record is observed by the write job itself (``DataFrame.observe``), not by a query before it. Read it back
with ``spark.read.option("recursiveFileLookup", "true").json(path)`` (or ``.parquet``).

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

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from connect.config_def import NO_DEFAULT, ConfigDef, ConfigKey, Importance, Type, Width, non_empty_string, one_of
from connect.connector import SinkConnector, register_connector

_SPARK_FORMAT = {"jsonl": "json", "parquet": "parquet"}


@register_connector
class DirectorySink(SinkConnector):
    """JSON lines or Parquet files under ``path``, one directory per batch (see the module docstring)."""
    class_name = "io.riverlog.connect.file.DirectorySinkConnector"
    aliases = ("DirectorySink", "DirectorySinkConnector")
    config_def = ConfigDef([
        ConfigKey("path", Type.STRING, NO_DEFAULT, non_empty_string, Importance.HIGH,
                  "Directory the batches are written under (created if missing).", None, -1, Width.LONG, "Path"),
        ConfigKey("format", Type.STRING, "jsonl", one_of("jsonl", "parquet"), Importance.MEDIUM,
                  "File format: jsonl (one JSON object per line) or parquet.", None, -1, Width.SHORT, "Format"),
    ])

    @staticmethod
    def batch_name(topic: str, partition: int, offset: int) -> str:
        return f"{re.sub(r'[^A-Za-z0-9._-]', '_', topic)}+{partition}+{offset:020d}"

    def write_batch(self, frame: DataFrame, batch_id: int) -> None:
        root = self.values["path"]
        os.makedirs(root, exist_ok=True)
        observed = Observation(f"directory-sink-{uuid.uuid4().hex}")
        rows = frame.observe(observed, F.min(F.struct("topic", "partition", "offset")).alias("first"))
        rows = rows.where(F.col("value").isNotNull())
        rows = rows.select("value.*") if isinstance(frame.schema["value"].dataType, StructType) else rows.select("value")
        tmp = os.path.join(root, f"_tmp-{uuid.uuid4().hex}")
        try:
            rows.coalesce(max(1, self.config.tasks_max)).write.mode("overwrite") \
                .format(_SPARK_FORMAT[self.values["format"]]).save(tmp)
            first = observed.get["first"]
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if first is None:  # no record in the batch
            shutil.rmtree(tmp, ignore_errors=True)
            return
        final = os.path.join(root, self.batch_name(first["topic"], first["partition"], first["offset"]))
        for name in os.listdir(tmp):
            if name.startswith((".", "_")):
                os.remove(os.path.join(tmp, name))
        if os.path.exists(final):
            trash = os.path.join(root, f"_old-{uuid.uuid4().hex}")
            os.replace(final, trash)
            os.replace(tmp, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(tmp, final)


__all__ = ["DirectorySink"]
