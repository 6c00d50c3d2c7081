"""Spark reading a Riverlog topic against Spark reading the same rows from Parquet and against the
ceiling of the Python data source path itself, local[2], one run.

One broker process; N records (100-byte values) in a topic of 2 partitions; a batch query sums the
value lengths (so every value is read) through ``format("riverlog")``; the same query reads the
same rows written to Parquet, and the same rows yielded from memory as Arrow batches of the size
riverlog yields (``bench/arrow_ceiling.py``, no broker). The three alternate, ``--rounds`` times;
each figure is the median with its range and the load average beside it. ``read_slice`` alone
(no Spark, in this process) is timed too, and profiled with ``--profile``. Prints one JSON line per figure.

    python bench/spark_source_bench.py [--records 1000000] [--rounds 3] [--profile]
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


def local_spark(**conf):
    """A local[2] SparkSession whose Python workers run this interpreter and see this checkout,
    with ``riverlog`` registered (and ``conf`` set on the builder)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.path.join(ROOT, "bench"), os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession
    import spark_source
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config(map=conf).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_source.register(spark)
    return spark


def timed(query) -> float:
    start = time.perf_counter()
    query()
    return time.perf_counter() - start


def load() -> float:
    return round(os.getloadavg()[0], 2)


def read_slice_alone(servers: str, records: int, profile: bool) -> tuple[float, int, list[int]]:
    """``read_slice`` of the topic's partition 0 in this process: seconds, rows, rows per batch."""
    from spark_source.options import SourceOptions
    from spark_source.reader import OffsetLookup, read_slice
    from spark_source.planning import Slice
    options = SourceOptions.parse({"riverlog.bootstrap.servers": servers, "subscribe": "bench"}, streaming=False)
    lookup = OffsetLookup(options)
    try:
        high = lookup.watermarks([("bench", 0)])[("bench", 0)][1]
    finally:
        lookup.close()
    sizes: list[int] = []
    profiler = None
    if profile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    for batch in read_slice(options, Slice("bench", 0, 0, high)):
        sizes.append(batch.num_rows)
    elapsed = time.perf_counter() - start
    if profiler is not None:
        import pstats
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    return elapsed, high, sizes


def spread(times: list[float], rows: int) -> dict:
    rates = sorted(rows / t for t in times)
    return {"min": round(rates[0]), "max": round(rates[-1])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile read_slice alone, to stderr")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="riverlog-spark-bench-") as tmp:
        proc, servers = start_broker(os.path.join(tmp, "broker"))
        spark = local_spark()
        from pyspark.sql import functions as F
        try:
            create_topic(servers, "bench", 2)
            fill(servers, "bench", args.records)
            elapsed, rows, sizes = read_slice_alone(servers, args.records, args.profile)
            batch_rows = round(statistics.median(sizes))
            emit("spark_source.read_slice_alone", rows / elapsed, "rows/s", rows=rows, batches=len(sizes),
                 median_batch_rows=batch_rows, load=load())
            from arrow_ceiling import ArrowCeiling
            spark.dataSource.register(ArrowCeiling)
            ceiling = (spark.read.format("arrow_ceiling").option("rows", args.records).option("partitions", 2)
                       .option("batchRows", batch_rows).load())
            riverlog = (spark.read.format("riverlog").option("riverlog.bootstrap.servers", servers)
                        .option("subscribe", "bench").load())
            parquet_dir = os.path.join(tmp, "parquet")
            riverlog.write.parquet(parquet_dir)
            parquet = spark.read.parquet(parquet_dir)

            def total(df):
                return lambda: df.agg(F.sum(F.length("value")), F.count("*")).collect()
            assert total(riverlog)()[0][1] == args.records
            assert total(ceiling)()[0][1] == args.records  # builds the batches in the workers, untimed
            assert total(ceiling)()[0][1] == args.records
            times: dict[str, list[float]] = {"parquet": [], "ceiling": [], "riverlog": []}
            loads = []
            for _ in range(args.rounds):
                for name, df in (("parquet", parquet), ("ceiling", ceiling), ("riverlog", riverlog)):
                    times[name].append(timed(total(df)))
                loads.append(load())
            n = args.records
            base = n / statistics.median(times["parquet"])
            top = n / statistics.median(times["ceiling"])
            rate = n / statistics.median(times["riverlog"])
            where = {"records": n, "rounds": args.rounds, "load": loads}
            emit("baseline.spark_reads_parquet", base, "rows/s", **spread(times["parquet"], n), **where)
            emit("baseline.spark_reads_python_arrow_ceiling", top, "rows/s", batch_rows=batch_rows,
                 **spread(times["ceiling"], n), **where)
            emit("spark_source.batch_read", rate, "rows/s", **spread(times["riverlog"], n), **where)
            emit("spark_source.batch_read_vs_ceiling", rate / top, "ratio", target_ratio=0.8,
                 per_round=[round(c / r, 3) for c, r in zip(times["ceiling"], times["riverlog"])])
            emit("spark_source.batch_read_vs_parquet", rate / base, "ratio",
                 per_round=[round(p / r, 3) for p, r in zip(times["parquet"], times["riverlog"])])
        finally:
            spark.stop()
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
