"""The connector plugin: what a connector class tells the worker, and the registry that finds it
by Kafka's class name or a short alias.

A connector is deliberately small. It says its ``kind`` (source or sink), its own ``ConfigDef``
(Kafka's ``Connector.config()``), and builds its part of the one streaming query the worker runs:

- a **source** connector returns a streaming record frame from :meth:`SourceConnector.read_stream`
  (``topic``, ``partition``, ``timestamp``, ``key``, ``value``, ``headers`` with key and value as
  Connect data, i.e. typed Spark columns) and maps Spark's end offset of a micro-batch to Connect's
  source partitions and offsets (:meth:`SourceConnector.source_offsets`), which the worker writes to
  connect-offsets in the batch's broker transaction (KIP-618);
- a **sink** connector writes one micro-batch of converted, transformed records from
  ``foreachBatch`` (:meth:`SinkConnector.write_batch`); the worker reads the topics, converts,
  transforms, routes bad records and commits the consumer group ``connect-<name>``.

Either kind may check a change of its offsets (``PATCH``/``DELETE /connectors/{name}/offsets``)
in ``alter_offsets``, Kafka's ``alterOffsets``, and says there whether those offsets are all it keeps.

    class MySink(SinkConnector):
        class_name, aliases = "com.example.MySink", ("MySink",)
        config_def = ConfigDef([...])
        def write_batch(self, frame, batch_id): ...
    register_connector(MySink)
"""
from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pyspark.sql import DataFrame

from connect.config import CONNECTORS, SINK, SOURCE, ConnectorConfig
from connect.config_def import ConfigDef, Plugin


def _version() -> str:
    try:
        return importlib.metadata.version("riverlog")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0"


@dataclass(frozen=True)
class ConnectorContext:
    """What the worker hands a connector when its query starts."""
    spark: Any
    bootstrap_servers: str
    """The worker's cluster (connect-* topics, and the default input or output cluster)."""
    stored_offsets: list[tuple[dict, dict]] = field(default_factory=list)
    """Source connectors: connect-offsets' (partition, offset) pairs, used when there is no checkpoint."""
    tasks_max: int = 1


class Connector:
    """Kafka's ``Connector``: a class name (plus aliases), a kind, and its own ConfigDef."""
    class_name: str = ""
    aliases: tuple[str, ...] = ()
    kind: str = ""
    reads_topics: bool = False  # consumes riverlog topics, so ``consumer.override.*`` apply (checked at POST)
    config_def: ConfigDef = ConfigDef()
    version: str = _version()

    def __init__(self, config: ConnectorConfig, context: ConnectorContext):
        self.config, self.context = config, context
        self.values = self.config_def.parse(config.originals, f"Connector {config.name}") if self.config_def.keys \
            else {}

    @classmethod
    def problems(cls, props: Mapping[str, Any]) -> dict[str, list[str]]:
        """Kafka's ``Connector.validate`` beyond the per-key checks (rules that join several keys):
        ``{field: [problems]}``, listed at ``POST`` with the config's other problems."""
        return {}

    def task_configs(self, tasks_max: int) -> list[dict[str, str]]:
        """Kafka's ``taskConfigs``: one Spark query is all tasks, so task ``i`` is a slice of
        parallelism carrying the connector's config."""
        return [dict(self.config.originals) for _ in range(max(1, tasks_max))]


class SourceConnector(Connector):
    kind = SOURCE

    @classmethod
    def alter_offsets(cls, config: Mapping[str, str], offsets: list[tuple[dict, dict | None]]) -> bool:
        """Kafka's ``SourceConnector.alterOffsets``: called by ``PATCH`` and ``DELETE
        /connectors/{name}/offsets`` (a reset passes every stored partition with offset None)
        before anything is written, with the connector's config (the connector is STOPPED, so
        no instance runs). Raise :class:`~connect.errors.ConnectError` to refuse the change (HTTP
        500 with its message, as Kafka's ``ConnectException``). Return True when the offsets in
        connect-offsets are all the connector keeps; False (the default, as Kafka's) when it may
        also track its position elsewhere, so the answer tells the user to change that too."""
        return False

    def read_stream(self) -> DataFrame:
        """A streaming record frame (key and value as Connect data)."""
        raise NotImplementedError

    def source_offsets(self, end_offset: Mapping[str, Any]) -> list[tuple[dict, dict]]:
        """Connect's (source partition, source offset) pairs for Spark's end offset of a batch."""
        raise NotImplementedError

    @property
    def output_bootstrap_servers(self) -> str:
        """Where the records go (the worker's cluster unless the connector says otherwise)."""
        return self.context.bootstrap_servers

    def output_topics(self) -> list[str]:
        """The topics the connector writes that are known before its first record (FileStreamSource's
        ``topic``): those KIP-158's ``topic.creation.*`` settings create when it starts. Empty (the
        default) when they are known only record by record."""
        return []


class SinkConnector(Connector):
    kind = SINK
    reads_topics = True
    # A sink that names its output after where the batch starts asks for it (``wants_batch_start``);
    # the runtime then sets ``batch_start`` before each write_batch: where the batch starts in each
    # (topic, partition) it may hold, the same for every attempt at the batch, so output named after
    # it is replaced, not added to, when the batch is written again (connect.directory_sink); and
    # ``batch_partitions``: the (topic, partition)s the batch may hold records of (its range there is
    # not empty, or where it starts had to be looked up), sorted.
    wants_batch_start = False
    batch_start: Mapping[tuple[str, int], int] = MappingProxyType({})
    batch_partitions: tuple[tuple[str, int], ...] = ()

    @property
    def input_bootstrap_servers(self) -> str:
        return self.context.bootstrap_servers

    @classmethod
    def alter_offsets(cls, config: Mapping[str, str], offsets: Mapping[tuple[str, int], int | None]) -> bool:
        """Kafka's ``SinkConnector.alterOffsets``: as :meth:`SourceConnector.alter_offsets`, with
        the parsed ``{(topic, partition): offset or None}`` the consumer group is about to get."""
        return False

    def prepare(self, frame: DataFrame) -> DataFrame:
        """The sink's own projection of a batch's converted, transformed records (a filter, a
        select), given to :meth:`write_batch`. The runtime plans it once with the converters and
        moves it onto each later batch with them (connect.plan_template), so it must read nothing
        but ``frame``'s columns and the sink's config."""
        return frame

    def write_batch(self, frame: DataFrame, batch_id: int) -> DataFrame | None:
        """Write one micro-batch's records; a replay of ``batch_id`` must overwrite, not add.
        Return None, or the records the sink could not write as a frame of ``topic``, ``partition``,
        ``offset``, ``message``: with ``errors.tolerance=all`` they go to the dead-letter queue (stage
        TASK_PUT) in the transaction that moves the group's offsets; with ``none`` the connector
        fails naming the first."""
        raise NotImplementedError


def register_connector(cls: type[Connector]) -> type[Connector]:
    """Make ``connector.class`` accept ``cls.class_name`` and its aliases."""
    CONNECTORS.register(Plugin(cls.class_name, cls.config_def, cls.kind, cls), cls.aliases)
    return cls


def connector_class(name: str) -> type[Connector] | None:
    plugin = CONNECTORS.get(name.strip())
    target = plugin.target if plugin is not None else None
    return target if isinstance(target, type) and issubclass(target, Connector) else None


__all__ = ["Connector", "ConnectorContext", "SinkConnector", "SourceConnector", "connector_class",
           "register_connector"]
