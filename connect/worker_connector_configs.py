"""The worker's connector-config operations, Kafka's ``POST /connectors``,
``PUT``/``PATCH /connectors/{name}/config`` and the ``/connector-plugins`` endpoints (list, config
definitions, ``validate``), mixed into :class:`~connect.worker.Worker`.

Apart from the lifecycle because they check and write configs: a changed config is handed to the
worker's ``_apply_target``, which alone moves the connector's state.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect.config import validate
from connect.config_infos import refusal
from connect.connector import connector_class
from connect.errors import AlreadyExistsError, BadRequestError, NotFoundError
from connect.plugins import check_connector_config, plugin_config_keys, plugin_list, validate_connector_config
from connect.states import Failures, TargetState
from connect.worker_connector import S

_INITIAL_STATES = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED, "STOPPED": TargetState.STOPPED}


class WorkerConnectorConfigs:
    """Needs ``_lock``, ``_connectors``, ``storage``, ``connector_config``, ``connector_info``,
    ``_assign``, ``_stop_query``, ``_set``, ``_apply_target``, ``_paths`` and ``_require_member``
    (from Worker)."""

    # ------------------------------------------------------------------------------ configs
    def create_connector(self, name: str, config: Mapping[str, Any], initial_state: str | None = None) -> dict:
        """``initial_state`` is KIP-980's: RUNNING, PAUSED (no tasks until it is resumed, no query)
        or STOPPED (no tasks, so its offsets can be set before it first runs). Without one, as
        Kafka, no target-state record is written: a connector without one is STARTED."""
        target = None
        if initial_state:
            target = _INITIAL_STATES.get(str(initial_state).strip().upper())
            if target is None:
                raise BadRequestError(f"Invalid initial_state {initial_state!r}: use RUNNING, PAUSED or STOPPED")
        with self._lock:
            self._require_member()
            if name in self.storage.configs.connector_configs:
                raise AlreadyExistsError(f"Connector {name} already exists")
            props = check_connector_config(name, config, self.config.override_policy)
            self.storage.put_connector_config(name, props, target)
            self._assign(name)
            return self.connector_info(name)

    def put_connector_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, dict]:
        with self._lock:
            if name not in self.storage.configs.connector_configs:
                return True, self.create_connector(name, config)
            self._require_member()
            props = check_connector_config(name, config, self.config.override_policy)
            c = self._connectors[name]
            running = c.state == S.RUNNING and c.query is not None
            self._stop_query(c)
            try:
                if props != self.storage.configs.connector_configs[name]:
                    # Kafka's task starts afresh from its committed offsets, which the new config keys
                    # (FileStreamSource's by its file): the last query's checkpoint would carry the old
                    # config's position over. What it left open is ended first, then it is dropped,
                    # before the config is written, so no crash leaves the new config on the old one.
                    paths = self._paths(name)
                    paths.end_pending(self.config.bootstrap_servers)
                    paths.discard()
                self.storage.put_connector_config(name, props)
            except Exception:
                # Not written: the connector goes on with the config it has (from its stored offsets
                # if its checkpoint was dropped), as Kafka's runs on when a config write fails.
                if running:
                    self._apply_target(c, self.storage.configs.target_state(name) or TargetState.STARTED)
                raise
            if c.state == S.FAILED:  # a new config restarts a failed connector, as in Kafka
                c.failures = Failures()
                self._set(c, S.RESTARTING, S.RESTARTING)
            self._apply_target(c, self.storage.configs.target_state(name) or TargetState.STARTED)
            return False, self.connector_info(name)

    def patch_connector_config(self, name: str, patch: Mapping[str, Any]) -> dict:
        with self._lock:
            merged = self.connector_config(name)
            for k, v in patch.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = v
            if "name" not in merged:
                # Kafka's patchConnectorConfig puts the merged config as it is: ``name`` removed by
                # a null fails validation (only POST and PUT fill it in from the URL)
                raise refusal(validate(merged).errors())
            return self.put_connector_config(name, merged)[1]

    # ------------------------------------------------------------------------------ plugins
    def connector_plugins(self, connectors_only: bool = True) -> list[dict]:
        return plugin_list(connectors_only)

    def plugin_config(self, plugin: str) -> list[dict]:
        return plugin_config_keys(plugin)

    def validate(self, plugin: str, config: Mapping[str, Any]) -> dict:
        if connector_class(plugin) is None:
            raise NotFoundError(f"Unknown plugin {plugin}.")
        props = dict(config)
        props.setdefault("connector.class", plugin)
        return validate_connector_config(props, self.config.override_policy).to_json()
