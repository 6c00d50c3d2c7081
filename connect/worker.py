"""Kafka Connect's ``Worker`` and ``StandaloneHerder`` in one object: it owns a SparkSession and
runs each connector as one Structured Streaming query (:mod:`connect.pipeline`), keeping configs,
target states, statuses and source offsets in the three compacted topics (:mod:`connect.storage`).

    worker = Worker(spark, {"bootstrap.servers": "127.0.0.1:9092", "group.id": "connect",
                            "state.dir": "/var/lib/riverlog/connect"}).start()
    worker.create_connector("lines", {"connector.class": "FileStreamSource", "file": "/tmp/in.txt",
                                      "topic": "lines", "value.converter": "StringConverter"})
    worker.wait_for_state("lines", "RUNNING")
    worker.pause("lines"); worker.resume("lines"); worker.stop("lines"); worker.offsets("lines")

Every public method is thread-safe (one re-entrant lock: the REST server calls from its threads)
and raises :mod:`connect.errors`' typed errors. States move only through
:data:`connect.states.CONNECTOR` / :data:`~connect.states.TASK`. Pausing stops the query and keeps
its checkpoint, so nothing moves until it is resumed; a supervisor thread notices a failed query,
writes FAILED with the trace, and restarts it after Kafka's backoff while ``errors.retry.timeout``
allows (:func:`connect.states.restart_decision`). A worker started again with the same
``group.id`` (even after SIGKILL) reads the topics and resumes every connector in its target state.

One worker runs a ``group.id`` at a time (:mod:`connect.worker_lease`): Kafka's workers of one group split
its connectors among them, Riverlog's runs them all, so a second worker of a live group would run
every connector twice. ``start`` waits for the group; while another worker holds it (past one
``session.timeout.ms``, by which time a killed one has been expired) it raises
:class:`~connect.errors.WorkerGroupInUseError` naming that worker.

This class keeps the lifecycle: start/close, target states and running a connector, the only
code that moves a connector's state. The rest is split by concept into mixins:
``worker_restarts.py`` (the restart endpoints and the supervisor, moving states through this
class), ``worker_status.py`` (statuses, task configs, topic tracking), ``worker_connector_configs.py``
(create/put/patch a config, plugins, validate), ``worker_offsets.py`` (the offsets endpoints) and
``worker_membership.py`` (the group lost or left), ``worker_health.py`` (``GET /health``: starting,
healthy, or unhealthy naming what holds the worker's lock); ``worker_connector.py`` holds the record they share.
"""
from __future__ import annotations

import functools
import logging
import os
import socket
import tempfile
import threading
import traceback
from collections.abc import Mapping
from typing import Any

from connect import topic_creation
from connect.config import WorkerConfig, parse_connector_config, with_worker_client_defaults
from connect.connector import ConnectorContext, SourceConnector, connector_class
from connect.errors import BadRequestError, ConfigError, ConnectError
from connect.offsets_admin import OffsetsAdmin
from connect.connector_state import ConnectorPaths
from connect.pipeline import Pipeline
from connect.query_status import QueryMetrics
from connect.states import CONNECTOR, TASK, ConnectorState, TargetState, running_state
from connect.storage import ConnectStorage
from connect.storage_format import Status
from connect.topic_tracking import TopicTracker, TrackingConfig
from connect.worker_connector import S, _Connector
from connect.worker_connector_configs import WorkerConnectorConfigs
from connect.worker_health import StagedLock, WorkerHealth
from connect.worker_lease import WorkerLease
from connect.worker_membership import WorkerMembership
from connect.worker_offsets import WorkerOffsets
from connect.worker_restarts import WorkerRestarts
from connect.worker_status import WorkerStatus

log = logging.getLogger(__name__)


class Worker(WorkerStatus, WorkerConnectorConfigs, WorkerOffsets, WorkerRestarts, WorkerMembership, WorkerHealth):
    """See the module docstring; the methods are worker_api.md's contract."""

    def __init__(self, spark, worker_config: Mapping[str, Any]):
        self.spark = spark
        self.config = WorkerConfig.parse(worker_config)
        self.state_dir = str(self.config.originals.get("state.dir") or
                             os.path.join(tempfile.gettempdir(), "riverlog-connect"))
        self.worker_id = self._advertised()
        self.storage = ConnectStorage(self.config)
        self.topics = TopicTracker(self.storage, TrackingConfig.of(self.config))
        self.offsets_admin = OffsetsAdmin(self.config.bootstrap_servers)
        self.metrics = QueryMetrics()
        self._lock = StagedLock()       # its holder's stage is what GET /health names when stuck
        self._connectors: dict[str, _Connector] = {}
        self._generation = 0
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._lease: WorkerLease | None = None
        self._started = False
        self._ready = False             # start() returned: GET /health stops answering 'starting'
        self._lease_lost_at: float | None = None

    def _advertised(self, bound_port: int | None = None) -> str:
        """Kafka's worker id, its REST server's advertised ``host:port`` (``RestServer.advertisedUrl``):
        ``rest.advertised.host.name`` else the listener's host (``listeners``, else ``rest.host.name``)
        else this host's name, and ``rest.advertised.port`` else the port the server listens on
        (the configured one until it is bound)."""
        c = self.config
        listen_host, listen_port = c.rest_listener
        host = c.rest_advertised_host_name or listen_host or socket.gethostname()
        port = c.rest_advertised_port or (bound_port if bound_port is not None else listen_port)
        return f"{host}:{port}"

    def rest_bound(self, port: int) -> None:
        """Called by :class:`connect.rest.RestServer` once it listens: with ``rest.port`` 0 the
        worker id gets the port bound (statuses written before then keep the configured one)."""
        with self._lock:
            self.worker_id = self._advertised(port)

    @functools.cached_property
    def kafka_cluster_id(self) -> str:
        """The id of the cluster holding the worker's topics, asked once."""
        return self.offsets_admin.cluster_id()

    # ------------------------------------------------------------------------------ lifecycle
    def start(self, config: Mapping | None = None) -> "Worker":
        with self._lock:
            if not self._started:
                self._stopping.clear()
                self._lease_lost_at = None
                # the group first: ending pending transactions or starting a query belongs to its holder
                with self._lock.stage("creating the config topic"):
                    self.storage.ensure_config_topic()
                with self._lock.stage(f"joining group.id '{self.config.group_id}'"):
                    self._lease = WorkerLease(self.config, self.worker_id, self._lease_lost).acquire()
                try:
                    import spark_source
                    spark_source.register(self.spark)
                    self.spark.streams.addListener(self.metrics)
                    with self._lock.stage("ending the transactions a previous worker left open"):
                        self._finish_pending()
                    with self._lock.stage("initializing and reading to the end of internal topics"):
                        self.storage.start()
                    mine = [s.generation for s in self.storage.statuses.connectors.values()]
                    self._generation = max(mine, default=-1) + 1
                    self._started = True
                    for name in self.storage.configs.connectors():
                        self._assign(name)
                    self._supervisor = threading.Thread(target=self._supervise, name="connect-supervisor",
                                                        daemon=True)
                    self._supervisor.start()
                    self._ready = True
                except BaseException:   # nothing half-started: no group held, no query, not started
                    self._abandon_start()
                    raise
            if config is not None:
                body = dict(config)
                props = dict(body["config"]) if "config" in body else body
                name = body.get("name") or props.get("name")
                if not name:
                    raise BadRequestError("the connector config has no 'name'")
                if name not in self._connectors:
                    self.create_connector(name, props, body.get("initial_state"))
        return self

    def _abandon_start(self) -> None:
        """A start that failed part-way (the topics unreadable, a status or task-config write
        refused while assigning): stop what it started and leave the group, so the worker is not
        left looking started with no supervisor while holding the group another worker could run."""
        self._ready = False
        for c in self._connectors.values():
            self._stop_query(c)
        self._connectors.clear()
        try:
            self.spark.streams.removeListener(self.metrics)
        except Exception:  # noqa: BLE001 - not added, or the session is gone
            pass
        self._started = False
        self.storage.close()
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.close()

    def _finish_pending(self) -> None:
        """Before reading connect-offsets: end the transactions a killed worker left open (see
        `connect.connector_state.finish_pending`), or reading would wait for them to time out. A
        directory of the older naming is removed once its transactions ended (the broker's
        offsets are where its connector goes on from: `ConnectorPaths`)."""
        for paths in ConnectorPaths.existing(self.state_dir, self.config.group_id):
            try:
                paths.end_pending(self.config.bootstrap_servers)
            except Exception:  # noqa: BLE001 - the connector's own start tries again and fails visibly
                log.warning("could not end the open transactions of %s", paths.previous(), exc_info=True)
                continue
            if paths.name is None:
                paths.discard()

    def close(self) -> None:
        """Stop every query (checkpoints kept), write each connector's and task's status
        UNASSIGNED (Kafka's ``AbstractHerder.onShutdown``, a safe write: a newer owner's status is
        left alone), then close the clients and leave the group."""
        self._stopping.set()
        self._ready = False
        if self._supervisor is not None:
            self._supervisor.join(timeout=10)
        with self._lock:
            if self._started:
                statuses = self._unassign_all()
                if self._lease is not None and self._lease.held:  # once lost, a newer owner's may be there
                    self._put_unassigned(statuses)
            try:
                self.spark.streams.removeListener(self.metrics)
            except Exception:  # noqa: BLE001 - the session may be gone already
                pass
            self.storage.close()
            self.offsets_admin.close()
            lease, self._lease = self._lease, None
            self._started = False
        if lease is not None:  # last, so a successor starts once every query here stopped; unlocked,
            lease.close()       # as _lease_lost takes the lock on the thread close() joins

    def _unassign_all(self) -> list[Status]:
        """Kafka's ``onShutdown`` for every connector this worker ran: its query stopped, and it
        and its tasks UNASSIGNED here at once (nothing runs them on this worker any more); returns
        the statuses for :meth:`_put_unassigned`."""
        statuses = []
        for c in self._connectors.values():
            self._stop_query(c)
            if c.state != S.UNASSIGNED and CONNECTOR.can_move(c.state, S.UNASSIGNED):
                c.state, c.trace = S.UNASSIGNED, None
            if c.tasks and c.task_state != S.UNASSIGNED and TASK.can_move(c.task_state, S.UNASSIGNED):
                c.task_state = S.UNASSIGNED
            statuses += [Status(c.name, S.UNASSIGNED, self.worker_id, self._generation)] + \
                [Status(c.name, S.UNASSIGNED, self.worker_id, self._generation, task=i) for i in range(c.tasks)]
        return statuses

    def __enter__(self) -> "Worker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------ target states
    def pause(self, name: str) -> None:
        self._target(name, TargetState.PAUSED)

    def resume(self, name: str) -> None:
        self._target(name, TargetState.STARTED)

    def stop(self, name: str) -> None:
        self._target(name, TargetState.STOPPED)

    def _target(self, name: str, target: TargetState) -> None:
        with self._lock:
            c = self._known(name, "Unknown connector {}")    # AbstractHerder.pause/resumeConnector
            self._require_member()
            if target == TargetState.STOPPED:
                # DistributedHerder.stopConnector: the empty task configs before the target state,
                # so a crash between the two leaves a connector without tasks, never a STOPPED one with
                self.storage.put_task_configs(name, [])
            self.storage.put_target_state(name, target)
            if c.state == S.FAILED and target != TargetState.STOPPED:
                return  # as Kafka: a failed connector stays FAILED until restarted (or stopped)
            self._apply_target(c, target)

    def delete_connector(self, name: str) -> None:
        with self._lock:
            c = self._get(name)
            self._require_member()
            # DistributedHerder.deleteConnectorConfig: the config's and target state's tombstones
            # first (KafkaConfigBackingStore.removeConnectorConfig), and only once they are written
            # is the connector stopped and destroyed (onDeletion's statuses): a refused write leaves
            # it running as it was, and no crash leaves a config whose statuses say DESTROYED
            self.storage.remove_connector_config(name)
            del self._connectors[name]
            self._stop_query(c)
            paths = self._paths(name)
            try:
                paths.end_pending(self.config.bootstrap_servers)    # before its sinkId is forgotten
            except Exception:  # noqa: BLE001 - deleted all the same; they end at transaction.timeout.ms
                log.warning("could not end the open transactions of deleted connector %s", name, exc_info=True)
            paths.discard()     # a connector created again under the name starts afresh
            try:
                self._set(c, S.DESTROYED, S.DESTROYED if c.tasks else None, tasks_after=0)
                if self.topics.config.enabled:
                    self.topics.reset(name)     # DistributedHerder.resetActiveTopics for a removed connector
            except Exception:  # noqa: BLE001 - deleted all the same: its config is gone from the topic
                log.warning("connector %s was deleted, but its statuses or topics could not be cleared", name,
                            exc_info=True)

    # ------------------------------------------------------------------------------ running
    def _paths(self, name: str) -> ConnectorPaths:
        return ConnectorPaths(self.state_dir, self.config.group_id, name)

    def _set(self, c: _Connector, state: ConnectorState | None, task_state: ConnectorState | None,
             trace: str | None = None, tasks_after: int | None = None) -> None:
        """Move the connector (and its tasks) through the tables, then write the statuses; None
        leaves that part's status as it is, unwritten."""
        new = state if state is None or state == c.state else CONNECTOR.move(c.state, state)
        old_tasks = c.tasks
        new_task = c.task_state
        if task_state is not None and old_tasks:
            new_task = TASK.move(c.task_state, task_state) if task_state != c.task_state else task_state
        if new is not None:
            c.state, c.trace = new, trace
            self.storage.put_status(Status(c.name, new, self.worker_id, self._generation, trace))
        if task_state is not None and old_tasks:
            c.task_state = new_task
            for i in range(old_tasks):
                self.storage.put_status(Status(c.name, new_task, self.worker_id, self._generation, trace, task=i))
        if tasks_after is not None:
            for i in range(tasks_after, old_tasks):
                self.storage.put_status(Status(c.name, S.DESTROYED, self.worker_id, self._generation, task=i))
            c.tasks = tasks_after
            if tasks_after == 0:
                c.task_state = S.UNASSIGNED

    def _assign(self, name: str) -> None:
        c = self._connectors.get(name) or _Connector(name)
        self._connectors[name] = c
        self._apply_target(c, self.storage.configs.target_state(name) or TargetState.STARTED)

    def _instantiate(self, c: _Connector) -> None:
        props = self.storage.configs.connector_configs[c.name]
        config = with_worker_client_defaults(parse_connector_config(props), self.config)
        cls = connector_class(config.connector_class)
        if cls is None:
            raise ConfigError(f"connector.class {config.connector_class} could not be found")
        stored = []
        if cls.kind == "source":
            self.storage.offset_log.read_to_end(self.storage.offsets)
            stored = self.storage.offsets.connector_offsets(c.name)
        context = ConnectorContext(self.spark, self.config.bootstrap_servers, stored, config.tasks_max)
        c.config, c.plugin = config, cls(config, context)

    def _apply_target(self, c: _Connector, target: TargetState) -> None:
        """Bring the connector to ``target``: stopped -> no tasks; paused -> no query, and the
        tasks it has (none when it was stopped or is new: as Kafka, only a started connector
        computes its task configs, so a changed config reaches the tasks when it is resumed);
        started -> its task configs, and the query running."""
        with self._lock.stage(f"bringing connector {c.name} to {target.name}"):
            self._apply_target_staged(c, target)

    def _apply_target_staged(self, c: _Connector, target: TargetState) -> None:
        if target == TargetState.STOPPED:
            self._stop_query(c)
            if self.storage.configs.tasks(c.name):
                self.storage.put_task_configs(c.name, [])
            self._set(c, S.STOPPED, S.DESTROYED if c.tasks else None, tasks_after=0)
            return
        try:
            self._instantiate(c)
            if target == TargetState.PAUSED:
                self._stop_query(c)
                if not c.tasks:
                    c.tasks, c.task_state = len(self.storage.configs.tasks(c.name)), S.UNASSIGNED
                self._set(c, S.PAUSED, S.PAUSED)
                return
            task_configs = c.plugin.task_configs(c.config.tasks_max)
            if len(self.storage.configs.tasks(c.name)) != len(task_configs) or \
                    self.storage.configs.tasks(c.name) != task_configs:
                self.storage.put_task_configs(c.name, task_configs)
            if not c.tasks:
                c.tasks, c.task_state = len(task_configs), S.UNASSIGNED
            elif c.tasks > len(task_configs):  # tasks.max lowered: the extra tasks are gone
                self._set(c, c.state, None, c.trace, tasks_after=len(task_configs))
            else:
                c.tasks = len(task_configs)
            if c.query is None or not c.query.isActive:
                self._create_topics(c)
                c.pipeline = Pipeline(self.spark, self.config, c.config, c.plugin, self.storage, self._paths(c.name))
                c.query = c.pipeline.start()
            self._set(c, running_state(target), S.RUNNING)
        except Exception as e:  # noqa: BLE001 - any start failure is the connector's FAILED status
            self._failed(c, traceback.format_exc() if not isinstance(e, ConnectError) else f"{type(e).__name__}: {e}")

    def _create_topics(self, c: _Connector) -> None:
        """KIP-158: a source connector with ``topic.creation.*`` settings (and the worker's
        ``topic.creation.enable``) creates the topics it names up front before its first record."""
        if not self.config.topic_creation_enable or not isinstance(c.plugin, SourceConnector):
            return
        groups = topic_creation.configured_groups(c.config.values, c.config.originals)
        if not groups:
            return   # nothing to create: the connector's topics are not even listed (a catalog read)
        topics = topic_creation.topics_known_at_start(c.plugin.output_topics(), c.config.transforms,
                                                     c.config.predicates)
        if topics:
            client = {**self.storage.offset_log.client_config, "bootstrap.servers": c.plugin.output_bootstrap_servers}
            topic_creation.create_topics(client, groups, topics)

    def _stop_query(self, c: _Connector) -> None:
        if c.query is not None:
            try:
                c.query.stop()
            except Exception:  # noqa: BLE001 - a failed query may refuse to stop cleanly
                log.debug("stopping the query of %s", c.name, exc_info=True)
            try:
                self._track(c)    # its last batches' topics
            except Exception:  # noqa: BLE001 - the status topic unreachable: the query stops all the same
                log.warning("could not record the topics of %s", c.name, exc_info=True)
            c.query = None
        c.restart_at = None


__all__ = ["Worker"]
