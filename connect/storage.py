"""Connect's three compacted topics over the broker client: create them, write to them, and read
them to the end on start, so a worker started anywhere with the same ``group.id`` and topic names
sees every connector's config, target state, status and source offsets where they were left.

    storage = ConnectStorage(WorkerConfig.parse({"bootstrap.servers": servers, "group.id": "connect"}))
    storage.start()                                  # create the topics if needed, read them to the end
    storage.put_connector_config("pg", {...})
    storage.configs.connectors()                     # ['pg']
    topic, key, value, partition = storage.offset_record("pg", {"slot": "s"}, {"lsn": 42})
    producer.produce(topic, value, key, partition)   # inside the caller's own transaction

Record shapes and the folds are in :mod:`connect.storage_format`. Writes use ``acks=all`` and an
idempotent producer and wait for the acknowledgement; the written record is then folded into the
view (validate, write, then apply). Readers use ``read_committed``: source offsets are written in
the same transaction as a source connector's output (KIP-618), and an aborted batch's offsets
must never be seen. Not thread-safe: the worker calls one store from one thread.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from broker.client import (OFFSET_BEGINNING, AdminClient, Consumer, NewTopic, Producer, TopicPartition, murmur2)
from broker.errors import TopicAlreadyExistsError

from connect.config import WorkerConfig
from connect.errors import ConfigError, ConnectError
from connect.states import TargetState
from connect.storage_format import (ConfigView, OffsetView, Record, Status, StatusView, TopicStatus,
                                    can_write_safely, connector_config_records, connector_removal_records,
                                    offset_record, restart_request_record, status_record, target_state_record,
                                    task_config_records, topic_status_key, topic_status_record)


class OffsetRecord(NamedTuple):
    """A source offset to produce in the caller's transaction: ``produce(topic, value, key, partition)``."""
    topic: str
    key: bytes
    value: bytes | None
    partition: int


class TopicLog:
    """One compacted topic: Kafka's ``KafkaBasedLog`` (create, send, read to the end)."""

    def __init__(self, client_config: Mapping[str, Any], topic: str, partitions: int, replication_factor: int,
                 timeout: float = 30.0):
        self.client_config = dict(client_config)
        self.topic, self.partitions, self.replication_factor = topic, partitions, replication_factor
        self.timeout = timeout
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._assigned: list[TopicPartition] = []

    def ensure_topic(self) -> None:
        """Create the topic compacted, or use the one there (its partition count is then its own)."""
        admin = AdminClient(self.client_config)
        try:
            new = NewTopic(self.topic, self.partitions, self.replication_factor, config={"cleanup.policy": "compact"})
            admin.create_topics([new])[self.topic].result(self.timeout)
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
        self.partitions = self._partition_count()

    def _partition_count(self) -> int:
        consumer = self._reader()
        meta = consumer.list_topics(self.topic, self.timeout).topics.get(self.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise ConnectError(f"topic '{self.topic}' has no partitions after creating it: {getattr(meta, 'error', None)}")
        return len(meta.partitions)

    def partition_for(self, key: bytes) -> int:
        return murmur2(key, self.partitions)

    def send(self, records: list[Record]) -> None:
        """Write ``records`` in order and wait until every in-sync replica has them."""
        if self._producer is None:
            self._producer = Producer({**self.client_config, "acks": "all", "enable.idempotence": True,
                                       "linger.ms": 0})
        errors: list = []
        for key, value in records:
            self._producer.produce(self.topic, value=value, key=key, partition=self.partition_for(key),
                                   on_delivery=lambda err, msg: err is not None and errors.append(err))
        left = self._producer.flush(self.timeout)
        if errors:
            raise errors[0].exception()
        if left:
            raise ConnectError(f"{left} record(s) to '{self.topic}' were not acknowledged within {self.timeout}s; "
                               "check that the brokers are reachable")

    def _reader(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer({**self.client_config, "group.id": "", "enable.auto.commit": False,
                                       "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        return self._consumer

    def read_to_end(self, view) -> None:
        """Fold every committed record up to each partition's last stable offset into ``view``."""
        consumer = self._reader()
        if not self._assigned:
            self._assigned = [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
            consumer.assign(self._assigned)
        ends = {}
        for tp in self._assigned:
            low, end = consumer.get_watermark_offsets(TopicPartition(self.topic, tp.partition), self.timeout)
            if end > low:
                ends[tp.partition] = end
        deadline = time.monotonic() + self.timeout
        while True:
            behind = [p for p in consumer.position([TopicPartition(self.topic, p) for p in ends])
                      if p.offset < ends[p.partition]]
            if not behind:
                return
            if time.monotonic() > deadline:
                raise ConnectError(f"reading '{self.topic}' to its end did not finish within {self.timeout}s "
                                   f"(behind: {[(p.partition, p.offset, ends[p.partition]) for p in behind]})")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                raise msg.error().exception()
            view.apply(msg.key(), msg.value())

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(1)
            self._producer = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
            self._assigned = []


class ConnectStorage:
    """Kafka's config, status and offset backing stores for one worker."""

    def __init__(self, config: WorkerConfig, client_config: Mapping[str, Any] | None = None,
                 timeout: float = 30.0):
        self.config = config
        client = {"bootstrap.servers": config.bootstrap_servers, **(client_config or {})}
        self.config_log = TopicLog(client, config.config_storage_topic, 1,
                                   config.config_storage_replication_factor, timeout)
        self.status_log = TopicLog(client, config.status_storage_topic, config.status_storage_partitions,
                                   config.status_storage_replication_factor, timeout)
        self.offset_log = TopicLog(client, config.offset_storage_topic, config.offset_storage_partitions,
                                   config.offset_storage_replication_factor, timeout)
        self.configs, self.statuses, self.offsets = ConfigView(), StatusView(), OffsetView()

    def start(self) -> "ConnectStorage":
        self.ensure_config_topic()
        for log in (self.status_log, self.offset_log):
            log.ensure_topic()
        self.read_to_end()
        return self

    def ensure_config_topic(self) -> None:
        """Create connect-configs, or refuse one of several partitions as Kafka's
        ``KafkaConfigBackingStore.start`` does: its records are read back in the order written
        (task configs before their commit, a tombstone before a re-creation), which only one
        partition keeps."""
        log = self.config_log
        log.ensure_topic()
        if log.partitions > 1:
            raise ConfigError(f"Topic '{log.topic}' supplied via the 'config.storage.topic' property is required to "
                              f"have a single partition in order to guarantee consistency of connector "
                              f"configurations, but found {log.partitions} partitions.")

    def read_to_end(self) -> None:
        self.config_log.read_to_end(self.configs)
        self.status_log.read_to_end(self.statuses)
        self.offset_log.read_to_end(self.offsets)

    def close(self) -> None:
        for log in (self.config_log, self.status_log, self.offset_log):
            log.close()

    def __enter__(self) -> "ConnectStorage":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self, log: TopicLog, view, records: list[Record]) -> None:
        log.send(records)
        for key, value in records:
            view.apply(key, value)

    # -------------------------------------------------------------------------------- configs
    def put_connector_config(self, name: str, properties: Mapping[str, str],
                             target_state: TargetState | None = None) -> None:
        """Kafka's ``putConnectorConfig``: an initial target state (KIP-980) goes first, and the
        committed task configs follow (:func:`connect.storage_format.connector_config_records`)."""
        self._write(self.config_log, self.configs,
                    connector_config_records(self.configs, name, properties, target_state))

    def remove_connector_config(self, name: str) -> None:
        self._write(self.config_log, self.configs, connector_removal_records(name))

    def put_target_state(self, name: str, state: TargetState) -> None:
        self._write(self.config_log, self.configs, [target_state_record(name, state)])

    def put_task_configs(self, name: str, configs: list[Mapping[str, str]]) -> None:
        self._write(self.config_log, self.configs, task_config_records(name, configs))

    def put_restart_request(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> None:
        self._write(self.config_log, self.configs, [restart_request_record(name, include_tasks, only_failed)])

    # ------------------------------------------------------------------------------- statuses
    def put_status(self, status: Status) -> None:
        self._write(self.status_log, self.statuses, [status_record(status)])

    def put_status_safe(self, status: Status) -> bool:
        """Kafka's ``putSafe``: write only if no newer generation of another worker owns it."""
        current = self.statuses.connector(status.connector) if status.task is None \
            else self.statuses.tasks.get((status.connector, status.task))
        if not can_write_safely(current, status):
            return False
        self.put_status(status)
        return True

    def put_topic_status(self, status: TopicStatus) -> None:
        """Kafka's ``put(TopicStatus)``: a topic the connector used (topic tracking)."""
        self._write(self.status_log, self.statuses, [topic_status_record(status)])

    def delete_topic_status(self, connector: str, topic: str) -> None:
        """Kafka's ``deleteTopic``: the topic status' tombstone."""
        self._write(self.status_log, self.statuses, [(topic_status_key(connector, topic), None)])

    # -------------------------------------------------------------------------------- offsets
    def offset_record(self, connector: str, partition: Mapping[str, Any],
                      offset: Mapping[str, Any] | None) -> OffsetRecord:
        """The record that stores one source offset, for the caller to produce inside its own
        transaction with the connector's output (the view learns it on the next read)."""
        key, value = offset_record(connector, partition, offset)
        return OffsetRecord(self.offset_log.topic, key, value, self.offset_log.partition_for(key))

    def put_offsets(self, connector: str, offsets: Mapping[Any, Mapping[str, Any] | None] | list) -> None:
        """Write offsets outside a transaction (``[(partition, offset), ...]``), e.g. from
        ``PATCH /connectors/{name}/offsets``."""
        pairs = offsets.items() if isinstance(offsets, Mapping) else offsets
        self._write(self.offset_log, self.offsets, [offset_record(connector, p, o) for p, o in pairs])


__all__ = ["ConnectStorage", "OffsetRecord", "TopicLog"]
