"""``DirectorySink``: each micro-batch's records as JSON lines or Parquet under a directory, exactly
once per batch.

A batch is written by Spark (``tasks.max`` part files) into a hidden ``_tmp-…`` directory, which is
then renamed into place, so a reader sees a batch whole or not at all. The batch's directory is
named after its first record, Confluent's ``<topic>+<partition>+<offset>`` (the smallest
(topic, partition, offset) of the batch's records that have a value): a batch replayed from the
same start, whether from Spark's checkpoint or, after the checkpoint was lost, from the consumer
group's committed offsets, has the same first record and so replaces the directory instead of
adding a copy. The write job itself observes the first record (``DataFrame.observe``). Read it back
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

_FIRST = "__connect_first"
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
        value = frame.schema["value"].dataType
        columns = [f.name for f in value.fields] if isinstance(value, StructType) else ["value"]
        # Observed after the projection: observing the converted frame itself costs the write
        # twice its time (Spark evaluates the conversion below the observation without sharing it).
        rows = frame.where(F.col("value").isNotNull()).select(
            F.struct("topic", "partition", "offset").alias(_FIRST),
            *(["value.*"] if isinstance(value, StructType) else ["value"]))
        rows = rows.observe(observed, F.min(_FIRST).alias("first")).select(*[F.col(f"`{c}`") for c in columns])
        tmp = os.path.join(root, f"_tmp-{uuid.uuid4().hex}")
        try:
            rows.coalesce(max(1, self.config.tasks_max)).write.mode("overwrite") \
                .format(_SPARK_FORMAT[self.values["format"]]).save(tmp)
            first = observed.get["first"]
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if first is None:  # no record with a value in the batch
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
