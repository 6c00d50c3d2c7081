"""Connectors end to end: a poison record under ``errors.tolerance=all`` lands in the dead-letter
queue with Kafka's context headers while every other record reaches the DirectorySink; under
``none`` the connector is FAILED naming the record, and restarted with backoff while
``errors.retry.timeout`` allows; TopicCopy copies (and renames) topics from one
cluster to another with its source offsets in connect-offsets (``topics.regex`` matching whole
names, as Kafka's); a sink read in many small batches
whose JSON changes shape midway writes what each record says, its plan built once per type and
moved onto the batches after (with and without a dead-letter queue). The connectors run side by
side in one worker, so the queries' start-up costs overlap."""
from __future__ import annotations

import glob
import json
import os

import pytest

from broker.records.batch import COMPRESSION_ZSTD, iter_headers
from tests.conftest import wait_until
from tests.spark.connect_helpers import produce, read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

JSON = "org.apache.kafka.connect.json.JsonConverter"


WRITTEN: dict[int, list] = {}   # batch id -> the values RejectingSink wrote (the worker runs it in this process)


def _rejecting_sink():
    """A sink that cannot write records whose value says ``reject``: the write stage's dead letters."""
    from pyspark.sql import functions as F

    from connect.config_def import ConfigDef
    from connect.connector import SinkConnector, connector_class, register_connector
    if connector_class("RejectingSink") is not None:
        return

    @register_connector
    class RejectingSink(SinkConnector):
        class_name, aliases, config_def = "tests.RejectingSink", ("RejectingSink",), ConfigDef([])

        def write_batch(self, frame, batch_id):
            rejected = F.col("value").contains("reject")
            WRITTEN[batch_id] = [r["value"] for r in frame.where(~rejected).collect()]
            return frame.where(rejected).select("topic", "partition", "offset",
                                                F.lit("the target refused the row").alias("message"))


def _jsonl(path) -> list[dict]:
    rows = []
    for name in sorted(glob.glob(f"{path}/*/*.json")):
        with open(name) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def _shapes(bad: tuple[int, ...]) -> tuple[list[bytes], list[dict]]:
    """320 records whose JSON gains a field at record 150 (a schema change mid-batch), ``bad`` ones
    not JSON; and what the sink below writes for the others (card masked, a static field added)."""
    values, expected = [], []
    for i in range(320):
        if i in bad:
            values.append(b"{not json")
            continue
        v = {"id": i, "name": f"n{i}", "card": f"4111-{i:04d}", **({"note": f"v2-{i}"} if i >= 150 else {})}
        values.append(json.dumps(v).encode())
        expected.append({**v, "card": "", "pipeline": "t"})
    return values, expected


def _batch_compressions(data_dir: str, topic: str) -> set[int]:
    """The compression codec of every data batch (transaction markers left out) stored for ``topic``."""
    found = set()
    for path in glob.glob(os.path.join(data_dir, f"{topic}-0", "*.log")):
        with open(path, "rb") as f:
            found |= {h.compression for _, h in iter_headers(f.read()) if not h.is_control}
    return found


def test_dead_letter_queue_failure_and_two_clusters(spark, spark_broker, broker_factory, tmp_path):
    from connect import Worker
    bootstrap = spark_broker.bootstrap
    target = broker_factory()
    good = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(6)]
    records = good[:3] + [b"{not json"] + good[3:]
    produce(bootstrap, "orders", records, keys=[b"k%d" % i for i in range(len(records))])
    produce(bootstrap, "copied", [b"x", b"y", b"z"])
    produce(bootstrap, "copied-not", [b"no"])     # topics.regex "copied" matches whole names only, as Kafka
    produce(bootstrap, "puts", [b"a", b"reject me", b"b"])
    shapes, shapes_out = _shapes(bad=(70, 250))
    produce(bootstrap, "shapes", shapes)
    clean, clean_out = _shapes(bad=())
    produce(bootstrap, "shapes-clean", clean)
    _rejecting_sink()

    w = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": "connect-connectors",
                       "state.dir": str(tmp_path / "state")}).start()
    try:
        common = {"topics": "orders", "key.converter": "StringConverter", "value.converter": JSON,
                  "value.converter.schemas.enable": "false"}
        w.create_connector("tolerant", {**common, "connector.class": "DirectorySink", "path": str(tmp_path / "out"),
                                        "errors.tolerance": "all", "errors.log.enable": "true",
                                        "errors.deadletterqueue.topic.name": "orders-dlq",
                                        "errors.deadletterqueue.context.headers.enable": "true",
                                        "transforms": "mask", "transforms.mask.type": "MaskField$Value",
                                        "transforms.mask.fields": "name"})
        w.create_connector("strict", {**common, "connector.class": "DirectorySink", "path": str(tmp_path / "strict"),
                                      "errors.retry.timeout": "20000", "errors.retry.delay.max.ms": "1000"})
        w.create_connector("copy", {"connector.class": "TopicCopy", "topics.regex": "copied",
                                    "target.cluster.bootstrap.servers": target.bootstrap,
                                    "transforms": "rename", "transforms.rename.type": "RegexRouter",
                                    "transforms.rename.regex": "(.*)", "transforms.rename.replacement": "east.$1"})
        w.create_connector("puts", {"connector.class": "RejectingSink", "topics": "puts",
                                    "key.converter": "StringConverter", "value.converter": "StringConverter",
                                    "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "puts-dlq",
                                    "errors.deadletterqueue.context.headers.enable": "true",
                                    "producer.override.compression.type": "zstd"})

        batched = {"connector.class": "DirectorySink", "key.converter": "StringConverter", "value.converter": JSON,
                   "value.converter.schemas.enable": "false", "consumer.override.max.poll.records": "40",
                   "transforms": "mask,tag", "transforms.mask.type": "MaskField$Value",
                   "transforms.mask.fields": "card", "transforms.tag.type": "InsertField$Value",
                   "transforms.tag.static.field": "pipeline", "transforms.tag.static.value": "t"}
        w.create_connector("shapes", {**batched, "topics": "shapes", "path": str(tmp_path / "shapes"),
                                      "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "shapes-dlq",
                                      "errors.deadletterqueue.context.headers.enable": "true"})
        w.create_connector("shapes-clean", {**batched, "topics": "shapes-clean", "path": str(tmp_path / "clean")})

        wait_until(lambda: len(_jsonl(tmp_path / "out")) == 6, 90, 0.3, "the six good records in the directory")
        assert sorted(r["id"] for r in _jsonl(tmp_path / "out")) == list(range(6))
        assert {r["name"] for r in _jsonl(tmp_path / "out")} == {""}  # MaskField ran
        dlq = wait_until(lambda: read_committed(bootstrap, "orders-dlq"), 30, 0.3, "the DLQ record")
        assert [m.value() for m in dlq] == [b"{not json"] and dlq[0].key() == b"k3"
        headers = {k: v.decode() for k, v in dlq[0].headers()}
        assert headers["__connect.errors.topic"] == "orders"
        assert headers["__connect.errors.partition"] == "0" and headers["__connect.errors.offset"] == "3"
        assert headers["__connect.errors.connector.name"] == "tolerant"
        assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
        assert headers["__connect.errors.class.name"] == JSON
        assert headers["__connect.errors.exception.message"]
        assert "DataException" in headers["__connect.errors.exception.stacktrace"]
        wait_until(lambda: w.offsets("tolerant")["offsets"] == [
            {"partition": {"kafka_topic": "orders", "kafka_partition": 0}, "offset": {"kafka_offset": 7}}],
            20, 0.3, "the sink's group offsets past every record")

        # errors.retry.timeout: restarted with backoff, failing on the same record each time, then
        # left FAILED once the timeout has passed.
        wait_until(lambda: w._connectors["strict"].failures.attempts >= 2, 90, 0.3, "a restart after the failure")
        failed = wait_until(lambda: (s := w.connector_status("strict"))["connector"]["state"] == "FAILED"
                            and w._connectors["strict"].restart_at is None and s, 120, 0.3,
                            "the strict connector FAILED for good")
        trace = failed["connector"]["trace"]
        assert "topic 'orders' partition 0 offset 3" in trace and "value.converter" in trace
        assert failed["tasks"][0]["state"] == "FAILED"
        assert not _jsonl(tmp_path / "strict")

        copied = wait_until(lambda: read_committed(target.bootstrap, "east.copied"), 60, 0.3, "the copied topic")
        assert [m.value() for m in copied] == [b"x", b"y", b"z"]
        # the last record copied, as MirrorMaker 2 stores it
        wait_until(lambda: w.offsets("copy")["offsets"] == [
            {"partition": {"cluster": "source", "topic": "copied", "partition": 0}, "offset": {"offset": 2}}],
            20, 0.3, "the copy's source offsets")
        from broker.client import AdminClient
        with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
            assert "east.copied-not" not in admin.list_topics(timeout=30).topics
        # A record the sink could not write (stage TASK_PUT) is a dead letter; the others were written.
        put = wait_until(lambda: read_committed(bootstrap, "puts-dlq"), 60, 0.3, "the write stage's dead letter")
        assert [m.value() for m in put] == [b"reject me"]
        put_headers = {k: v.decode() for k, v in put[0].headers()}
        assert (put_headers["__connect.errors.stage"], put_headers["__connect.errors.offset"]) == ("TASK_PUT", "1")
        assert put_headers["__connect.errors.exception.message"] == "the target refused the row"
        # Kafka's dead-letter producer takes the connector's producer.override.* too
        assert _batch_compressions(spark_broker.data_dir, "puts-dlq") == {COMPRESSION_ZSTD}
        assert sorted(v for vs in WRITTEN.values() for v in vs) == ["a", "b"]
        metrics = w.connector_status("copy")["metrics"]
        assert metrics["last_batch_id"] is not None and metrics["lag"] == 0

        # Eight batches of 40: the type learnt in the first, learnt again in the fourth (the new
        # field), the plan moved onto the batches between (see connect.plan_template).
        for name, path, expected in (("shapes", "shapes", shapes_out), ("shapes-clean", "clean", clean_out)):
            wait_until(lambda: len(_jsonl(tmp_path / path)) >= len(expected), 90, 0.3, f"every record of {name}")
            assert sorted(_jsonl(tmp_path / path), key=lambda r: r["id"]) == expected, name
            assert w._connectors[name].pipeline.template.moves >= 3, name
        dead = wait_until(lambda: read_committed(bootstrap, "shapes-dlq"), 30, 0.3, "the batched sink's dead letters")
        assert [(dict(m.headers())["__connect.errors.offset"], m.value()) for m in dead] == \
            [(b"70", b"{not json"), (b"250", b"{not json")]
    finally:
        w.close()
