"""Spark sink benchmark: rows/s written by ``format("riverlog")`` on local[2], exactly-once
against at-least-once, the same rows in the same run (100-byte values, 2 partitions).

The at-least-once run is the baseline: the same Arrow path and producers without transactions,
so the ratio is the cost of the exactly-once protocol (a transactional producer per task, the
commit decision, EndTxn per task). Streaming micro-batches of ``--batch-rows`` rows from a
memory-backed file source; prints one JSON line per figure.

    python bench/sink_bench.py [--rows 2000000] [--batches 4]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.broker_bench import create_topic, emit, start_broker  # noqa: E402


def make_input(directory: str, rows: int, batches: int) -> None:
    """``batches`` Parquet files of random 100-byte values: one micro-batch each."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(directory)
    per = rows // batches
    rng = np.random.default_rng(1)
    for b in range(batches):
        data = rng.integers(0, 256, size=per * 100, dtype=np.uint8).tobytes()
        offsets = pa.array(np.arange(0, (per + 1) * 100, 100, dtype=np.int32))
        values = pa.BinaryArray.from_buffers(pa.binary(), per, [None, offsets.buffers()[1], pa.py_buffer(data)])
        pq.write_table(pa.table({"value": values}), os.path.join(directory, f"part-{b:03d}.parquet"))


def run(spark, servers: str, input_dir: str, topic: str, guarantee: str, checkpoint: str) -> tuple[float, int]:
    df = spark.readStream.schema("value binary").option("maxFilesPerTrigger", 1).parquet(input_dir).repartition(2)
    start = time.perf_counter()
    q = (df.writeStream.format("riverlog").option("riverlog.bootstrap.servers", servers).option("topic", topic)
         .option("deliveryGuarantee", guarantee).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    elapsed = time.perf_counter() - start
    if q.exception() is not None:
        raise q.exception()
    return elapsed, sum(p["numInputRows"] for p in q.recentProgress)


def parquet_read_rows_s(spark, input_dir: str) -> tuple[float, int]:
    """The limit: Spark reading the same rows (and handing them to Python as Arrow) with no sink."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Discard(DataSourceArrowWriter):
        def write(self, iterator):
            for _ in iterator:
                pass
            return WriterCommitMessage()

    class DiscardSource(DataSource):
        @classmethod
        def name(cls):
            return "discard"

        def writer(self, schema, overwrite):
            return Discard()

    spark.dataSource.register(DiscardSource)
    df = spark.read.parquet(input_dir).repartition(2)
    n = df.count()
    start = time.perf_counter()
    df.write.format("discard").mode("append").save()
    return time.perf_counter() - start, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--batches", type=int, default=4)
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    import spark_sink
    work = tempfile.mkdtemp(prefix="sink-bench-")
    proc, servers = start_broker(os.path.join(work, "broker"))
    try:
        spark = (SparkSession.builder.master("local[2]").appName("sink-bench")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                 .config("spark.driver.memory", "2g").getOrCreate())
        spark_sink.register(spark)
        input_dir = os.path.join(work, "input")
        make_input(input_dir, args.rows, args.batches)
        # Warm-up: the first query of a session pays for JIT, workers and imports.
        create_topic(servers, "warmup", 2)
        run(spark, servers, input_dir, "warmup", "at-least-once", os.path.join(work, "ck-warmup"))
        figures = {}
        for guarantee in ("at-least-once", "exactly-once"):
            topic = f"sink-{guarantee}"
            create_topic(servers, topic, 2)
            elapsed, n = run(spark, servers, input_dir, topic, guarantee, os.path.join(work, f"ck-{guarantee}"))
            figures[guarantee] = n / elapsed
            emit(f"sink_{guarantee.replace('-', '_')}_rows_s", n / elapsed, "rows/s", rows=n,
                 batches=args.batches, seconds=round(elapsed, 2))
        emit("sink_exactly_once_vs_at_least_once", figures["exactly-once"] / figures["at-least-once"], "ratio")
        elapsed, n = parquet_read_rows_s(spark, input_dir)
        emit("baseline_spark_parquet_to_python_arrow_rows_s", n / elapsed, "rows/s", rows=n)
        spark.stop()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
