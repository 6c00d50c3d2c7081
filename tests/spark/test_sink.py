"""The riverlog sink against a real broker: batch and streaming writes, exactly-once through a
failed task and a killed driver, and the commit protocol's pure decisions."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from broker.client import AdminClient, Consumer, NewTopic, TopicPartition
from spark_sink.commit_log import CommitLog
from spark_sink.protocol import (SKIP, WRITE, Attempt, Decision, SinkReusedError, batch_prefix, decide, strays,
                                 transactional_id, write_action)
from spark_sink.writer import StreamWriter
from tests.conftest import ROOT, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration]


# ------------------------------------------------------------------------------ helpers
def make_topic(broker, name: str, partitions: int = 2) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result()
    admin.close()
    return name


def read_all(broker, topic: str, isolation: str = "read_committed", partitions: int = 2, idle: float = 0.6):
    """Every record of ``topic`` as (key, value, headers, partition), read until nothing more comes."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "", "enable.auto.commit": False,
                  "isolation.level": isolation, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        while True:
            msgs = c.consume(10_000, idle)
            if not msgs:
                return out
            out += [(m.key(), m.value(), m.headers(), m.partition()) for m in msgs if m.error() is None]
    finally:
        c.close()


def values(records) -> list[int]:
    return sorted(int(v) for _, v, _, _ in records)


def write_json_files(directory, files: int, rows: int) -> list[int]:
    os.makedirs(directory, exist_ok=True)
    ids = []
    for f in range(files):
        part = list(range(f * rows, (f + 1) * rows))
        with open(os.path.join(directory, f"part-{f:03d}.json"), "w") as out:
            out.writelines(json.dumps({"id": i}) + "\n" for i in part)
        ids += part
    return ids


def sink(df, broker, topic, checkpoint):
    return (df.writeStream.format("riverlog").option("riverlog.bootstrap.servers", broker.bootstrap)
            .option("topic", topic).option("checkpointLocation", str(checkpoint)))


# ------------------------------------------------------------------------------ pure protocol
def test_protocol_decisions():
    assert transactional_id("q", 1, 0, 2) == "q-1-0-2"
    assert not "q-10-0-0".startswith(batch_prefix("q", 1))
    a, b = Attempt("q-3-0-0", 7, 0), Attempt("q-3-1-1", 8, 2)
    d = Decision("q", 3, [a, b])
    assert Decision.from_value(d.to_value()) == d
    assert write_action(None, 0) == WRITE
    assert write_action(Decision("q", 2, []), 3) == WRITE
    assert write_action(d, 3) == SKIP           # replay of a decided batch: write nothing
    with pytest.raises(SinkReusedError):
        write_action(d, 2)                      # an older batch under a sink id that went further
    # A fresh batch is decided from the attempts reported now, and must be recorded.
    fresh, new = decide(Decision("q", 2, []), "q", 3, [b, a])
    assert new and fresh.attempts == [a, b]
    # A replay carries out the recorded decision, whatever the replay's tasks reported.
    replay, new = decide(d, "q", 3, [Attempt("q-3-0-0", 9, 1)])
    assert not new and replay is d
    # Strays: open attempts of the batch, or an earlier one, outside its decision (a failed
    # attempt, an earlier run's, a speculative copy that opened after its batch was committed).
    open_ids = ["q-3-0-0", "q-3-0-1", "q-3-1-1", "q-30-0-0", "q-2-0-0", "other-3-0-0"]
    assert strays(open_ids, "q", 3, d.transactional_ids()) == ["q-2-0-0", "q-3-0-1"]
    assert strays(open_ids, "q", 3, set()) == ["q-2-0-0", "q-3-0-0", "q-3-0-1", "q-3-1-1"]


# ------------------------------------------------------------------------------ options
@pytest.mark.parametrize("options, columns, named", [
    ({"topic": "t"}, "value string", "riverlog.bootstrap.servers"),
    ({"topic": "t", "riverlog.bootstrap.servers": "x:1", "kafka.acks": "1"}, "value string", "kafka.acks"),
    ({"topic": "t", "riverlog.bootstrap.servers": "x:1", "riverlog.linger.mss": "1"}, "value string",
     "riverlog.linger.mss"),
    ({"topic": "t", "riverlog.bootstrap.servers": "x:1", "deliveryGuarantee": "maybe"}, "value string",
     "deliveryGuarantee"),
    ({"topic": "t", "riverlog.bootstrap.servers": "x:1"}, "payload string", "'value'"),
    ({"topic": "t", "riverlog.bootstrap.servers": "x:1"}, "value int", "'value'"),
])
def test_bad_options_fail_at_start(spark, options, columns, named):
    df = spark.createDataFrame([], columns)
    with pytest.raises(Exception, match=named):
        df.write.format("riverlog").options(**options).mode("append").save()


# ------------------------------------------------------------------------------ batch writes
def test_batch_write_reads_back(spark, spark_broker):
    from chispa import assert_df_equality
    topic = make_topic(spark_broker, "sink-batch")
    rows = [(f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())] if i % 2 else [], i % 2)
            for i in range(40)]
    schema = "key binary, value binary, headers array<struct<key:string,value:binary>>, partition int"
    df = spark.createDataFrame(rows, schema)
    (df.write.format("riverlog").option("riverlog.bootstrap.servers", spark_broker.bootstrap)
     .option("topic", topic).option("riverlog.linger.ms", "1").mode("append").save())
    for isolation in ("read_committed", "read_uncommitted"):
        got = read_all(spark_broker, topic, isolation)
        back = spark.createDataFrame([(k, v, [(hk, hv) for hk, hv in (h or [])], p) for k, v, h, p in got], schema)
        assert_df_equality(back, df, ignore_row_order=True, ignore_nullable=True)


def test_batch_write_topic_column_at_least_once(spark, spark_broker):
    a, b = make_topic(spark_broker, "sink-col-a", 1), make_topic(spark_broker, "sink-col-b", 1)
    df = spark.createDataFrame([(a if i % 3 else b, str(i)) for i in range(30)], "topic string, value string")
    (df.write.format("riverlog").option("riverlog.bootstrap.servers", spark_broker.bootstrap)
     .option("deliveryGuarantee", "at-least-once").mode("append").save())
    assert values(read_all(spark_broker, a, partitions=1)) == [i for i in range(30) if i % 3]
    assert values(read_all(spark_broker, b, partitions=1)) == [i for i in range(30) if not i % 3]


# ------------------------------------------------------------------------------ streaming
def test_stream_writes_every_row_once(spark, spark_broker, tmp_path):
    topic = make_topic(spark_broker, "sink-stream")
    ids = write_json_files(tmp_path / "in", 3, 100)
    df = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
          .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value"))
    q = sink(df, spark_broker, topic, tmp_path / "ck").trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert q.exception() is None and len(q.recentProgress) >= 3
    assert values(read_all(spark_broker, topic)) == ids


def test_a_batch_write_inside_foreach_batch_knows_its_run(spark, spark_broker, tmp_path):
    """Spark's micro-batch properties reach the tasks of a batch write made inside foreachBatch, so
    their run is known there (:func:`spark_sink.protocol.stream_run`); a job group the user sets
    there hides it. Every row is written once either way."""
    from pyspark import TaskContext
    from spark_sink.protocol import stream_run
    topic = make_topic(spark_broker, "sink-foreach-run")
    ids = write_json_files(tmp_path / "in", 3, 50)
    runs: dict[int, set] = {}

    def write(df, batch_id):
        if batch_id == 2:
            df.sparkSession.sparkContext.setJobGroup("users-own-group", "set inside foreachBatch")
        seen = df.rdd.mapPartitions(lambda _: [stream_run(TaskContext.get().getLocalProperty, batch_id)]).collect()
        runs[batch_id] = set(seen)
        (df.write.format("riverlog").mode("append").option("riverlog.bootstrap.servers", spark_broker.bootstrap)
         .option("topic", topic).option("sinkId", "foreach-run").option("batchId", str(batch_id)).save())

    df = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
          .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value"))
    q = (df.writeStream.foreachBatch(write).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    assert runs == {0: {str(q.runId)}, 1: {str(q.runId)}, 2: {None}}
    assert values(read_all(spark_broker, topic)) == ids


def test_a_batch_write_of_a_runs_later_micro_batch_skips_the_replay_check(spark_broker, monkeypatch):
    """A batch write (``sinkId``, ``batchId``) in a task of a run's later micro-batch does not read
    the decision log, as a streaming write's task does not: a decision recorded behind the run's
    back is not seen and the task writes. Its commit reads the log (a foreachBatch body may write its
    batch again in the run) and keeps the recorded decision. Outside the run (the user's job group)
    the task reads it, and the batch is skipped."""
    from spark_sink import writer as sink_writer
    topic = make_topic(spark_broker, "sink-batch-run-memo", partitions=1)
    schema = StructType([StructField("value", BinaryType())])
    log = CommitLog({"bootstrap.servers": spark_broker.bootstrap})

    def task(batch_id: int, group: str):
        props = {"spark.jobGroup.id": group, "sql.streaming.queryId": "q", "streaming.sql.batchId": str(batch_id),
                 "spark.job.description": f"\nid = q\nrunId = run-a\nbatch = {batch_id}"}
        ctx = type("Ctx", (), {"getLocalProperty": staticmethod(props.get), "partitionId": lambda self: 0,
                               "taskAttemptId": lambda self: 0})()
        monkeypatch.setattr("pyspark.TaskContext.get", staticmethod(lambda: ctx))
        w = sink_writer.BatchWriter({"riverlog.bootstrap.servers": spark_broker.bootstrap, "topic": topic,
                                     "sinkId": "batch-memo", "batchId": str(batch_id)}, schema)
        message = w.write(iter([pa.record_batch({"value": [b"%d" % batch_id]})]))
        w.commit([message])
        return message

    assert not task(0, "run-a").skipped                    # the run's first batch: the log is read
    log.record(Decision("batch-memo", 1, []))               # batch 1 decided behind the run's back
    assert not task(1, "run-a").skipped                    # not read: written (the commit keeps the decision)
    log.record(Decision("batch-memo", 3, []))
    assert task(3, "users-own-group").skipped              # not the run's micro-batch: read, skipped
    assert values(read_all(spark_broker, topic, partitions=1)) == [0]


def test_failed_task_then_restart_writes_once(spark, spark_broker, tmp_path):
    """A task fails (its batch and the query fail, its partner's transaction stays open), and
    the query restarts from its checkpoint: the batch is written again, visibly only once."""
    from pyspark.sql.functions import udf
    topic = make_topic(spark_broker, "sink-task-fail")
    ids = write_json_files(tmp_path / "in", 2, 200)
    flag = str(tmp_path / "failed-once")

    @udf("string")
    def fail_once(v):
        from pyspark import TaskContext
        if int(v) == 250 and TaskContext.get().attemptNumber() == 0 and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError("injected task failure")
        return v

    df = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
          .repartition(2).selectExpr("CAST(id AS STRING) AS value").select(fail_once("value").alias("value")))
    q = sink(df, spark_broker, topic, tmp_path / "ck").trigger(availableNow=True).start()
    with pytest.raises(Exception, match="injected task failure"):
        q.awaitTermination(120)
    q = sink(df, spark_broker, topic, tmp_path / "ck").trigger(availableNow=True).start()
    q.awaitTermination(120)
    assert q.exception() is None
    assert values(read_all(spark_broker, topic)) == ids
    assert set(values(read_all(spark_broker, topic, "read_uncommitted"))) == set(ids)


def test_driver_killed_mid_stream_then_restarted(spark, spark_broker, tmp_path):
    topic = make_topic(spark_broker, "sink-driver-kill")
    ids = write_json_files(tmp_path / "in", 12, 50)
    checkpoint = tmp_path / "ck"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "spark", "sink_query.py"),
                             spark_broker.bootstrap, topic, str(tmp_path / "in"), str(checkpoint)],
                            env=env, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Kill as soon as a decision of the third batch is recorded: usually before its
        # transactions are all committed and before Spark's own commit log has the batch.
        log = CommitLog({"bootstrap.servers": spark_broker.bootstrap})
        sink_id = wait_until(lambda: _query_id(checkpoint), 90, 0.05, "the query's checkpoint")
        wait_until(lambda: (d := log.latest(sink_id)) is not None and d.batch_id >= 2, 120, 0.01,
                   "the third batch's decision")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert len(os.listdir(checkpoint / "commits")) < 12
    df = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
          .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value"))
    q = sink(df, spark_broker, topic, checkpoint).trigger(availableNow=True).start()
    q.awaitTermination(180)
    assert q.exception() is None
    assert values(read_all(spark_broker, topic)) == ids


def _query_id(checkpoint):
    try:
        with open(checkpoint / "metadata") as f:
            return json.loads(f.readline())["id"]
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------ replay, without Spark tasks
def test_replayed_decided_batch_is_finished_not_rewritten(spark_broker):
    """The driver died after recording batch 5's decision and before ending its transactions: the
    replay's tasks write nothing and its commit() finishes exactly the decided transactions."""
    topic = make_topic(spark_broker, "sink-replay")
    schema = StructType([StructField("value", BinaryType()), StructField("key", StringType())])
    writer = StreamWriter({"riverlog.bootstrap.servers": spark_broker.bootstrap, "topic": topic}, schema)

    def rows(lo, hi):
        return [pa.record_batch({"value": [str(i).encode() for i in range(lo, hi)],
                                 "key": [str(i) for i in range(lo, hi)]})]

    first = [writer.write_partition(rows(0, 10), "replay", 5, 0, 0, True),
             writer.write_partition(rows(10, 20), "replay", 5, 1, 0, True)]
    stray = writer.write_partition(rows(100, 105), "replay", 5, 1, 1, True)  # e.g. a speculative attempt
    CommitLog({"bootstrap.servers": spark_broker.bootstrap}).record(
        Decision("replay", 5, [m.attempt for m in first]))
    # Nothing is visible yet: the open transactions hold the last stable offset.
    assert read_all(spark_broker, topic, idle=0.3) == []
    replay = [writer.write_partition(rows(0, 10), "replay", 5, p, 0, True) for p in (0, 1)]
    assert all(m.skipped and m.attempt is None for m in replay)
    writer.commit(replay, 5)
    assert values(read_all(spark_broker, topic)) == list(range(20))
    writer.commit(replay, 5)  # once more, as another restart would: idempotent
    assert values(read_all(spark_broker, topic)) == list(range(20))
    assert values(read_all(spark_broker, topic, "read_uncommitted")) == list(range(20)) + list(range(100, 105))
    assert stray.attempt is not None
    # The next batch writes again.
    nxt = writer.write_partition(rows(20, 25), "replay", 6, 0, 0, True)
    assert nxt.attempt is not None
    writer.commit([nxt], 6)
    assert values(read_all(spark_broker, topic)) == list(range(25))


def test_a_runs_later_batch_skips_the_replay_check_its_first_does_not(spark_broker):
    """Only a run's first batch can be a replay: a later one of the same run (Spark's runId) is
    written without reading the decision log, and its commit does not read it either; a new run
    reads it, and finds what is decided."""
    topic = make_topic(spark_broker, "sink-run-memo", partitions=1)
    schema = StructType([StructField("value", BinaryType())])
    writer = StreamWriter({"riverlog.bootstrap.servers": spark_broker.bootstrap, "topic": topic}, schema)

    def rows(lo, hi):
        return [pa.record_batch({"value": [str(i).encode() for i in range(lo, hi)]})]

    first = writer.write_partition(rows(0, 5), "memo", 1, 0, 0, True, run_id="run-a")
    assert first.checked and first.attempt is not None
    writer.commit([first], 1)
    # Batch 2 decided behind the run's back: only a new run's first batch would look.
    CommitLog({"bootstrap.servers": spark_broker.bootstrap}).record(Decision("memo", 2, [first.attempt]))
    assert writer.write_partition(rows(5, 10), "memo", 2, 0, 0, True, run_id="run-b").skipped
    later = writer.write_partition(rows(5, 10), "memo", 2, 0, 1, True, run_id="run-a")
    assert later.checked and not later.skipped and later.attempt is not None
    writer.commit([later], 2)  # decided anew from the attempts: the log was not read again
    assert values(read_all(spark_broker, topic, partitions=1)) == list(range(10))


def test_a_foreach_batch_write_done_again_in_its_run_finds_its_batch_decided(spark_broker):
    """A ``foreachBatch`` body that writes its micro-batch again (a retry wrapper around a body whose
    next step failed) under the same ``sinkId`` and ``batchId``: its tasks skip the decision log (a
    later batch of a run they know), so the commit must read it, find the batch decided and abort
    the new attempts, or the batch is written twice."""
    from spark_sink.writer import _RUNS, BatchWriter
    topic = make_topic(spark_broker, "sink-written-again", partitions=1)
    writer = BatchWriter({"riverlog.bootstrap.servers": spark_broker.bootstrap, "topic": topic,
                          "sinkId": "again", "batchId": "7"}, StructType([StructField("value", BinaryType())]))
    rows = [pa.record_batch({"value": [str(i).encode() for i in range(5)]})]
    _RUNS.found_undecided("again", "run-a", 6)      # this worker wrote the run's batch 6
    writer.commit([writer.write_partition(rows, "again", 7, 0, 10, True, run_id="run-a")])
    again = writer.write_partition(rows, "again", 7, 0, 11, True, run_id="run-a")
    assert again.attempt is not None                 # written without a look at the log ...
    writer.commit([again])                           # ... so the commit looks
    assert values(read_all(spark_broker, topic, partitions=1)) == list(range(5))
