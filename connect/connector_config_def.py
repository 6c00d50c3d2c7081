"""The definitions of a connector's config under Kafka Connect's names: Kafka's ``ConnectorConfig``,
``SinkConnectorConfig`` and ``SourceConnectorConfig`` keys (names, types, defaults, groups, order,
messages), ``ConnectorConfig.enrich``'s group per transform and predicate alias, and the plugin
registries the connector, converter, transform and predicate modules fill. Pure: what
:func:`connect.config.validate` checks a config against.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect.config_def import (NO_DEFAULT, ConfigDef, ConfigKey, Importance, Invalid, PluginRegistry, Type, Width,
                                java_str)
from connect.config_validators import (at_least, non_empty_string, non_empty_string_without_control_chars, one_of,
                                       regex, replication_factor, unique_aliases)

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
        # a STRING, as Kafka defines it: the validate response shows the value as written (an alias
        # too); config.validate looks the class up and lists Plugins.newConnector's refusal
        ConfigKey("connector.class", Type.STRING, NO_DEFAULT, None, Importance.HIGH,
                  "Name or alias of the class for this connector.", COMMON_GROUP, next(order), Width.LONG,
                  "Connector class"),
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
        ConfigKey("errors.deadletterqueue.topic.replication.factor", Type.SHORT, 3, replication_factor,
                  Importance.MEDIUM,
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
    """Kafka's ``SourceConnectorConfig`` keys: KIP-158's ``topic.creation.groups`` (the groups'
    own keys: :func:`connect.topic_creation.enrich`) and KIP-618's exactly-once source support."""
    from connect.topic_creation import groups_key
    return [
        groups_key(),
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


def _converter_type() -> ConfigKey:
    """Kafka's ``ConverterConfig.newConfigDef()``: the key every converter's definition starts with."""
    return ConfigKey("converter.type", Type.STRING, NO_DEFAULT, one_of("key", "value", "header"), Importance.LOW,
                     "How this converter will be used.", None, -1, Width.NONE, "Converter type")


BYTE_ARRAY_CONVERTER_CONFIG = ConfigDef([_converter_type()])
"""Kafka's ``ByteArrayConverter.config()``."""

STRING_CONVERTER_CONFIG = ConfigDef([
    _converter_type(),
    ConfigKey("converter.encoding", Type.STRING, "UTF-8", None, Importance.HIGH,
              "The name of the Java character set to use for encoding strings as byte arrays.", None, -1,
              Width.MEDIUM, "Encoding"),
])
"""Kafka's ``StringConverterConfig`` (``value.converter.converter.encoding``); the encoding is
checked when the connector starts, as Kafka's converter checks it when it is configured."""

JSON_CONVERTER_CONFIG = ConfigDef([
    _converter_type(),
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


def unknown_connector(name: str) -> str:
    """Kafka's ``Plugins.newConnector`` refusal of a class no connector has: it lists every
    connector there is (``PluginDesc.toString``), so a misspelt alias shows the right one."""
    descs = []
    for class_name in CONNECTORS.class_names():
        plugin = CONNECTORS.get(class_name)
        kind = plugin.kind if plugin is not None and plugin.kind else "unknown"
        version = getattr(getattr(plugin, "target", None), "version", None) or "undefined"
        descs.append(f"PluginDesc{{klass=class {class_name}, name='{class_name}', version='{version}', "
                     f"encodedVersion={version}, type={kind}, typeName='{kind}', location='classpath'}}")
    return (f"Failed to find any class that implements Connector and which name matches {name}, "
            f"available connectors are: {', '.join(descs)}")


def _recommend(registry: PluginRegistry):
    return lambda name, parsed: registry.class_names()


def _plugin_def(registry: PluginRegistry, name: Any) -> ConfigDef | None:
    plugin = registry.get(name.strip()) if isinstance(name, str) else None
    return plugin.config_def if plugin is not None else None


def _as_strings(config: Mapping[str, Any]) -> dict[str, Any]:
    """REST bodies may carry JSON numbers and booleans; Connect's config map is strings."""
    out = {}
    for k, v in config.items():
        out[str(k)] = v if v is None or isinstance(v, (str, list)) else java_str(v)
    return out
