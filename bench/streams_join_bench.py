"""Streams joins on Spark and interactive queries: the DSL against the same join by hand, local[2].

One broker process and one SparkSession (its start-up is not counted); the shapes, runners and
figures of ``streams_bench.py`` (median of ``--rounds`` alternating runs, spread beside it). Prints
one JSON line per figure:

1. ``join``: a stream–table enrichment join through the DSL (``b.table(customers)``,
   ``orders.join(customers, "concat(value, ':', right)")`` → ``to``) against the same join written
   by hand: ``foreachBatch`` over the orders stream, each batch joined with the table's latest
   value per key (``max_by(value, offset)`` over a batch read of the table topic), written
   exactly once. The table is produced before the orders, so both give one result per order. The
   hand-written join re-reads the whole table every batch and does not order a batch's table
   updates against its orders by timestamp, which the DSL does. ``ratio_to_handwritten`` is the
   DSL's rate over the hand-written one (target: ≥ 0.9, i.e. ≤ 10% cost).
2. ``fk``: a foreign-key join (KIP-213) through the DSL (``lines.join(products,
   foreign_key=..., joiner=...)`` → ``toStream().to``; ``--records`` order lines, each its own key,
   against ``records / 20`` products produced first) against the closest PySpark has:
   ``foreachBatch`` over the lines stream, the foreign key extracted with ``split``, each batch
   joined with the products' latest value per key (``max_by(value, offset)`` over a batch read of
   the products topic), written exactly once. The hand-written join answers only the lines' side:
   a product update does not reach the lines that reference it, a changed foreign key retracts
   nothing, and no answer is checked against a newer line — which the DSL does, through its two
   internal topics (a subscription and an answer per line, each a round trip through the broker).
   ``streams.fk_join.python_task_alone``: the three hops through the tasks' Python without Spark.
3. ``store``: interactive queries on a key-value store of ``--store-keys`` keys (default 1M;
   ``STREAMS_JOIN_BENCH_STORE_KEYS`` or ``--scale`` shrink it): its changelog is produced with
   Riverlog's state codec to a compacted 2-partition topic; ``read_store`` (what ``app.store()``
   runs) is timed (the client-side view's build, records/s), then ``get`` of random present keys,
   p50/p99 in microseconds.

    python bench/streams_join_bench.py [--records 200000] [--rounds 2] [--only join,fk,store] [--scale 0.1]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker_bench import create_topic, emit, start_broker  # noqa: E402 - beside this file
from spark_source_bench import local_spark  # noqa: E402
from streams_bench import (Ctx, Run, batch_seconds, compare, fill, read_stream, run_dsl,  # noqa: E402
                           run_stream, topic_size, warm_up)

PARTS = ("join", "fk", "store")


def part_join(ctx, n: int, rounds: int) -> None:
    from pyspark.sql import functions as F
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Produced
    from streams.serdes import Serdes
    orders, customers, keys = "join-orders", "join-customers", max(10, n // 20)
    create_topic(ctx.servers, orders, 2)
    create_topic(ctx.servers, customers, 2)
    fill(ctx.servers, customers, keys, keys=keys, values=lambda i: b"tier%d" % (i % 3))
    fill(ctx.servers, orders, n, keys=keys, start=keys)

    def topology(out):
        b = StreamsBuilder()
        S = Serdes.String()
        table = b.table(customers, Consumed.with_(S, S))
        (b.stream(orders, Consumed.with_(S, S)).join(table, "concat(value, ':', right)")
          .to(out, Produced.with_(S, S)))
        return b.build()

    def by_hand(run):
        def write(batch, batch_id):
            table = (ctx.spark.read.format("riverlog").option("riverlog.bootstrap.servers", ctx.servers)
                     .option("subscribe", customers).load()
                     .groupBy("key").agg(F.max_by("value", "offset").alias("right")))
            joined = batch.join(table, "key").select(
                "key", F.concat(F.col("value").cast("string"), F.lit(":"),
                                F.col("right").cast("string")).cast("binary").alias("value"))
            (joined.write.format("riverlog").mode("append").option("riverlog.bootstrap.servers", ctx.servers)
             .option("topic", run.out).option("sinkId", run.name).option("batchId", str(batch_id)).save())
        return read_stream(ctx, orders).select("key", "value").writeStream.foreachBatch(write)

    runners = {"handwritten": lambda: run_stream(ctx, "j-hand", by_hand),
               "dsl": lambda: run_dsl(ctx, "j-dsl", topology)}
    compare(ctx, "join", n, runners, rounds, table_keys=keys)


def part_fk(ctx, n: int, rounds: int) -> None:
    from pyspark.sql import functions as F
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Produced
    from streams.serdes import Serdes
    lines, products, keys = "fk-lines", "fk-products", max(10, n // 20)
    create_topic(ctx.servers, lines, 2)
    create_topic(ctx.servers, products, 2)
    fill(ctx.servers, products, keys, keys=keys, values=lambda i: b"price%d" % i)
    fill(ctx.servers, lines, n, keys=n + keys, start=keys, values=lambda i: b"k%d/%d" % (i % keys, i))

    def topology(out):
        b = StreamsBuilder()
        S = Serdes.String()
        right = b.table(products, Consumed.with_(S, S))
        (b.table(lines, Consumed.with_(S, S))
          .join(right, foreign_key=lambda v: v.split("/")[0], joiner=lambda line, price: f"{line}:{price}")
          .toStream().to(out, Produced.with_(S, S)))
        return b.build()

    def by_hand(run):
        def write(batch, batch_id):
            table = (ctx.spark.read.format("riverlog").option("riverlog.bootstrap.servers", ctx.servers)
                     .option("subscribe", products).load()
                     .groupBy(F.col("key").alias("fk")).agg(F.max_by("value", "offset").alias("right")))
            keyed = batch.withColumn("fk", F.split(F.col("value").cast("string"), "/").getItem(0).cast("binary"))
            joined = keyed.join(table, "fk").select(
                "key", F.concat(F.col("value").cast("string"), F.lit(":"),
                                F.col("right").cast("string")).cast("binary").alias("value"))
            (joined.write.format("riverlog").mode("append").option("riverlog.bootstrap.servers", ctx.servers)
             .option("topic", run.out).option("sinkId", run.name).option("batchId", str(batch_id)).save())
        return read_stream(ctx, lines).select("key", "value").writeStream.foreachBatch(write)

    queries: list = []

    def dsl():
        """``run_dsl``, keeping each query's rows, batches and batch time: where the time goes."""
        from streams.app import StreamsApp
        run = Run(ctx, "fk-dsl")
        app = StreamsApp(topology(run.out), ctx.spark, run.config())
        start = time.perf_counter()
        app.start()
        try:
            app.processAllAvailable()
            wall = time.perf_counter() - start
            busy = batch_seconds(app.queries)
            queries[:] = [{"query": q.name, "batches": sum(1 for p in q.recentProgress if p["numInputRows"]),
                           "rows": sum(p["numInputRows"] for p in q.recentProgress),
                           "seconds": round(batch_seconds([q]), 1)} for q in app.queries]
        finally:
            app.close()
        return {"wall": wall, "batches": busy, "out": topic_size(ctx.servers, run.out)}

    runners = {"handwritten": lambda: run_stream(ctx, "fk-hand", by_hand), "dsl": dsl}
    compare(ctx, "fk_join", n, runners, rounds, table_keys=keys)
    emit("streams.fk_join.dsl.queries", len(queries), "queries", per_query=queries)
    fk_python_alone(topology, products, lines, n, keys)


def fk_python_alone(topology, products: str, lines: str, n: int, keys: int) -> None:
    """The FK join's three hops through the tasks' Python alone (no Spark, state in dicts, one
    partition): the lines (subscriptions out), the products and subscriptions (answers out), the
    answers (results out); CPU seconds per hop, with the rows each hop writes (outputs, internal
    records and changelog rows)."""
    from datetime import datetime, timezone
    from streams.interpreter import default_serdes
    from streams.spark_task import TaskProcessor
    from streams_bench import BASE, DictMapState
    tp = topology("fk-py-out")
    left = next(sub.id for sub in tp.subtopologies
                if any(lines in node.topics for node in sub.nodes if node.kind == "source"))
    right = next(sub.id for sub in tp.subtopologies if sub.id != left)

    class Handle:
        def getMapState(self, *a):
            return DictMapState()

    class R(dict):
        def asDict(self, recursive=False):
            return self

    def task(sub_id):
        proc = TaskProcessor(tp, sub_id, "fk-py", default_serdes({}), None)
        proc.init(Handle())
        return proc

    def rows(records):
        return [R(topic=t, partition=0, offset=i, key=k, value=v, timestamp=ts, headers=None)
                for i, (t, k, v, ts) in enumerate(records)]

    def hop(proc, records):
        start = time.process_time()
        out = list(proc.handleInputRows((0,), iter(rows(records)), None))
        return time.process_time() - start, [(r.topic, r.key, r.value, r.timestamp) for r in out]

    ts = lambda i: datetime.fromtimestamp((BASE + i) / 1000, tz=timezone.utc)  # noqa: E731
    half = n // 2                                  # one partition's share, as python_alone takes
    products_in = [(products, b"k%d" % i, b"price%d" % i, ts(i)) for i in range(keys // 2)]
    lines_in = [(lines, b"k%d" % i, b"k%d/%d" % (i % (keys // 2), i), ts(keys + i)) for i in range(half)]
    left_task, right_task = task(left), task(right)
    hops = []
    cpu, out = hop(left_task, lines_in)
    hops.append({"hop": "lines", "rows_in": len(lines_in), "rows_out": len(out), "cpu_s": round(cpu, 2)})
    registrations = [r for r in out if "REGISTRATION" in r[0]]
    cpu, out = hop(right_task, products_in + registrations)
    hops.append({"hop": "subscriptions", "rows_in": len(products_in) + len(registrations), "rows_out": len(out),
                 "cpu_s": round(cpu, 2)})
    answers = [r for r in out if "RESPONSE" in r[0]]
    cpu, out = hop(left_task, answers)
    hops.append({"hop": "answers", "rows_in": len(answers), "rows_out": len(out), "cpu_s": round(cpu, 2)})
    results = sum(1 for r in out if r[0] == "fk-py-out")
    total = sum(h["cpu_s"] for h in hops)
    emit("streams.fk_join.python_task_alone", half / total, "rec/s (CPU time)", records=half, results=results,
         hops=hops)


def part_store(ctx, keys: int, gets: int = 20_000) -> None:
    import pyarrow as pa
    from broker.client import Producer
    from streams.interactive import read_store
    from streams.state_codec import encode_key, encode_value
    from streams.stores import StoreSpec
    topic = "iq-prices-changelog"
    create_topic(ctx.servers, topic, 2, **{"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": ctx.servers, "linger.ms": 5})
    start = time.perf_counter()
    for lo in range(0, keys, 50_000):
        for part in (0, 1):
            mine = range(lo + part, min(lo + 50_000, keys), 2)
            p.produce_batch(topic, pa.table({
                "key": pa.array([encode_key(("k", f"key{i}")) for i in mine], pa.binary()),
                "value": pa.array([encode_value((float(i), 1_700_000_000_000 + i)) for i in mine], pa.binary()),
                "timestamp": pa.array([1_700_000_000_000 + i for i in mine], pa.int64())}), partition=part)
    if p.flush(300):
        raise RuntimeError("could not produce the changelog")
    p.close()
    produced = time.perf_counter() - start
    assert topic_size(ctx.servers, topic) == keys
    start = time.perf_counter()
    store = read_store({"bootstrap.servers": ctx.servers}, topic, StoreSpec("prices", "keyValue"), timeout=120)
    build = time.perf_counter() - start
    emit("streams.store.build", keys / build, "keys/s", keys=keys, seconds=round(build, 2),
         produce_seconds=round(produced, 2))
    rng = random.Random(7)
    probes = [f"key{rng.randrange(keys)}" for _ in range(gets)]
    lat = []
    for k in probes:
        t = time.perf_counter_ns()
        v = store.get(k)
        lat.append((time.perf_counter_ns() - t) / 1000)
        if v is None:
            raise AssertionError(f"{k} is missing from the store")
    lat.sort()
    emit("streams.store.get.p50", statistics.median(lat), "us", keys=keys, gets=gets,
         p99=round(lat[int(len(lat) * 0.99)], 2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--store-keys", type=int,
                        default=int(os.environ.get("STREAMS_JOIN_BENCH_STORE_KEYS", "1000000")))
    parser.add_argument("--scale", type=float, default=float(os.environ.get("STREAMS_BENCH_SCALE", "1")))
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated subset of {PARTS}")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    n = max(1_000, int(args.records * args.scale))
    with tempfile.TemporaryDirectory(prefix="riverlog-streams-join-bench-") as tmp:
        proc, servers = start_broker(os.path.join(tmp, "broker"))
        spark = None
        try:
            if "store" in parts:
                part_store(Ctx(None, servers, tmp), max(1_000, int(args.store_keys * args.scale)))
            if parts & {"join", "fk"}:
                spark = local_spark()
                spark.conf.set("spark.sql.session.timeZone", "UTC")
                ctx = Ctx(spark, servers, tmp)
                warm_up(ctx)
                if "join" in parts:
                    part_join(ctx, n, args.rounds)
                if "fk" in parts:
                    part_fk(ctx, n, args.rounds)
        finally:
            if spark is not None:
                spark.stop()
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
