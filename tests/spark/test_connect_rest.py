"""Kafka Connect's REST API, path by path, with a real HTTP client against a real worker (one
SparkSession, one broker process) running two connectors for the whole module: a FileStreamSource
(file -> topic ``lines``) and a FileStreamSink (``lines`` -> file). The tests run in file order and
share the connectors, so Spark starts as few queries as the paths need; every status code Kafka
answers is checked, success and error, with Connect's ``{"error_code", "message"}`` body.

The ``riverlog connect`` client commands are run here too, as subprocesses against the same REST API.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import httpx
import pytest

from tests.conftest import ROOT, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

SOURCE, SINK = "lines-in", "lines-out"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


@pytest.fixture(scope="module")
def env(spark, spark_broker, tmp_path_factory):
    from broker.client import AdminClient, NewTopic
    from connect.rest import RestServer
    from connect.worker import Worker
    root = tmp_path_factory.mktemp("connect-rest")
    with AdminClient({"bootstrap.servers": spark_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic("lines", 1)])["lines"].result()
    worker = Worker(spark, {"bootstrap.servers": spark_broker.bootstrap, "group.id": "rest-test",
                            "rest.port": 0, "state.dir": str(root / "state")}).start()
    server = RestServer(worker, "127.0.0.1", 0).start()
    client = httpx.Client(base_url=server.url, timeout=120)
    yield {"root": root, "worker": worker, "server": server, "http": client, "in": root / "in.txt",
           "out": root / "out.txt", "servers": spark_broker.bootstrap}
    client.close()
    server.stop()
    worker.close()


def _source_config(env, **extra) -> dict:
    return {"connector.class": "FileStreamSource", "tasks.max": "1", "file": str(env["in"]), "topic": "lines",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter", **extra}


def _sink_config(env, **extra) -> dict:
    return {"connector.class": "FileStreamSink", "tasks.max": "1", "file": str(env["out"]), "topics": "lines",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter", **extra}


def _error(response, status: int) -> str:
    """Connect's error body with ``status``; its message."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert body["error_code"] == status and isinstance(body["message"], str), body
    return body["message"]


def _state(env, name: str) -> str:
    return env["http"].get(f"/connectors/{name}/status").json()["connector"]["state"]


def _wait_state(env, name: str, state: str, timeout: float = 120) -> None:
    wait_until(lambda: _state(env, name) == state, timeout, 0.1, f"{name} {state}")


def _append(path, lines) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def _out_lines(env) -> list[str]:
    return env["out"].read_text().splitlines() if env["out"].exists() else []


def _end_offset(env, topic: str) -> int:
    from broker.client import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": env["servers"], "group.id": "rest-test-watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def _records(env, topic: str, name: str) -> list[tuple[int, int, str, dict | None]]:
    """``topic``'s records about connector ``name`` (connect-configs' or connect-status' keys):
    (partition, offset, key, value)."""
    from tests.spark.connect_helpers import read_committed
    about = re.compile(rf"(status-connector-|status-task-|connector-|target-state-|task-|commit-){re.escape(name)}(-\d+)?")
    return [(m.partition(), m.offset(), m.key().decode(), None if m.value() is None else json.loads(m.value()))
            for m in read_committed(env["servers"], topic) if m.key() and about.fullmatch(m.key().decode())]


def _written_since(env, topic: str, name: str, before: list) -> list[tuple[str, dict | None]]:
    """(key, value) of the records about ``name`` written after ``before`` was read, in log order per key."""
    seen = {(p, o) for p, o, _, _ in before}
    return [(k, v) for p, o, k, v in _records(env, topic, name) if (p, o) not in seen]


def _cli(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", "connect", *args, "--url", env["server"].url],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------------- worker and plugins
def test_root_and_plugins(env):
    http = env["http"]
    root = http.get("/")
    assert root.status_code == 200 and set(root.json()) >= {"version", "commit", "kafka_cluster_id"}
    assert http.get("/health").json()["status"] == "healthy"
    from broker.client import AdminClient
    cluster = AdminClient({"bootstrap.servers": env["servers"]}).describe_cluster().result(30).cluster_id
    assert root.json()["kafka_cluster_id"] == cluster and cluster
    plugins = http.get("/connector-plugins").json()
    assert {"class": FILE_SOURCE, "type": "source"}.items() <= next(p for p in plugins if p["class"] == FILE_SOURCE).items()
    assert all(p["type"] in ("source", "sink") for p in plugins)
    everything = http.get("/connector-plugins", params={"connectorsOnly": "false"}).json()
    assert {"transformation", "converter", "predicate"} <= {p["type"] for p in everything}
    keys = http.get("/connector-plugins/FileStreamSource/config").json()
    assert {"file", "topic", "batch.size"} <= {k["name"] for k in keys}
    names = [k["name"] for k in keys]        # the plugin's own keys first, each key once (Kafka 3.5+)
    assert len(names) == len(set(names)) and names.index("file") < names.index("connector.class")
    _error(http.get("/connector-plugins/NoSuchConnector/config"), 404)


def test_validate_lists_every_problem_with_200_and_a_name_mismatch_is_400(env):
    http = env["http"]
    good = http.put("/connector-plugins/FileStreamSource/config/validate", json=_source_config(env, name="v"))
    assert good.status_code == 200 and good.json()["error_count"] == 0, good.text
    bad = http.put("/connector-plugins/FileStreamSource/config/validate",
                   json={"connector.class": "FileStreamSource", "name": "v", "tasks.max": "0", "transforms": "nope"})
    assert bad.status_code == 200
    infos = bad.json()
    named = {c["value"]["name"] for c in infos["configs"] if c["value"] and c["value"]["errors"]}
    assert {"tasks.max", "file", "topic"} <= named and infos["error_count"] >= 3, named
    assert any(n.startswith("transforms") for n in named), named
    message = _error(http.put("/connector-plugins/FileStreamSink/config/validate",
                              json=_source_config(env, name="v")), 400)
    assert message == f"Included connector type FileStreamSource does not match request type FileStreamSink"


def test_a_bad_config_is_refused_at_post_with_every_field_named(env):
    http = env["http"]
    r = http.post("/connectors", json={"name": "broken", "config": {
        "connector.class": "FileStreamSource", "tasks.max": "0", "errors.tolerance": "some"}})
    message = _error(r, 400)
    assert message.startswith("Connector configuration is invalid and contains the following "), message
    count = int(message.split("following ", 1)[1].split(" ", 1)[0])
    assert count >= 4, message
    for field in ("tasks.max", "errors.tolerance", "file", "topic"):
        assert field in message, (field, message)
    assert "broken" not in http.get("/connectors").json()
    _error(http.post("/connectors", json={"name": "x", "config": {"name": "y", "connector.class": "FileStreamSink"}}),
           400)


# -------------------------------------------------------------------------------- create and read
def test_post_creates_201_then_409_and_put_creates_201_then_updates_200(env):
    http = env["http"]
    _append(env["in"], [f"line-{i}" for i in range(5)])
    created = http.post("/connectors", json={"name": SOURCE, "config": _source_config(env)})
    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"{http.base_url}/connectors/{SOURCE}".replace("//connectors", "/connectors")
    assert created.json()["name"] == SOURCE and created.json()["type"] == "source"
    assert created.json()["config"]["name"] == SOURCE
    assert "already exists" in _error(http.post("/connectors", json={"name": SOURCE, "config": _source_config(env)}),
                                      409)
    put = http.put(f"/connectors/{SINK}/config", json=_sink_config(env))
    assert put.status_code == 201 and put.json()["type"] == "sink", put.text
    again = http.put(f"/connectors/{SINK}/config", json=_sink_config(env, **{"errors.log.enable": "true"}))
    assert again.status_code == 200 and again.json()["config"]["errors.log.enable"] == "true", again.text
    _error(http.put(f"/connectors/{SINK}/config", json=_sink_config(env, name="other")), 400)
    _wait_state(env, SOURCE, "RUNNING")
    _wait_state(env, SINK, "RUNNING")
    wait_until(lambda: _out_lines(env) == [f"line-{i}" for i in range(5)], 120, 0.2, "the lines through both")
    # As Kafka: a create without initial_state writes no target state; a worker reading the
    # records back finds the connector STARTED with its tasks.
    from connect.states import TargetState
    from connect.storage_format import ConfigView, fold
    for name in (SOURCE, SINK):
        records = _records(env, "connect-configs", name)
        assert [k for _, _, k, _ in records if k.startswith("target-state-")] == [], records
        view = fold(ConfigView(), [(k.encode(), None if v is None else json.dumps(v).encode()) for _, _, k, v in records])
        assert view.target_state(name) == TargetState.STARTED and len(view.tasks(name)) == 1


def test_list_with_expand_status_info_and_both(env):
    http = env["http"]
    assert http.get("/connectors").json() == [SOURCE, SINK]
    status = http.get("/connectors?expand=status").json()
    assert set(status) == {SOURCE, SINK} and set(status[SOURCE]) == {"status"}
    assert status[SOURCE]["status"]["connector"]["state"] == "RUNNING"
    info = http.get("/connectors", params={"expand": "info"}).json()
    assert set(info[SINK]) == {"info"} and info[SINK]["info"]["config"]["topics"] == "lines"
    both = http.get("/connectors?expand=status&expand=info").json()
    assert set(both[SOURCE]) == {"status", "info"} and both[SOURCE]["info"]["type"] == "source"


def test_connector_config_tasks_and_task_status(env):
    http = env["http"]
    info = http.get(f"/connectors/{SOURCE}").json()
    assert info["name"] == SOURCE and info["tasks"] == [{"connector": SOURCE, "task": 0}]
    assert http.get(f"/connectors/{SOURCE}/config").json() == {**_source_config(env), "name": SOURCE}
    tasks = http.get(f"/connectors/{SOURCE}/tasks").json()
    assert tasks[0]["id"] == {"connector": SOURCE, "task": 0} and tasks[0]["config"]["file"] == str(env["in"])
    status = http.get(f"/connectors/{SOURCE}/status").json()
    assert status["type"] == "source" and status["tasks"][0]["state"] == "RUNNING"
    assert status["connector"]["worker_id"] == env["worker"].worker_id
    task = http.get(f"/connectors/{SOURCE}/tasks/0/status")
    assert task.status_code == 200 and task.json()["id"] == 0 and task.json()["state"] == "RUNNING"
    _error(http.get(f"/connectors/{SOURCE}/tasks/7/status"), 404)
    assert _error(http.post(f"/connectors/{SOURCE}/tasks/7/restart"), 404) == f"Task {SOURCE}-7 not found"   # Kafka's


@pytest.mark.parametrize("method, path", [
    ("GET", "/connectors/ghost"), ("GET", "/connectors/ghost/config"), ("GET", "/connectors/ghost/status"),
    ("GET", "/connectors/ghost/tasks"), ("GET", "/connectors/ghost/tasks/0/status"),
    ("POST", "/connectors/ghost/restart"), ("POST", "/connectors/ghost/tasks/0/restart"),
    ("PUT", "/connectors/ghost/pause"), ("PUT", "/connectors/ghost/resume"), ("PUT", "/connectors/ghost/stop"),
    ("DELETE", "/connectors/ghost"), ("GET", "/connectors/ghost/offsets"), ("DELETE", "/connectors/ghost/offsets"),
    ("PATCH", "/connectors/ghost/config"),
])
def test_an_unknown_connector_is_404_on_every_path(env, method, path):
    body = {"file": "x"} if method == "PATCH" else None
    message = _error(env["http"].request(method, path, json=body), 404)
    assert "ghost" in message


def test_unknown_paths_bad_json_and_wrong_methods_answer_connect_errors(env):
    http = env["http"]
    assert _error(http.get("/no/such/path"), 404) == "HTTP 404 Not Found"
    assert _error(http.delete("/connectors"), 405) == "HTTP 405 Method Not Allowed"
    _error(http.post("/connectors", content=b"{not json", headers={"Content-Type": "application/json"}), 500)
    _error(http.put(f"/connectors/{SINK}/config", json=["a", "list"]), 500)
    _error(http.put(f"/connectors/{SINK}/config", json={"file": {"nested": 1}}), 500)
    assert "config" in _error(http.post("/connectors", json={"name": "no-config"}), 400)


# -------------------------------------------------------------------------- change, pause, restart
def test_patch_changes_one_key(env):
    http = env["http"]
    patched = http.patch(f"/connectors/{SOURCE}/config", json={"batch.size": "100"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["config"]["batch.size"] == "100"
    assert http.get(f"/connectors/{SOURCE}/config").json()["file"] == str(env["in"])
    _error(http.patch(f"/connectors/{SOURCE}/config", json={"name": "other"}), 400)
    assert "tasks.max" in _error(http.patch(f"/connectors/{SOURCE}/config", json={"tasks.max": "0"}), 400)


def test_pause_and_resume_are_202_and_rows_move_again(env):
    http = env["http"]
    r = http.put(f"/connectors/{SINK}/pause")
    assert r.status_code == 202 and not r.content
    _wait_state(env, SINK, "PAUSED")
    assert http.get(f"/connectors/{SINK}/status").json()["tasks"][0]["state"] == "PAUSED"
    _append(env["in"], ["after-pause"])
    assert http.put(f"/connectors/{SINK}/resume").status_code == 202
    _wait_state(env, SINK, "RUNNING")
    wait_until(lambda: _out_lines(env)[-1:] == ["after-pause"], 120, 0.2, "the line written after the pause")


def test_restart_is_204_alone_and_202_with_the_status(env):
    http = env["http"]
    nothing_failed = http.post(f"/connectors/{SINK}/restart", params={"includeTasks": "true", "onlyFailed": "true"})
    assert nothing_failed.status_code == 202, nothing_failed.text
    assert nothing_failed.json()["name"] == SINK and nothing_failed.json()["connector"]["state"] == "RUNNING"
    plain = http.post(f"/connectors/{SINK}/restart")
    assert plain.status_code == 204 and not plain.content
    _wait_state(env, SINK, "RUNNING")
    assert http.post(f"/connectors/{SINK}/tasks/0/restart").status_code == 204
    _wait_state(env, SINK, "RUNNING")


def test_restart_answers_kafkas_plan_and_writes_only_what_kafka_writes(env):
    """The 202 body is Kafka's restart plan (RESTARTING on what restarts, the state before on the
    rest), and a plain restart writes no RESTARTING status (Kafka's shutdown writes UNASSIGNED)."""
    http = env["http"]
    before = _records(env, "connect-status", SINK)
    assert http.post(f"/connectors/{SINK}/restart").status_code == 204
    _wait_state(env, SINK, "RUNNING")
    written = _written_since(env, "connect-status", SINK, before)
    assert [v["state"] for k, v in written if k == f"status-connector-{SINK}"] == ["UNASSIGNED", "RUNNING"], written
    assert "RESTARTING" not in {v["state"] for _, v in written}, written

    connector_only = http.post(f"/connectors/{SINK}/restart", params={"onlyFailed": "true"})
    assert connector_only.status_code == 202, connector_only.text
    plan = connector_only.json()
    assert plan["connector"]["state"] == "RUNNING" and [t["state"] for t in plan["tasks"]] == ["RUNNING"], plan

    before = _records(env, "connect-status", SINK)
    with_tasks = http.post(f"/connectors/{SINK}/restart", params={"includeTasks": "true"})
    assert with_tasks.status_code == 202, with_tasks.text
    plan = with_tasks.json()
    assert plan["name"] == SINK and plan["type"] == "sink", plan
    assert plan["connector"]["state"] == "RESTARTING" and [t["state"] for t in plan["tasks"]] == ["RESTARTING"], plan
    _wait_state(env, SINK, "RUNNING")
    written = _written_since(env, "connect-status", SINK, before)
    assert [v["state"] for k, v in written if k == f"status-task-{SINK}-0"][:1] == ["RESTARTING"], written

    assert _error(http.post("/connectors/ghost/restart"), 404) == "Connector ghost not found"
    assert _error(http.post("/connectors/ghost/restart", params={"includeTasks": "true"}), 404) == \
        "Unknown connector: ghost"


# --------------------------------------------------------------------------------------- offsets
def test_offsets_are_read_any_time_and_changed_only_while_stopped(env):
    http = env["http"]
    source = http.get(f"/connectors/{SOURCE}/offsets").json()["offsets"]
    assert source and source[0]["partition"] == {"filename": str(env["in"])}
    assert source[0]["offset"]["position"] == env["in"].stat().st_size
    sink = http.get(f"/connectors/{SINK}/offsets").json()["offsets"]
    end = _end_offset(env, "lines")          # past the 6 records and the source's transaction markers
    assert sink == [{"partition": {"kafka_topic": "lines", "kafka_partition": 0}, "offset": {"kafka_offset": end}}]
    altered = {"offsets": [{"partition": {"kafka_topic": "lines", "kafka_partition": 0}, "offset": {"kafka_offset": 2}}]}
    not_stopped = ("Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
                   f"for the specified connector by issuing a 'PUT' request to the '/connectors/{SINK}/stop' endpoint")
    assert _error(http.patch(f"/connectors/{SINK}/offsets", json=altered), 400) == not_stopped   # Kafka's, exactly
    assert _error(http.delete(f"/connectors/{SINK}/offsets"), 400) == not_stopped
    assert http.put(f"/connectors/{SINK}/stop").status_code == 204     # Kafka's: done when it answers
    _wait_state(env, SINK, "STOPPED")
    assert http.get(f"/connectors/{SINK}/tasks").json() == []
    _error(http.patch(f"/connectors/{SINK}/offsets", json={"offsets": []}), 400)
    for malformed in ([{"partition": []}], [{"partition": {}}], [{"key": "val"}], [123],
                      [{"partition": {"kafka_topic": "lines"}, "offset": 5}]):   # nothing written for any
        _error(http.patch(f"/connectors/{SINK}/offsets", json={"offsets": malformed}), 400)
    # Kafka's SinkUtils reads the values through their text: 0.9, 2.7 and true are not integers
    for partition, offset, refused in ((0.9, 1, "partition value in the provided offsets: '0.9'. Partition"),
                                       (True, 1, "partition value in the provided offsets: 'true'. Partition"),
                                       (0, 2.7, "offset value in the provided offsets: '2.7'. Offset")):
        bad = {"offsets": [{"partition": {"kafka_topic": "lines", "kafka_partition": partition},
                            "offset": {"kafka_offset": offset}}]}
        message = _error(http.patch(f"/connectors/{SINK}/offsets", json=bad), 400)
        assert message.startswith(f"Failed to parse the following Kafka {refused} values for sink connectors "
                                  "need to be integers."), message
    missing = {"offsets": [{"partition": {"kafka_topic": "lines"}, "offset": {"kafka_offset": 1}}]}
    assert _error(http.patch(f"/connectors/{SINK}/offsets", json=missing), 400) == \
        "The partition for a sink connector offset must contain the keys 'kafka_topic' and 'kafka_partition'"
    # a partition the topic lacks: the coordinator refuses it (per partition), and that fails the request
    lacking = {"offsets": [{"partition": {"kafka_topic": "lines", "kafka_partition": 7},
                            "offset": {"kafka_offset": 1}}]}
    refused = http.patch(f"/connectors/{SINK}/offsets", json=lacking)
    assert refused.status_code == 500 and "partition 7 does not exist" in refused.json()["message"], refused.text
    assert http.get(f"/connectors/{SINK}/offsets").json()["offsets"] == \
        [{"partition": {"kafka_topic": "lines", "kafka_partition": 0}, "offset": {"kafka_offset": end}}]
    as_text = {"offsets": [{"partition": {"kafka_topic": "lines", "kafka_partition": "0"},
                            "offset": {"kafka_offset": "2"}}]}            # "2" is 2 to Kafka too
    r = http.patch(f"/connectors/{SINK}/offsets", json=as_text)
    assert r.status_code == 200 and r.json()["message"] == "The offsets for this connector have been altered successfully", \
        r.text
    assert http.get(f"/connectors/{SINK}/offsets").json()["offsets"] == altered["offsets"]
    reset = http.delete(f"/connectors/{SINK}/offsets")
    assert reset.status_code == 200 and "reset successfully" in reset.json()["message"], reset.text
    assert http.get(f"/connectors/{SINK}/offsets").json()["offsets"] == []


def test_initial_state_creates_a_connector_stopped_or_paused(env):
    """KIP-980: created STOPPED (no tasks), paused (still no tasks, as Kafka), its offsets refused
    by FileStreamSource's checks unless Kafka's shape, set before it first runs under the ``file``
    setting as written, then resumed, it reads from those offsets; created PAUSED, it has no tasks
    and moves nothing."""
    from broker.client import AdminClient, Consumer, NewTopic, TopicPartition
    http, path = env["http"], env["root"] / "kip980.txt"
    with AdminClient({"bootstrap.servers": env["servers"]}) as admin:
        admin.create_topics([NewTopic("kip980", 1)])["kip980"].result()
    _append(path, ["skipped", "read"])
    as_written = os.path.join(str(env["root"]), ".", "kip980.txt")     # the key is this text, not the absolute path
    config = _source_config(env, file=as_written, topic="kip980")
    assert "initial_state" in _error(http.post("/connectors", json={"name": "k", "config": config,
                                                                    "initial_state": "DESTROYED"}), 400)
    created = http.post("/connectors", json={"name": "k", "config": config, "initial_state": "stopped"})
    assert created.status_code == 201, created.text
    assert _state(env, "k") == "STOPPED" and http.get("/connectors/k/tasks").json() == []
    assert http.put("/connectors/k/pause").status_code == 202
    status = http.get("/connectors/k/status").json()
    assert status["connector"]["state"] == "PAUSED" and status["tasks"] == [], status
    assert http.get("/connectors/k/tasks").json() == [] and http.get("/connectors/k").json()["tasks"] == []
    assert http.put("/connectors/k/stop").status_code == 204
    for partition, offset, refused in (
            ({"filename": as_written}, {"position": "abc"},
             "The value for the 'position' key in the offset is expected to be a Long value"),
            ({"filename": as_written}, {"pos": 2}, "Offset objects should either be null or contain the key 'position'"),
            ({"filename": as_written}, {"position": -4},
             "The value for the 'position' key in the offset should be a non-negative value"),
            ({"file": as_written}, {"position": 2}, "Partition objects should contain the key 'filename'")):
        bad = {"offsets": [{"partition": partition, "offset": offset}]}
        assert _error(http.patch("/connectors/k/offsets", json=bad), 500) == refused    # Kafka's ConnectException
    assert http.get("/connectors/k/offsets").json()["offsets"] == []
    offsets = {"offsets": [{"partition": {"filename": as_written}, "offset": {"position": len("skipped\n")}}]}
    assert http.patch("/connectors/k/offsets", json=offsets).json()["message"] == \
        "The offsets for this connector have been altered successfully"
    assert http.put("/connectors/k/resume").status_code == 202
    _wait_state(env, "k", "RUNNING")
    c = Consumer({"bootstrap.servers": env["servers"], "group.id": "kip980-read", "isolation.level": "read_committed"})
    values = []
    try:
        c.assign([TopicPartition("kip980", 0, 0)])
        wait_until(lambda: values.extend(m.value() for m in c.consume(10, timeout=0.5) if m.error() is None) or values,
                   120, 0.1, "the resumed connector's write")
    finally:
        c.close()
    assert values == [b"read"], values
    wait_until(lambda: http.get("/connectors/k/offsets").json()["offsets"] ==
               [{"partition": {"filename": as_written}, "offset": {"position": path.stat().st_size}}],
               60, 0.2, "the offset under the file setting as written")
    assert http.delete("/connectors/k").status_code == 204
    paused = http.post("/connectors", json={"name": "p", "config": _sink_config(env, file=str(env["root"] / "p.txt")),
                                            "initial_state": "PAUSED"})
    assert paused.status_code == 201, paused.text
    assert paused.json()["tasks"] == [] and http.get("/connectors/p/tasks").json() == []
    status = http.get("/connectors/p/status").json()
    assert status["connector"]["state"] == "PAUSED" and status["tasks"] == [], status
    assert not (env["root"] / "p.txt").exists()
    assert http.delete("/connectors/p").status_code == 204


# -------------------------------------------------------------------------------------- the CLI
def test_the_cli_client_commands(env, tmp_path):
    listed = _cli(env, "list")
    assert listed.returncode == 0 and listed.stdout.split() == [SOURCE, SINK], listed.stderr
    status = _cli(env, "status", SOURCE)
    assert status.returncode == 0 and json.loads(status.stdout)["connector"]["state"] == "RUNNING", status.stderr
    offsets = _cli(env, "offsets", SOURCE)
    assert json.loads(offsets.stdout)["offsets"][0]["partition"] == {"filename": str(env["in"])}
    missing = _cli(env, "pause", "ghost")
    assert missing.returncode == 1 and missing.stderr.startswith("Error: 404: "), missing.stderr
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({"name": "bad", "config": {"connector.class": "FileStreamSource"}}))
    refused = _cli(env, "create", str(spec))
    assert refused.returncode == 1 and "Error: 400: Connector configuration is invalid" in refused.stderr
    assert "file" in refused.stderr and "topic" in refused.stderr
    unreachable = subprocess.run([sys.executable, "-m", "broker.cli", "connect", "list", "--url",
                                  "http://127.0.0.1:9"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert unreachable.returncode == 1 and "cannot reach the Connect REST API" in unreachable.stderr
    stopped = _cli(env, "stop", SOURCE)
    assert stopped.returncode == 0 and "204" in stopped.stdout
    _wait_state(env, SOURCE, "STOPPED")


# -------------------------------------------------------------------------------------- delete
def test_delete_is_204_then_404(env):
    http = env["http"]
    for name in (SOURCE, SINK):
        before = _records(env, "connect-configs", name)
        r = http.delete(f"/connectors/{name}")
        assert r.status_code == 204 and not r.content
        # Kafka's removeConnectorConfig: the two tombstones, no commit-<name> {"tasks": 0}
        assert _written_since(env, "connect-configs", name, before) == \
            [(f"connector-{name}", None), (f"target-state-{name}", None)]
        _error(http.get(f"/connectors/{name}"), 404)
        _error(http.delete(f"/connectors/{name}"), 404)
    assert http.get("/connectors").json() == []
    assert os.path.exists(env["out"])
