"""One connector's runtime record on a :class:`~connect.worker.Worker`: what the worker and its
mixins (:mod:`connect.worker_status`, :mod:`connect.worker_offsets`,
:mod:`connect.worker_connector_configs`) read and move under the worker's lock. Its own module so
that they share it without importing :mod:`connect.worker`, which imports them.
"""
from __future__ import annotations

from connect.connector import Connector
from connect.config import ConnectorConfig
from connect.pipeline import Pipeline
from connect.states import ConnectorState, Failures

S = ConnectorState


class _Connector:
    """One connector on this worker: its parsed config, plugin, query and state."""

    def __init__(self, name: str):
        self.name = name
        self.config: ConnectorConfig | None = None
        self.plugin: Connector | None = None
        self.query = None
        self.pipeline: Pipeline | None = None  # the query's foreachBatch function
        self.state = S.UNASSIGNED
        self.task_state = S.UNASSIGNED
        self.trace: str | None = None
        self.failures = Failures()
        self.restart_at: float | None = None
        self.tasks = 0
