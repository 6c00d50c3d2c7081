"""A Connect worker's config: Kafka's ``DistributedConfig`` keys the worker uses (its group, its
config, offset and status topics, its REST listener, exactly-once source support, its default
converters), parsed once into a frozen :class:`WorkerConfig`.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connect.config_def import NO_DEFAULT, ConfigDef, ConfigKey, Importance, Type, config_error
from connect.config_validators import Invalid, at_least, between, non_empty_string, one_of
from connect.config_validators import replication_factor as _replication_factor
from connect.connector_config_def import _CONVERTER_DOC, JSON_CONVERTER, SIMPLE_HEADER_CONVERTER, _as_strings

_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
"""Kafka's ``RestServer.LISTENER_PATTERN`` (matched whole): ``protocol://host:port``."""


def parse_listener(listener: str) -> tuple[str, int]:
    """``(host, port)`` of an ``http://host:port`` listener, with Kafka's messages; an empty host
    (``http://:8083``) is every interface, as Jetty binds it. ``https`` is refused: Riverlog's REST
    API serves plain HTTP, and ignoring the protocol would serve unencrypted what was asked encrypted."""
    m = _LISTENER.fullmatch(listener.strip())
    if m is None:
        raise Invalid("Listener doesn't have the right format (protocol://hostname:port).")
    protocol, host, port = m.group(1).lower(), m.group(2), int(m.group(3))
    if protocol not in ("http", "https"):
        raise Invalid('Listener protocol must be either "http" or "https".')
    if protocol == "https":
        raise Invalid("https listeners are not supported: the REST API serves http (put TLS in front of it)")
    if not 0 <= port <= 65535:
        raise Invalid("the port must be between 0 and 65535")
    return host, port


def _listeners(name: str, value: Any) -> None:
    """Kafka's ``ListenersValidator``, and one listener: the REST API is one http server."""
    if value is None:
        return
    if not value or any(not str(v).strip() for v in value):
        raise Invalid("Empty URL found when parsing listeners list.")
    if len(value) > 1:
        raise Invalid("the REST API serves one listener; give one http://host:port")
    parse_listener(str(value[0]))


_POLICY_PACKAGE = "org.apache.kafka.connect.connector.policy."
_POLICY_SUFFIX = "ConnectorClientConfigOverridePolicy"


def override_policy_name(value: str) -> str | None:
    """``All``, ``None`` or ``Principal`` for a policy named by alias, simple or full class name."""
    name = str(value).strip().removeprefix(_POLICY_PACKAGE).removesuffix(_POLICY_SUFFIX)
    return name if name in ("All", "None", "Principal") else None


def _override_policy(name: str, value: Any) -> None:
    if override_policy_name(value) is None:
        raise Invalid(f"Class {value} could not be found (policies: All, None, Principal)")


WORKER_CONFIG_DEF = ConfigDef([
    ConfigKey("bootstrap.servers", Type.LIST, "localhost:9092", None, Importance.HIGH,
              "A list of host/port pairs used to establish the initial connection to the cluster."),
    ConfigKey("group.id", Type.STRING, NO_DEFAULT, non_empty_string, Importance.HIGH,
              "A unique string that identifies the Connect cluster group this worker belongs to."),
    ConfigKey("session.timeout.ms", Type.INT, 10000, at_least(1), Importance.HIGH,
              "The timeout used to detect worker failures: a worker whose heartbeats stop for this long "
              "leaves the group, and another worker of the group.id may start."),
    ConfigKey("heartbeat.interval.ms", Type.INT, 3000, at_least(1), Importance.HIGH,
              "The expected time between heartbeats to the group coordinator."),
    ConfigKey("rebalance.timeout.ms", Type.INT, 60000, at_least(1), Importance.HIGH,
              "The maximum allowed time for each worker to join the group once a rebalance has begun."),
    ConfigKey("config.storage.topic", Type.STRING, "connect-configs", non_empty_string, Importance.HIGH,
              "The name of the topic where connector configurations are stored"),
    ConfigKey("config.storage.replication.factor", Type.SHORT, -1, _replication_factor, Importance.LOW,
              "Replication factor used when creating the configuration storage topic (-1: the broker's "
              "default.replication.factor, so a one-broker cluster works out of the box)"),
    ConfigKey("offset.storage.topic", Type.STRING, "connect-offsets", non_empty_string, Importance.HIGH,
              "The name of the topic where source connector offsets are stored"),
    ConfigKey("offset.storage.partitions", Type.INT, 25, at_least(1), Importance.LOW,
              "The number of partitions used when creating the offset storage topic"),
    ConfigKey("offset.storage.replication.factor", Type.SHORT, -1, _replication_factor, Importance.LOW,
              "Replication factor used when creating the offset storage topic (-1: the broker's default)"),
    ConfigKey("status.storage.topic", Type.STRING, "connect-status", non_empty_string, Importance.HIGH,
              "The name of the topic where connector and task status are stored"),
    ConfigKey("status.storage.partitions", Type.INT, 5, at_least(1), Importance.LOW,
              "The number of partitions used when creating the status storage topic"),
    ConfigKey("status.storage.replication.factor", Type.SHORT, -1, _replication_factor, Importance.LOW,
              "Replication factor used when creating the status storage topic (-1: the broker's default)"),
    ConfigKey("listeners", Type.LIST, None, _listeners, Importance.LOW,
              "The REST API's listener, http://host:port (an empty host: every interface; port 0: a free "
              "one), as Kafka 3.0+ configures it; it wins over rest.host.name and rest.port."),
    ConfigKey("rest.host.name", Type.STRING, None, None, Importance.LOW,
              "Hostname for the REST API (Kafka 2's key; listeners wins). If this is set, it will only bind "
              "to this interface."),
    ConfigKey("rest.port", Type.INT, 8083, between(0, 65535), Importance.LOW,
              "Port for the REST API to listen on (Kafka 2's key; listeners wins; 0: any free port)."),
    ConfigKey("rest.advertised.host.name", Type.STRING, None, None, Importance.LOW,
              "If this is set, this is the hostname that will be given out to other workers to connect to."),
    ConfigKey("rest.advertised.port", Type.INT, None, None, Importance.LOW,
              "If this is set, this is the port that will be given out to other workers to connect to."),
    ConfigKey("topic.tracking.enable", Type.BOOLEAN, True, None, Importance.LOW,
              "Enable tracking the set of active topics per connector during runtime."),
    ConfigKey("topic.tracking.allow.reset", Type.BOOLEAN, True, None, Importance.LOW,
              "If set to true, it allows user requests to reset the set of active topics per connector."),
    ConfigKey("topic.creation.enable", Type.BOOLEAN, True, None, Importance.LOW,
              "Whether to allow automatic creation of topics used by source connectors, when source "
              "connectors are configured with `topic.creation.` properties."),
    ConfigKey("exactly.once.source.support", Type.STRING, "disabled",
              one_of("disabled", "preparing", "enabled", case_insensitive=True), Importance.HIGH,
              "Whether to enable exactly-once support for source connectors in the cluster by using "
              "transactions to write source records and their source offsets."),
    ConfigKey("key.converter", Type.STRING, JSON_CONVERTER, non_empty_string, Importance.HIGH,
              _CONVERTER_DOC.format("keys")),
    ConfigKey("value.converter", Type.STRING, JSON_CONVERTER, non_empty_string, Importance.HIGH,
              _CONVERTER_DOC.format("values")),
    ConfigKey("header.converter", Type.STRING, SIMPLE_HEADER_CONVERTER, non_empty_string, Importance.LOW,
              "HeaderConverter class used to convert between Kafka Connect format and the serialized form."),
    ConfigKey("offset.flush.interval.ms", Type.LONG, 60000, at_least(0), Importance.LOW,
              "Interval at which to try committing offsets for tasks."),
    ConfigKey("connector.client.config.override.policy", Type.STRING, "All", _override_policy, Importance.MEDIUM,
              "Which client configurations a connector may override: All, None or Principal (Kafka's "
              "ConnectorClientConfigOverridePolicy plugins, by alias or class name)."),
])
"""Kafka's ``DistributedConfig`` keys the worker uses. Converter names are plain strings here:
the worker resolves them in the registries when it builds a connector, after the converter
module has registered its classes."""


@dataclass(frozen=True)
class WorkerConfig:
    """A worker's config, parsed once. ``originals`` keeps every key (client settings such as
    ``client.id`` pass through to the worker's clients, as Kafka's worker passes them)."""
    bootstrap_servers: str
    group_id: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    config_storage_topic: str
    config_storage_replication_factor: int
    offset_storage_topic: str
    offset_storage_partitions: int
    offset_storage_replication_factor: int
    status_storage_topic: str
    status_storage_partitions: int
    status_storage_replication_factor: int
    listeners: list[str] | None
    rest_host_name: str | None
    rest_port: int
    rest_advertised_host_name: str | None
    rest_advertised_port: int | None
    topic_tracking_enable: bool
    topic_tracking_allow_reset: bool
    topic_creation_enable: bool
    exactly_once_source_support: str
    key_converter: str
    value_converter: str
    header_converter: str
    offset_flush_interval_ms: int
    connector_client_config_override_policy: str
    originals: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, props: Mapping[str, Any]) -> "WorkerConfig":
        props = _as_strings(props)
        values = WORKER_CONFIG_DEF.validate_all(props)
        errors = {n: cv.errors for n, cv in values.items() if cv.errors}
        errors.update(_client_problems(props))
        errors.update(_unknown_converters(values))
        errors.update({k: [f"Invalid value {props[k]} for configuration {k}: {why}"]
                       for k, why in _UNSUPPORTED.items() if str(props.get(k) or "").strip()})
        if errors:
            raise config_error("Worker configuration", errors)
        v = {n: cv.value for n, cv in values.items()}
        return cls(**{k.replace(".", "_"): v[k] for k in v if k != "bootstrap.servers"},
                   bootstrap_servers=",".join(v["bootstrap.servers"]), originals=dict(props))

    @property
    def rest_listener(self) -> tuple[str | None, int]:
        """Where the REST API listens: ``listeners`` (Kafka 3.0+'s key; an empty host: every
        interface) else Kafka 2's ``rest.host.name`` (None: Riverlog's loopback default) and
        ``rest.port``."""
        if self.listeners:
            return parse_listener(self.listeners[0])
        return self.rest_host_name, self.rest_port

    @property
    def override_policy(self) -> str:
        """``connector.client.config.override.policy`` as ``All``, ``None`` or ``Principal``."""
        return override_policy_name(self.connector_client_config_override_policy)

    @property
    def producer_defaults(self) -> dict[str, Any]:
        """``producer.*``: every connector's producer settings under its ``producer.override.*``."""
        return _prefixed(self.originals, PRODUCER)

    @property
    def consumer_defaults(self) -> dict[str, Any]:
        """``consumer.*``: every connector's consumer settings under its ``consumer.override.*``."""
        return _prefixed(self.originals, CONSUMER)

    @property
    def exactly_once_source_enabled(self) -> bool:
        return self.exactly_once_source_support.lower() == "enabled"


_UNSUPPORTED = {
    "config.providers": "config providers are not supported: a ${provider:path:key} reference would reach the "
                        "connector as its literal text; put the values in the configs",
    "rest.extension.classes": "REST extensions are not supported: the REST API would answer without what they add "
                              "(authentication, for one); put a proxy in front of it",
}
"""Kafka worker keys whose feature Riverlog lacks: refused when set, never ignored."""

PRODUCER, CONSUMER = "producer.", "consumer."
_RUNTIME_OWNED = {"producer.bootstrap.servers": "the connectors' clients use the worker's bootstrap.servers",
                  "consumer.bootstrap.servers": "the connectors' clients use the worker's bootstrap.servers",
                  "consumer.group.id": "a sink connector's consumer group is connect-<connector name>"}


def _unknown_converters(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """Kafka's ``CLASS`` check of ``key.converter`` and ``value.converter``: a name no converter
    has (by class name or alias) stops the worker at start, instead of failing each connector
    that takes the default when its query starts. (``header.converter`` has no effect: see
    docs/connect.md.)"""
    from connect.plugins import CONVERTERS     # registers the built-ins; pyspark is heavy
    problems: dict[str, list[str]] = {}
    for key in ("key.converter", "value.converter"):
        cv = values[key]
        if not cv.errors and cv.value is not None and CONVERTERS.get(str(cv.value).strip()) is None:
            problems[key] = [f"Invalid value {cv.value} for configuration {key}: Class {cv.value} could not be found."]
    return problems


def _prefixed(props: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix) and len(k) > len(prefix)}


def _client_problems(props: Mapping[str, Any]) -> dict[str, list[str]]:
    """Kafka's worker hands its ``producer.*`` and ``consumer.*`` settings to every connector's
    clients (``Worker.baseProducerConfigs``/``baseConsumerConfigs``); checked here as a connector's
    own overrides are checked, so a bad one stops the worker, not each connector as it starts. The
    settings the runtime itself decides are refused."""
    from connect.config_infos import _consumer_check, _producer_check   # the client is heavy
    problems: dict[str, list[str]] = {}
    for prefix, check in ((PRODUCER, _producer_check), (CONSUMER, _consumer_check)):
        for key, raw in _prefixed(props, prefix).items():
            owned = _RUNTIME_OWNED.get(prefix + key.lower())
            problem = f"Invalid value {raw} for configuration {prefix}{key}: {owned}; it cannot be set here" \
                if owned else check(key, raw)
            if problem:
                problems[prefix + key] = [problem]
    return problems

