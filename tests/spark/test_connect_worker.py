"""The Connect worker against a real broker and real Spark: a connector's lifecycle (create, pause
with nothing moving, resume, stop, offsets read and altered while stopped and refused while running,
delete), the REST-facing errors, and the connect topics as the worker's memory."""
from __future__ import annotations

import time

import pytest

from tests.conftest import wait_until
from tests.spark.connect_helpers import values

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(scope="module")
def worker(spark, spark_broker, tmp_path_factory):
    from connect import Worker
    state = tmp_path_factory.mktemp("connect-state")
    w = Worker(spark, {"bootstrap.servers": spark_broker.bootstrap, "group.id": "connect-lifecycle",
                       "state.dir": str(state), "rest.port": "8083"}).start()
    yield w
    w.close()


def _append(path, lines):
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))


def test_lifecycle_pause_resume_stop_offsets_delete(worker, spark_broker, tmp_path):
    from connect.errors import AlreadyExistsError, BadRequestError, ConfigError, NotFoundError
    bootstrap, source = spark_broker.bootstrap, tmp_path / "in.txt"
    _append(source, ["a", "b", "c"])
    config = {"connector.class": "FileStreamSource", "file": str(source), "topic": "lifecycle-lines",
              "value.converter": "org.apache.kafka.connect.storage.StringConverter", "key.converter": "StringConverter"}

    with pytest.raises(ConfigError) as bad:
        worker.create_connector("bad", {"connector.class": "FileStreamSource", "tasks.max": "0",
                                        "transforms": "t", "batch.size": "x"})
    assert {"tasks.max", "transforms.t.type", "file", "topic", "batch.size"} <= set(bad.value.details["errors"])
    assert bad.value.details["infos"]["error_count"] >= 5

    info = worker.create_connector("lines", config)
    assert info["type"] == "source" and info["tasks"] == [{"connector": "lines", "task": 0}]
    with pytest.raises(AlreadyExistsError):
        worker.create_connector("lines", config)
    assert worker.wait_for_state("lines", "RUNNING")["connector"]["worker_id"] == worker.worker_id
    wait_until(lambda: values(bootstrap, "lifecycle-lines") == [b"a", b"b", b"c"], 60, 0.3, "the first lines")
    wait_until(lambda: worker.offsets("lines")["offsets"] == [{"partition": {"filename": str(source)},
                                                                "offset": {"position": 6}}], 10, 0.2, "offsets")
    with pytest.raises(BadRequestError):
        worker.alter_offsets("lines", [{"partition": {"filename": str(source)}, "offset": {"position": 0}}])

    worker.pause("lines")
    status = worker.connector_status("lines")
    assert status["connector"]["state"] == "PAUSED" and status["tasks"][0]["state"] == "PAUSED"
    _append(source, ["d", "e"])
    deadline = time.monotonic() + 4  # paused: nothing moves for as long as we look
    while time.monotonic() < deadline:
        assert values(bootstrap, "lifecycle-lines") == [b"a", b"b", b"c"]
        time.sleep(0.5)

    worker.resume("lines")
    worker.wait_for_state("lines", "RUNNING")
    wait_until(lambda: values(bootstrap, "lifecycle-lines") == [b"a", b"b", b"c", b"d", b"e"], 60, 0.3,
               "the lines written while paused")

    worker.stop("lines")
    status = worker.connector_status("lines")
    assert status["connector"]["state"] == "STOPPED" and status["tasks"] == []
    assert worker.task_configs("lines") == []
    assert worker.offsets("lines")["offsets"][0]["offset"] == {"position": 10}
    assert worker.alter_offsets("lines", [{"partition": {"filename": str(source)}, "offset": {"position": 6}}]) \
        == "The offsets for this connector have been altered successfully"
    assert worker.offsets("lines")["offsets"][0]["offset"] == {"position": 6}
    worker.resume("lines")
    wait_until(lambda: values(bootstrap, "lifecycle-lines")[5:] == [b"d", b"e"], 60, 0.3,
               "d and e again, from the altered offset")
    assert worker.task_configs("lines")[0]["id"] == {"connector": "lines", "task": 0}

    restarted = worker.restart("lines", include_tasks=True)
    assert restarted is not None and restarted["name"] == "lines"
    worker.wait_for_state("lines", "RUNNING")

    # Kafka keys a FileStreamSource's offset by its file: pointed at another file, the connector
    # reads it from that file's own offset (its start), never at the last file's byte position
    # that the query's checkpoint holds.
    second = tmp_path / "second.txt"
    _append(second, ["x1", "x2", "x3"])
    worker.put_connector_config("lines", {**config, "file": str(second)})
    wait_until(lambda: len(values(bootstrap, "lifecycle-lines")) >= 10, 60, 0.3, "the second file")
    assert values(bootstrap, "lifecycle-lines")[7:] == [b"x1", b"x2", b"x3"]
    assert {"partition": {"filename": str(second)}, "offset": {"position": 9}} in worker.offsets("lines")["offsets"]

    worker.delete_connector("lines")
    assert "lines" not in worker.connectors()
    with pytest.raises(NotFoundError):
        worker.connector_status("lines")
    # The topics remember: the config is gone, the offsets stay (as Kafka keeps them).
    worker.storage.read_to_end()
    assert "lines" not in worker.storage.configs.connector_configs
    assert worker.storage.statuses.connector("lines") is None
    assert worker.storage.offsets.connector_offsets("lines")


def test_plugins_and_validate(worker):
    classes = {p["class"]: p["type"] for p in worker.connector_plugins()}
    assert classes["org.apache.kafka.connect.file.FileStreamSourceConnector"] == "source"
    assert classes["io.riverlog.connect.file.DirectorySinkConnector"] == "sink"
    assert any(p["type"] == "transformation" for p in worker.connector_plugins(connectors_only=False))
    names = {k["name"] for k in worker.plugin_config("FileStreamSink")}
    assert {"file", "topics", "errors.tolerance"} <= names
    result = worker.validate("FileStreamSink", {"name": "v", "topics": "x", "errors.tolerance": "some"})
    assert result["error_count"] == 1


def test_a_stopped_connector_that_fails_to_start_when_resumed_is_failed(worker, spark_broker, tmp_path):
    """Kafka's WorkerConnector goes STOPPED -> FAILED when its start fails on resume; the resume
    itself is answered (202) and the status carries the trace, no query is left behind."""
    from connect.errors import NotFoundError
    config = {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "never-made",
              "topic.creation.default.replication.factor": "3", "topic.creation.default.partitions": "1"}
    worker.create_connector("resume-fails", config, "STOPPED")
    try:
        worker.resume("resume-fails")
        status = worker.connector_status("resume-fails")
        assert status["connector"]["state"] == "FAILED", status
        assert "Task failed to create new topic never-made" in status["connector"]["trace"]
        assert worker._connectors["resume-fails"].query is None
    finally:
        worker.delete_connector("resume-fails")
    with pytest.raises(NotFoundError):
        worker.connector_status("resume-fails")
