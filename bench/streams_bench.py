"""Streams on Spark: the DSL's queries against the same work written by hand in PySpark, local[2], one run.

One broker process and one SparkSession (its start-up is not counted). Input is produced before
each figure's clock starts (String keys and values, 2 partitions, keys hashed to partitions), and
each query runs until it has nothing left (``StreamsApp.processAllAvailable`` for the DSL,
``processAllAvailable`` for the hand-written streaming queries, a micro-batch every 100 ms for
both). DSL and hand-written runs alternate (``--rounds``), and every figure is the median with the
spread (min–max) beside it. Prints one JSON line per figure:

1. ``window``: a 1-minute tumbling windowed count (DSL, emit on update) vs ``groupBy(window(),
   key).count()`` with a 0 s watermark in append mode to the exactly-once sink (emits each window
   once, when the watermark passes its end) and the same in update mode through ``foreachBatch``;
   the DSL with its default record cache and without it.
2. ``ktable``: ``table() → groupBy(value) → count()`` vs a batch recompute (latest value per key
   with ``max_by``, then ``groupBy(value).count()``) written exactly once; the DSL with and
   without its record cache.
3. ``count``: a grouped count through ``transformWithState`` vs Spark's ``groupBy(key).count()``
   in update mode, both on the RocksDB state store, both written exactly once; the DSL with its
   default record cache (one output per key per batch, as update mode) and without it; plus
   ``transformWithState`` with a processor that only counts its rows (Spark's cost of handing
   rows to Python) and the task's Python alone (no Spark, CPU time, cProfile's top entries).
   ``breakdown``: one more DSL count whose processor times itself on the executor (its
   ``MapState`` calls, the task's Python, the output Rows' conversion to Arrow).
4. ``restore``: restart of a grouped count with its checkpoint vs without it (state rebuilt from
   the changelog) for changelogs of 1k, 10k and 100k keys: start until the first batch is done.
5. ``latency``: produce → visible to a ``read_committed`` consumer, p50 and p95, 200 rec/s,
   exactly-once, ``commit.interval.ms`` 100: a stateless (pure SQL) and a stateful topology.
6. ``mapvalues``: one stateless ``mapValues`` (upper-case the String value) → ``to``, written as SQL
   (all in Spark), as a vectorised callable (``streams.vectorized``: one ``mapInArrow`` call per
   Arrow batch, serdes in Spark) and as a per-record callable (the task: Python per record,
   serdes included); one JSON line each, wall-clock rec/s with the batches' own rate beside it.
7. ``smallbatch``: two stateful sub-topologies in small micro-batches (6 offsets), 2-partition
   input: each query's median ``addBatch`` and ``triggerExecution``, where a batch's fixed costs
   (the state-store tasks, the processor's start, the exactly-once write) show.
8. ``steady``: the windowed count of 1. (DSL and hand-written append) in batches of 20,000
   (``maxOffsetsPerTrigger``): the median ``addBatch`` and ``triggerExecution`` of the batches
   after the first, where a running application spends its time (the first starts the query).

    python bench/streams_bench.py [--records 200000] [--rounds 2] [--only window,count] [--scale 0.25]

``make bench`` runs it with the defaults (about 10 minutes on a quiet machine).

``--scale`` (or ``STREAMS_BENCH_SCALE``) multiplies every record and key count, for a quick run.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
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
from pyspark.sql.streaming.stateful_processor import StatefulProcessor  # noqa: E402

BASE = 1_700_000_000_000  # event time of the first record (ms)
EVERY_UPDATE = {"statestore.cache.max.bytes": 0}   # Kafka's record cache off: one output per input record
PARTS = ("window", "ktable", "count", "breakdown", "restore", "latency", "mapvalues", "smallbatch", "steady")


# ------------------------------------------------------------------------------ input
def fill(servers: str, topic: str, n: int, keys: int, step_ms: int = 3, values=None, start: int = 0) -> None:
    """``n`` records, key ``k{i % keys}``, event time ``BASE + i * step_ms``, into a 2-partition topic."""
    import pyarrow as pa
    from broker.client import Producer
    p = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    chunk = 50_000
    for lo in range(start, start + n, chunk):
        idx = range(lo, min(lo + chunk, start + n))
        table = pa.table({"key": pa.array([b"k%d" % (i % keys) for i in idx], pa.binary()),
                          "value": pa.array([values(i) if values else b"v%d" % i for i in idx], pa.binary()),
                          "timestamp": pa.array([BASE + i * step_ms for i in idx], pa.int64())})
        p.produce_batch(topic, table)
    if p.flush(120):
        raise RuntimeError(f"could not produce to {topic}")
    p.close()


def topic_size(servers: str, topic: str) -> int:
    from broker.client import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers, "group.id": "bench-size"})
    try:
        return sum(high - low for low, high in (c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                                                for p in range(2)))
    finally:
        c.close()


class Run:
    """Names and a fresh output topic per run, so runs share nothing."""
    n = 0

    def __init__(self, ctx, label: str):
        Run.n += 1
        self.ctx, self.name = ctx, f"{label}-{Run.n}"
        self.out = f"{self.name}-out"
        create_topic(ctx.servers, self.out, 2)
        self.ckpt = os.path.join(ctx.tmp, "ckpt", self.name)

    def config(self, **extra) -> dict:
        return {"application.id": self.name, "bootstrap.servers": self.ctx.servers,
                "state.dir": os.path.join(self.ctx.tmp, "state"), "commit.interval.ms": 100, **extra}


def batch_seconds(queries) -> float:
    """Spark's own time for the batches that read input (planning and writing included)."""
    total = 0
    for q in queries:
        for p in q.recentProgress:
            if p["numInputRows"] > 0:
                total += p["durationMs"]["triggerExecution"]
    return total / 1000


# ------------------------------------------------------------------------------ runners
def run_dsl(ctx, label: str, topology, **config) -> dict:
    from streams.app import StreamsApp
    run = Run(ctx, label)
    tp = topology(run.out)
    app = StreamsApp(tp, ctx.spark, run.config(**config))
    start = time.perf_counter()
    app.start()
    try:
        app.processAllAvailable()
        wall = time.perf_counter() - start
        busy = batch_seconds(app.queries)
    finally:
        app.close()
    return {"wall": wall, "batches": busy, "out": topic_size(ctx.servers, run.out)}


def run_stream(ctx, label: str, build, update: bool = False, rocksdb: bool = False) -> dict:
    """A hand-written streaming query: ``build(run)`` gives the DataStreamWriter (trigger and
    checkpoint are set here)."""
    from streams.app import _PROVIDER, _ROCKSDB, _start_with
    run = Run(ctx, label)
    writer = build(run).option("checkpointLocation", run.ckpt).trigger(processingTime="100 milliseconds")
    start = time.perf_counter()
    q = _start_with(ctx.spark, writer, {_PROVIDER: _ROCKSDB}) if rocksdb else writer.start()
    try:
        q.processAllAvailable()
        wall = time.perf_counter() - start
        busy = batch_seconds([q])
    finally:
        q.stop()
    return {"wall": wall, "batches": busy, "out": topic_size(ctx.servers, run.out)}


def read_stream(ctx, topic: str, max_offsets: int | None = None):
    reader = (ctx.spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", ctx.servers)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return reader.load()


def sink(ctx, run, df):
    return (df.writeStream.format("riverlog").option("riverlog.bootstrap.servers", ctx.servers)
            .option("topic", run.out).option("deliveryGuarantee", "exactly-once"))


def update_sink(ctx, run, df):
    """Update mode (Python sinks refuse it) through ``foreachBatch``, exactly once as the DSL writes."""
    def write(batch, batch_id):
        (batch.write.format("riverlog").mode("append").option("riverlog.bootstrap.servers", ctx.servers)
         .option("topic", run.out).option("sinkId", run.name).option("batchId", str(batch_id)).save())
    return df.writeStream.outputMode("update").foreachBatch(write)


def compare(ctx, name: str, records: int, runners: dict, rounds: int, **extra) -> None:
    """Alternate the runners ``rounds`` times; emit each one's rec/s and its ratio to the first baseline."""
    results = {k: [] for k in runners}
    for _ in range(rounds):
        for k, fn in runners.items():
            results[k].append(fn())
    first = next(iter(runners))
    base = None
    for k, rs in results.items():
        for field in ("wall", "batches"):
            rates = sorted(records / r[field] for r in rs)
            rate = statistics.median(rates)
            fig = {"spread": [round(rates[0]), round(rates[-1])], "records": records, "output_offsets": rs[-1]["out"]}
            if k == first:
                base = base or {}
                base[field] = rate
            else:
                fig["ratio_to_" + first] = round(rate / base[field], 3)
            emit(f"streams.{name}.{k}.{field}", rate, "rec/s", **fig, **extra)


# ------------------------------------------------------------------------------ 1. windowed count
def window_topology(topic: str):
    """``build(out)``: the DSL's 1-minute tumbling count of ``topic`` per key, written to ``out``."""
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Produced
    from streams.serdes import Serdes
    from streams.windows import TimeWindows

    def build(out):
        b = StreamsBuilder()
        (b.stream(topic, Consumed.with_(Serdes.String(), Serdes.String())).groupByKey()
          .windowedBy(TimeWindows.ofSizeWithNoGrace(60_000)).count()
          .toStream().map(lambda k, v: (f"{k.key}@{k.start}", v))
          .to(out, Produced.with_(Serdes.String(), Serdes.Long())))
        return b.build()
    return build


def window_counted(ctx, topic: str, max_offsets: int | None = None):
    """The same count written by hand: ``groupBy(window(), key).count()`` with a 0 s watermark."""
    from pyspark.sql import functions as F
    from streams.serdes import Serdes
    df = read_stream(ctx, topic, max_offsets).withWatermark("timestamp", "0 seconds")
    c = df.groupBy(F.window("timestamp", "1 minute"), "key").count()
    return c.select(F.concat(F.col("key").cast("string"), F.lit("@"),
                             F.unix_millis(F.col("window.start")).cast("string")).cast("binary").alias("key"),
                    Serdes.Long().encode(F.col("count")).alias("value"))


def part_window(ctx, n: int, rounds: int) -> None:
    topic = "window-in"
    create_topic(ctx.servers, topic, 2)
    fill(ctx.servers, topic, n, keys=1000)
    topology = window_topology(topic)

    def counted(run):
        return window_counted(ctx, topic)

    runners = {
        "handwritten_append": lambda: run_stream(ctx, "w-hand", lambda r: sink(ctx, r, counted(r))),
        "dsl": lambda: run_dsl(ctx, "w-dsl", topology),
        "dsl_every_update": lambda: run_dsl(ctx, "w-dsl0", topology, **EVERY_UPDATE),
        "handwritten_update": lambda: run_stream(ctx, "w-upd", lambda r: update_sink(ctx, r, counted(r))),
    }
    compare(ctx, "window", n, runners, rounds, keys=1000, windows=-(-n * 3 // 60_000) + 1)
    python_alone("window", topology, topic, n, 1000, step_ms=3)


# ------------------------------------------------------------------------------ 2. KTable aggregation
def part_ktable(ctx, n: int, rounds: int) -> None:
    from pyspark.sql import functions as F
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Grouped, Produced
    from streams.serdes import Serdes
    topic, keys = "table-in", max(10, n // 20)
    create_topic(ctx.servers, topic, 2)
    fill(ctx.servers, topic, n, keys=keys, values=lambda i: b"g%d" % ((i * 7) % 100))

    def topology(out):
        b = StreamsBuilder()
        (b.table(topic, Consumed.with_(Serdes.String(), Serdes.String()))
          .groupBy("value", Grouped.with_(Serdes.String(), Serdes.String())).count()
          .toStream().to(out, Produced.with_(Serdes.String(), Serdes.Long())))
        return b.build()

    def recompute():
        run = Run(ctx, "t-hand")
        start = time.perf_counter()
        df = (ctx.spark.read.format("riverlog").option("riverlog.bootstrap.servers", ctx.servers)
              .option("subscribe", topic).load())
        latest = df.groupBy("key").agg(F.max_by("value", "offset").alias("value"))
        out = latest.groupBy("value").count().select(F.col("value").alias("key"),
                                                     Serdes.Long().encode(F.col("count")).alias("value"))
        (out.write.format("riverlog").mode("append").option("riverlog.bootstrap.servers", ctx.servers)
         .option("topic", run.out).option("sinkId", run.name).option("batchId", "0").save())
        wall = time.perf_counter() - start
        return {"wall": wall, "batches": wall, "out": topic_size(ctx.servers, run.out)}

    runners = {"handwritten_batch": recompute, "dsl": lambda: run_dsl(ctx, "t-dsl", topology),
               "dsl_every_update": lambda: run_dsl(ctx, "t-dsl0", topology, **EVERY_UPDATE)}
    compare(ctx, "ktable", n, runners, rounds, keys=keys, groups=100)


# ------------------------------------------------------------------------------ 3. custom state vs native
class CountRows(StatefulProcessor):
    """transformWithState's floor: a processor that only counts its rows and yields one."""
    def init(self, handle):
        pass

    def handleInputRows(self, key, rows, timerValues):
        from pyspark.sql import Row
        yield Row(key=str(key[0]).encode(), value=str(sum(1 for _ in rows)).encode())

    def close(self):
        pass


def count_topology(topic: str):
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Produced
    from streams.serdes import Serdes

    def build(out):
        b = StreamsBuilder()
        (b.stream(topic, Consumed.with_(Serdes.String(), Serdes.String())).groupByKey().count()
          .toStream().to(out, Produced.with_(Serdes.String(), Serdes.Long())))
        return b.build()
    return build


def part_count(ctx, n: int, rounds: int) -> None:
    from pyspark.sql import functions as F
    from streams.serdes import Serdes
    topic, keys = "count-in", max(10, n // 20)
    create_topic(ctx.servers, topic, 2)
    fill(ctx.servers, topic, n, keys=keys)
    ctx.filled[topic] = True

    def native(run):
        c = read_stream(ctx, topic).groupBy("key").count()
        return update_sink(ctx, run, c.select("key", Serdes.Long().encode(F.col("count")).alias("value")))

    def floor(run):
        rows = read_stream(ctx, topic).groupBy("partition").transformWithState(
            CountRows(), "key BINARY, value BINARY", "Append", "None")
        return sink(ctx, run, rows)

    runners = {
        "native_update": lambda: run_stream(ctx, "c-native", native, rocksdb=True),
        "dsl": lambda: run_dsl(ctx, "c-dsl", count_topology(topic)),
        "dsl_every_update": lambda: run_dsl(ctx, "c-dsl0", count_topology(topic), **EVERY_UPDATE),
        "tws_count_rows_only": lambda: run_stream(ctx, "c-floor", floor, rocksdb=True),
    }
    compare(ctx, "count", n, runners, rounds, keys=keys)
    python_alone("count", count_topology(topic), topic, n, keys)


class DictMapState:
    """A ``MapState`` over a dict: the task's Python measured without Spark."""
    def __init__(self):
        self.d = {}

    def containsKey(self, k):
        return k[0] in self.d

    def getValue(self, k):
        return (self.d[k[0]],) if k[0] in self.d else None

    def updateValue(self, k, v):
        self.d[k[0]] = v[0]

    def removeKey(self, k):
        self.d.pop(k[0], None)

    def iterator(self):
        return iter([((k,), (v,)) for k, v in self.d.items()])

    def exists(self):
        return bool(self.d)


def python_alone(name: str, topology, topic: str, n: int, keys: int, step_ms: int = 1) -> None:
    """A DSL task's Python for one partition's share of a bench's input, no Spark: processors, the
    write-back cache, state encoding and the changelog rows (CPU time, not wall: less load-bound)."""
    from datetime import datetime, timezone
    from streams.interpreter import default_serdes
    from streams.spark_task import TaskProcessor
    tp = topology(f"{name}-py-out")
    proc = TaskProcessor(tp, 0, f"{name}-py", default_serdes({}), None)

    class Handle:
        def getMapState(self, *a):
            return DictMapState()
    proc.init(Handle())

    class R(dict):
        def asDict(self, recursive=False):
            return self
    half = n // 2
    rows = [R(topic=topic, partition=0, offset=i, key=b"k%d" % (i % keys), value=b"v%d" % i,
              timestamp=datetime.fromtimestamp((BASE + i * step_ms) / 1000, tz=timezone.utc), headers=None)
            for i in range(half)]
    prof = cProfile.Profile()
    prof.enable()
    out = sum(1 for _ in proc.handleInputRows((0,), iter(rows), None))
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
    top = [" ".join(line.split()[1:2] + line.split()[3:4] + line.split()[5:]).replace(ROOT + "/", "")
           for line in s.getvalue().splitlines() if line.strip()[:1].isdigit()][1:12]
    rates = []
    for _ in range(3):  # unprofiled, state warm (the same rows again, as a later batch)
        start = time.process_time()
        sum(1 for _ in proc.handleInputRows((0,), iter(rows), None))
        rates.append(half / (time.process_time() - start))
    emit(f"streams.{name}.python_task_alone", max(rates), "rec/s (CPU time)", records=half, output_rows=out,
         spread=[round(min(rates)), round(max(rates))], top_tottime_s_cumtime_s=top)


# ------------------------------------------------------------------------------ 3b. where the time goes
class _TimedState:
    """A ``MapState`` that counts and times its calls (each is a round trip to the JVM)."""
    def __init__(self, state, clock: dict):
        self.state, self.clock = state, clock

    def __getattr__(self, name):
        fn = getattr(self.state, name)

        def timed(*a):
            start = time.perf_counter()
            try:
                return fn(*a)
            finally:
                self.clock["state_s"] += time.perf_counter() - start
                self.clock["state_calls"] += 1
        return timed


def timed_processor(path: str):
    """``TaskProcessor`` timing, per call and on the executor: pulling the input rows (measured ≈0:
    Spark has converted them to Rows before the call, so that cost is outside), the task (processors, MapState calls apart) and turning the output Rows back into
    Arrow as Spark's serializer does (done a second time here, to time it). Appends one JSON line
    per call to ``path``."""
    from streams.spark_task import TaskProcessor

    class TimedTaskProcessor(TaskProcessor):
        def init(self, handle):
            super().init(handle)
            self.clock = {"state_s": 0.0, "state_calls": 0}
            self.states = {n: _TimedState(st, self.clock) for n, st in self.states.items()}

        def handleInputRows(self, key, rows, timerValues):
            import json
            import pyarrow as pa
            self.clock.update(state_s=0.0, state_calls=0)
            t0 = time.perf_counter()
            rows = list(rows)
            t1 = time.perf_counter()
            out = list(super().handleInputRows(key, iter(rows), timerValues))
            t2 = time.perf_counter()
            pa.RecordBatch.from_pylist([r.asDict(True) for r in out])
            t3 = time.perf_counter()
            with open(path, "a") as f:
                f.write(json.dumps({"rows_in": len(rows), "rows_out": len(out), "input_s": t1 - t0,
                                    "task_s": t2 - t1 - self.clock["state_s"], "state_s": self.clock["state_s"],
                                    "state_calls": self.clock["state_calls"], "output_s": t3 - t2}) + "\n")
            yield from out
    return TimedTaskProcessor


def part_breakdown(ctx, n: int) -> None:
    """One DSL grouped count with the timed processor: where a batch's time goes."""
    import json
    import streams.app
    topic = "count-in"
    if not ctx.filled.get(topic):
        create_topic(ctx.servers, topic, 2)
        fill(ctx.servers, topic, n, keys=max(10, n // 20))
    path = os.path.join(ctx.tmp, "timings.jsonl")
    plain = streams.app.TaskProcessor
    streams.app.TaskProcessor = timed_processor(path)
    try:
        r = run_dsl(ctx, "c-timed", count_topology(topic))
    finally:
        streams.app.TaskProcessor = plain
    calls = [json.loads(line) for line in open(path)]
    total = {k: sum(c[k] for c in calls) for k in calls[0]}
    inside = sum(total[k] for k in ("input_s", "task_s", "state_s", "output_s"))
    emit("streams.count.breakdown", r["batches"], "s (Spark's batch time; 2 tasks in parallel)", records=n,
         calls=len(calls), **{k: round(v, 3) for k, v in total.items()},
         rest_of_spark_s_approx=round(r["batches"] - inside / 2, 3))


# ------------------------------------------------------------------------------ 4. restore
def part_restore(ctx, sizes: list[int]) -> None:
    from streams.app import StreamsApp
    for keys in sizes:
        topic = f"restore-in-{keys}"
        create_topic(ctx.servers, topic, 2)
        fill(ctx.servers, topic, keys, keys=keys)
        run = Run(ctx, f"r{keys}")
        tp = count_topology(topic)(run.out)
        config = run.config()
        times = {}
        for phase in ("fill", "with_checkpoint", "without_checkpoint"):
            if phase == "without_checkpoint":
                shutil.rmtree(os.path.join(config["state.dir"], run.name))
            if phase != "fill":
                fill(ctx.servers, topic, 10, keys=keys, start=keys + len(times) * 10)
            app = StreamsApp(tp, ctx.spark, config)
            start = time.perf_counter()
            app.start()
            try:
                app.processAllAvailable()
                times[phase] = time.perf_counter() - start
            finally:
                app.close()
        emit(f"streams.restore.{keys}_keys", times["without_checkpoint"], "s",
             with_checkpoint=round(times["with_checkpoint"], 3), first_run=round(times["fill"], 3),
             changelog_records=keys)


# ------------------------------------------------------------------------------ 5. latency
def part_latency(ctx, seconds: float, rate: float) -> None:
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Produced
    from streams.serdes import Serdes
    s = Serdes.String()

    def stateless(src, out):
        b = StreamsBuilder()
        (b.stream(src, Consumed.with_(s, s)).mapValues("concat(value, '')").to(out, Produced.with_(s, s)))
        return b.build()

    def stateful(src, out):
        b = StreamsBuilder()
        (b.stream(src, Consumed.with_(s, s)).groupByKey().reduce(lambda a, v: v)
          .toStream().to(out, Produced.with_(s, s)))
        return b.build()

    for name, topology in (("stateless_sql", stateless), ("stateful_reduce", stateful)):
        lat = measure_latency(ctx, name, topology, seconds, rate)
        if not lat:
            emit(f"streams.latency.{name}.p50", -1, "s", error="nothing arrived")
            continue
        emit(f"streams.latency.{name}.p50", statistics.median(lat), "s", p95=round(lat[int(len(lat) * 0.95)], 3),
             max=round(lat[-1], 3), records=len(lat), rate=rate, commit_interval_ms=100)


def measure_latency(ctx, name: str, topology, seconds: float, rate: float) -> list[float]:
    from broker.client import Consumer, Producer, TopicPartition
    from streams.app import StreamsApp
    run = Run(ctx, f"lat-{name}")
    src = f"{run.name}-in"
    create_topic(ctx.servers, src, 2)
    app = StreamsApp(topology(src, run.out), ctx.spark, run.config()).start()
    consumer = Consumer({"bootstrap.servers": ctx.servers, "isolation.level": "read_committed",
                         "fetch.max.wait.ms": 10})
    consumer.assign([TopicPartition(run.out, p, 0) for p in range(2)])
    stop, latencies = threading.Event(), []

    def feed():
        with Producer({"bootstrap.servers": ctx.servers, "linger.ms": 0}) as p:
            i, t0 = 0, time.monotonic()
            while not stop.is_set():
                p.produce(src, key=b"k%d" % (i % 10), value=b"%.6f" % time.time())
                p.poll(0)
                i += 1
                time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
            p.flush(10)

    try:
        while not all(q.recentProgress for q in app.queries):
            time.sleep(0.1)
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        warm_until = time.monotonic() + 5
        end = warm_until + seconds
        while time.monotonic() < end:
            for m in consumer.consume(100, 0.05):
                if m.error() is None and time.monotonic() > warm_until:
                    latencies.append(time.time() - float(m.value()))
        stop.set()
        feeder.join(10)
    finally:
        app.close()
        consumer.close()
    return sorted(latencies)


# ------------------------------------------------------------------------------ 6. mapValues: SQL, vectorised, per record
def part_mapvalues(ctx, n: int, rounds: int) -> None:
    from streams import vectorized
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Produced
    from streams.serdes import Serdes
    topic = "mapvalues-in"
    create_topic(ctx.servers, topic, 2)
    fill(ctx.servers, topic, n, keys=1000)
    mappers = {"sql": "upper(value)", "vectorized": vectorized(lambda v: v.str.upper(), "string"),
               "per_record": lambda v: v.upper()}

    def topology(mapper):
        def build(out):
            b = StreamsBuilder()
            (b.stream(topic, Consumed.with_(Serdes.String(), Serdes.String())).mapValues(mapper)
             .to(out, Produced.with_(Serdes.String(), Serdes.String())))
            return b.build()
        return build

    results = {k: [] for k in mappers}
    for _ in range(rounds):
        for k, mapper in mappers.items():
            results[k].append(run_dsl(ctx, f"mv-{k}", topology(mapper)))
    base = None
    for k, rs in results.items():
        rates = sorted(n / r["wall"] for r in rs)
        rate = statistics.median(rates)
        base = base or rate
        emit(f"streams.mapvalues.{k}", rate, "rec/s", records=n, spread=[round(rates[0]), round(rates[-1])],
             batches_rec_s=round(statistics.median(n / r["batches"] for r in rs)),
             ratio_to_sql=round(rate / base, 3), output_offsets=rs[-1]["out"])
    mapvalues_python_alone(topology, mappers)


def mapvalues_python_alone(topology, mappers, rows: int = 10_000, repeat: int = 20) -> None:
    """The Python each callable form runs per Arrow batch of ``rows`` (Spark's default
    ``maxRecordsPerBatch``), no Spark, CPU time: the vectorised step's Arrow UDF function against
    the per-record task's ``mapInArrow`` function (deserialize, call, serialize per record)."""
    import pyarrow as pa
    from streams.column_functions import arrow_function
    from streams.interpreter import default_serdes
    from streams.spark_plan import plan, vectorized_fn
    from streams.spark_task import stateless_batches
    values = pa.array([f"v{i}" for i in range(rows)], pa.string())
    tp = topology(mappers["vectorized"])("py-out")
    udf = arrow_function(vectorized_fn(plan(tp.subtopologies[0]).prefix[0]))
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([b"k%d" % (i % 1000) for i in range(rows)]), "value": pa.array([b"v%d" % i for i in range(rows)]),
        "topic": pa.array(["mapvalues-in"] * rows), "partition": pa.array([0] * rows, pa.int32()),
        "offset": pa.array(range(rows), pa.int64()),
        "timestamp": pa.array([BASE * 1000 + i for i in range(rows)], pa.timestamp("us", tz="UTC")),
        "headers": pa.nulls(rows, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))})
    task = stateless_batches(topology(mappers["per_record"])("py-out"), 0, "py", default_serdes({}))
    for name, call in (("vectorized", lambda: udf(values)), ("per_record", lambda: list(task([batch])))):
        rates = []
        for _ in range(3):
            start = time.process_time()
            for _ in range(repeat):
                call()
            rates.append(rows * repeat / (time.process_time() - start))
        emit(f"streams.mapvalues.{name}.python_alone", max(rates), "rec/s (CPU time)", batch_rows=rows,
             spread=[round(min(rates)), round(max(rates))])


# ------------------------------------------------------------------------------ 8. steady batches
def steady_medians(query) -> dict:
    """Median ``addBatch`` and ``triggerExecution`` (ms) of the batches with input after the first."""
    ps = [p for p in query.recentProgress if p["numInputRows"]][1:]
    return {k: statistics.median(p["durationMs"].get(k, 0) for p in ps) for k in ("addBatch", "triggerExecution")}


def part_steady(ctx, rounds: int, per_batch: int = 20_000) -> None:
    from streams.app import StreamsApp
    topic, n = "steady-in", 6 * per_batch
    create_topic(ctx.servers, topic, 2)
    fill(ctx.servers, topic, n, keys=1000)
    topology = window_topology(topic)
    results: dict[str, list] = {"dsl": [], "handwritten_append": []}
    for _ in range(rounds):
        run = Run(ctx, "steady-dsl")
        app = StreamsApp(topology(run.out), ctx.spark, run.config(maxOffsetsPerTrigger=per_batch)).start()
        try:
            app.processAllAvailable()
            results["dsl"].append(steady_medians(app.queries[0]))
        finally:
            app.close()
        run = Run(ctx, "steady-hand")
        q = (sink(ctx, run, window_counted(ctx, topic, per_batch)).option("checkpointLocation", run.ckpt)
             .trigger(processingTime="100 milliseconds").start())
        try:
            q.processAllAvailable()
            results["handwritten_append"].append(steady_medians(q))
        finally:
            q.stop()
    for who, rs in results.items():
        for k in ("addBatch", "triggerExecution"):
            values = sorted(r[k] for r in rs)
            emit(f"streams.steady.{who}.{k}", statistics.median(values), "ms per batch", spread=[values[0], values[-1]],
                 records_per_batch=per_batch, batches=n // per_batch - 1)


# ------------------------------------------------------------------------------ 7. small stateful batches
def part_small_batches(ctx, n: int = 120) -> None:
    """Small micro-batches, where a batch's fixed costs show: two stateful sub-topologies (a count
    behind a repartition, a windowed count), 2-partition input, ``maxOffsetsPerTrigger`` 6. Emits
    each query's median ``addBatch`` and ``triggerExecution`` over its batches with input (Spark's
    progress events) and the time to process everything."""
    import json
    from broker.client import Producer
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Grouped, Produced
    from streams.serdes import Serdes
    from streams.windows import TimeWindows
    topic, order = "small-in", "user STRING, amount DOUBLE"
    create_topic(ctx.servers, topic, 2)
    with Producer({"bootstrap.servers": ctx.servers}) as p:
        for i in range(n):
            p.produce(topic, key=f"k{i % 5}".encode(), timestamp=BASE + i * 500,
                      value=json.dumps({"user": f"u{i % 3}", "amount": 50 + i * 3}).encode())
        p.flush(30)
    run = Run(ctx, "small")
    b = StreamsBuilder()
    orders = b.stream(topic, Consumed.with_(Serdes.String(), Serdes.Json(order)))
    (orders.groupBy("value.user", Grouped.with_(Serdes.String(), Serdes.Json(order))).count()
           .toStream().to(run.out, Produced.with_(Serdes.String(), Serdes.Long())))
    (orders.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 1_000)).count()
           .toStream().map(lambda k, v: (f"{k.key}@{k.start}", v)).to(run.out, Produced.with_(Serdes.String(), Serdes.Long())))
    from streams.app import StreamsApp
    app = StreamsApp(b.build(), ctx.spark, run.config(maxOffsetsPerTrigger=6))
    start = time.perf_counter()
    app.start()
    try:
        app.processAllAvailable()
        wall = time.perf_counter() - start
        for i, q in enumerate(app.queries):
            rows = [r for r in q.recentProgress if r["numInputRows"] > 0]
            for step in ("addBatch", "triggerExecution"):
                emit(f"streams.small_batches.subtopology{i}.{step}",
                     statistics.median(r["durationMs"][step] for r in rows), "ms", batches=len(rows),
                     state_partitions=sorted({op["numShufflePartitions"] for r in rows for op in r["stateOperators"]}))
        emit("streams.small_batches.all_processed", wall, "s", records=n)
    finally:
        app.close()


# ------------------------------------------------------------------------------ main
class Ctx:
    def __init__(self, spark, servers: str, tmp: str):
        self.spark, self.servers, self.tmp = spark, servers, tmp
        self.filled: dict = {}


def warm_up(ctx) -> None:
    """One small run of each kind of query, so the first measured one does not pay for the
    JVM's and the Python workers' first use."""
    topic = "warm-in"
    create_topic(ctx.servers, topic, 2)
    fill(ctx.servers, topic, 2_000, keys=100)
    run_dsl(ctx, "warm", count_topology(topic))
    from pyspark.sql import functions as F
    from streams.serdes import Serdes
    counts = read_stream(ctx, topic).groupBy("key").count()
    run_stream(ctx, "warm-native", lambda r: update_sink(ctx, r, counts.select(
        "key", Serdes.Long().encode(F.col("count")).alias("value"))), rocksdb=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scale", type=float, default=float(os.environ.get("STREAMS_BENCH_SCALE", "1")))
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated subset of {PARTS}")
    parser.add_argument("--latency-seconds", type=float, default=20)
    parser.add_argument("--rate", type=float, default=200)
    args = parser.parse_args()
    parts = set(args.only.split(","))
    n = max(1_000, int(args.records * args.scale))
    with tempfile.TemporaryDirectory(prefix="riverlog-streams-bench-") as tmp:
        proc, servers = start_broker(os.path.join(tmp, "broker"))
        spark = local_spark()
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        ctx = Ctx(spark, servers, tmp)
        try:
            warm_up(ctx)
            if "window" in parts:
                part_window(ctx, n, args.rounds)
            if "ktable" in parts:
                part_ktable(ctx, n, args.rounds)
            if "count" in parts:
                part_count(ctx, n, args.rounds)
            if "breakdown" in parts:
                part_breakdown(ctx, n)
            if "restore" in parts:
                part_restore(ctx, [max(100, int(k * args.scale)) for k in (1_000, 10_000, 100_000)])
            if "mapvalues" in parts:
                part_mapvalues(ctx, n, args.rounds)
            if "smallbatch" in parts:
                part_small_batches(ctx)
            if "steady" in parts:
                part_steady(ctx, args.rounds)
            if "latency" in parts:
                part_latency(ctx, args.latency_seconds * min(1.0, max(args.scale, 0.25)), args.rate)
        finally:
            spark.stop()
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
