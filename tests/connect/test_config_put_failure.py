"""A ``PUT /connectors/{name}/config`` stops the connector's query before it writes the new config
(and, for a changed one, ends what the query left open and drops its checkpoint). When a step of
that fails (connect-configs unreachable, a transaction coordinator that does not answer), the
request fails, and the connector goes on with the config it has, as Kafka's keeps running when its
herder cannot write a config: it is never left stopped while its status says RUNNING."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from broker.errors import KafkaTimeoutError
from connect.states import TargetState
from connect.worker_config import WorkerConfig
from connect.worker_connector import S
from connect.worker_connector_configs import WorkerConnectorConfigs

pytestmark = pytest.mark.unit

OLD = {"name": "f", "connector.class": "FileStreamSource", "file": "/tmp/a.txt", "topic": "t"}


class _Worker(WorkerConnectorConfigs):
    """The parts of Worker that ``put_connector_config`` uses; the storage step named ``failing`` fails."""

    def __init__(self, failing: str):
        self.config = WorkerConfig.parse({"bootstrap.servers": "127.0.0.1:9092", "group.id": "c"})
        self._lock = threading.RLock()
        self.connector = SimpleNamespace(name="f", state=S.RUNNING, query="running")
        self._connectors = {"f": self.connector}
        self.failing = failing
        self.started: list[TargetState] = []
        self.storage = SimpleNamespace(configs=SimpleNamespace(connector_configs={"f": dict(OLD)},
                                                               target_state=lambda name: TargetState.STARTED),
                                       put_connector_config=self._write)

    def _write(self, name, props):
        if self.failing == "write":
            raise KafkaTimeoutError("connect-configs did not answer")
        self.storage.configs.connector_configs[name] = props

    def _paths(self, name):
        def end_pending(servers):
            if self.failing == "end_pending":
                raise KafkaTimeoutError("the transaction coordinator did not answer")
        return SimpleNamespace(end_pending=end_pending, discard=lambda: None)

    def _require_member(self):
        pass

    def _stop_query(self, c):
        c.query = None

    def _apply_target(self, c, target):
        self.started.append(target)
        c.query = "running"

    def connector_info(self, name):
        return {"name": name}


@pytest.mark.parametrize("failing", ["write", "end_pending"])
def test_a_config_put_that_fails_leaves_the_connector_running_its_old_config(failing):
    worker = _Worker(failing)
    with pytest.raises(KafkaTimeoutError):
        worker.put_connector_config("f", {**OLD, "file": "/tmp/b.txt"})
    assert worker.storage.configs.connector_configs["f"]["file"] == "/tmp/a.txt"
    assert worker.connector.query == "running", "the connector was left stopped after a failed PUT"
    assert worker.started == [TargetState.STARTED]


def test_a_config_put_that_succeeds_starts_the_connector_once():
    worker = _Worker("")
    worker.put_connector_config("f", {**OLD, "file": "/tmp/b.txt"})
    assert worker.storage.configs.connector_configs["f"]["file"] == "/tmp/b.txt"
    assert worker.started == [TargetState.STARTED] and worker.connector.query == "running"
