"""Connect against plain Structured Streaming: what the runtime costs, local[2], one run.

Two broker processes and one SparkSession (start-up not counted), one Connect worker. Each figure
runs a connector (created through the worker, its query found by name and run until it has
nothing left with ``processAllAvailable``) and the plain streaming query that does the same work
by hand (same input, same column expressions, same exactly-once riverlog write or file output), a
micro-batch every 100 ms for both, alternating ``--rounds`` times after one untimed warm-up query
of each kind; every figure is the median with the spread (min–max) beside it. Prints one JSON line per figure:

1. ``file_source``: a file of N lines -> a riverlog topic. FileStreamSource (StringConverter) vs
   ``readStream.format("connect-file")`` (the same reader) -> ``writeStream.format("riverlog")``
   exactly-once. ``.transforms``: HoistField$Value, InsertField$Value (static), InsertHeader, value
   written by JsonConverter (schemas.enable=false) vs ``to_json(struct(...))`` and a headers column.
2. ``topic_copy``: N records of a topic on broker B -> broker A (the worker's cluster, so records
   and source offsets are one transaction). TopicCopy vs ``readStream.format("riverlog")`` ->
   ``writeStream.format("riverlog")``. ``.transforms``: RegexRouter, InsertHeader, DropHeaders vs
   ``concat``/``filter`` over topic and headers.
3. ``jsonl_sink``: N JSON records -> JSON-lines files. DirectorySink (JsonConverter,
   schemas.enable=false: the schema inferred per batch) vs ``foreachBatch`` with ``from_json`` and a
   known schema -> ``write.json``. ``.transforms``: MaskField$Value, InsertField$Value (static),
   ReplaceField$Value (renames) vs the same columns by hand. ``.small_batches``: the same in
   batches of 5,000 records (``consumer.override.max.poll.records`` vs ``maxOffsetsPerTrigger``),
   where a sink's steady state shows: its type is inferred in the first batch only.

For each: ``wall`` (start to all input done, query start included) and ``batches`` (Spark's own
time for the batches that read input) in rows/s, the connector's ratio to the plain query (target:
>= 0.9, the runtime costing at most 10%), and ``start_to_first_row`` (start to the first output
visible to a ``read_committed`` consumer, or the first batch directory renamed into place), and
``phases``: seconds per phase of Spark's progress over those batches (``addBatch``, the write — a
sink connector's whole ``foreachBatch``: type inference, planning and write —, ``queryPlanning``,
``latestOffset``, ``walCommit``, ``commitOffsets``), medians of the rounds.

    python bench/connect_bench.py [--records 50000] [--rounds 2] [--only file_source,jsonl_sink]
                                  [--figures jsonl_sink.small_batches,jsonl_sink.transforms.small_batches]

``make bench`` runs it with the defaults.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_bench import create_topic, emit, start_broker  # noqa: E402 - beside this file
from spark_source_bench import local_spark  # noqa: E402

PARTS = ("file_source", "topic_copy", "jsonl_sink")
STRING = "org.apache.kafka.connect.storage.StringConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"
TRIGGER = "100 milliseconds"
ORDER_SCHEMA = "amount DOUBLE, card STRING, id BIGINT, user STRING"
SMALL_BATCH = 5000
FIGURES: set[str] = set()   # --figures: run only these (every figure of the chosen parts when empty)


class Ctx:
    def __init__(self, spark, servers: str, other: str, tmp: str, worker):
        self.spark, self.servers, self.other, self.tmp, self.worker = spark, servers, other, tmp, worker
        self.n = 0

    def fresh(self, label: str) -> str:
        self.n += 1
        return f"{label}-{self.n}"


# ------------------------------------------------------------------------------ watching output
class FirstRow:
    """Polls ``visible()`` in a thread from ``start()`` and keeps the time the first output showed."""

    def __init__(self, visible):
        self.visible, self.at, self._stop = visible, None, threading.Event()

    def start(self) -> "FirstRow":
        self.t0 = time.perf_counter()
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def _run(self):
        while not self._stop.is_set() and self.at is None:
            try:
                if self.visible():
                    self.at = time.perf_counter() - self.t0
            except Exception:  # noqa: BLE001 - the output may not exist yet
                pass
            time.sleep(0.02)

    def stop(self) -> float | None:
        self._stop.set()
        return self.at


def committed_rows(servers: str, topic: str):
    """A ``visible()`` for a topic: a read_committed consumer that has received a record."""
    from broker.client import Consumer
    state = {"c": None}

    def visible():
        if state["c"] is None:
            state["c"] = Consumer({"bootstrap.servers": servers, "group.id": f"bench-first-{topic}",
                                   "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
            state["c"].subscribe([topic])
        m = state["c"].poll(0.05)
        if m is not None and m.error() is None:
            state["c"].close()
            return True
        return False
    return visible


def batch_dir(path: str):
    return lambda: os.path.isdir(path) and any(not n.startswith(("_", ".")) for n in os.listdir(path))


def batch_seconds(q) -> float:
    return sum(p["durationMs"]["triggerExecution"] for p in q.recentProgress if p["numInputRows"] > 0) / 1000


PHASES = ("addBatch", "queryPlanning", "latestOffset", "walCommit", "commitOffsets")


def phase_seconds(q) -> dict[str, float]:
    """Where the batches that read input spent their time, per phase of Spark's progress
    (``addBatch`` is the write: for a sink connector its whole ``foreachBatch``)."""
    rows = [p["durationMs"] for p in q.recentProgress if p["numInputRows"] > 0]
    return {k: sum(r.get(k, 0) for r in rows) / 1000 for k in PHASES}


def topic_end(servers: str, topic: str) -> int:
    from broker.client import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers, "group.id": "bench-size"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts)
    finally:
        c.close()


# ------------------------------------------------------------------------------ runners
def run_connector(ctx, name: str, config: dict, visible) -> dict:
    spark, worker = ctx.spark, ctx.worker
    first = FirstRow(visible).start()
    start = time.perf_counter()
    worker.create_connector(name, config)
    try:
        q = None
        deadline = time.monotonic() + 120
        while q is None:
            q = next((x for x in spark.streams.active if x.name == f"connect-{name}"), None)
            if q is None:
                status = worker.connector_status(name)
                if status["connector"]["state"] == "FAILED" or time.monotonic() > deadline:
                    raise RuntimeError(f"connector {name} did not start: {status}")
                time.sleep(0.02)
        q.processAllAvailable()
        wall = time.perf_counter() - start
        status = worker.connector_status(name)
        if status["connector"]["state"] != "RUNNING":
            raise RuntimeError(f"connector {name}: {status}")
        busy, phases = batch_seconds(q), phase_seconds(q)
    finally:
        latency = first.stop()
        worker.delete_connector(name)
    return {"wall": wall, "batches": busy, "first": latency, "phases": phases}


def run_plain(ctx, name: str, writer, visible) -> dict:
    writer = writer.option("checkpointLocation", os.path.join(ctx.tmp, "ckpt", name)).trigger(processingTime=TRIGGER)
    first = FirstRow(visible).start()
    start = time.perf_counter()
    q = writer.start()
    try:
        q.processAllAvailable()
        wall = time.perf_counter() - start
        busy, phases = batch_seconds(q), phase_seconds(q)
    finally:
        latency = first.stop()
        q.stop()
    return {"wall": wall, "batches": busy, "first": latency, "phases": phases}


def riverlog_write(df, servers: str, topic: str | None = None):
    w = (df.writeStream.format("riverlog").option("riverlog.bootstrap.servers", servers)
         .option("deliveryGuarantee", "exactly-once"))
    return w.option("topic", topic) if topic else w


def compare(name: str, records: int, runners: dict, rounds: int, check) -> None:
    """Alternate plain and connector ``rounds`` times; emit rows/s, the ratio, and start-to-first-row."""
    if FIGURES and name not in FIGURES:
        return
    results = {k: [] for k in runners}
    for _ in range(rounds):
        for k, fn in runners.items():
            r = fn()
            check(k, r)
            results[k].append(r)
    base = {}
    for k, rs in results.items():
        for field in ("wall", "batches"):
            rates = sorted(records / r[field] for r in rs if r[field])
            if not rates:
                continue
            rate = statistics.median(rates)
            fig = {"spread": [round(rates[0]), round(rates[-1])], "records": records}
            if k == "plain":
                base[field] = rate
            else:
                fig["ratio_to_plain"] = round(rate / base[field], 3)
            emit(f"connect.{name}.{k}.{field}", rate, "rows/s", **fig)
        firsts = sorted(r["first"] for r in rs if r["first"] is not None)
        if firsts:
            emit(f"connect.{name}.{k}.start_to_first_row", statistics.median(firsts), "s",
                 spread=[round(firsts[0], 3), round(firsts[-1], 3)])
        phases = [r["phases"] for r in rs if r.get("phases")]
        if phases:
            emit(f"connect.{name}.{k}.phases", statistics.median(sum(p.values()) for p in phases), "s",
                 **{ph: round(statistics.median(p[ph] for p in phases), 3) for ph in PHASES})


# ------------------------------------------------------------------------------ 1. file source
def part_file_source(ctx, n: int, rounds: int) -> None:
    from pyspark.sql import functions as F
    from connect.file_stream import FILE_SOURCE_FORMAT, FileLinesDataSource
    ctx.spark.dataSource.register(FileLinesDataSource)
    path = os.path.join(ctx.tmp, "lines.txt")
    with open(path, "w") as f:
        f.writelines(f"line {i} of the benchmark's input file, some text to carry\n" for i in range(n))
    batch = str(max(1000, n // 10))

    for transforms in (False, True):
        label = "file_source" + (".transforms" if transforms else "")
        extra = {"transforms": "hoist,tag,via", "value.converter": JSON, "value.converter.schemas.enable": "false",
                 "transforms.hoist.type": "HoistField$Value", "transforms.hoist.field": "line",
                 "transforms.tag.type": "InsertField$Value", "transforms.tag.static.field": "src",
                 "transforms.tag.static.value": "bench",
                 "transforms.via.type": "InsertHeader", "transforms.via.header": "via",
                 "transforms.via.value.literal": "bench"} if transforms else {}

        def connector(label=label, extra=extra):
            name, out = ctx.fresh(label.replace(".", "-")), ctx.fresh("out")
            create_topic(ctx.servers, out, 1)
            r = run_connector(ctx, name, {"connector.class": "FileStreamSource", "file": path, "topic": out,
                                          "batch.size": batch, "key.converter": STRING, "value.converter": STRING,
                                          **extra}, committed_rows(ctx.servers, out))
            return {**r, "out": topic_end(ctx.servers, out)}

        def plain(transforms=transforms):
            name, out = ctx.fresh("plain-file"), ctx.fresh("out")
            create_topic(ctx.servers, out, 1)
            df = (ctx.spark.readStream.format(FILE_SOURCE_FORMAT).option("path", path).option("batchSize", batch)
                  .load())
            if transforms:
                df = df.select(F.to_json(F.struct(F.col("value").alias("line"), F.lit("bench").alias("src")))
                               .alias("value"),
                               F.array(F.struct(F.lit("via").alias("key"), F.lit(b"bench").alias("value")))
                               .alias("headers"))
            else:
                df = df.select("value")
            r = run_plain(ctx, name, riverlog_write(df, ctx.servers, out), committed_rows(ctx.servers, out))
            return {**r, "out": topic_end(ctx.servers, out)}

        compare(label, n, {"plain": plain, "connector": connector}, rounds, _at_least(n))


def _at_least(n: int):
    def check(kind, r):
        if r.get("out", n) < n:
            raise RuntimeError(f"{kind} wrote {r['out']} of {n} records")
    return check


# ------------------------------------------------------------------------------ 2. topic copy
def fill(servers: str, topic: str, n: int, value) -> None:
    import pyarrow as pa
    from broker.client import Producer
    p = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for lo in range(0, n, 50_000):
        idx = range(lo, min(lo + 50_000, n))
        p.produce_batch(topic, pa.table({"key": pa.array([b"k%d" % (i % 1000) for i in idx], pa.binary()),
                                         "value": pa.array([value(i) for i in idx], pa.binary())}))
    if p.flush(120):
        raise RuntimeError(f"could not produce to {topic}")
    p.close()


def part_topic_copy(ctx, n: int, rounds: int) -> None:
    from pyspark.sql import functions as F

    def source_topic() -> str:
        topic = ctx.fresh("copy-in")
        create_topic(ctx.other, topic, 1)
        fill(ctx.other, topic, n, lambda i: b"record %d with a payload of some length" % i)
        return topic

    for transforms in (False, True):
        label = "topic_copy" + (".transforms" if transforms else "")
        extra = {"transforms": "route,via,drop",
                 "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
                 "transforms.route.replacement": "copied-$1",
                 "transforms.via.type": "InsertHeader", "transforms.via.header": "via",
                 "transforms.via.value.literal": "bench",
                 "transforms.drop.type": "DropHeaders", "transforms.drop.headers": "trace"} if transforms else {}

        def out_of(topic, transforms=transforms):
            out = f"copied-{topic}" if transforms else topic
            create_topic(ctx.servers, out, 1)
            return out

        def connector(label=label, extra=extra):
            topic = source_topic()
            out = out_of(topic)
            r = run_connector(ctx, ctx.fresh(label.replace(".", "-")),
                              {"connector.class": "TopicCopy", "topics": topic,
                               "source.cluster.bootstrap.servers": ctx.other, **extra},
                              committed_rows(ctx.servers, out))
            return {**r, "out": topic_end(ctx.servers, out)}

        def plain(transforms=transforms):
            topic = source_topic()
            out = out_of(topic)
            df = (ctx.spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", ctx.other)
                  .option("subscribe", topic).option("startingOffsets", "earliest").option("includeHeaders", "true")
                  .load())
            headers = F.col("headers")
            if transforms:
                headers = F.filter(F.concat(F.coalesce(headers, F.array().cast(df.schema["headers"].dataType)),
                                            F.array(F.struct(F.lit("via").alias("key"),
                                                             F.lit(b"bench").alias("value")))),
                                   lambda h: h["key"] != "trace")
            df = df.select(F.lit(out).alias("topic"), "key", "value", "timestamp", headers.alias("headers"))
            r = run_plain(ctx, ctx.fresh("plain-copy"), riverlog_write(df, ctx.servers),
                          committed_rows(ctx.servers, out))
            return {**r, "out": topic_end(ctx.servers, out)}

        compare(label, n, {"plain": plain, "connector": connector}, rounds, _at_least(n))


# ------------------------------------------------------------------------------ 3. JSON-lines sink
def part_jsonl_sink(ctx, n: int, rounds: int) -> None:
    from pyspark.sql import functions as F
    topic = ctx.fresh("orders")
    create_topic(ctx.servers, topic, 1)
    fill(ctx.servers, topic, n, lambda i: json.dumps({"id": i, "user": f"u{i % 100}", "amount": i * 0.25,
                                                      "card": f"4111-0000-{i:08d}"}).encode())

    def rows(path: str) -> int:
        return int(ctx.spark.read.option("recursiveFileLookup", "true").json(path).count())

    for transforms, batch in ((False, None), (True, None), (False, SMALL_BATCH), (True, SMALL_BATCH)):
        label = "jsonl_sink" + (".transforms" if transforms else "") + (".small_batches" if batch else "")
        extra = {"transforms": "mask,tag,rename",
                 "transforms.mask.type": "MaskField$Value", "transforms.mask.fields": "card",
                 "transforms.mask.replacement": "****",
                 "transforms.tag.type": "InsertField$Value", "transforms.tag.static.field": "pipeline",
                 "transforms.tag.static.value": "bench",
                 "transforms.rename.type": "ReplaceField$Value", "transforms.rename.renames": "amount:total"} \
            if transforms else {}
        if batch:
            extra["consumer.override.max.poll.records"] = str(batch)

        def connector(label=label, extra=extra):
            name = ctx.fresh(label.replace(".", "-"))
            path = os.path.join(ctx.tmp, "out", name)
            r = run_connector(ctx, name, {"connector.class": "DirectorySink", "topics": topic, "path": path,
                                          "format": "jsonl", "key.converter": STRING, "value.converter": JSON,
                                          "value.converter.schemas.enable": "false", **extra}, batch_dir(path))
            return {**r, "out": rows(path)}

        def plain(transforms=transforms, batch=batch):
            name = ctx.fresh("plain-jsonl")
            path = os.path.join(ctx.tmp, "out", name)

            def write(batch, batch_id):
                v = batch.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("v")).select("v.*")
                if transforms:
                    v = v.select(F.col("amount").alias("total"), F.lit("****").alias("card"), "id", "user",
                                 F.lit("bench").alias("pipeline"))
                v.write.mode("overwrite").json(os.path.join(path, f"batch-{batch_id:010d}"))

            df = (ctx.spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", ctx.servers)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .options(**({"maxOffsetsPerTrigger": str(batch)} if batch else {})).load())
            r = run_plain(ctx, name, df.writeStream.foreachBatch(write), batch_dir(path))
            return {**r, "out": rows(path)}

        compare(label, n, {"plain": plain, "connector": connector}, rounds, _at_least(n))


# ------------------------------------------------------------------------------ main
def warm_up(ctx) -> None:
    """One untimed plain query and one connector, so the first figure does not pay for the JVM's
    and the Python workers' first queries."""
    topic, out = ctx.fresh("warm"), ctx.fresh("warm-out")
    create_topic(ctx.servers, topic, 1)
    create_topic(ctx.servers, out, 1)
    fill(ctx.servers, topic, 1000, lambda i: b"%d" % i)
    df = (ctx.spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", ctx.servers)
          .option("subscribe", topic).option("startingOffsets", "earliest").load().select("value"))
    run_plain(ctx, ctx.fresh("warm"), riverlog_write(df, ctx.servers, out), lambda: True)
    run_connector(ctx, ctx.fresh("warm"), {"connector.class": "TopicCopy", "topics": topic,
                                           "transforms": "r", "transforms.r.type": "RegexRouter",
                                           "transforms.r.regex": ".*", "transforms.r.replacement": out},
                  lambda: True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default=",".join(PARTS))
    ap.add_argument("--figures", default="", help="only these figures, e.g. jsonl_sink.small_batches")
    args = ap.parse_args()
    FIGURES.update(f for f in args.figures.split(",") if f)
    parts = [p for p in args.only.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        ap.error(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")

    # Spark before any gRPC thread in this process; configured as `riverlog connect standalone`
    # configures its own session (connect/cli.py), which is what the connectors run under.
    spark = local_spark(**{"spark.python.sql.dataFrameDebugging.enabled": "false"})
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
    tmp = tempfile.mkdtemp(prefix="connect-bench-")
    (proc, servers), (proc2, other) = start_broker(os.path.join(tmp, "a")), start_broker(os.path.join(tmp, "b"))
    worker = None
    try:
        from connect import Worker
        worker = Worker(spark, {"bootstrap.servers": servers, "group.id": "connect-bench",
                                "state.dir": os.path.join(tmp, "state"), "connect.trigger.interval": TRIGGER}).start()
        ctx = Ctx(spark, servers, other, tmp, worker)
        warm_up(ctx)
        for part in parts:
            globals()[f"part_{part}"](ctx, args.records, args.rounds)
    finally:
        if worker is not None:
            worker.close()
        spark.stop()
        for p in (proc, proc2):
            p.terminate()
            p.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
