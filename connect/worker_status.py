"""The worker's reading side: the connector list, configs, task configs and statuses as Kafka's
``AbstractHerder`` answers them, ``wait_for_state``, and topic tracking (``GET .../topics``,
``PUT .../topics/reset``), mixed into :class:`~connect.worker.Worker`.

Apart from the lifecycle because none of it moves a connector's state: it reads the worker's
connectors and the config topic under the worker's lock, and topic tracking records (or clears)
the topics a connector's batches used.
"""
from __future__ import annotations

import time

from connect.connector import connector_class
from connect.errors import ConnectError, NotFoundError
from connect.worker_connector import S, _Connector


class WorkerStatus:
    """Needs ``_lock``, ``_connectors``, ``storage``, ``worker_id``, ``metrics``, ``topics`` and
    ``_require_member`` (from Worker)."""

    # ------------------------------------------------------------------------------ reading
    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self.storage.configs.connectors())

    def _get(self, name: str) -> _Connector:
        return self._known(name, "Connector {} not found")

    def _known(self, name: str, missing: str) -> _Connector:
        c = self._connectors.get(name)
        if c is None or name not in self.storage.configs.connector_configs:
            raise NotFoundError(missing.format(name))
        return c

    def connector_config(self, name: str) -> dict:
        with self._lock:
            self._get(name)
            return dict(self.storage.configs.connector_configs[name])

    def _kind(self, name: str) -> str:
        cls = connector_class(self.storage.configs.connector_configs[name].get("connector.class", ""))
        return cls.kind if cls is not None else "unknown"

    def connector_info(self, name: str) -> dict:
        with self._lock:
            c = self._get(name)
            return {"name": name, "config": self.connector_config(name),
                    "tasks": [{"connector": name, "task": i} for i in range(c.tasks)], "type": self._kind(name)}

    def task_configs(self, name: str) -> list[dict]:
        with self._lock:
            self._get(name)
            return [{"id": {"connector": name, "task": i}, "config": dict(cfg)}
                    for i, cfg in enumerate(self.storage.configs.tasks(name))]

    def connector_status(self, name: str) -> dict:
        with self._lock:
            c = self._known(name, "No status found for connector {}")     # AbstractHerder.connectorStatus
            connector = {"state": c.state.value, "worker_id": self.worker_id}
            task = {"state": c.task_state.value, "worker_id": self.worker_id}
            if c.trace and c.state == S.FAILED:
                connector["trace"] = c.trace
            if c.trace and c.task_state == S.FAILED:
                task["trace"] = c.trace
            query_id = str(c.query.runId) if c.query is not None else None
            return {"name": name, "connector": connector,
                    "tasks": [{"id": i, **task} for i in range(c.tasks)], "type": self._kind(name),
                    "metrics": self.metrics.get(query_id)}

    def task_status(self, name: str, task: int) -> dict:
        """``AbstractHerder.taskStatus``: one task's status; 404 naming the task when the connector
        or the task is not known."""
        with self._lock:
            missing = f"No status found for task {name}-{task}"
            c = self._known(name, missing.replace("{", "{{").replace("}", "}}"))
            if not 0 <= task < c.tasks:
                raise NotFoundError(missing)
            return next(t for t in self.connector_status(name)["tasks"] if t["id"] == task)

    def wait_for_state(self, name: str, state: str, timeout: float = 60) -> dict:
        """The status once the connector (and its tasks) show ``state``; ConnectError on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.connector_status(name)
            tasks_ok = all(t["state"] == state for t in status["tasks"])
            if status["connector"]["state"] == state and tasks_ok:
                return status
            if time.monotonic() > deadline:
                raise ConnectError(f"connector {name} did not reach {state} within {timeout}s: {status}")
            time.sleep(0.1)

    # ------------------------------------------------------------------------------ topics
    def active_topics(self, name: str) -> dict:
        """``AbstractHerder.connectorActiveTopics`` as ``GET /connectors/{name}/topics`` answers it
        (any name: one never run has none)."""
        with self._lock:
            return {name: {"topics": self.topics.active(name)}}

    def reset_active_topics(self, name: str) -> None:
        """``AbstractHerder.resetConnectorActiveTopics``: tombstones for the recorded topics."""
        with self._lock:
            self._require_member()
            self.topics.reset(name)

    def _track(self, c: _Connector) -> None:
        """Record the topics the query's batches used since the last call (topic tracking)."""
        if c.query is not None:
            run = str(c.query.runId)
            topics = self.metrics.drain_topics(run)
            if topics:
                try:
                    self.topics.record(c.name, topics)
                except Exception:
                    self.metrics.requeue_topics(run, topics)   # recorded on a later tick
                    raise
