"""delta_apply inside a real ``writeStream.foreachBatch``: a file stream of Kafka-shaped Debezium
rows (one file per micro-batch) into an SCD-2 Delta table, then the checkpoint deleted and the
query run again over every file and one more: the table's commit metadata keeps it from applying anything twice."""
from __future__ import annotations

import os
import random
import shutil
import time

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from spark_sink.delta import delta_apply
from tests.delta_cdc import Events, batch, random_history, records_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_foreach_batch_applies_each_change_once_even_after_the_checkpoint_is_lost(spark, tmp_path):
    txns, final = random_history(random.Random(5), keys=5, steps=30)
    records = records_of(Events(), txns)
    source, lake, ck = tmp_path / "in", str(tmp_path / "lake"), str(tmp_path / "ck")
    source.mkdir()
    part = len(records) // 4 + 1
    start = time.time() - 1000

    def write(i):
        """One file per quarter of the history; Spark's file source takes files by modification time,
        so each gets its own second (files written within one tick would come in any order, and an
        older file after a newer one is, rightly, held by the table's marks)."""
        path = str(source / f"part-{i}.parquet")
        pq.write_table(batch(records[i * part:(i + 1) * part]), path)
        os.utime(path, (start + 10 * i, start + 10 * i))
    for i in range(3):
        write(i)
    schema = spark.read.parquet(str(source)).schema
    sink = delta_apply(table_path=lake, scd_type=2)

    def run():
        q = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
             .writeStream.foreachBatch(sink).option("checkpointLocation", ck).trigger(availableNow=True).start())
        q.awaitTermination()   # availableNow ends by itself; the suite timeout bounds it
        assert q.exception() is None
        return q.id

    first = run()
    table = DeltaTable(lake)
    assert table.transaction_version(f"riverlog.delta.{first}") == 2   # the app id follows the query id
    shutil.rmtree(ck)
    write(3)
    second = run()                             # every file again, batch ids from 0; only the last one is new
    table = DeltaTable(lake)
    assert second != first and table.transaction_version(f"riverlog.delta.{second}") == 3
    history = table.to_pyarrow_table().to_pylist()
    assert len(history) == sum(1 for r in records if r["value"] is not None)
    assert {r["id"]: {c: r[c] for c in ("id", "name", "note")} for r in history if r["__is_current"]} == final
