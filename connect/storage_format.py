"""The records of Connect's three compacted topics, byte for byte as Kafka Connect writes them, and
pure folds of those records into the current view.

Kafka's distributed worker serialises every internal record with a ``JsonConverter`` configured
``schemas.enable=false`` (``Worker``'s internal converters; ``ConnectDistributed``), so values are
plain compact JSON, no ``{"schema", "payload"}`` envelope; keys of connect-configs and
connect-status are UTF-8 strings (``StringSerializer``); keys of connect-offsets are JSON too.

connect-configs (one partition; ``KafkaConfigBackingStore``)::

    connector-<name>            {"properties": {<connector config>}}          null: connector deleted
    target-state-<name>         {"state": "PAUSED", "state.v2": "STOPPED"}     ("state" is PAUSED for STOPPED,
                                                                                for workers before 3.5)
    task-<name>-<n>             {"properties": {<task config>}}
    commit-<name>               {"tasks": <count>}                             applies the task-* before it
    restart-connector-<name>    {"include-tasks": false, "only-failed": false}

connect-status (``status.storage.partitions``; ``KafkaStatusBackingStore``)::

    status-connector-<name>     {"state": "RUNNING", "trace": null, "worker_id": "host:8083", "generation": 7}
    status-task-<name>-<n>      same shape                                     null: removed
    status-topic-<topic>:connector-<name>   {"topic": {"name", "connector", "task", "discoverTimestamp"}}

connect-offsets (``offset.storage.partitions``; ``OffsetStorageWriter``, ``KafkaOffsetBackingStore``)::

    key   ["<connector>", {<source partition>}]      value  {<source offset>}   null: offset deleted

A record goes to ``murmur2(key) % partitions`` (the Java producer's default), so a key always
lands in the same partition and compaction keeps its latest value. Records that do not parse
are skipped, as Kafka's readers log and skip them: one bad record must not stop a worker.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from connect.errors import DataError
from connect.states import ConnectorState, TargetState

TARGET_STATE_PREFIX, CONNECTOR_PREFIX, TASK_PREFIX = "target-state-", "connector-", "task-"
COMMIT_TASKS_PREFIX, RESTART_PREFIX = "commit-", "restart-connector-"
CONNECTOR_STATUS_PREFIX, TASK_STATUS_PREFIX, TOPIC_STATUS_PREFIX = "status-connector-", "status-task-", "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"

Record = tuple[bytes, "bytes | None"]
"""(key, value) as written; value None is a tombstone."""


def to_json(value: Any) -> bytes:
    """Jackson's compact output, as Kafka's JsonConverter writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _from_json(data: bytes | None) -> Any:
    return None if data is None else json.loads(data.decode("utf-8"))


def _key(data: bytes | str) -> str:
    return data if isinstance(data, str) else data.decode("utf-8")


# ------------------------------------------------------------------------------------ connect-configs
def connector_config_record(name: str, properties: Mapping[str, str]) -> Record:
    return (CONNECTOR_PREFIX + name).encode(), to_json({"properties": dict(properties)})


def target_state_record(name: str, state: TargetState) -> Record:
    """Kafka 3.5+'s ``TARGET_STATE_V1``: older workers read ``state``, which cannot say STOPPED."""
    state = TargetState(state)
    legacy = TargetState.PAUSED if state == TargetState.STOPPED else state
    return (TARGET_STATE_PREFIX + name).encode(), to_json({"state": legacy.value, "state.v2": state.value})


def task_config_record(name: str, task: int, properties: Mapping[str, str]) -> Record:
    return f"{TASK_PREFIX}{name}-{task}".encode(), to_json({"properties": dict(properties)})


def commit_record(name: str, tasks: int) -> Record:
    return (COMMIT_TASKS_PREFIX + name).encode(), to_json({"tasks": tasks})


def restart_request_record(name: str, include_tasks: bool = False, only_failed: bool = False) -> Record:
    return (RESTART_PREFIX + name).encode(), to_json({"include-tasks": include_tasks, "only-failed": only_failed})


def connector_removal_records(name: str) -> list[Record]:
    """Kafka's ``removeConnectorConfig``: tombstones for the config and the target state."""
    return [((CONNECTOR_PREFIX + name).encode(), None), ((TARGET_STATE_PREFIX + name).encode(), None)]


def task_config_records(name: str, configs: list[Mapping[str, str]]) -> list[Record]:
    """Kafka's ``putTaskConfigs``: every task's config, then the commit that applies them together."""
    return [task_config_record(name, i, c) for i, c in enumerate(configs)] + [commit_record(name, len(configs))]


def connector_config_records(view: "ConfigView", name: str, properties: Mapping[str, str],
                             target_state: TargetState | None = None) -> list[Record]:
    """Kafka's ``putConnectorConfig`` (KIP-980's initial target state first), then a consistent set
    of committed task configs again, so the last ``commit-<name>`` follows the last config: once
    compacted, a commit ahead of its connector's config reads as a deleted connector's
    (``processTasksCommitRecord``) and a paused connector would come back without tasks."""
    records = [target_state_record(name, target_state)] if target_state is not None else []
    records.append(connector_config_record(name, properties))
    tasks = view.tasks(name)
    if name in view.task_counts and name not in view.inconsistent and len(tasks) == view.task_counts[name]:
        records += task_config_records(name, tasks)
    return records


@dataclass(frozen=True)
class RestartRequest:
    connector: str
    only_failed: bool = False
    include_tasks: bool = False


@dataclass
class ConfigView:
    """The fold of connect-configs: ``KafkaConfigBackingStore``'s ``ConsumeCallback`` rules."""
    connector_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    target_states: dict[str, TargetState] = field(default_factory=dict)
    task_counts: dict[str, int] = field(default_factory=dict)
    task_configs: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)
    deferred: dict[str, dict[int, dict[str, str]]] = field(default_factory=dict)
    inconsistent: set[str] = field(default_factory=set)
    restart_requests: dict[str, RestartRequest] = field(default_factory=dict)

    def connectors(self) -> list[str]:
        return sorted(self.connector_configs)

    def target_state(self, name: str) -> TargetState | None:
        return self.target_states.get(name)

    def tasks(self, name: str) -> list[dict[str, str]]:
        """The committed task configs, task 0 first (empty while inconsistent)."""
        if name in self.inconsistent:
            return []
        return [self.task_configs[(name, i)] for i in range(self.task_counts.get(name, 0))
                if (name, i) in self.task_configs]

    def apply(self, key: bytes | str, value: bytes | None) -> None:
        key = _key(key)
        try:
            data = _from_json(value)
        except ValueError:
            return
        if key.startswith(TARGET_STATE_PREFIX):
            self._target_state(key[len(TARGET_STATE_PREFIX):], data)
        elif key.startswith(CONNECTOR_PREFIX):
            self._connector(key[len(CONNECTOR_PREFIX):], data)
        elif key.startswith(TASK_PREFIX):
            parsed = _task_id(key, 1)
            if parsed is not None and isinstance(data, dict) and isinstance(data.get("properties"), dict):
                self.deferred.setdefault(parsed[0], {})[parsed[1]] = data["properties"]
        elif key.startswith(COMMIT_TASKS_PREFIX):
            self._commit(key[len(COMMIT_TASKS_PREFIX):], data)
        elif key.startswith(RESTART_PREFIX) and isinstance(data, dict):
            name = key[len(RESTART_PREFIX):]
            self.restart_requests[name] = RestartRequest(
                name, data.get("only-failed") is True, data.get("include-tasks") is True)

    def _target_state(self, name: str, data: Any) -> None:
        if data is None:
            self.target_states.pop(name, None)
            if name in self.connector_configs:  # every connector always has a target state
                self.target_states[name] = TargetState.STARTED
            return
        if not isinstance(data, dict):
            return
        state = data.get("state.v2") if isinstance(data.get("state.v2"), str) else data.get("state")
        if state in TargetState.__members__:
            self.target_states[name] = TargetState(state)

    def _connector(self, name: str, data: Any) -> None:
        if data is None:
            self._remove(name)
        elif isinstance(data, dict) and isinstance(data.get("properties"), dict):
            self.connector_configs[name] = data["properties"]
            self.target_states.setdefault(name, TargetState.STARTED)

    def _remove(self, name: str) -> None:
        self.connector_configs.pop(name, None)
        self.task_counts.pop(name, None)
        self.task_configs = {k: v for k, v in self.task_configs.items() if k[0] != name}
        self.deferred.pop(name, None)

    def _commit(self, name: str, data: Any) -> None:
        if name not in self.connector_configs:
            self._remove(name)  # deleted, and compaction removed its config and tombstone
            return
        if not isinstance(data, dict) or not isinstance(data.get("tasks"), int):
            return
        count = data["tasks"]
        deferred = self.deferred.pop(name, {})
        if not set(range(count)) <= set(deferred):
            self.inconsistent.add(name)  # compaction removed a task config this commit needs
        else:
            for task, props in deferred.items():
                self.task_configs[(name, task)] = props
            self.inconsistent.discard(name)
        self.task_counts[name] = count


def _task_id(key: str, skip: int) -> tuple[str, int] | None:
    """Kafka's ``parseTaskId``: ``<prefix>-<connector with dashes>-<n>``."""
    parts = key.split("-")
    if len(parts) < skip + 2:
        return None
    try:
        return "-".join(parts[skip:-1]), int(parts[-1])
    except ValueError:
        return None


# ------------------------------------------------------------------------------------- connect-status
@dataclass(frozen=True)
class Status:
    """Kafka's ``ConnectorStatus``/``TaskStatus``: ``task`` is None for a connector."""
    connector: str
    state: ConnectorState
    worker_id: str
    generation: int
    trace: str | None = None
    task: int | None = None

    def key(self) -> bytes:
        if self.task is None:
            return (CONNECTOR_STATUS_PREFIX + self.connector).encode()
        return f"{TASK_STATUS_PREFIX}{self.connector}-{self.task}".encode()


def status_record(status: Status) -> Record:
    """``STATUS_SCHEMA_V0`` as JSON; DESTROYED is a tombstone, as Kafka writes it."""
    if status.state == ConnectorState.DESTROYED:
        return status.key(), None
    return status.key(), to_json({"state": ConnectorState(status.state).value, "trace": status.trace,
                                  "worker_id": status.worker_id, "generation": status.generation})


@dataclass(frozen=True)
class TopicStatus:
    """Kafka's ``TopicStatus``: ``connector``'s task ``task`` first used ``topic`` at
    ``discover_timestamp`` (ms)."""
    topic: str
    connector: str
    task: int
    discover_timestamp: int

    def key(self) -> bytes:
        return topic_status_key(self.connector, self.topic)


def topic_status_key(connector: str, topic: str) -> bytes:
    return f"{TOPIC_STATUS_PREFIX}{topic}{TOPIC_STATUS_SEPARATOR}{connector}".encode()


def topic_status_record(status: TopicStatus) -> Record:
    """``TOPIC_STATUS_SCHEMA_V0`` as JSON (``KafkaStatusBackingStore.serializeTopicStatus``)."""
    return status.key(), to_json({"topic": {"name": status.topic, "connector": status.connector,
                                            "task": status.task, "discoverTimestamp": status.discover_timestamp}})


def can_write_safely(current: Status | None, status: Status) -> bool:
    """Kafka's ``putSafe`` guard: overwrite only our own status or one from an older generation,
    so a worker that lost the connector in a rebalance cannot hide its new owner's status."""
    return current is None or current.worker_id == status.worker_id or current.generation <= status.generation


@dataclass
class StatusView:
    """The fold of connect-status: ``KafkaStatusBackingStore.read`` rules. The latest record wins,
    except that a task's UNASSIGNED from the same or an older generation does not hide RUNNING."""
    connectors: dict[str, Status] = field(default_factory=dict)
    tasks: dict[tuple[str, int], Status] = field(default_factory=dict)
    topics: dict[str, dict[str, dict]] = field(default_factory=dict)

    def connector(self, name: str) -> Status | None:
        return self.connectors.get(name)

    def task_statuses(self, name: str) -> list[Status]:
        return [s for (c, _), s in sorted(self.tasks.items()) if c == name]

    def apply(self, key: bytes | str, value: bytes | None) -> None:
        key = _key(key)
        try:
            data = _from_json(value)
        except ValueError:
            return
        if key.startswith(CONNECTOR_STATUS_PREFIX):
            name = key[len(CONNECTOR_STATUS_PREFIX):]
            if not name:
                return
            if data is None:
                self.connectors.pop(name, None)
                self.tasks = {k: v for k, v in self.tasks.items() if k[0] != name}
                return
            status = _parse_status(name, None, data)
            if status is not None:
                self.connectors[name] = status
        elif key.startswith(TASK_STATUS_PREFIX):
            parsed = _task_id(key, 2)
            if parsed is None:
                return
            if data is None:
                self.tasks.pop(parsed, None)
                return
            status = _parse_status(parsed[0], parsed[1], data)
            current = self.tasks.get(parsed)
            if status is None or (status.state == ConnectorState.UNASSIGNED and current is not None
                                  and current.state == ConnectorState.RUNNING
                                  and current.generation >= status.generation):
                return
            self.tasks[parsed] = status
        elif key.startswith(TOPIC_STATUS_PREFIX) and TOPIC_STATUS_SEPARATOR in key:
            topic, connector = key[len(TOPIC_STATUS_PREFIX):].split(TOPIC_STATUS_SEPARATOR, 1)
            if not topic or not connector:
                return
            if data is None:
                self.topics.get(connector, {}).pop(topic, None)
            elif isinstance(data, dict) and isinstance(data.get("topic"), dict):
                self.topics.setdefault(connector, {})[topic] = data["topic"]


def _parse_status(connector: str, task: int | None, data: Any) -> Status | None:
    if not isinstance(data, dict) or data.get("state") not in ConnectorState.__members__:
        return None
    if not isinstance(data.get("generation"), int):
        return None
    return Status(connector, ConnectorState(data["state"]), str(data.get("worker_id")), data["generation"],
                  data.get("trace"), task)


# ------------------------------------------------------------------------------------ connect-offsets
def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """``OffsetStorageWriter``'s key: the JSON array ``[namespace, source partition]``."""
    return to_json([connector, dict(partition)])


def offset_record(connector: str, partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> Record:
    """One source offset; ``offset`` None deletes it (Kafka's tombstone, KIP-875)."""
    _check_offset_map("source partition", partition)
    if offset is not None:
        _check_offset_map("source offset", offset)
    return offset_key(connector, partition), None if offset is None else to_json(dict(offset))


def _check_offset_map(what: str, data: Mapping[str, Any]) -> None:
    """Kafka's ``OffsetUtils.validateFormat``: string keys, primitive values."""
    if not isinstance(data, Mapping):
        raise DataError(f"a {what} must be a map of string keys to primitive values, got {type(data).__name__}")
    for k, v in data.items():
        if not isinstance(k, str):
            raise DataError(f"a {what} may only use string keys; {k!r} is a {type(k).__name__}")
        if v is not None and not isinstance(v, (str, int, float, bool, bytes)):
            raise DataError(f"a {what} may only contain primitive values, but field {k!r} holds "
                            f"a {type(v).__name__}")


def _canonical(partition: Mapping[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


@dataclass
class OffsetView:
    """The fold of connect-offsets: per connector, the latest offset of each source partition.
    Partitions compare by value, whatever order their fields were written in."""
    offsets: dict[str, dict[str, tuple[dict, dict]]] = field(default_factory=dict)

    def get(self, connector: str, partition: Mapping[str, Any]) -> dict | None:
        found = self.offsets.get(connector, {}).get(_canonical(partition))
        return found[1] if found else None

    def connector_offsets(self, connector: str) -> list[tuple[dict, dict]]:
        """(source partition, source offset) pairs, as ``GET /connectors/{name}/offsets`` lists them."""
        return [v for _, v in sorted(self.offsets.get(connector, {}).items())]

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Kafka's ``OffsetUtils.processPartitionKey`` rules: a key that is not
        ``[string, map]`` is ignored."""
        try:
            parsed = _from_json(key) if key is not None else None
            offset = _from_json(value)
        except ValueError:
            return
        if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[0], str)
                and isinstance(parsed[1], dict)):
            return
        connector, partition = parsed
        per_connector = self.offsets.setdefault(connector, {})
        if offset is None:
            per_connector.pop(_canonical(partition), None)
        elif isinstance(offset, dict):
            per_connector[_canonical(partition)] = (partition, offset)


def fold(view, records: Iterable[tuple[bytes | str | None, bytes | None]]):
    """Apply ``records`` in log order to ``view`` (a ConfigView, StatusView or OffsetView)."""
    for key, value in records:
        view.apply(key, value)
    return view
