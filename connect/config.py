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
under their prefixes. Plugins are looked up in the registries below, which the converter,
transform, predicate and connector modules fill; this module implements none of them. Pure.
"""
from __future__ import annotations

from collections.abc import Mapping
import re
from dataclasses import dataclass, field, replace
from typing import Any

from connect.config_def import (NO_DEFAULT, ConfigDef, ConfigKey, ConfigValue, Importance, Invalid, Plugin,
                                PluginRegistry, Type, Width, all_of, at_least, between, config_error, java_str,
                                non_empty_string, non_empty_string_without_control_chars, one_of, regex,
                                unique_aliases)

CONNECTORS = PluginRegistry("connector")
CONVERTERS = PluginRegistry("converter")
HEADER_CONVERTERS = PluginRegistry("header converter")
TRANSFORMATIONS = PluginRegistry("transformation")
PREDICATES = PluginRegistry("predicate")

SOURCE, SINK = "source", "sink"
COMMON_GROUP, TRANSFORMS_GROUP, PREDICATES_GROUP, ERROR_GROUP = "Common", "Transforms", "Predicates", "Error Handling"
EXACTLY_ONCE_GROUP = "Exactly Once Support"
PRODUCER_OVERRIDE, CONSUMER_OVERRIDE = "producer.override.", "consumer.override."
MAX_POLL_RECORDS = "max.poll.records"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
SIMPLE_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
NULL_VALUE = "Null value can not be supplied as the configuration value."

_CONVERTER_DOC = ("Converter class used to convert between Kafka Connect format and the serialized form that is "
                  "written to Kafka. This controls the format of the {} in messages written to or read from Kafka.")


def _common_keys() -> list[ConfigKey]:
    """Kafka's ``ConnectorConfig.configDef()``."""
    order = iter(range(1, 100))
    err = iter(range(1, 100))
    return [
        ConfigKey("name", Type.STRING, NO_DEFAULT, non_empty_string_without_control_chars, Importance.HIGH,
                  "Globally unique name to use for this connector.", COMMON_GROUP, next(order), Width.MEDIUM,
                  "Connector name"),
        ConfigKey("connector.class", Type.CLASS, NO_DEFAULT, None, Importance.HIGH,
                  "Name or alias of the class for this connector.", COMMON_GROUP, next(order), Width.LONG,
                  "Connector class", plugins=CONNECTORS),
        ConfigKey("tasks.max", Type.INT, 1, at_least(1), Importance.HIGH,
                  "Maximum number of tasks to use for this connector.", COMMON_GROUP, next(order), Width.SHORT,
                  "Tasks max"),
        ConfigKey("tasks.max.enforce", Type.BOOLEAN, True, None, Importance.LOW,
                  "(Deprecated) Whether to enforce that the tasks.max property is respected by the connector.",
                  COMMON_GROUP, next(order), Width.SHORT, "Enforce tasks max"),
        ConfigKey("key.converter", Type.CLASS, None, None, Importance.LOW, _CONVERTER_DOC.format("keys"),
                  COMMON_GROUP, next(order), Width.SHORT, "Key converter class", plugins=CONVERTERS),
        ConfigKey("value.converter", Type.CLASS, None, None, Importance.LOW, _CONVERTER_DOC.format("values"),
                  COMMON_GROUP, next(order), Width.SHORT, "Value converter class", plugins=CONVERTERS),
        ConfigKey("header.converter", Type.CLASS, None, None, Importance.LOW,
                  "HeaderConverter class used to convert between Kafka Connect format and the serialized form "
                  "that is written to Kafka.", COMMON_GROUP, next(order), Width.SHORT, "Header converter class",
                  plugins=HEADER_CONVERTERS),
        ConfigKey("transforms", Type.LIST, [], unique_aliases, Importance.LOW,
                  "Aliases for the transformations to be applied to records.", TRANSFORMS_GROUP, next(order),
                  Width.LONG, "Transforms"),
        ConfigKey("predicates", Type.LIST, [], unique_aliases, Importance.LOW,
                  "Aliases for the predicates used by transformations.", PREDICATES_GROUP, next(order),
                  Width.LONG, "Predicates"),
        ConfigKey("config.action.reload", Type.STRING, "restart", one_of("none", "restart"), Importance.LOW,
                  "The action that Connect should take on the connector when changes in external configuration "
                  "providers result in a change in the connector's configuration properties.", COMMON_GROUP,
                  next(order), Width.MEDIUM, "Reload Action"),
        ConfigKey("errors.retry.timeout", Type.LONG, 0, None, Importance.MEDIUM,
                  "The maximum duration in milliseconds that a failed operation will be reattempted. The default "
                  "is 0, which means no retries will be attempted. Use -1 for infinite retries.", ERROR_GROUP,
                  next(err), Width.MEDIUM, "Retry Timeout for Errors"),
        ConfigKey("errors.retry.delay.max.ms", Type.LONG, 60000, None, Importance.MEDIUM,
                  "The maximum duration in milliseconds between consecutive retry attempts. Jitter will be added "
                  "to the delay once this limit is reached to prevent thundering herd issues.", ERROR_GROUP,
                  next(err), Width.MEDIUM, "Maximum Delay Between Retries for Errors"),
        ConfigKey("errors.tolerance", Type.STRING, "none", one_of("none", "all"), Importance.MEDIUM,
                  "Behavior for tolerating errors during connector operation. 'none' is the default value and "
                  "signals that any error will result in an immediate connector task failure; 'all' changes the "
                  "behavior to skip over problematic records.", ERROR_GROUP, next(err), Width.SHORT,
                  "Error Tolerance"),
        ConfigKey("errors.log.enable", Type.BOOLEAN, False, None, Importance.MEDIUM,
                  "If true, write each error and the details of the failed operation and problematic record to "
                  "the Connect application log.", ERROR_GROUP, next(err), Width.SHORT, "Log Errors"),
        ConfigKey("errors.log.include.messages", Type.BOOLEAN, False, None, Importance.MEDIUM,
                  "Whether to include in the log the Connect record that resulted in a failure.", ERROR_GROUP,
                  next(err), Width.SHORT, "Log Error Details"),
    ]


def _sink_keys() -> list[ConfigKey]:
    """Kafka's ``SinkConnectorConfig``: topics, and the dead letter queue (sinks only)."""
    return [
        ConfigKey("topics", Type.LIST, "", None, Importance.HIGH, "List of topics to consume, separated by commas",
                  COMMON_GROUP, 4, Width.LONG, "Topics"),
        ConfigKey("topics.regex", Type.STRING, "", regex, Importance.HIGH,
                  "Regular expression giving topics to consume. Only one of topics or topics.regex should be "
                  "specified.", COMMON_GROUP, 4, Width.LONG, "Topics regex"),
        ConfigKey(DLQ_TOPIC, Type.STRING, "", None, Importance.MEDIUM,
                  "The name of the topic to be used as the dead letter queue (DLQ) for messages that result in an "
                  "error when processed by this sink connector, or its transformations or converters. The topic "
                  "name is blank by default, which means that no messages are to be recorded in the DLQ.",
                  ERROR_GROUP, 6, Width.MEDIUM, "Dead Letter Queue Topic Name"),
        ConfigKey("errors.deadletterqueue.topic.replication.factor", Type.SHORT, 3, None, Importance.MEDIUM,
                  "Replication factor used to create the dead letter queue topic when it doesn't already exist.",
                  ERROR_GROUP, 7, Width.MEDIUM, "Dead Letter Queue Topic Replication Factor"),
        ConfigKey("errors.deadletterqueue.context.headers.enable", Type.BOOLEAN, False, None, Importance.MEDIUM,
                  "If true, add headers containing error context to the messages written to the dead letter "
                  "queue. All error context header keys will start with __connect.errors.", ERROR_GROUP, 8,
                  Width.MEDIUM, "Enable Error Context Headers"),
    ]


def _non_negative_or_null(name: str, value: Any) -> None:
    if value is not None:
        at_least(0)(name, value)


def _source_keys() -> list[ConfigKey]:
    """Kafka's ``SourceConnectorConfig`` keys for KIP-618's exactly-once source support."""
    return [
        ConfigKey("exactly.once.support", Type.STRING, "requested", one_of("requested", "required",
                                                                             case_insensitive=True),
                  Importance.MEDIUM, "Permitted values are requested, required. If set to \"required\", forces "
                  "a preflight check for the connector to ensure that it can provide exactly-once semantics.",
                  EXACTLY_ONCE_GROUP, 1, Width.SHORT, "Exactly once support"),
        ConfigKey("transaction.boundary", Type.STRING, "poll", one_of("poll", "interval", "connector",
                                                                       case_insensitive=True),
                  Importance.MEDIUM, "Permitted values are: poll, interval, connector.", EXACTLY_ONCE_GROUP, 2,
                  Width.SHORT, "Transaction Boundary"),
        ConfigKey("transaction.boundary.interval.ms", Type.LONG, None, _non_negative_or_null, Importance.LOW,
                  "If 'transaction.boundary' is set to 'interval', determines the interval for producer "
                  "transaction commits by connector tasks.", EXACTLY_ONCE_GROUP, 3, Width.SHORT,
                  "Transaction boundary interval"),
        ConfigKey("offsets.storage.topic", Type.STRING, None, non_empty_string, Importance.LOW,
                  "The name of a separate offsets topic to use for this connector. If empty or not specified, the "
                  "worker's global offsets topic name will be used.", "offsets.topic", 1, Width.LONG,
                  "Offsets topic"),
    ]


def connector_config_def(kind: str | None) -> ConfigDef:
    """The base definitions for a source or sink connector (``None``: the common ones only)."""
    keys = _common_keys() + (_sink_keys() if kind == SINK else _source_keys() if kind == SOURCE else [])
    return ConfigDef(keys)


JSON_CONVERTER_CONFIG = ConfigDef([
    ConfigKey("converter.type", Type.STRING, NO_DEFAULT, one_of("key", "value", "header"), Importance.LOW,
              "How this converter will be used.", None, -1, Width.NONE, "Converter type"),
    ConfigKey("schemas.enable", Type.BOOLEAN, True, None, Importance.HIGH,
              "Include schemas within each of the serialized values and keys.", "Schemas", 1, Width.MEDIUM,
              "Enable Schemas"),
    ConfigKey("schemas.cache.size", Type.INT, 1000, None, Importance.HIGH,
              "The maximum number of schemas that can be cached in this converter instance.", "Schemas", 2,
              Width.MEDIUM, "Schema Cache Size"),
    ConfigKey("decimal.format", Type.STRING, "BASE64", one_of("BASE64", "NUMERIC", case_insensitive=True),
              Importance.LOW, "Controls which format this converter will serialize decimals in.", "Serialization",
              1, Width.MEDIUM, "Decimal Format"),
    ConfigKey("replace.null.with.default", Type.BOOLEAN, True, None, Importance.LOW,
              "Whether to replace fields that have a default value and that are null to the default value.",
              "Serialization", 2, Width.MEDIUM, "Replace null with default"),
])
"""Kafka's ``JsonConverterConfig`` (``key.converter.schemas.enable`` and friends), for the converter
module to register its JSON converter with."""


# ------------------------------------------------------------------------------- transforms, predicates
def _aliases(props: Mapping[str, Any], name: str) -> list[str]:
    raw = props.get(name)
    if isinstance(raw, (list, tuple)):
        items = [str(a) for a in raw]
    elif isinstance(raw, str) and raw.strip():
        items = [a.strip() for a in raw.split(",")]
    else:
        items = []
    return list(dict.fromkeys(items))


def enrich(base: ConfigDef, props: Mapping[str, Any]) -> ConfigDef:
    """Kafka's ``ConnectorConfig.enrich``: for each alias in ``transforms`` / ``predicates`` a group
    ``"Transforms: <alias>"`` with a required ``transforms.<alias>.type`` and, once the type names a
    registered plugin, that plugin's own keys under the alias prefix.

    Differences, so that a POST is refused with every problem on the field that has it: the
    implicit ``transforms.<alias>.predicate`` must name an alias in ``predicates`` (Kafka finds out
    at start-up); it and ``negate`` are defined even while the type is unknown; and "negate without
    predicate" is listed on ``negate`` (Kafka lists it on ``type``)."""
    out = base.copy()
    predicate_aliases = _aliases(props, "predicates")

    def predicate_exists(name: str, value: Any) -> None:
        if value is not None and value not in predicate_aliases:
            listed = ", ".join(predicate_aliases) if predicate_aliases else "none"
            raise Invalid(f"there is no predicate '{value}' in 'predicates' (aliases there: {listed})")

    for alias in _aliases(props, "transforms"):
        prefix, group = f"transforms.{alias}.", f"{TRANSFORMS_GROUP}: {alias}"

        def negate_needs_predicate(name: str, value: Any, prefix: str = prefix) -> None:
            if props.get(prefix + "negate") is not None and props.get(prefix + "predicate") is None:
                raise Invalid(f"Config '{prefix}negate' was provided but there is no config '{prefix}predicate' "
                              "defining a predicate to be negated.", whole=True)

        out.define(ConfigKey(prefix + "type", Type.CLASS, NO_DEFAULT, None, Importance.HIGH,
                             f"Class for the '{alias}' transformation.", group, 0, Width.LONG,
                             f"Transformation type for {alias}", recommender=_recommend(TRANSFORMATIONS),
                             plugins=TRANSFORMATIONS))
        implicit = ConfigDef([
            ConfigKey("predicate", Type.STRING, None, predicate_exists, Importance.MEDIUM,
                      "The alias of a predicate used to determine whether to apply this transformation."),
            ConfigKey("negate", Type.BOOLEAN, False, negate_needs_predicate, Importance.MEDIUM,
                      "Whether the configured predicate should be negated."),
        ])
        own = _plugin_def(TRANSFORMATIONS, props.get(prefix + "type"))
        for key in (own.keys.values() if own else ()):
            if key.name not in implicit.keys:  # the implicit keys mask a transform's own of that name
                implicit.define(key)
        out.embed(prefix, group, 1, implicit)
    for alias in predicate_aliases:
        prefix, group = f"predicates.{alias}.", f"{PREDICATES_GROUP}: {alias}"
        out.define(ConfigKey(prefix + "type", Type.CLASS, NO_DEFAULT, None, Importance.HIGH,
                             f"Class for the '{alias}' predicate.", group, 0, Width.LONG,
                             f"Predicate type for {alias}", recommender=_recommend(PREDICATES), plugins=PREDICATES))
        own = _plugin_def(PREDICATES, props.get(prefix + "type"))
        if own is not None:
            out.embed(prefix, group, 1, own)
    return out


def _recommend(registry: PluginRegistry):
    return lambda name, parsed: registry.class_names()


def _plugin_def(registry: PluginRegistry, name: Any) -> ConfigDef | None:
    plugin = registry.get(name.strip()) if isinstance(name, str) else None
    return plugin.config_def if plugin is not None else None


# ------------------------------------------------------------------------------------ the response
@dataclass
class ConfigInfo:
    """One entry of ``configs``: a definition (None for a value no key defines) and its value."""
    definition: ConfigKey | None
    value: ConfigValue | None

    def to_json(self) -> dict:
        type_ = self.definition.type if self.definition else None
        return {"definition": self.definition.definition() if self.definition else None,
                "value": self.value.info(type_) if self.value else None}


@dataclass
class ConfigInfos:
    """Connect's validate response: ``{"name", "error_count", "groups", "configs"}``."""
    name: str
    error_count: int
    groups: list[str]
    configs: list[ConfigInfo] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"name": self.name, "error_count": self.error_count, "groups": list(self.groups),
                "configs": [c.to_json() for c in self.configs]}

    def errors(self) -> dict[str, list[str]]:
        """Every field with problems, and its messages."""
        out: dict[str, list[str]] = {}
        for c in self.configs:
            if c.value is not None and c.value.errors:
                out.setdefault(c.value.name, []).extend(c.value.errors)
        return out

    def raise_if_invalid(self) -> None:
        """:class:`~connect.errors.ConfigError` with Kafka's refusal message and ``details["errors"]``."""
        if self.error_count:
            raise config_error("Connector configuration", self.errors())


def _result(name: str, keys: Mapping[str, ConfigKey], values: list[ConfigValue], groups: list[str]) -> ConfigInfos:
    """Kafka's ``AbstractHerder.generateResult``: values no key defines first, then every key."""
    by_name = {v.name: v for v in values}
    configs = [ConfigInfo(None, v) for v in values if v.name not in keys]
    count = sum(len(v.errors) for v in values if v.name not in keys)
    for name, key in keys.items():
        value = by_name.get(name)
        count += len(value.errors) if value else 0
        configs.append(ConfigInfo(key, value))
    return ConfigInfos(name, count, groups, configs)


def _prefixed(prefix: str, keys: Mapping[str, ConfigKey], values: list[ConfigValue]) -> ConfigInfos:
    """Kafka's ``prefixedConfigInfos`` (converters, client overrides): one error per failing value."""
    groups: list[str] = []
    configs = []
    for v in values:
        key = keys.get(v.name)
        if key is not None and key.group is not None and key.group not in groups:
            groups.append(key.group)
        shown = ConfigValue(prefix + v.name, v.value, v.recommended_values, v.errors, v.visible)
        configs.append(ConfigInfo(_renamed(key, prefix + key.name) if key else None, shown))
    return ConfigInfos("", sum(1 for v in values if v.errors), groups, configs)


def _renamed(key: ConfigKey, name: str) -> ConfigKey:
    return replace(key, name=name)


def _merge(name: str, *parts: ConfigInfos | None) -> ConfigInfos:
    out = ConfigInfos(name, 0, [], [])
    for p in parts:
        if p is None:
            continue
        out.error_count += p.error_count
        out.configs.extend(p.configs)
        out.groups.extend(g for g in p.groups if g not in out.groups)
    return out


def _converter_infos(props: Mapping[str, Any], values: Mapping[str, ConfigValue], prop: str,
                     registry: PluginRegistry, converter_type: str) -> ConfigInfos | None:
    """Kafka's ``validateConverterConfig``: a converter named in the connector config validates its
    own keys (``key.converter.schemas.enable`` ...) under the property's prefix."""
    value = values.get(prop)
    if props.get(prop) is None or value is None or value.errors:
        return None
    own = _plugin_def(registry, value.value)
    if own is None:
        return None
    prefix = prop + "."
    plugin_props = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}
    plugin_props.setdefault("converter.type", converter_type)
    return _prefixed(prefix, own.keys, list(own.validate_all(plugin_props).values()))


def _override_infos(props: Mapping[str, Any], prefix: str, check) -> ConfigInfos:
    """Client overrides (Kafka's ``All`` override policy): each listed under its own name; values the
    Riverlog client would refuse carry its message."""
    values = []
    for name, raw in props.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            problem = check(name[len(prefix):], raw) if check else None
            values.append(ConfigValue(name[len(prefix):], raw, [], [problem] if problem else []))
    return _prefixed(prefix, {}, values)


def _producer_check(name: str, raw: Any) -> str | None:
    from broker.client import PRODUCER_CONFIG  # the client is heavy; only overrides need it
    from broker.errors import InvalidConfigError
    try:
        PRODUCER_CONFIG.parse({name: raw})
    except InvalidConfigError as e:
        return str(e)
    return None


def _consumer_check(name: str, raw: Any) -> str | None:
    if name != MAX_POLL_RECORDS:
        return None
    try:
        ok = int(str(raw).strip()) >= 1
    except ValueError:
        ok = False
    return None if ok else f"Invalid value {raw} for configuration {MAX_POLL_RECORDS}: Value must be at least 1"


def _as_strings(config: Mapping[str, Any]) -> dict[str, Any]:
    """REST bodies may carry JSON numbers and booleans; Connect's config map is strings."""
    out = {}
    for k, v in config.items():
        out[str(k)] = v if v is None or isinstance(v, (str, list)) else java_str(v)
    return out


def validate(config: Mapping[str, Any], connector_defs: Plugin | None = None) -> ConfigInfos:
    """Connect's validate response for ``config``. ``connector_defs`` is the connector plugin
    (its kind, source or sink, and its own ConfigDef); by default it is looked up by
    ``connector.class`` in :data:`CONNECTORS`. An unknown or missing class is listed on
    ``connector.class`` and the rest is validated against the common definitions."""
    props = _as_strings(config)
    plugin = connector_defs
    if plugin is None and isinstance(props.get("connector.class"), str):
        plugin = CONNECTORS.get(props["connector.class"].strip())
    kind = plugin.kind if plugin is not None else None
    definitions = enrich(connector_config_def(kind), props)
    values = definitions.validate_all(props)
    if connector_defs is not None and "connector.class" in values:
        cv = values["connector.class"]
        cv.errors = [e for e in cv.errors if "could not be found" not in e]  # named by the caller
        cv.value = cv.value if cv.value is not None else props.get("connector.class")
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
        _override_infos(props, PRODUCER_OVERRIDE, _producer_check) if uses_producer else None,
        _override_infos(props, CONSUMER_OVERRIDE, _consumer_check) if reads_topics else None,
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
    dlq_context_headers_enable: bool
    producer_overrides: Mapping[str, Any]
    consumer_overrides: Mapping[str, Any]
    values: Mapping[str, Any]
    originals: Mapping[str, Any]

    def reader_options(self) -> dict[str, str]:
        """``consumer.override.*`` as ``format("riverlog")`` reader options: client settings under
        ``riverlog.``, and Kafka's ``max.poll.records`` — the records a sink task gets per ``put()``
        — as the micro-batch's bound, ``maxOffsetsPerTrigger`` (offsets: a transaction's commit
        marker counts, so a batch holds at most that many records)."""
        out = {f"riverlog.{k}": str(v) for k, v in self.consumer_overrides.items() if k != MAX_POLL_RECORDS}
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
    return ConnectorConfig(
        name=values["name"], connector_class=values["connector.class"], kind=kind, tasks_max=values["tasks.max"],
        key_converter=values["key.converter"], value_converter=values["value.converter"],
        header_converter=values["header.converter"], transforms=transforms, predicates=predicates,
        errors_tolerance=values["errors.tolerance"], errors_retry_timeout_ms=values["errors.retry.timeout"],
        errors_retry_delay_max_ms=values["errors.retry.delay.max.ms"],
        errors_log_enable=values["errors.log.enable"],
        errors_log_include_messages=values["errors.log.include.messages"],
        dlq_topic=values.get(DLQ_TOPIC) or "",
        dlq_context_headers_enable=bool(values.get("errors.deadletterqueue.context.headers.enable")),
        producer_overrides=prefixed(PRODUCER_OVERRIDE), consumer_overrides=prefixed(CONSUMER_OVERRIDE),
        values=values, originals=props)


# ------------------------------------------------------------------------------------------- worker
def _replication_factor(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 1:
        raise Invalid("Replication factor must be positive, or -1 to use the broker's default")


WORKER_CONFIG_DEF = ConfigDef([
    ConfigKey("bootstrap.servers", Type.LIST, "localhost:9092", None, Importance.HIGH,
              "A list of host/port pairs used to establish the initial connection to the cluster."),
    ConfigKey("group.id", Type.STRING, NO_DEFAULT, non_empty_string, Importance.HIGH,
              "A unique string that identifies the Connect cluster group this worker belongs to."),
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
    ConfigKey("rest.host.name", Type.STRING, None, None, Importance.LOW,
              "Hostname for the REST API. If this is set, it will only bind to this interface."),
    ConfigKey("rest.port", Type.INT, 8083, between(0, 65535), Importance.LOW,
              "Port for the REST API to listen on (0: any free port)."),
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
    config_storage_topic: str
    config_storage_replication_factor: int
    offset_storage_topic: str
    offset_storage_partitions: int
    offset_storage_replication_factor: int
    status_storage_topic: str
    status_storage_partitions: int
    status_storage_replication_factor: int
    rest_host_name: str | None
    rest_port: int
    exactly_once_source_support: str
    key_converter: str
    value_converter: str
    header_converter: str
    offset_flush_interval_ms: int
    originals: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, props: Mapping[str, Any]) -> "WorkerConfig":
        props = _as_strings(props)
        v = WORKER_CONFIG_DEF.parse(props, "Worker configuration")
        return cls(**{k.replace(".", "_"): v[k] for k in v if k != "bootstrap.servers"},
                   bootstrap_servers=",".join(v["bootstrap.servers"]), originals=dict(props))

    @property
    def exactly_once_source_enabled(self) -> bool:
        return self.exactly_once_source_support.lower() == "enabled"


__all__ = ["CONNECTORS", "CONVERTERS", "ConfigInfo", "ConfigInfos", "ConnectorConfig", "HEADER_CONVERTERS",
           "JSON_CONVERTER_CONFIG", "PREDICATES", "PredicateSpec", "SINK", "SOURCE", "TRANSFORMATIONS",
           "TransformSpec", "WORKER_CONFIG_DEF", "WorkerConfig", "all_of", "connector_config_def", "enrich",
           "parse_connector_config", "validate"]
