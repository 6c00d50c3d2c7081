"""``riverlog connect standalone``: a worker process started from a worker.properties file and
connector files (JSON and .properties), serving the REST API on ``rest.port``, moving records, and
stopping cleanly on SIGTERM."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import httpx
import pytest

from tests.conftest import ROOT, free_ports, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _records(servers: str, topic: str, n: int) -> list[bytes]:
    from broker.client import Consumer
    c = Consumer({"bootstrap.servers": servers, "group.id": "cli-test-reader", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        wait_until(lambda: got.extend(m.value() for m in [c.poll(0.5)] if m is not None and m.error() is None)
                   or len(got) >= n, 120, 0, f"{n} records in {topic}")
    finally:
        c.close()
    return got


def test_standalone_runs_the_connector_files_serves_rest_and_stops_on_sigterm(spark_broker, tmp_path):
    [port] = free_ports(1)
    data = tmp_path / "in.txt"
    data.write_text("".join(f"row-{i}\n" for i in range(20)))
    worker = tmp_path / "worker.properties"
    worker.write_text(f"# Kafka's worker.properties format\nbootstrap.servers={spark_broker.bootstrap}\n"
                      f"group.id=cli-standalone\nrest.host.name=127.0.0.1\nrest.port={port}\n"
                      f"state.dir={tmp_path / 'state'}\n"
                      "key.converter=org.apache.kafka.connect.storage.StringConverter\n")
    source = tmp_path / "source.json"
    source.write_text(json.dumps({"name": "rows-in", "config": {
        "connector.class": "FileStreamSource", "file": str(data), "topic": "cli-rows",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}))
    validated_only = tmp_path / "sink.properties"
    validated_only.write_text("name=rows-out\nconnector.class=FileStreamSink\ntopics=cli-rows\n"
                              f"file={tmp_path / 'out.txt'}\n"
                              "value.converter=org.apache.kafka.connect.storage.StringConverter\n")
    proc = subprocess.Popen([sys.executable, "-m", "broker.cli", "connect", "standalone", "--worker", str(worker),
                             "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                             str(source), str(validated_only)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT})
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: any(f"REST API at {url}" in line for line in err) or proc.poll() is not None, 180, 0.2,
                   "the worker's REST API")
        assert proc.poll() is None, "".join(err)[-3000:]
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.get("/connectors").json() == ["rows-in", "rows-out"]
            wait_until(lambda: http.get("/connectors/rows-in/status").json()["connector"]["state"] == "RUNNING",
                       60, 0.1, "rows-in RUNNING")
        assert sorted(_records(spark_broker.bootstrap, "cli-rows", 20)) == sorted(b"row-%d" % i for i in range(20))
        out_file = tmp_path / "out.txt"
        try:
            wait_until(lambda: out_file.exists() and out_file.read_text().splitlines() == [f"row-{i}" for i in range(20)],
                       120, 0.2, "the sink's file")
        except AssertionError:
            status = httpx.get(f"{url}/connectors/rows-out/status", timeout=60).json()
            raise AssertionError((status, out_file.read_text() if out_file.exists() else None)) from None
        listed = subprocess.run([sys.executable, "-m", "broker.cli", "connect", "list", "--url", url], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        assert listed.stdout.split() == ["rows-in", "rows-out"], listed.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    out = proc.stdout.read()
    assert code == 0, "".join(err)[-3000:]
    assert "connector rows-in created" in out and "connector rows-out created" in out, out


def test_standalone_refuses_a_bad_connector_file_before_starting_spark(tmp_path):
    worker = tmp_path / "worker.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\n")
    bad = tmp_path / "bad.json"
    bad.write_text('{"config": {"connector.class": "FileStreamSource"}}')
    r = subprocess.run([sys.executable, "-m", "broker.cli", "connect", "standalone", "--worker", str(worker), str(bad)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "names no connector" in r.stderr, r.stderr
