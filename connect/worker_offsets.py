"""The worker's offsets operations, Kafka's ``GET``/``PATCH``/``DELETE /connectors/{name}/offsets``:
a source connector's offsets in connect-offsets, a sink's as its consumer group's committed
offsets (:mod:`connect.offsets_admin`), mixed into :class:`~connect.worker.Worker`.

Apart from the lifecycle because they only run on a STOPPED connector (Kafka's
``modifyConnectorOffsetsChecks``): no query is running, so they write offsets and never move a state.
"""
from __future__ import annotations

from collections.abc import Mapping

from connect.connector import Connector, SinkConnector, connector_class
from connect.errors import BadRequestError, ConfigError
from connect.offsets_admin import modified_message, parse_sink_offsets
from connect.worker_connector import S, _Connector


class WorkerOffsets:
    """Needs ``_lock``, ``_get``, ``_kind``, ``_paths``, ``_require_member``, ``storage``,
    ``offsets_admin`` and ``config`` (from Worker)."""

    # ------------------------------------------------------------------------------ offsets
    def offsets(self, name: str) -> dict:
        with self._lock:
            c = self._get(name)
            if isinstance(c.plugin, SinkConnector) or self._kind(name) == "sink":
                pairs = self.offsets_admin.sink_offsets(self._group(name), self._input_servers(c))
            else:
                self.storage.offset_log.read_to_end(self.storage.offsets)
                pairs = self.storage.offsets.connector_offsets(name)
            return {"offsets": [{"partition": p, "offset": o} for p, o in pairs]}

    def _require_stopped(self, c: _Connector) -> None:
        """``StandaloneHerder.modifyConnectorOffsetsChecks``, with its message."""
        if c.state != S.STOPPED:
            raise BadRequestError(f"Connectors must be in the STOPPED state before their offsets can be modified. "
                                  f"This can be done for the specified connector by issuing a 'PUT' request to the "
                                  f"'/connectors/{c.name}/stop' endpoint")

    def _plugin_class(self, name: str) -> type[Connector]:
        props = self.storage.configs.connector_configs[name]
        cls = connector_class(props.get("connector.class", ""))
        if cls is None:
            raise ConfigError(f"connector.class {props.get('connector.class')} could not be found")
        return cls

    def alter_offsets(self, name: str, offsets: list[dict]) -> str:
        """Kafka's ``Worker.modifyConnectorOffsets``: the offsets parsed (a sink's as
        ``SinkUtils`` parses them), checked by the connector's ``alter_offsets`` hook, then
        written; the message says whether the connector keeps offsets elsewhere too."""
        with self._lock:
            c = self._get(name)
            self._require_member()
            self._require_stopped(c)
            if not isinstance(offsets, list) or not all(
                    isinstance(o, Mapping) and set(o) <= {"partition", "offset"}
                    and (isinstance(o.get("partition"), Mapping) and o["partition"]
                         or o.get("partition") is None and self._kind(name) == "sink")   # SinkUtils names it
                    and (o.get("offset") is None or isinstance(o["offset"], Mapping)) for o in offsets):
                # Kafka's JSON reader refuses these (an unknown field, a partition that is not an object)
                raise BadRequestError("offsets must be a list of {\"partition\": {...}, \"offset\": {...} | null}")
            pairs = [(None if o.get("partition") is None else dict(o["partition"]),
                      None if o.get("offset") is None else dict(o["offset"])) for o in offsets]
            return self._modify_offsets(c, pairs)

    def reset_offsets(self, name: str) -> str:
        """Kafka's reset: every offset the connector has, removed (after its hook saw them)."""
        with self._lock:
            c = self._get(name)
            self._require_member()
            self._require_stopped(c)
            return self._modify_offsets(c, None)

    def _modify_offsets(self, c: _Connector, pairs: list[tuple[dict, dict | None]] | None) -> str:
        """Alter (``pairs``) or reset (None) the offsets; Kafka's answer (``completeModifyOffsetsCallback``).
        What the last query left open is ended first: a decided batch committed later would
        write its offsets over these, and an attempt left open under the sinkId forgotten here
        would hold every ``read_committed`` reader until ``transaction.timeout.ms``."""
        name, cls, reset = c.name, self._plugin_class(c.name), pairs is None
        paths = self._paths(name)
        paths.end_pending(self.config.bootstrap_servers)
        props = dict(self.storage.configs.connector_configs[name])
        if self._kind(name) == "sink":
            group, servers = self._group(name), self._input_servers(c)
            parsed = {(p["kafka_topic"], p["kafka_partition"]): None
                      for p, _ in self.offsets_admin.sink_offsets(group, servers)} if reset else parse_sink_offsets(pairs)
            managed = cls.alter_offsets(props, parsed)
            if reset:
                self.offsets_admin.reset_sink_offsets(group, servers)
            else:
                self.offsets_admin.alter_sink_offsets(group, servers, parsed)
        else:
            if reset:
                self.storage.offset_log.read_to_end(self.storage.offsets)
                pairs = [(p, None) for p, _ in self.storage.offsets.connector_offsets(name)]
            for p, o in pairs:
                self.storage.offset_record(name, p, o)  # Kafka's validateFormat, before the connector's checks
            managed = cls.alter_offsets(props, pairs)
            if pairs:
                self.storage.put_offsets(name, pairs)
        paths.discard()
        return modified_message(managed, reset)

    def _group(self, name: str) -> str:
        from connect.connector_state import group_id
        return group_id(name)

    def _input_servers(self, c: _Connector) -> str:
        return c.plugin.input_bootstrap_servers if isinstance(c.plugin, SinkConnector) else self.config.bootstrap_servers
