"""What connect-status and the worker say when a connector stops running here, and what a failed
write leaves behind, as Kafka Connect's herder does: a delete writes the config's tombstone before
anything else (``DistributedHerder.deleteConnectorConfig``), a worker that closes or loses its
group writes each connector's and task's UNASSIGNED (``AbstractHerder.onShutdown``), and a start
that fails part-way leaves the group and looks started to no one."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]

SESSION = {"session.timeout.ms": "1500", "heartbeat.interval.ms": "300"}


def _config(bootstrap, tmp_path, group, port):
    return {"bootstrap.servers": bootstrap, "group.id": group, **SESSION,
            "config.storage.topic": f"{group}-configs", "status.storage.topic": f"{group}-status",
            "offset.storage.topic": f"{group}-offsets", "state.dir": str(tmp_path / "state"),
            "rest.advertised.host.name": "h", "rest.port": str(port)}


def _topics(bootstrap, tmp_path, group):
    """connect-configs and connect-status as another process reads them."""
    from connect.config import WorkerConfig
    from connect.storage import ConnectStorage
    storage = ConnectStorage(WorkerConfig.parse(_config(bootstrap, tmp_path, group, 1))).start()
    storage.close()
    return storage.configs, storage.statuses


def _source(tmp_path, topic):
    path = tmp_path / "in.txt"
    path.write_text("a\n")
    return {"connector.class": "FileStreamSource", "file": str(path), "topic": topic,
            "value.converter": "StringConverter"}


def test_a_refused_config_tombstone_leaves_the_connector_as_it_was(spark, spark_broker, tmp_path, monkeypatch):
    from connect import Worker
    from connect.errors import ConnectError
    bootstrap, group = spark_broker.bootstrap, "statuses-delete"
    w = Worker(spark, _config(bootstrap, tmp_path, group, 18101)).start()
    try:
        w.create_connector("d", _source(tmp_path, "statuses-delete-lines"), "STOPPED")

        def refused(records):
            raise ConnectError("1 record(s) to 'statuses-delete-configs' were not acknowledged within 30.0s")
        with monkeypatch.context() as m:
            m.setattr(w.storage.config_log, "send", refused)     # the broker fails the tombstone's write
            with pytest.raises(ConnectError, match="not acknowledged"):
                w.delete_connector("d")
        assert w.connector_status("d")["connector"]["state"] == "STOPPED"
        configs, statuses = _topics(bootstrap, tmp_path, group)
        assert configs.connectors() == ["d"]
        assert statuses.connector("d").state.value == "STOPPED"    # no DESTROYED written for a kept config

        w.pause("d")     # still a live connector: it moves on (a DESTROYED one refuses every move)
        assert w.connector_status("d")["connector"]["state"] == "PAUSED"
        w.delete_connector("d")
        configs, statuses = _topics(bootstrap, tmp_path, group)
        assert configs.connectors() == [] and statuses.connector("d") is None
    finally:
        w.close()


def test_a_clean_stop_writes_unassigned_statuses(spark, spark_broker, tmp_path):
    from connect import Worker
    bootstrap, group = spark_broker.bootstrap, "statuses-close"
    w = Worker(spark, _config(bootstrap, tmp_path, group, 18102)).start()
    try:
        w.create_connector("p", _source(tmp_path, "statuses-close-lines"))
        w.wait_for_state("p", "RUNNING")
        w.pause("p")
        w.create_connector("s", _source(tmp_path, "statuses-close-lines"), "STOPPED")
        _, statuses = _topics(bootstrap, tmp_path, group)
        assert [statuses.connector(n).state.value for n in ("p", "s")] == ["PAUSED", "STOPPED"]
    finally:
        w.close()
    _, statuses = _topics(bootstrap, tmp_path, group)
    assert [statuses.connector(n).state.value for n in ("p", "s")] == ["UNASSIGNED", "UNASSIGNED"]
    assert [t.state.value for t in statuses.task_statuses("p")] == ["UNASSIGNED"]
    assert statuses.connector("p").worker_id == "h:18102"


def test_a_worker_that_lost_its_group_shows_its_connectors_unassigned(spark, spark_broker, tmp_path):
    from connect import Worker
    bootstrap, group = spark_broker.bootstrap, "statuses-lost"
    w = Worker(spark, _config(bootstrap, tmp_path, group, 18103)).start()
    try:
        w.create_connector("r", _source(tmp_path, "statuses-lost-lines"))
        w.wait_for_state("r", "RUNNING")
        w._lease._lose()          # what the membership's revocation (or its session's expiry) runs
        assert w._connectors["r"].query is None
        status = w.connector_status("r")
        assert status["connector"]["state"] == "UNASSIGNED"
        assert [t["state"] for t in status["tasks"]] == ["UNASSIGNED"]
        _, statuses = _topics(bootstrap, tmp_path, group)
        assert statuses.connector("r").state.value == "UNASSIGNED"

        # the group's new owner runs it now; closing the worker that lost the group leaves that be
        from connect.config import WorkerConfig
        from connect.states import ConnectorState
        from connect.storage import ConnectStorage
        from connect.storage_format import Status
        owner = ConnectStorage(WorkerConfig.parse(_config(bootstrap, tmp_path, group, 1))).start()
        try:
            owner.put_status(Status("r", ConnectorState.RUNNING, "owner:8083", statuses.connector("r").generation + 1))
        finally:
            owner.close()
        w.close()
        _, statuses = _topics(bootstrap, tmp_path, group)
        assert (statuses.connector("r").state.value, statuses.connector("r").worker_id) == ("RUNNING", "owner:8083")
    finally:
        w.close()


def test_a_start_that_fails_while_assigning_leaves_the_group(spark, spark_broker, tmp_path, monkeypatch):
    from connect import Worker
    from connect.errors import ConnectError
    bootstrap, group = spark_broker.bootstrap, "statuses-start"
    first = Worker(spark, _config(bootstrap, tmp_path, group, 18104)).start()
    try:
        first.create_connector("s", _source(tmp_path, "statuses-start-lines"), "STOPPED")
    finally:
        first.close()

    failing = Worker(spark, _config(bootstrap, tmp_path, group, 18105))

    def refused(status):
        raise ConnectError("1 record(s) to 'statuses-start-status' were not acknowledged within 30.0s")
    monkeypatch.setattr(failing.storage, "put_status", refused)   # the broker fails the first status write
    with pytest.raises(ConnectError, match="not acknowledged"):
        failing.start()
    assert not failing._started and failing._supervisor is None and failing._lease is None

    # the group was left: the next worker gets it without waiting out the failed one's session
    successor = Worker(spark, _config(bootstrap, tmp_path, group, 18106)).start()
    try:
        assert successor.connector_status("s")["connector"]["state"] == "STOPPED"
    finally:
        successor.close()
