"""Spark task retries under the exactly-once paths: a retried task's output replaces its failed
attempts' output, never adds to it (Spark's ``DataWritingSparkTask``: a failed attempt's writer is
aborted and only the attempt that succeeds reaches ``StreamingWrite.commit``; Kafka's EOS: what a
``read_committed`` consumer sees is the committed transactions only).

The application runs in child processes (this module run as a script), each with a SparkSession of
its own, ``local[2,4]``: two threads, ``spark.task.maxFailures`` 4 (the suite's shared session gives
a task one attempt). In every micro-batch partition 1's task fails twice: its attempt 0 in the
query's own Python code (a UDF; a Streams ``mapValues``), its attempt 1 in the sink after its rows
are written (its transaction open, its commit message never sent); attempt 2 succeeds. The first
life runs (a) a plain ``writeStream.format("riverlog")`` query and (b) a Streams application
(``exactly_once_v2``: a stateless sub-topology, and a stream–table join, a count and a windowed
count in a stateful one); a second life, a new driver, restarts (b) from its checkpoint on more
input. The test then reads every output and changelog with ``read_committed`` and compares them
with the input and the reference interpreter (:class:`streams.testing.TopologyTestDriver`), and
finds no transaction left open."""
from __future__ import annotations

import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":
    sys.path.insert(0, ROOT)

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from streams.serdes import Serdes  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

ORDER = "user STRING, amount DOUBLE"
APP = "retries-app"
BASE = 1_700_000_000_000
PARTITIONS = 2
S, L, J = Serdes.String(), Serdes.Long(), Serdes.Json(ORDER)


def names(prefix: str) -> dict[str, str]:
    return {n: f"{prefix}-{n}" for n in ("in", "out", "customers", "orders", "plain", "enriched", "per-key",
                                         "windows", "plain-out")}


def fails_first(value):
    """Identity, except that attempt 0 of partition 1's task raises (Spark retries the task)."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    if ctx is not None and ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
        raise RuntimeError(f"injected failure of attempt 0 of partition 1 (value {value!r})")
    return value


def topology(t: dict[str, str]):
    """(b): the stateful sub-topology (a join, a count, a windowed count) and a stateless one,
    each passing its records through :func:`fails_first`."""
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Materialized, Produced
    from streams.windows import TimeWindows
    b = StreamsBuilder()
    customers = b.table(t["customers"], Consumed.with_(S, S), Materialized.as_("customers"))
    orders = b.stream(t["orders"], Consumed.with_(S, J)).mapValues(fails_first)
    orders.join(customers, lambda o, c: f"{o['user']}|{c}").to(t["enriched"], Produced.with_(S, S))
    (orders.groupByKey().count(materialized=Materialized.as_("per-key"))
        .toStream().to(t["per-key"], Produced.with_(S, L)))
    (orders.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 1_000))
        .count(materialized=Materialized.as_("per-key-window"))
        .toStream().map(lambda k, v: (f"{k.key}@{k.start}", v)).to(t["windows"], Produced.with_(S, L)))
    (b.stream(t["plain"], Consumed.with_(S, S)).mapValues(fails_first).mapValues(lambda v: v.upper())
        .to(t["plain-out"], Produced.with_(S, S)))
    return b.build()


def app_config(bootstrap: str, state_dir: str) -> dict:
    # the record cache off: every update is forwarded, as the test driver (one commit per record) does
    return {"application.id": APP, "bootstrap.servers": bootstrap, "state.dir": state_dir,
            "processing.guarantee": "exactly_once_v2", "statestore.cache.max.bytes": 0}


def inputs(phase: int) -> dict[str, list[tuple]]:
    users = ["ann", "bob", "cy"]
    at = BASE + phase * 100_000
    out = {"orders": [(f"k{i % 6}", {"user": users[i % 3], "amount": float(i)}, at + 1_000 * i) for i in range(24)],
           "plain": [(f"p{i}", f"v{phase}.{i}", at + i) for i in range(12)]}
    if phase == 0:
        out["customers"] = [(f"k{i}", f"cust{i}", at - 10_000 + i) for i in range(6)]
    return out


def produce_phase(servers: str, t: dict[str, str], phase: int) -> None:
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for name in ("customers", "plain", "orders"):   # the table ahead of the stream, as in the reference
            for k, v, ts in inputs(phase).get(name, ()):
                p.produce(t[name], key=S.serialize(k), value=(J if name == "orders" else S).serialize(v), timestamp=ts)
        if phase == 0:
            for i in range(40):
                p.produce(t["in"], key=str(i).encode(), value=str(i).encode(), partition=i % PARTITIONS)
        assert p.flush(30) == 0


# ------------------------------------------------------------------------------ the child
def failing_riverlog():
    """``riverlog`` whose streaming writer fails attempt 1 of partition 1's task after writing: its
    transaction is open and holds rows, its commit message never reaches the driver. Defined in a
    function so that Spark pickles the classes by value into its workers."""
    from pyspark import TaskContext

    from spark_sink.writer import StreamWriter
    from spark_source.data_source import RiverlogDataSource

    class FailsAfterWrite(StreamWriter):
        def write(self, iterator):
            message = super().write(iterator)
            ctx = TaskContext.get()
            if ctx.partitionId() == 1 and ctx.attemptNumber() == 1:
                raise RuntimeError(f"injected failure of attempt 1 of partition 1 after writing {message.rows} row(s)")
            return message

    class Riverlog(RiverlogDataSource):
        def streamWriter(self, schema, overwrite):
            return FailsAfterWrite(self.options, schema)
    return Riverlog


def child(servers: str, state_dir: str, prefix: str, life: str) -> None:
    """One life of the application: life 0 runs (a) and (b) on the first input, life 1 restarts (b)
    from its checkpoint (a new driver) on the input the test added."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    from streams.app import StreamsApp
    from tests.spark.child_process import SHORT_LIVED_JVM
    spark = (SparkSession.builder.master("local[2,4]").appName("riverlog-task-retries")
             .config("spark.sql.shuffle.partitions", str(PARTITIONS)).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "1g").config("spark.driver.extraJavaOptions", SHORT_LIVED_JVM)
             .config("spark.sql.warehouse.dir", os.path.join(state_dir, "warehouse")).getOrCreate())
    spark.dataSource.register(failing_riverlog())
    t = names(prefix)

    if life == "0":
        sink_query(spark, servers, state_dir, t)
    app = StreamsApp(topology(t), spark, app_config(servers, state_dir)).start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    print(f"streams life {life} done", flush=True)
    spark.stop()


def sink_query(spark, servers: str, state_dir: str, t: dict[str, str]) -> None:
    """(a) a plain exactly-once sink query."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType
    value = F.udf(fails_first, StringType())(F.col("value").cast("string")).cast("binary")
    q = (spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", servers)
         .option("subscribe", t["in"]).option("startingOffsets", "earliest").load()
         .select("key", value.alias("value"))
         .writeStream.format("riverlog").option("riverlog.bootstrap.servers", servers).option("topic", t["out"])
         .option("checkpointLocation", os.path.join(state_dir, "sink-checkpoint")).start())
    q.processAllAvailable()
    q.stop()
    print("sink query done", flush=True)


# ------------------------------------------------------------------------------ the test
def run_child(servers: str, state: str, prefix: str, life: int, tmp_path) -> str:
    """One life in a child process; its logs. A life whose JVM gave up on a Python worker that was
    slow to start (Spark waits 10 s for one, ``PythonWorkerFactory.createSimpleWorker``; a loaded
    machine misses that) runs again: a restart, which exactly-once must survive anyway."""
    from tests.spark.child_process import run_life
    logs = ""
    for run in range(3):
        log = tmp_path / f"life-{life}-{run}.log"
        try:
            run_life([os.path.abspath(__file__), servers, state, prefix, str(life)], log, None, f"life {life}")
            return logs + log.read_text()
        except AssertionError:
            logs += log.read_text()
            if run == 2 or "Python worker failed to connect back" not in log.read_text():
                raise
    return logs


def read_committed(servers: str, topic: str) -> list[tuple]:
    """(key, value, partition) of every committed record of ``topic``, each partition in offset order
    (up to its last stable offset, which a read_committed consumer's watermarks give as the end)."""
    c = Consumer({"bootstrap.servers": servers, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    out = []
    try:
        for p in range(PARTITIONS):
            tp = TopicPartition(topic, p)
            low, high = c.get_watermark_offsets(tp, timeout=30)
            if high <= low:
                continue
            c.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + 30
            while c.position([tp])[0].offset < high:
                assert time.monotonic() < deadline, f"{topic}[{p}]: no committed record up to offset {high} in 30 s"
                out.extend((m.key(), m.value(), p) for m in c.consume(500, timeout=1) if not m.error())
    finally:
        c.close()
    return out


def per_key(rows) -> dict:
    out: dict = {}
    for k, v in rows:
        out.setdefault(k, []).append(v)
    return out


@pytest.mark.timeout(900)
def test_retried_tasks_write_exactly_once(spark_broker, tmp_path):
    from streams.app import StreamsApp
    from streams.testing import TopologyTestDriver
    servers, prefix, state = spark_broker.bootstrap, "retries", str(tmp_path / "state")
    t = names(prefix)
    with AdminClient({"bootstrap.servers": servers}) as admin:
        for f in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in t.values()]).values():
            f.result(30)
    text = ""
    for life in (0, 1):
        produce_phase(servers, t, life)
        text += run_child(servers, state, prefix, life, tmp_path)
    sink_part, streams_part = text.split("sink query done", 1)
    for where in (sink_part, streams_part):   # (a), and each of (b)'s sub-topologies (a value of each input)
        assert "injected failure of attempt 0" in where and "injected failure of attempt 1" in where, \
            "no task failed: the test tests nothing"
    assert "(value 'v" in streams_part and "(value {'user'" in streams_part

    # (a) each input row once in the committed output
    assert sorted(int(v) for _, v, _ in read_committed(servers, t["out"])) == list(range(40))

    # (b) per key, the reference's updates exactly (every update forwarded, no cache)
    d = TopologyTestDriver(topology(t), {"application.id": "oracle"})
    topics = {n: d.createInputTopic(t[n], S, J if n == "orders" else S) for n in ("customers", "plain", "orders")}
    for phase in (0, 1):
        for name in ("customers", "plain", "orders"):
            for k, v, ts in inputs(phase).get(name, ()):
                topics[name].pipeInput(k, v, ts)
    for name, serde in (("enriched", S), ("per-key", L), ("windows", L), ("plain-out", S)):
        want = per_key((r.key, r.value) for r in d.createOutputTopic(t[name], S, serde).readRecordsToList())
        got = per_key((S.deserialize(k), serde.deserialize(v)) for k, v, _ in read_committed(servers, t[name]))
        assert got == want and got, name
    app = StreamsApp(topology(t), None, app_config(servers, state))
    for store in ("customers", "per-key"):
        assert sorted(app.store(store).all()) == sorted(d.getKeyValueStore(store).all()), store
    assert sorted(app.store("per-key-window").all(), key=repr) == \
        sorted(d.getWindowStore("per-key-window").all(), key=repr)

    # no attempt left open (the failed ones aborted by the driver's commit)
    with AdminClient({"bootstrap.servers": servers}) as admin:
        ongoing = [x.transactional_id for x in admin.list_transactions(30).result() if x.state == "Ongoing"]
    assert not ongoing, ongoing


if __name__ == "__main__":
    child(*sys.argv[1:5])
