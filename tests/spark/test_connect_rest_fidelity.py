"""Kafka Connect REST and worker behaviour checked against Kafka's own rules, through a real HTTP
client against a real worker (one SparkSession, one broker process): connectors kept apart by
their exact name, transactions ended before a sinkId is forgotten, topic tracking (KIP-558), and
Kafka's messages and record order where they differ from an easy guess. Tests run in file order
and share the module's worker."""
from __future__ import annotations

import json
import os

import httpx
import pytest

from tests.conftest import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

STRING = "org.apache.kafka.connect.storage.StringConverter"


@pytest.fixture(scope="module")
def env(spark, spark_broker, tmp_path_factory):
    from connect.rest import RestServer
    from connect.worker import Worker
    root = tmp_path_factory.mktemp("connect-fidelity")
    worker = Worker(spark, {"bootstrap.servers": spark_broker.bootstrap, "group.id": "fidelity",
                            "rest.port": 0, "state.dir": str(root / "state")}).start()
    server = RestServer(worker, "127.0.0.1", 0).start()
    client = httpx.Client(base_url=server.url, timeout=120)
    yield {"root": root, "worker": worker, "server": server, "http": client, "servers": spark_broker.bootstrap}
    client.close()
    server.stop()
    worker.close()


def _topics(env, *names) -> None:
    from broker.client import AdminClient, NewTopic
    with AdminClient({"bootstrap.servers": env["servers"]}) as admin:
        for name, future in admin.create_topics([NewTopic(n, 1) for n in names]).items():
            future.result(30)


def _source(env, name: str, topic: str, lines: list[str]) -> dict:
    path = env["root"] / f"{name.replace(' ', '+')}.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return {"connector.class": "FileStreamSource", "file": str(path), "topic": topic,
            "key.converter": STRING, "value.converter": STRING}


def _sink(env, name: str, topic: str) -> dict:
    return {"connector.class": "FileStreamSink", "file": str(env["root"] / f"{name}.out"), "topics": topic,
            "key.converter": STRING, "value.converter": STRING}


def _error(response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert body["error_code"] == status, body
    return body["message"]


def _state(env, name: str) -> str:
    return env["http"].get(f"/connectors/{name}/status").json()["connector"]["state"]


def _wait_state(env, name: str, state: str) -> None:
    wait_until(lambda: _state(env, name) == state, 120, 0.1, f"{name} {state}")


def _values(env, topic: str) -> list[str]:
    from tests.spark.connect_helpers import read_committed
    return [m.value().decode() for m in read_committed(env["servers"], topic)]


def _records(env, topic: str, keys) -> list[tuple[str, dict | None]]:
    """(key, value) of ``topic``'s records whose key is in ``keys``, in log order."""
    from tests.spark.connect_helpers import read_committed
    return [(m.key().decode(), None if m.value() is None else json.loads(m.value()))
            for m in read_committed(env["servers"], topic) if m.key() and m.key().decode() in keys]


# ------------------------------------------------------------------------------ names kept apart
def test_connectors_whose_names_differ_only_in_special_characters_keep_apart(env):
    """Kafka keys a connector's state by its exact name: ``x y`` and ``x_y`` each have their
    checkpoint and sinkId, and deleting one leaves the other's checkpoint and rows alone."""
    http, worker = env["http"], env["worker"]
    _topics(env, "names-1", "names-2")
    assert http.post("/connectors", json={"name": "x y", "config": _source(env, "x y", "names-1", ["one"])}
                     ).status_code == 201
    _wait_state(env, "x y", "RUNNING")
    wait_until(lambda: _values(env, "names-1") == ["one"], 120, 0.2, "x y's line")
    assert http.post("/connectors", json={"name": "x_y", "config": _source(env, "x_y", "names-2", ["two"])}
                     ).status_code == 201
    _wait_state(env, "x_y", "RUNNING")
    first, second = worker._paths("x y"), worker._paths("x_y")
    assert first.root != second.root
    wait_until(lambda: _values(env, "names-2") == ["two"], 120, 0.2, "x_y's line, not skipped")
    assert first.previous()[0] != second.previous()[0]
    assert _state(env, "x y") == "RUNNING" and _state(env, "x_y") == "RUNNING"
    from connect.connector_state import ConnectorPaths
    mapped = {p.name: p.root for p in ConnectorPaths.existing(worker.state_dir, "fidelity")}
    assert mapped["x y"] == first.root and mapped["x_y"] == second.root
    assert http.delete("/connectors/x y").status_code == 204
    assert os.listdir(os.path.join(second.checkpoint, "offsets")) and not os.path.exists(first.root)
    with open(env["root"] / "x_y.txt", "a") as f:
        f.write("three\n")
    wait_until(lambda: _values(env, "names-2") == ["two", "three"], 120, 0.2, "x_y going on after x y's delete")
    assert http.delete("/connectors/x_y").status_code == 204


def test_a_worker_started_over_a_directory_of_the_older_naming_removes_it(env, spark, tmp_path):
    """A directory without the exact name (the older naming) cannot be told apart between the
    names that map to it: its transactions are ended and it is removed; the broker's offsets
    are where its connector goes on from."""
    from connect.worker import Worker
    old = tmp_path / "state" / "older" / "x_y"
    os.makedirs(old / "checkpoint" / "offsets")
    (old / "sink-id").write_text(f"connect-x_y-0123456789ab\n{env['servers']}")
    worker = Worker(spark, {"bootstrap.servers": env["servers"], "group.id": "older",
                            "state.dir": str(tmp_path / "state")})
    worker._finish_pending()
    assert not old.exists()


# ------------------------------------------------------------------ a transaction left open
@pytest.mark.parametrize("how", ["reset", "delete"])
def test_offsets_reset_and_delete_end_what_the_forgotten_sink_id_left_open(env, how):
    """A batch attempt left open under the sinkId that an offsets reset or a delete forgets
    would stay Ongoing until ``transaction.timeout.ms`` (900 s here), holding the last stable
    offset of every topic it wrote; it is aborted first, so ``read_committed`` readers go on."""
    from broker.client import Producer
    from tests.spark.connect_helpers import produce
    http, name, out = env["http"], f"open-{how}", f"open-{how}-held"
    _topics(env, f"open-{how}-in", out)
    produce(env["servers"], f"open-{how}-in", [b"a"])
    assert http.put(f"/connectors/{name}/config", json=_sink(env, name, f"open-{how}-in")).status_code == 201
    _wait_state(env, name, "RUNNING")
    wait_until(lambda: (env["root"] / f"{name}.out").exists() and
               (env["root"] / f"{name}.out").read_text() == "a\n", 120, 0.2, "the sink's line")
    assert http.put(f"/connectors/{name}/stop").status_code == 204
    sink_id = env["worker"]._paths(name).previous()[0]
    held = Producer({"bootstrap.servers": env["servers"], "transactional.id": f"{sink_id}-0-7-0",
                     "transaction.timeout.ms": 900000})
    try:
        held.init_transactions(30)
        held.begin_transaction()
        held.produce(out, value=b"open")
        assert held.flush(30) == 0
        produce(env["servers"], out, [b"after"])
        assert _values(env, out) == []           # the open transaction holds the last stable offset
        if how == "reset":
            assert http.delete(f"/connectors/{name}/offsets").status_code == 200
        else:
            assert http.delete(f"/connectors/{name}").status_code == 204
        wait_until(lambda: _values(env, out) == ["after"], 60, 0.2, "the last stable offset moving on")
    finally:
        held.close(1)
    if how == "reset":
        assert http.delete(f"/connectors/{name}").status_code == 204


# ---------------------------------------------------------------------------- topic tracking
def test_topic_tracking_records_each_topic_once_and_resets(env):
    """KIP-558: ``status-topic-<topic>:connector-<name>`` written the first time a source writes to
    a topic or a sink reads from one; GET answers ``{name: {"topics": [...]}}`` (an unknown name
    too, with none), reset (202) writes tombstones, and a topic used again is recorded again."""
    http = env["http"]
    _topics(env, "tracked")
    assert http.post("/connectors", json={"name": "trk-src", "config": _source(env, "trk-src", "tracked", ["a"])}
                     ).status_code == 201
    assert http.put("/connectors/trk-sink/config", json=_sink(env, "trk-sink", "tracked")).status_code == 201
    for name in ("trk-src", "trk-sink"):
        wait_until(lambda: http.get(f"/connectors/{name}/topics").json() == {name: {"topics": ["tracked"]}},
                   120, 0.2, f"{name}'s topic")
    with open(env["root"] / "trk-src.txt", "a") as f:
        f.write("b\n")
    wait_until(lambda: (env["root"] / "trk-sink.out").exists() and
               (env["root"] / "trk-sink.out").read_text() == "a\nb\n", 120, 0.2, "the second line through both")
    keys = {"status-topic-tracked:connector-trk-src", "status-topic-tracked:connector-trk-sink"}
    written = _records(env, "connect-status", keys)
    assert sorted(k for k, _ in written) == sorted(keys), written        # once each
    for key, value in written:
        topic = value["topic"]
        assert set(topic) == {"name", "connector", "task", "discoverTimestamp"} and topic["name"] == "tracked"
        assert key.endswith(":connector-" + topic["connector"]) and topic["task"] == 0
        assert isinstance(topic["discoverTimestamp"], int) and topic["discoverTimestamp"] > 0
    assert http.get("/connectors/nope/topics").json() == {"nope": {"topics": []}}
    reset = http.put("/connectors/trk-src/topics/reset")
    assert reset.status_code == 202 and not reset.content
    assert http.get("/connectors/trk-src/topics").json() == {"trk-src": {"topics": []}}
    assert _records(env, "connect-status", {"status-topic-tracked:connector-trk-src"})[-1][1] is None
    with open(env["root"] / "trk-src.txt", "a") as f:
        f.write("c\n")
    wait_until(lambda: http.get("/connectors/trk-src/topics").json() == {"trk-src": {"topics": ["tracked"]}},
               120, 0.2, "the topic recorded again")


def test_topic_tracking_disabled_or_its_reset_not_allowed_is_403(env, spark):
    from connect.rest import RestServer
    from connect.worker import Worker
    for config, get, reset in (({"topic.tracking.enable": "false"}, "Topic tracking is disabled.",
                                "Topic tracking is disabled."),
                               ({"topic.tracking.allow.reset": "false"}, None, "Topic tracking reset is disabled.")):
        worker = Worker(spark, {"bootstrap.servers": env["servers"], "group.id": "tracking-off", **config})
        server = RestServer(worker, "127.0.0.1", 0).start()
        try:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                if get is not None:
                    assert _error(client.get("/connectors/a/topics"), 403) == get
                assert _error(client.put("/connectors/a/topics/reset"), 403) == reset
        finally:
            server.stop()
            worker.close()


# -------------------------------------------------------------------------- Kafka's messages
def test_patch_removing_the_name_is_refused_as_kafka_validates_it(env):
    http = env["http"]
    before = http.get("/connectors/trk-src/config").json()
    message = _error(http.patch("/connectors/trk-src/config", json={"name": None}), 400)
    assert 'Missing required configuration "name" which has no default value.' in message, message
    assert message.startswith("Connector configuration is invalid and contains the following 1 error(s):"), message
    assert http.get("/connectors/trk-src/config").json() == before


def test_unknown_connector_404s_say_what_kafka_says(env):
    http = env["http"]
    assert _error(http.get("/connectors/nope/status"), 404) == "No status found for connector nope"
    for verb in ("pause", "resume", "stop"):
        assert _error(http.put(f"/connectors/nope/{verb}"), 404) == "Unknown connector nope"
    assert _error(http.get("/connectors/nope/tasks/0/status"), 404) == "No status found for task nope-0"
    assert _error(http.get("/connectors/trk-src/tasks/5/status"), 404) == "No status found for task trk-src-5"


def test_the_worker_id_is_the_bound_rest_port(env):
    port = env["server"].port
    assert port != 0
    status = env["http"].get("/connectors/trk-src/status").json()
    assert status["connector"]["worker_id"].endswith(f":{port}"), status
    assert status["tasks"][0]["worker_id"].endswith(f":{port}"), status


def test_stop_writes_the_empty_task_configs_before_the_stopped_target_state(env):
    """``DistributedHerder.stopConnector``: a crash between the two writes must never leave a
    STOPPED connector listing tasks."""
    http = env["http"]
    before = len(_records(env, "connect-configs", {"commit-trk-sink", "target-state-trk-sink"}))
    assert http.put("/connectors/trk-sink/stop").status_code == 204
    written = _records(env, "connect-configs", {"commit-trk-sink", "target-state-trk-sink"})[before:]
    assert [k for k, _ in written] == ["commit-trk-sink", "target-state-trk-sink"], written
    assert written[0][1] == {"tasks": 0} and written[1][1]["state.v2"] == "STOPPED", written


def test_a_null_sink_offset_partition_gets_sink_utils_message(env):
    http = env["http"]
    _wait_state(env, "trk-sink", "STOPPED")
    body = {"offsets": [{"partition": None, "offset": {"kafka_offset": 1}}]}
    assert _error(http.patch("/connectors/trk-sink/offsets", json=body), 400) == \
        "The partition for a sink connector offset cannot be null or missing"
    for name in ("trk-src", "trk-sink"):
        assert http.delete(f"/connectors/{name}").status_code == 204


def test_refused_configs_answer_kafkas_messages_and_create_nothing(env):
    """``AbstractHerder.maybeAddConfigErrors``' pointer to the validate endpoint, ``Plugins``'
    list of the connectors there are for an unknown class, and a sink's consumer group that the
    runtime could not read in, all refused before anything is written."""
    http = env["http"]
    hint = "\nYou can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`"
    message = _error(http.post("/connectors", json={"name": "typo", "config": {
        "connector.class": "FileStreamSorce", "file": "/tmp/x", "topic": "t"}}), 400)
    assert "Failed to find any class that implements Connector and which name matches FileStreamSorce, " \
           "available connectors are: PluginDesc{" in message and message.endswith(hint), message
    assert "FileStreamSourceConnector" in message, message
    message = _error(http.put("/connectors/grp/config", json={
        "connector.class": "FileStreamSink", "file": "/tmp/x", "topics": "t", "consumer.override.group.id": "g"}), 400)
    assert "for configuration group.id: a sink connector's consumer group is connect-<connector name>" in message \
        and message.endswith(hint), message
    assert "typo" not in http.get("/connectors").json() and "grp" not in http.get("/connectors").json()


def test_the_workers_client_settings_reach_each_connector_under_its_overrides(env, spark, tmp_path):
    """Kafka's ``Worker.baseConsumerConfigs``/``baseProducerConfigs``: the worker's ``consumer.*``
    and ``producer.*`` settings, then the connector's ``*.override.*``. Created PAUSED, the
    connector is configured without a query being started."""
    from connect.worker import Worker
    worker = Worker(spark, {"bootstrap.servers": env["servers"], "group.id": "client-defaults",
                            "state.dir": str(tmp_path / "state"), "consumer.max.poll.records": "3",
                            "consumer.fetch.max.bytes": "1048576", "producer.linger.ms": "5"}).start()
    try:
        worker.create_connector("defaults-sink", {"connector.class": "FileStreamSink", "topics": "defaults-in",
                                                  "file": str(tmp_path / "out.txt"),
                                                  "consumer.override.fetch.max.bytes": "65536"}, "PAUSED")
        config = worker._connectors["defaults-sink"].config
        assert config.reader_options() == {"maxOffsetsPerTrigger": "3", "riverlog.fetch.max.bytes": "65536"}
        assert dict(config.producer_overrides) == {"linger.ms": "5"}
        worker.delete_connector("defaults-sink")
    finally:
        worker.close()
