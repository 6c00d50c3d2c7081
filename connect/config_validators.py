"""Kafka's config validators (``ConfigDef.Range``, ``ValidString``, ``CompositeValidator``, ...)
and the :class:`Invalid` they raise.

A validator checks one parsed value and words its problem as Kafka's does; :mod:`connect.config_def`
prefixes "Invalid value X for configuration Y: ". They are kept apart from the key definitions so
a connector's config module can pick the checks it needs without the parsing machinery. Pure.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Validator = Callable[[str, Any], None]
"""``validator(name, parsed_value)``: raises :class:`Invalid`; gets None for an unset key without default."""


class Invalid(Exception):
    """Raised by a validator: ``message`` is the part after "Invalid value X for configuration Y: "."""

    def __init__(self, message: str, value: Any = None, whole: bool = False):
        super().__init__(message)
        self.message, self.value, self.whole = message, value, whole


def at_least(minimum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None:
            raise Invalid("Value must be non-null")
        if value < minimum:
            raise Invalid(f"Value must be at least {minimum}")
    return check


def between(minimum: int | float, maximum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        at_least(minimum)(name, value)
        if value > maximum:
            raise Invalid(f"Value must be no more than {maximum}")
    return check


def replication_factor(name: str, value: Any) -> None:
    """A topic's replication factor: positive, or -1 for the broker's ``default.replication.factor``."""
    if value is not None and value != -1 and value < 1:
        raise Invalid("Replication factor must be positive, or -1 to use the broker's default")


def one_of(*strings: str, case_insensitive: bool = False) -> Validator:
    """Kafka's ``ValidString.in`` / ``CaseInsensitiveValidString.in``."""
    def check(name: str, value: Any) -> None:
        allowed = [s.lower() for s in strings] if case_insensitive else list(strings)
        probe = value.lower() if case_insensitive and isinstance(value, str) else value
        if probe not in allowed:
            suffix = " (case insensitive)" if case_insensitive else ""
            raise Invalid(f"String must be one of{suffix}: {', '.join(strings)}")
    return check


def non_empty_string(name: str, value: Any) -> None:
    if value is not None and not value:
        raise Invalid("String may not be empty")


def non_empty_string_without_control_chars(name: str, value: Any) -> None:
    """Kafka's ``nonEmptyStringWithoutControlChars`` (connector names)."""
    if value is None:
        raise Invalid("Value must be non-null")
    non_empty_string(name, value)
    bad = [c for c in value if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f]
    if bad:
        raise Invalid("String may not contain control sequences but had the following ASCII chars: "
                      + ", ".join(str(ord(c)) for c in bad))


def unique_aliases(name: str, value: Any) -> None:
    """Kafka's alias validator for ``transforms`` and ``predicates``."""
    if value is None:
        raise Invalid("Value must be non-null")
    if len(value) > len(set(value)):
        raise Invalid("Duplicate alias provided.")


def regex(name: str, value: Any) -> None:
    if value:
        try:
            re.compile(value)
        except re.error as e:
            raise Invalid(f"Not a valid regular expression: {e}") from None


def all_of(*validators: Validator) -> Validator:
    """Kafka's ``CompositeValidator``: the first failure is reported."""
    def check(name: str, value: Any) -> None:
        for v in validators:
            v(name, value)
    return check

__all__ = ["Invalid", "Validator", "all_of", "at_least", "between", "non_empty_string",
           "non_empty_string_without_control_chars", "one_of", "regex", "replication_factor", "unique_aliases"]
