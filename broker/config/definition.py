"""The typed-configuration machinery every Riverlog config table is built with: a key, a table of
keys, and the frozen values parsed from it.

A :class:`ConfigDef` lists keys with their type, default, validator and a one-line doc; ``parse``
turns user input (strings from a properties file or the CLI, or Python values) into a frozen
:class:`Config`, raising :class:`InvalidConfigError` that names the offending key and the allowed
range. Ranges follow Kafka's types: a key Kafka declares INT (sizes, counts, most timeouts) stays
within int32, SHORT (replication factors) within int16, and every integer within int64, so no
value can overflow where it ends up (a batch length, an int32 field on the wire, a deadline).
Kept apart from the tables (``broker.config``, ``broker.config.topic``, ``broker.client.config``)
so that each reads as a list of keys.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from broker.errors import InvalidConfigError

LONG_MIN, LONG_MAX = -2**63, 2**63 - 1
INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: type
    default: Any
    doc: str
    validator: Callable[[Any], str | None] | None = None
    broker_default: str | None = None  # topic keys: the broker key that supplies the default


def at_least(low):
    return lambda v: None if v >= low else f"must be at least {low}"


def between(low, high):
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def one_of(*choices):
    return lambda v: None if v in choices else f"must be one of {', '.join(map(str, choices))}"


def _coerce(key: ConfigKey, value: Any) -> Any:
    if key.type is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise ValueError("must be true or false")
    if key.type is int:
        if isinstance(value, bool):
            raise ValueError("must be an integer")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return int(str(value).strip()) if not isinstance(value, int) else value
    if key.type is float:
        return float(value)
    if key.type is str:
        return str(value).strip()
    return value


def _out_of_type_range(key: ConfigKey, value: Any) -> str | None:
    if key.type is int and value > LONG_MAX:
        return f"must be at most {LONG_MAX} (a 64-bit integer)"
    if key.type is int and value < LONG_MIN:
        return f"must be at least {LONG_MIN} (a 64-bit integer)"
    if key.type is float and not math.isfinite(value):
        return "must be a finite number"
    return None


class Config(Mapping):
    """An immutable, validated set of configuration values (overrides remembered separately)."""

    def __init__(self, definition: "ConfigDef", values: dict, overrides: dict):
        self._definition = definition
        self._values = MappingProxyType(values)
        self.overrides = MappingProxyType(overrides)

    def __getitem__(self, name):
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        return f"Config({dict(self.overrides)!r})"

    def with_overrides(self, overrides: Mapping, *, defaults: Mapping | None = None) -> "Config":
        return self._definition.parse(overrides, defaults=defaults)


class ConfigDef:
    def __init__(self, what: str, keys: Iterable[ConfigKey], refused: Mapping[str, str] | None = None,
                 check: Callable[[Mapping], "InvalidConfigError | None"] | None = None):
        """``refused``: names Kafka has that are not supported here, each with the reason and what
        to do instead; setting one fails with that reason rather than being accepted and ignored.
        ``check``: a rule across keys, given the parsed values (Kafka's ``validateValues``)."""
        self.what = what
        self.keys = {k.name: k for k in keys}
        self.refused = dict(refused or {})
        self.check = check

    def parse(self, values: Mapping | None = None, *, defaults: Mapping | None = None,
              ignore: Iterable[str] = (), check: bool = True) -> Config:
        """Validate ``values``; ``defaults`` replaces built-in defaults (e.g. from the broker);
        ``check=False`` skips the rule across keys (Kafka's ``LogConfig.fromProps`` on load)."""
        values = dict(values or {})
        ignored = set(ignore)
        out, overrides = {}, {}
        for name in values:
            if name in self.refused and name not in ignored:
                raise InvalidConfigError(f"{self.what} configuration '{name}' is not supported: {self.refused[name]}",
                                         config=name)
            if name not in self.keys and name not in ignored:
                raise InvalidConfigError(f"unknown {self.what} configuration '{name}'", config=name)
        for name, key in self.keys.items():
            if name in values and values[name] is not None:
                raw = values[name]
                overrides[name] = self._check(key, raw)
                out[name] = overrides[name]
            elif defaults is not None and name in defaults:
                out[name] = defaults[name]
            else:
                out[name] = key.default
        problem = self.check(out) if self.check is not None and check else None
        if problem is not None:
            raise problem
        return Config(self, out, overrides)

    def _check(self, key: ConfigKey, raw: Any) -> Any:
        try:
            value = _coerce(key, raw)
        except (TypeError, ValueError) as e:
            raise InvalidConfigError(
                f"invalid value {raw!r} for {self.what} configuration '{key.name}': "
                f"{e if 'must' in str(e) else 'must be of type ' + key.type.__name__}",
                config=key.name) from None
        problem = (key.validator(value) if key.validator else None) or _out_of_type_range(key, value)
        if problem:
            raise InvalidConfigError(
                f"invalid value {raw!r} for {self.what} configuration '{key.name}': {problem}",
                config=key.name)
        return value

    def describe(self) -> list[ConfigKey]:
        return sorted(self.keys.values(), key=lambda k: k.name)
