"""A source connector's records go through the riverlog sink's streaming write, and its
connect-offsets records are written by that write's committer in each batch's decided
transactions (connect.offset_commit); a connector that cannot travel to Spark's commit process
is written from ``foreachBatch`` with the same result."""
from __future__ import annotations

import json
import threading

import pytest

from broker.client.exactly_once import DecisionLog, offsets_transactional_id
from tests.conftest import wait_until
from tests.spark.connect_helpers import read_committed, values

pytestmark = [pytest.mark.spark, pytest.mark.integration]

STRING = "org.apache.kafka.connect.storage.StringConverter"
LINES, BATCH = 300, 40


def _pinned_source():
    """FileStreamSource holding a lock: it does not pickle, so its offsets take the foreachBatch path."""
    from connect.connector import connector_class, register_connector
    from connect.file_stream import FileStreamSource
    if connector_class("PinnedFileSource") is not None:
        return

    @register_connector
    class PinnedFileSource(FileStreamSource):
        class_name, aliases = "tests.PinnedFileSource", ("PinnedFileSource",)

        def __init__(self, config, context):
            super().__init__(config, context)
            self.lock = threading.Lock()


def _query(spark, name):
    return next(q for q in spark.streams.active if q.name == f"connect-{name}")


def test_a_source_connectors_offsets_commit_in_its_batches_transactions(spark, spark_broker, tmp_path):
    from connect import Worker
    bootstrap = spark_broker.bootstrap
    source = tmp_path / "in.txt"
    lines = [f"line-{i:04d}" for i in range(LINES)]
    source.write_text("".join(f"{line}\n" for line in lines))
    size = source.stat().st_size
    _pinned_source()
    w = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": "connect-source-commit",
                       "state.dir": str(tmp_path / "state")}).start()
    try:
        common = {"file": str(source), "batch.size": str(BATCH), "key.converter": STRING, "value.converter": STRING}
        # Created from a thread of its own, as the REST server's: the streaming write must still find
        # format("riverlog") (Spark looks it up through the thread's active session).
        made = threading.Thread(target=w.create_connector, args=(
            "streamed", {**common, "connector.class": "FileStreamSource", "topic": "streamed-lines"}))
        made.start()
        made.join(120)
        w.create_connector("pinned", {**common, "connector.class": "PinnedFileSource", "topic": "pinned-lines"})
        for name in ("streamed", "pinned"):
            wait_until(lambda: len(values(bootstrap, f"{name}-lines")) >= LINES, 120, 0.3, f"every line of {name}")
            assert [v.decode() for v in values(bootstrap, f"{name}-lines")] == lines, name
            wait_until(lambda: w.offsets(name)["offsets"] == [
                {"partition": {"filename": str(source)}, "offset": {"position": size}}], 30, 0.3, f"{name}'s offset")

        streamed, pinned = _query(spark, "streamed"), _query(spark, "pinned")
        assert "ForeachBatch" not in streamed.lastProgress["sink"]["description"]
        assert "ForeachBatch" in pinned.lastProgress["sink"]["description"]

        # Each batch of the streaming write decided its offsets attempt with its output: the latest
        # decision names it, and connect-offsets holds one committed record per batch, in order.
        sink_id = w._connectors["streamed"].pipeline.sink_id
        decision = DecisionLog({"bootstrap.servers": bootstrap}).latest(sink_id)
        assert offsets_transactional_id(sink_id, decision.batch_id) in decision.transactional_ids()
        positions = [json.loads(m.value())["position"] for m in read_committed(bootstrap, "connect-offsets")
                     if json.loads(m.key())[0] == "streamed"]
        assert len(positions) == LINES // BATCH + 1 and positions == sorted(positions) and positions[-1] == size
    finally:
        w.close()
