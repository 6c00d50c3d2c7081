"""A worker killed with SIGKILL mid-stream and started again picks every connector up from the
connect topics and writes nothing twice: once with its Spark checkpoints, once after they were
deleted (the broker's connect-offsets and consumer group are the truth; that last worker runs in
the test's session). The source's output is read back with ``read_committed``; the
DirectorySink's files are read back whole."""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT, wait_until
from tests.spark.connect_helpers import values
from tests.spark.connect_worker_process import GROUP

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

SCRIPT = os.path.join(ROOT, "tests", "spark", "connect_worker_process.py")
LINES = 500
BATCH = 50
SINK_BATCH = 120


def _start(bootstrap, state, connectors):
    logs = glob.glob(os.path.join(os.path.dirname(state), "worker-*.log"))
    log = open(os.path.join(os.path.dirname(state), f"worker-{len(logs)}.log"), "w")
    return subprocess.Popen([sys.executable, SCRIPT, bootstrap, str(state), json.dumps(connectors)], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc):
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _directory_lines(path) -> list[str]:
    out = []
    for name in glob.glob(os.path.join(path, "[!_]*", "*.json")):
        with open(name) as f:
            out += [json.loads(line)["value"] for line in f if line.strip()]
    return out


def _batch_sizes(path) -> list[int]:
    """Lines in each batch directory of a DirectorySink."""
    sizes = []
    for batch in glob.glob(os.path.join(path, "[!_]*")):
        lines = 0
        for name in glob.glob(os.path.join(batch, "*.json")):
            with open(name) as f:
                lines += sum(1 for line in f if line.strip())
        sizes.append(lines)
    return sizes


def test_sigkill_and_restart_writes_nothing_twice(spark, spark_broker, tmp_path):
    bootstrap, state = spark_broker.bootstrap, tmp_path / "state"
    source, out = tmp_path / "in.txt", tmp_path / "out"
    lines = [f"line-{i:04d}" for i in range(LINES)]
    source.write_text("".join(f"{line}\n" for line in lines))
    string = "org.apache.kafka.connect.storage.StringConverter"
    connectors = [
        {"name": "restart-src", "config": {"connector.class": "FileStreamSource", "file": str(source),
                                           "topic": "restart-lines", "batch.size": str(BATCH),
                                           "key.converter": string, "value.converter": string}},
        {"name": "restart-dir", "config": {"connector.class": "DirectorySink", "topics": "restart-lines",
                                           "path": str(out), "key.converter": string, "value.converter": string,
                                           "consumer.override.max.poll.records": str(SINK_BATCH)}},
    ]
    topic_count = lambda: len(values(bootstrap, "restart-lines"))  # noqa: E731
    # each look reads the whole topic through a new consumer: once a second, not five times
    poll = 1.0
    proc = _start(bootstrap, state, connectors)
    try:
        wait_until(lambda: topic_count() >= BATCH, 180, poll, "the source's first batches")
        _kill(proc)
        seen = topic_count()
        assert seen < LINES, "killed too late to be mid-stream"

        proc = _start(bootstrap, state, connectors)  # checkpoints kept
        wait_until(lambda: topic_count() >= seen + BATCH, 180, poll, "progress after the first restart")
        wait_until(lambda: _directory_lines(out), 60, 0.3, "the sink's first batch")
        _kill(proc)

        for checkpoint in glob.glob(os.path.join(state, "*", "*", "checkpoint")):
            shutil.rmtree(checkpoint)  # lost: the connect topics must carry the restart alone
        # The last worker is not killed: it runs in the test's session (a cold JVM's start is
        # most of a short life), picking the connectors up from the connect topics as the others.
        from connect import Worker
        worker = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": GROUP, "state.dir": str(state)}).start()
        try:
            assert sorted(worker.connectors()) == ["restart-dir", "restart-src"]
            wait_until(lambda: topic_count() >= LINES, 180, poll, "every line in the topic")
            wait_until(lambda: len(_directory_lines(out)) >= LINES, 180, 0.3, "every line in the directory")
        finally:
            worker.close()
        assert [v.decode() for v in values(bootstrap, "restart-lines")] == lines
        assert sorted(_directory_lines(out)) == lines
        sizes = _batch_sizes(out)
        assert len(sizes) > 1 and max(sizes) <= SINK_BATCH, sizes   # max.poll.records bounds a batch
    finally:
        if proc.poll() is None:
            _kill(proc)
