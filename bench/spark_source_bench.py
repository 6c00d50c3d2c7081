"""Spark reading a Riverlog topic against Spark reading the same rows from Parquet, local[2], one run.

One broker process; N records (100-byte values) in a topic of 2 partitions; a batch query sums the
value lengths (so every value is read) through ``format("riverlog")``, then the same rows written
to Parquet are read by the same query. Prints one JSON line per figure (rows/s and their ratio).

    python bench/spark_source_bench.py [--records 1000000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_bench import create_topic, emit, start_broker  # noqa: E402 - beside this file


def fill(servers: str, topic: str, n: int) -> None:
    import pyarrow as pa
    from broker.client import Producer
    p = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    chunk = 100_000
    values = pa.array([b"x" * 100] * chunk, pa.binary())
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        p.produce_batch(topic, pa.table({"value": values.slice(0, size)}))
    p.flush(120)
    p.close()


def local_spark():
    """A local[2] SparkSession whose Python workers run this interpreter and see this checkout,
    with ``riverlog`` registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession
    import spark_source
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_source.register(spark)
    return spark


def timed(query) -> float:
    start = time.perf_counter()
    query()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="riverlog-spark-bench-") as tmp:
        proc, servers = start_broker(os.path.join(tmp, "broker"))
        spark = local_spark()
        from pyspark.sql import functions as F
        try:
            create_topic(servers, "bench", 2)
            fill(servers, "bench", args.records)
            riverlog = (spark.read.format("riverlog").option("riverlog.bootstrap.servers", servers)
                        .option("subscribe", "bench").load())
            parquet_dir = os.path.join(tmp, "parquet")
            riverlog.write.parquet(parquet_dir)
            parquet = spark.read.parquet(parquet_dir)

            def total(df):
                return lambda: df.agg(F.sum(F.length("value")), F.count("*")).collect()
            assert total(riverlog)()[0][1] == args.records
            topic_times = [timed(total(riverlog)) for _ in range(args.rounds)]
            parquet_times = [timed(total(parquet)) for _ in range(args.rounds)]
            base = args.records / statistics.median(parquet_times)
            rate = args.records / statistics.median(topic_times)
            emit("baseline.spark_reads_parquet", base, "rows/s", records=args.records)
            emit("spark_source.batch_read", rate, "rows/s", baseline=round(base), ratio=round(rate / base, 3),
                 target_ratio=0.6, records=args.records)
        finally:
            spark.stop()
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
