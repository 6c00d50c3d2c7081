"""Bringing a connector back, mixed into :class:`~connect.worker.Worker`: Kafka's restart
endpoints (``POST /connectors/{name}/restart``, ``.../tasks/{id}/restart``) and the supervisor
thread that notices a failed query, writes FAILED with its trace and restarts it after Kafka's
backoff while ``errors.retry.timeout`` allows (:func:`connect.states.restart_decision`).

Apart from the lifecycle in :mod:`connect.worker` because both are one decision, when to start a
stopped query again and what its statuses read meanwhile; they move states only through the
worker's ``_set`` and ``_apply_target``, so the state tables stay checked in one place.
"""
from __future__ import annotations

import logging
import random
import time

from connect.errors import NotFoundError
from connect.pipeline import translated
from connect.states import ConnectorState, Failures, TargetState
from connect.worker_connector import S, _Connector

log = logging.getLogger("connect.worker")  # the worker's logger, as before the split


class WorkerRestarts:
    """Needs ``_lock``, ``_known``, ``_get``, ``_set``, ``_apply_target``, ``_stop_query``, ``_track``,
    ``_connectors``, ``_stopping``, ``_require_member``, ``connector_status``, ``metrics`` and ``storage``
    (from Worker)."""

    # ------------------------------------------------------------------------------ restarts
    def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> dict | None:
        """Kafka's restart. Alone (204, None returned) it is ``StandaloneHerder.restartConnector``:
        the connector is shut down (UNASSIGNED, as Kafka's shutdown writes) and started again in
        its target state. With either flag (202) it is ``restartConnectorAndTasks``: the answer is
        Kafka's restart plan (``AbstractHerder.buildRestartPlan``), the status before the restart
        with RESTARTING on the connector unless ``only_failed`` and it is not FAILED, and on each
        task when ``include_tasks`` unless ``only_failed`` and it is not FAILED; those statuses are
        written, then the query starts again. One query runs the connector and all its tasks, so
        restarting any of them restarts it (a part not in the plan keeps its status, or goes
        UNASSIGNED when it was FAILED)."""
        with self._lock:
            c = self._known(name, "Connector {} not found" if not (include_tasks or only_failed)
                            else "Unknown connector: {}")
            self._require_member()
            if not (include_tasks or only_failed):
                self._restart_query(c, S.UNASSIGNED, None)
                return None
            plan = self.connector_status(name)
            connector = not only_failed or c.state == S.FAILED
            tasks = bool(c.tasks) and include_tasks and (not only_failed or c.task_state == S.FAILED)
            if connector:
                plan["connector"]["state"] = S.RESTARTING.value
            if tasks:
                for task in plan["tasks"]:
                    task["state"] = S.RESTARTING.value
            if connector or tasks:
                self._restart_query(c, S.RESTARTING if connector else None, S.RESTARTING if tasks else None)
            return plan

    def restart_task(self, name: str, task: int) -> None:
        """Kafka's ``restartTask`` (204): the task shut down and started again in the target
        state; here that is the connector's query."""
        with self._lock:
            c = self._get(name)
            if not 0 <= task < c.tasks:
                raise NotFoundError(f"Task {name}-{task} not found")
            self._require_member()
            self._restart_query(c, None, S.UNASSIGNED)

    def _restart_query(self, c: _Connector, connector: ConnectorState | None, tasks: ConnectorState | None) -> None:
        """Stop the query, write ``connector``'s and ``tasks``' statuses (None: left as they are,
        or UNASSIGNED if FAILED, as Kafka's shutdown writes), start it again in its target state."""
        self._stop_query(c)
        c.failures, c.restart_at = Failures(), None
        if connector is None and c.state == S.FAILED:
            connector = S.UNASSIGNED
        if tasks is None and c.task_state == S.FAILED:
            tasks = S.UNASSIGNED
        if connector is not None or (tasks is not None and c.tasks):
            self._set(c, connector, tasks)
        self._apply_target(c, self.storage.configs.target_state(c.name) or TargetState.STARTED)

    # ------------------------------------------------------------------------------ supervisor
    def _failed(self, c: _Connector, trace: str) -> None:
        self._stop_query(c)
        if c.state == S.FAILED:
            c.trace = trace
        self._set(c, S.FAILED, S.FAILED, trace=trace)
        now_ms = int(time.time() * 1000)
        c.failures = c.failures.failed(now_ms)
        cfg = c.config
        if cfg is None:
            return
        decision = c.failures.decide(now_ms, cfg.errors_retry_timeout_ms, cfg.errors_retry_delay_max_ms,
                                     random.random())
        log.warning("connector %s failed (%s): %s", c.name, decision.reason, trace.splitlines()[-1] if trace else "")
        c.restart_at = time.monotonic() + decision.delay_ms / 1000 if decision.restart else None

    def _supervise(self) -> None:
        while not self._stopping.wait(0.2):
            with self._lock:
                for c in list(self._connectors.values()):
                    try:
                        self._check(c)
                    except Exception:  # noqa: BLE001 - one connector's trouble must not stop the others
                        log.exception("supervising connector %s", c.name)

    def _check(self, c: _Connector) -> None:
        self._track(c)
        if c.query is not None and not c.query.isActive:
            err = c.query.exception()
            if err is not None and c.config is not None:
                err = translated(err, c.config)  # a streaming write's flagged record, named as Kafka does
            trace = f"{type(err).__name__}: {err}" if err is not None else "the query stopped"
            self._failed(c, trace)
            return
        if c.failures.attempts and c.query is not None and \
                self.metrics.get(str(c.query.runId))["last_batch_id"] is not None:
            c.failures = c.failures.recovered()  # a batch went through: the run of failures is over
        if c.restart_at is not None and time.monotonic() >= c.restart_at and c.state == S.FAILED:
            c.restart_at = None
            target = self.storage.configs.target_state(c.name) or TargetState.STARTED
            failures = c.failures
            self._set(c, S.RESTARTING, S.RESTARTING, trace=None)
            self._apply_target(c, target)
            if c.state != S.FAILED:
                c.failures = failures  # cleared by a manual restart; a run of failures keeps its start


__all__ = ["WorkerRestarts"]
