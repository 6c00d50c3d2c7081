"""Kafka's ``ConfigDef`` for Connect: typed config keys, parsed and validated in one pass that
collects *every* problem per key instead of stopping at the first, because Connect's validate
endpoint (and a refused ``POST /connectors``) must list them all.

    d = ConfigDef().define(ConfigKey("tasks.max", Type.INT, 1, at_least(1), Importance.HIGH, "..."))
    values = d.validate_all({"tasks.max": "0"})
    values["tasks.max"].errors  # ['Invalid value 0 for configuration tasks.max: Value must be at least 1']

Messages, parsing rules (trimmed strings, comma lists, 32/16/64-bit integers) and the string forms
of values follow ``org.apache.kafka.common.config.ConfigDef`` so the validate response reads as
Kafka's. One deliberate difference: a key whose value did not parse is not also run through its
validator (Kafka would add a second, meaningless "Value must be non-null").

``Type.CLASS`` keys name a plugin (converter, transformation, predicate, connector) looked up in a
:class:`PluginRegistry` that the owning modules fill, so this module knows no plugin itself. The
validators (``at_least``, ``one_of``, ...) live in :mod:`connect.config_validators`. Pure.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from connect.config_validators import (Invalid, Validator, all_of, at_least, between, non_empty_string,  # noqa: F401
                                       non_empty_string_without_control_chars, one_of, regex, unique_aliases)
from connect.errors import ConfigError


class Type:
    """Kafka's ``ConfigDef.Type`` names, as the validate response spells them."""
    BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
        "BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")


class Importance:
    HIGH, MEDIUM, LOW = "HIGH", "MEDIUM", "LOW"


class Width:
    NONE, SHORT, MEDIUM, LONG = "NONE", "SHORT", "MEDIUM", "LONG"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
"""Kafka's ``ConfigDef.NO_DEFAULT_VALUE``: the key is required."""


class Password:
    """A PASSWORD value: shown as ``[hidden]`` everywhere, as Kafka's ``Password`` is."""

    def __init__(self, value: str):
        self.value = value

    def __str__(self) -> str:
        return "[hidden]"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


# ------------------------------------------------------------------------------------------- plugins
@dataclass(frozen=True)
class Plugin:
    """A class a config may name. ``config_def`` is the plugin's own ConfigDef (Kafka's
    ``config()``); ``kind`` is "source"/"sink" for connectors; ``target`` is whatever the module
    that registered it needs to build one (a factory, a function)."""
    class_name: str
    config_def: "ConfigDef | None" = None
    kind: str | None = None
    target: Any = None


class PluginRegistry:
    """Class names (and short aliases, as Kafka accepts ``FileStreamSink`` for
    ``org.apache.kafka.connect.file.FileStreamSinkConnector``) to :class:`Plugin`.

    A registry per plugin type lives in :mod:`connect.config`; converters, transforms and
    predicates register themselves on import, so validation needs no knowledge of them."""

    def __init__(self, what: str):
        self.what = what
        self._by_name: dict[str, Plugin] = {}

    def register(self, plugin: Plugin, aliases: Iterable[str] = ()) -> Plugin:
        for name in (plugin.class_name, *aliases):
            self._by_name[name] = plugin
        return plugin

    def unregister(self, class_name: str) -> None:
        self._by_name = {n: p for n, p in self._by_name.items() if p.class_name != class_name}

    def get(self, name: str) -> Plugin | None:
        return self._by_name.get(name)

    def class_names(self) -> list[str]:
        return sorted({p.class_name for p in self._by_name.values()})

    def __contains__(self, name: str) -> bool:
        return name in self._by_name


# ----------------------------------------------------------------------------------------- keys
Recommender = Callable[[str, Mapping[str, Any]], list]


@dataclass(frozen=True)
class ConfigKey:
    """One definition: Kafka's ``ConfigDef.ConfigKey`` with its validate-response fields."""
    name: str
    type: str
    default: Any = NO_DEFAULT
    validator: Validator | None = None
    importance: str = Importance.MEDIUM
    documentation: str = ""
    group: str | None = None
    order_in_group: int = -1
    width: str = Width.NONE
    display_name: str | None = None
    dependents: tuple[str, ...] = ()
    recommender: Recommender | None = None
    plugins: PluginRegistry | None = None  # where a CLASS value is looked up

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def definition(self) -> dict:
        """Connect's ``ConfigKeyInfo`` JSON (``GET .../config/validate`` → ``configs[].definition``)."""
        return {"name": self.name, "type": self.type, "required": self.required,
                "default_value": None if self.required else to_string(self.default, self.type),
                "importance": self.importance, "documentation": self.documentation, "group": self.group,
                "width": self.width, "display_name": self.display_name or self.name,
                "dependents": list(self.dependents), "order": self.order_in_group}


@dataclass
class ConfigValue:
    """Kafka's ``ConfigValue``: a key's parsed value and every problem found with it."""
    name: str
    value: Any = None
    recommended_values: list = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def info(self, type_: str | None) -> dict:
        """Connect's ``ConfigValueInfo`` JSON."""
        rec_type = Type.STRING if type_ == Type.LIST else type_
        return {"name": self.name, "value": to_string(self.value, type_),
                "recommended_values": [to_string(v, rec_type) for v in self.recommended_values],
                "errors": list(self.errors), "visible": self.visible}


class ConfigDef:
    """An ordered set of :class:`ConfigKey`; groups in order of first definition, as Kafka keeps them."""

    def __init__(self, keys: Iterable[ConfigKey] = ()):
        self.keys: dict[str, ConfigKey] = {}
        self.groups: list[str] = []
        for key in keys:
            self.define(key)

    def define(self, key: ConfigKey) -> "ConfigDef":
        if key.name in self.keys:
            raise ValueError(f"configuration {key.name} is defined twice")
        if key.default is not NO_DEFAULT and key.default is not None:
            key = replace(key, default=parse_value(key, key.default))  # a bad default fails here, at import
        self.keys[key.name] = key
        if key.group is not None and key.group not in self.groups:
            self.groups.append(key.group)
        return self

    def copy(self) -> "ConfigDef":
        return ConfigDef(self.keys.values())

    def embed(self, prefix: str, group: str, start_order: int, child: "ConfigDef") -> "ConfigDef":
        """Kafka's ``embed``: the child's keys under ``prefix``, in ``group``, numbered on from
        ``start_order``."""
        for i, key in enumerate(child.keys.values()):
            self.define(replace(key, name=prefix + key.name, group=group, order_in_group=start_order + i,
                                dependents=tuple(prefix + d for d in key.dependents)))
        return self

    def validate_all(self, props: Mapping[str, Any]) -> dict[str, ConfigValue]:
        """Every key's :class:`ConfigValue` (Kafka's ``validateAll``); never raises."""
        values = {name: ConfigValue(name) for name in self.keys}
        parsed: dict[str, Any] = {}
        for name, key in self.keys.items():
            cv = values[name]
            parse_failed = False
            if name in props and props[name] is None:
                parse_failed = True  # the caller lists Connect's "Null value" error for it
            elif name in props:
                try:
                    cv.value = parse_value(key, props[name])
                except Invalid as e:
                    cv.errors.append(message(name, props[name], e))
                    parse_failed = True
            elif key.required:
                cv.errors.append(f'Missing required configuration "{name}" which has no default value.')
                parse_failed = True
            else:
                cv.value = key.default
            if key.validator is not None and not parse_failed:
                try:
                    key.validator(name, cv.value)
                except Invalid as e:
                    cv.errors.append(message(name, cv.value if e.value is None else e.value, e))
            parsed[name] = cv.value
        for name, key in self.keys.items():
            if key.recommender is not None:
                values[name].recommended_values = list(key.recommender(name, parsed))
        return values

    def parse(self, props: Mapping[str, Any], what: str = "configuration") -> dict[str, Any]:
        """The parsed values, or :class:`ConfigError` listing every problem per key."""
        values = self.validate_all(props)
        errors = {n: v.errors for n, v in values.items() if v.errors}
        if errors:
            raise config_error(what, errors)
        return {n: v.value for n, v in values.items()}


def config_error(what: str, errors: Mapping[str, list[str]]) -> ConfigError:
    count = sum(len(m) for m in errors.values())
    lines = "\n".join(m for ms in errors.values() for m in ms)
    return ConfigError(f"{what} is invalid and contains the following {count} error(s):\n{lines}",
                       errors={k: list(v) for k, v in errors.items()})


def message(name: str, value: Any, e: Invalid) -> str:
    """Kafka's ``ConfigException(name, value, message)`` text."""
    if e.whole:
        return e.message
    return f"Invalid value {java_str(value)} for configuration {name}: {e.message}"


# -------------------------------------------------------------------------------------- parsing
_INT_RANGES = {Type.INT: 32, Type.SHORT: 16, Type.LONG: 64}
_INTEGER = re.compile(r"[+-]?\d+")
_COMMA = re.compile(r"\s*,\s*")


def parse_value(key: ConfigKey, value: Any) -> Any:
    """Kafka's ``ConfigDef.parseType``, with CLASS names resolved in the key's registry."""
    t = key.type
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else None
    if t == Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise Invalid("Expected value to be either true or false")
    if t in (Type.STRING, Type.PASSWORD):
        if text is None:
            raise Invalid(f"Expected value to be a string, but it was a {_java_type(value)}")
        return Password(text) if t == Type.PASSWORD else text
    if t in _INT_RANGES:
        bits = _INT_RANGES[t]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise Invalid(f"Expected value to be a {bits}-bit integer, but it was a {_java_type(value)}")
        if isinstance(value, str):
            if not _INTEGER.fullmatch(text):
                raise Invalid(f"Not a number of type {t}")
            value = int(text)
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise Invalid(f"Not a number of type {t}")
        return value
    if t == Type.DOUBLE:
        try:
            return float(text if text is not None else value)
        except (TypeError, ValueError):
            raise Invalid(f"Not a number of type {t}") from None
    if t == Type.LIST:
        if isinstance(value, (list, tuple)):
            return list(value)
        if text is None:
            raise Invalid("Expected a comma separated list.")
        return [] if not text else _COMMA.split(text)
    if t == Type.CLASS:
        if text is None:
            raise Invalid("Expected a Class instance or class name.")
        plugin = key.plugins.get(text) if key.plugins is not None else None
        if key.plugins is not None and plugin is None:
            raise Invalid(f"Class {value} could not be found.")
        return plugin.class_name if plugin is not None else text
    raise ValueError(f"unknown config type {t}")


def to_string(value: Any, type_: str | None) -> str | None:
    """Kafka's ``ConfigDef.convertToString``: how values appear in the validate response."""
    if value is None:
        return None
    if type_ == Type.LIST and isinstance(value, (list, tuple)):
        return ",".join(java_str(v) for v in value)
    return java_str(value)


def java_str(value: Any) -> str:
    """``String.valueOf`` of the Java value Kafka would hold: ``true``, ``[a, b]``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def _java_type(value: Any) -> str:
    return {bool: "java.lang.Boolean", int: "java.lang.Long", float: "java.lang.Double",
            list: "java.util.List", dict: "java.util.Map"}.get(type(value), type(value).__name__)


__all__ = ["NO_DEFAULT", "ConfigDef", "ConfigKey", "ConfigValue", "Importance", "Invalid",
           "Password", "Plugin", "PluginRegistry", "Type", "Width", "all_of", "at_least", "between",
           "config_error", "java_str", "non_empty_string", "non_empty_string_without_control_chars", "one_of",
           "parse_value", "regex", "to_string", "unique_aliases"]
