"""Connector and worker configs under Kafka Connect's names, validated once into Connect's
validate response (``PUT /connector-plugins/{type}/config/validate``), so a bad config is refused
at ``POST /connectors`` with every problem listed per field.

    infos = validate({"name": "pg", "connector.class": "PostgresSource", "tasks.max": "0"})
    infos.error_count                  # 1
    infos.to_json()                    # {"name": ..., "error_count": 1, "groups": [...], "configs": [...]}
    config = parse_connector_config(props)   # a frozen ConnectorConfig, or ConfigError

The definitions copy Kafka's ``ConnectorConfig``, ``SinkConnectorConfig``, ``SourceConnectorConfig``
and ``DistributedConfig`` (names, types, defaults, groups, order, messages); the response is built
as ``AbstractHerder.validateConnectorConfig`` builds it: the connector's keys (enriched with one
group per transform and predicate alias), then client overrides, then the converters' own keys
under their prefixes. Plugins are looked up in the registries of :mod:`connect.connector_config_def`,
which the converter, transform, predicate and connector modules fill; this module implements none of
them. Pure.

The response is built in :mod:`connect.config_infos` and the worker's config parsed in
:mod:`connect.worker_config`; this module validates a connector config and parses it into a
:class:`ConnectorConfig`.
"""
from __future__ import annotations

from collections.abc import Mapping
import re
from dataclasses import dataclass, replace
from typing import Any

from connect import topic_creation
from connect.config_def import ConfigValue, Plugin, java_str  # noqa: F401
from connect.config_validators import all_of  # noqa: F401
from connect.config_infos import (ConfigInfo, ConfigInfos, _consumer_check, _converter_infos,  # noqa: F401
                                  _merge, _override_infos, _producer_check, _result, _sink_consumer_check,
                                  with_policy)
from connect.connector_config_def import (COMMON_GROUP, CONNECTORS, CONSUMER_OVERRIDE, CONVERTERS,  # noqa: F401
                                          DLQ_TOPIC, ERROR_GROUP, EXACTLY_ONCE_GROUP, HEADER_CONVERTERS,
                                          JSON_CONVERTER, JSON_CONVERTER_CONFIG, MAX_POLL_RECORDS, NULL_VALUE,
                                          PREDICATES, PREDICATES_GROUP, PRODUCER_OVERRIDE, SIMPLE_HEADER_CONVERTER,
                                          SINK, SOURCE, TRANSFORMATIONS, TRANSFORMS_GROUP, _as_strings,
                                          connector_config_def, enrich, unknown_connector)
from connect.worker_config import WORKER_CONFIG_DEF, WorkerConfig  # noqa: F401


def validate(config: Mapping[str, Any], connector_defs: Plugin | None = None,
             override_policy: str = "All") -> ConfigInfos:
    """Connect's validate response for ``config``. ``connector_defs`` is the connector plugin
    (its kind, source or sink, and its own ConfigDef); by default it is looked up by
    ``connector.class`` in :data:`CONNECTORS`. An unknown or missing class is listed on
    ``connector.class`` and the rest is validated against the common definitions. Client
    overrides are checked under the worker's ``override_policy`` (Kafka's ``All``, ``None``,
    ``Principal``)."""
    props = _as_strings(config)
    plugin = connector_defs
    if plugin is None and isinstance(props.get("connector.class"), str):
        plugin = CONNECTORS.get(props["connector.class"].strip())
    kind = plugin.kind if plugin is not None else None
    definitions = enrich(connector_config_def(kind), props)
    if kind == SOURCE:
        definitions = topic_creation.enrich(definitions, props)
    values = definitions.validate_all(props)
    if plugin is None and isinstance(props.get("connector.class"), str) and "connector.class" in values:
        # Kafka's Plugins.newConnector message, naming the connectors there are
        values["connector.class"].errors.append(unknown_connector(props["connector.class"].strip()))
    for name, raw in props.items():
        if raw is None:
            values.setdefault(name, ConfigValue(name)).errors.append(NULL_VALUE)
    if kind == SINK:
        _validate_sink(props, values)
    elif str(props.get(DLQ_TOPIC) or "").strip():
        values[DLQ_TOPIC] = ConfigValue(DLQ_TOPIC, props[DLQ_TOPIC], [], [
            f"{DLQ_TOPIC} applies to sink connectors only; a {kind or 'connector of unknown type'} "
            "has no dead letter queue (remove it)"])
    keys = dict(definitions.keys)
    groups = list(definitions.groups)
    all_values = list(values.values())
    if plugin is not None and plugin.config_def is not None:
        keys.update(plugin.config_def.keys)
        groups += [g for g in plugin.config_def.groups if g not in groups]
        all_values += list(plugin.config_def.validate_all(props).values())
    name = props.get("connector.class") or ""
    uses_producer = kind == SOURCE or (kind == SINK and bool(str(props.get(DLQ_TOPIC) or "").strip()))
    reads_topics = getattr(getattr(plugin, "target", None), "reads_topics", kind == SINK)
    return _merge(
        name,
        _result(name, keys, all_values, groups),
        _override_infos(props, PRODUCER_OVERRIDE, with_policy(_producer_check, override_policy))
        if uses_producer else None,
        _override_infos(props, CONSUMER_OVERRIDE, with_policy(_sink_consumer_check(props.get("name")) if kind == SINK
                                                              else _consumer_check, override_policy))
        if reads_topics else None,
        _converter_infos(props, values, "header.converter", HEADER_CONVERTERS, "header"),
        _converter_infos(props, values, "key.converter", CONVERTERS, "key"),
        _converter_infos(props, values, "value.converter", CONVERTERS, "value"),
    )


def _validate_sink(props: Mapping[str, Any], values: dict[str, ConfigValue]) -> None:
    """Kafka's ``SinkConnectorConfig.validate``: exactly one of topics / topics.regex, and the DLQ
    topic outside both."""
    topics, pattern = str(props.get("topics") or "").strip(), str(props.get("topics.regex") or "").strip()
    dlq = str(props.get(DLQ_TOPIC) or "").strip()

    def add(name: str, value: str, msg: str) -> None:
        values.setdefault(name, ConfigValue(name, value)).errors.append(msg)

    if topics and pattern:
        msg = "topics and topics.regex are mutually exclusive options, but both are set."
        add("topics", topics, msg)
        add("topics.regex", pattern, msg)
    if not topics and not pattern:
        msg = "Must configure one of topics or topics.regex"
        add("topics", topics, msg)
        add("topics.regex", pattern, msg)
    if dlq and topics:
        listed = list(dict.fromkeys(t for t in (s.strip() for s in topics.split(",")) if t))
        if dlq in listed:
            add("topics", topics, f"The DLQ topic '{dlq}' may not be included in the list of topics "
                                  f"('topics={java_str(listed)}') consumed by the connector")
    if dlq and pattern:
        try:
            matched = re.fullmatch(pattern, dlq) is not None
        except re.error:
            matched = False
        if matched:
            add("topics.regex", pattern, f"The DLQ topic '{dlq}' may not be matched by the regex for the topics "
                                         f"('topics.regex={pattern}') consumed by the connector")


# --------------------------------------------------------------------------- the parsed connector config
@dataclass(frozen=True)
class TransformSpec:
    alias: str
    type: str
    predicate: str | None
    negate: bool
    config: Mapping[str, Any]


@dataclass(frozen=True)
class PredicateSpec:
    alias: str
    type: str
    config: Mapping[str, Any]


@dataclass(frozen=True)
class ConnectorConfig:
    """A connector config that passed :func:`validate`, typed once for the worker."""
    name: str
    connector_class: str
    kind: str | None
    tasks_max: int
    key_converter: str | None
    value_converter: str | None
    header_converter: str | None
    transforms: tuple[TransformSpec, ...]
    predicates: tuple[PredicateSpec, ...]
    errors_tolerance: str
    errors_retry_timeout_ms: int
    errors_retry_delay_max_ms: int
    errors_log_enable: bool
    errors_log_include_messages: bool
    dlq_topic: str
    dlq_topic_replication_factor: int
    dlq_context_headers_enable: bool
    producer_overrides: Mapping[str, Any]
    consumer_overrides: Mapping[str, Any]
    values: Mapping[str, Any]
    originals: Mapping[str, Any]

    def reader_options(self) -> dict[str, str]:
        """``consumer.override.*`` as ``format("riverlog")`` reader options: client settings under
        ``riverlog.``, and Kafka's ``max.poll.records`` — the records a sink task gets per ``put()``
        — as the micro-batch's bound, ``maxOffsetsPerTrigger`` (offsets: a transaction's commit
        marker counts, so a batch holds at most that many records). ``group.id``,
        ``auto.offset.reset=earliest`` and ``enable.auto.commit=false`` say what the reader does
        anyway (validation refuses other values) and are not passed on: the reader decides them."""
        out = {f"riverlog.{k}": str(v) for k, v in self.consumer_overrides.items()
               if k != MAX_POLL_RECORDS and k.lower() not in ("group.id", "auto.offset.reset", "enable.auto.commit")}
        if self.consumer_overrides.get(MAX_POLL_RECORDS) is not None:
            out["maxOffsetsPerTrigger"] = str(self.consumer_overrides[MAX_POLL_RECORDS]).strip()
        return out

    def converter_config(self, which: str) -> dict[str, Any]:
        """``<which>.converter.*`` without the prefix (e.g. ``{"schemas.enable": "false"}``)."""
        prefix = f"{which}.converter."
        return {k[len(prefix):]: v for k, v in self.originals.items() if k.startswith(prefix)}


def parse_connector_config(config: Mapping[str, Any], connector_defs: Plugin | None = None) -> ConnectorConfig:
    """Validate once; :class:`~connect.errors.ConfigError` lists every problem per field."""
    infos = validate(config, connector_defs)
    infos.raise_if_invalid()
    props = _as_strings(config)
    values = {c.value.name: c.value.value for c in infos.configs if c.value is not None}
    kind = connector_defs.kind if connector_defs else getattr(CONNECTORS.get(values["connector.class"]), "kind", None)

    def prefixed(prefix: str) -> dict[str, Any]:
        return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}

    transforms = tuple(
        TransformSpec(a, values[f"transforms.{a}.type"], values.get(f"transforms.{a}.predicate"),
                      bool(values.get(f"transforms.{a}.negate")),
                      {k: v for k, v in prefixed(f"transforms.{a}.").items() if k not in ("type", "predicate", "negate")})
        for a in values["transforms"])
    predicates = tuple(
        PredicateSpec(a, values[f"predicates.{a}.type"],
                      {k: v for k, v in prefixed(f"predicates.{a}.").items() if k != "type"})
        for a in values["predicates"])
    found = CONNECTORS.get(values["connector.class"])   # the class an alias names
    return ConnectorConfig(
        name=values["name"], kind=kind,
        connector_class=found.class_name if found is not None else values["connector.class"],
        tasks_max=values["tasks.max"],
        key_converter=values["key.converter"], value_converter=values["value.converter"],
        header_converter=values["header.converter"], transforms=transforms, predicates=predicates,
        errors_tolerance=values["errors.tolerance"], errors_retry_timeout_ms=values["errors.retry.timeout"],
        errors_retry_delay_max_ms=values["errors.retry.delay.max.ms"],
        errors_log_enable=values["errors.log.enable"],
        errors_log_include_messages=values["errors.log.include.messages"],
        dlq_topic=values.get(DLQ_TOPIC) or "",
        dlq_topic_replication_factor=values.get("errors.deadletterqueue.topic.replication.factor", 3),
        dlq_context_headers_enable=bool(values.get("errors.deadletterqueue.context.headers.enable")),
        producer_overrides=prefixed(PRODUCER_OVERRIDE), consumer_overrides=prefixed(CONSUMER_OVERRIDE),
        values=values, originals=props)


def with_worker_client_defaults(config: ConnectorConfig, worker: WorkerConfig) -> ConnectorConfig:
    """Kafka's client configs for a connector: the worker's ``producer.*`` / ``consumer.*``
    settings, then the connector's ``producer.override.*`` / ``consumer.override.*`` over them."""
    return replace(config, producer_overrides={**worker.producer_defaults, **config.producer_overrides},
                   consumer_overrides={**worker.consumer_defaults, **config.consumer_overrides})


__all__ = ["CONNECTORS", "CONVERTERS", "ConfigInfo", "ConfigInfos", "ConnectorConfig", "HEADER_CONVERTERS",
           "JSON_CONVERTER_CONFIG", "PREDICATES", "PredicateSpec", "SINK", "SOURCE", "TRANSFORMATIONS",
           "TransformSpec", "WORKER_CONFIG_DEF", "WorkerConfig", "all_of", "connector_config_def", "enrich",
           "parse_connector_config", "validate", "with_worker_client_defaults"]
