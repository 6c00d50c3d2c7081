"""Connect's validate response (``PUT /connector-plugins/{type}/config/validate``): Kafka's
``ConfigInfos``, built as ``AbstractHerder.generateResult`` and ``prefixedConfigInfos`` build it,
with the client overrides and the converters' own keys each listed under their prefixes.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from connect.config_def import ConfigKey, ConfigValue, PluginRegistry, config_error
from connect.errors import ConfigError
from connect.connector_config_def import MAX_POLL_RECORDS, _plugin_def

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

    def add_errors(self, name: str, raw: Any, messages: list[str]) -> None:
        """Problems found beyond the per-key checks (a transform's own settings, a connector's
        checks across keys) on the field ``name``: on its entry, else on a new one."""
        entry = next((c for c in self.configs if c.value is not None and c.value.name == name), None)
        if entry is None:
            entry = ConfigInfo(None, ConfigValue(name, raw, [], []))
            self.configs.append(entry)
        new = [m for m in messages if m not in entry.value.errors]
        entry.value.errors.extend(new)
        self.error_count += len(new)

    def raise_if_invalid(self) -> None:
        """:class:`~connect.errors.ConfigError` with Kafka's refusal message and ``details["errors"]``."""
        if self.error_count:
            raise config_error("Connector configuration", self.errors())


VALIDATE_HINT = ("You can also find the above list of errors at the endpoint "
                 "`/connector-plugins/{connectorType}/config/validate`")


def refusal(errors: Mapping[str, list[str]]) -> ConfigError:
    """Kafka's ``AbstractHerder.maybeAddConfigErrors``: the 400 a create, put or patch of an
    invalid config answers, every problem on its own line, then the pointer to the validate
    endpoint that lists them per field."""
    e = config_error("Connector configuration", errors)
    return ConfigError(f"{e}\n{VALIDATE_HINT}", errors=e.details["errors"])


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
    """Client overrides: each listed under its own name; ``check`` (under the worker's override
    policy, :func:`with_policy`) gives a refused key's message."""
    values = []
    for name, raw in props.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            problem = check(name[len(prefix):], raw) if check else None
            values.append(ConfigValue(name[len(prefix):], raw, [], [problem] if problem else []))
    return _prefixed(prefix, {}, values)


_OTHER_CLUSTER = ("a connector's records and offsets are on the worker's bootstrap.servers (TopicCopy reads and "
                  "writes other clusters with source.cluster.bootstrap.servers and target.cluster.bootstrap.servers)")


OVERRIDE_POLICIES: dict[str, frozenset | None] = {
    "All": None, "None": frozenset(),
    "Principal": frozenset({"sasl.jaas.config", "sasl.mechanism", "security.protocol"}),
}
"""Kafka's ``ConnectorClientConfigOverridePolicy`` plugins (KIP-458): the client keys each lets a
connector override (None: any)."""


def with_policy(check, policy: str):
    """``check`` under the worker's ``connector.client.config.override.policy``: a key the policy
    does not allow gets Kafka's ``AbstractConnectorClientConfigOverridePolicy`` message instead."""
    allowed = OVERRIDE_POLICIES[policy]
    if allowed is None:
        return check

    def checked(name: str, raw: Any) -> str | None:
        if name not in allowed:
            return f"The '{policy}' policy does not allow '{name}' to be overridden in the connector configuration."
        return check(name, raw) if check else None
    return checked


def _producer_check(name: str, raw: Any) -> str | None:
    """A producer override as the connector's writes take it; ``bootstrap.servers`` is refused: a
    source's records and its connect-offsets records are one transaction, on the worker's cluster."""
    if name.lower() == "bootstrap.servers":
        return f"Invalid value {raw} for configuration {name}: {_OTHER_CLUSTER}; it cannot be overridden"
    from broker.client import PRODUCER_CONFIG  # the client is heavy; only overrides need it
    from broker.errors import InvalidConfigError
    try:
        PRODUCER_CONFIG.parse({name: raw})
    except InvalidConfigError as e:
        return str(e)
    return None


def _sink_consumer_check(connector: Any):
    """A sink's consumer overrides: as :func:`_consumer_check`, and ``group.id`` only as the group
    the runtime gives every sink (``connect-<name>``, Kafka's ``SinkUtils.consumerGroupId``): its
    offsets, the offsets API and the dead-letter transaction all name that group, and the query
    cannot read in another."""
    def check(name: str, raw: Any) -> str | None:
        if name == "group.id" and str(raw).strip() != f"connect-{connector}":
            return (f"Invalid value {raw} for configuration group.id: a sink connector's "
                    "consumer group is connect-<connector name>; it cannot be overridden")
        return _consumer_check(name, raw)
    return check


# key: (the one value that says what the runtime does anyway, why another is refused)
_READER_DECIDES = {
    "auto.offset.reset": ("earliest", "a connector reading topics starts at its committed offsets, else at the "
                                      "earliest"),
    "enable.auto.commit": ("false", "a connector reading topics commits each batch's offsets itself")}


def _consumer_check(name: str, raw: Any) -> str | None:
    """A consumer override as the topic reader takes it: ``max.poll.records`` is its batch bound;
    where it starts and when it commits are the runtime's (the reader refuses both); any other key
    goes to the reader's consumer, so what that consumer would refuse when the query starts is
    refused here, with its message."""
    if name.lower() == "bootstrap.servers":   # its group's offsets are committed on the worker's cluster
        return f"Invalid value {raw} for configuration {name}: {_OTHER_CLUSTER}; it cannot be overridden"
    if name.lower() in _READER_DECIDES:
        same, why = _READER_DECIDES[name.lower()]
        if str(raw).strip().lower() != same:   # Kafka's own default for Connect's consumers is accepted
            return f"Invalid value {raw} for configuration {name}: {why}; it cannot be overridden"
        return None
    if name == MAX_POLL_RECORDS:     # Connect's own: the reader's batch bound (ConfigDef INT, at least 1)
        try:
            number = int(str(raw).strip())
        except ValueError:
            number = None
        if number is None or not -2**31 <= number < 2**31:
            return f"Invalid value {raw} for configuration {MAX_POLL_RECORDS}: Not a number of type INT"
        return None if number >= 1 else \
            f"Invalid value {raw} for configuration {MAX_POLL_RECORDS}: Value must be at least 1"
    from broker.client import CONSUMER_CONFIG  # the client is heavy; only overrides need it
    from broker.errors import InvalidConfigError
    try:   # the reader's consumer takes every other key: what it would refuse at start is refused now
        CONSUMER_CONFIG.parse({name: raw})
    except InvalidConfigError as e:
        return str(e)
    return None
