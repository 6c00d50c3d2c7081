"""``--property k=v`` values, read as Kafka's tools read them; ``.properties`` files are
:mod:`broker.config.properties`.

    property_args(["key.separator=:", "parse.key=true"])    # {"key.separator": ":", "parse.key": "true"}

``--property`` is ``CommandLineUtils.parseKeyValueArgs``: split at the first ``=``, nothing
trimmed (``key.separator= | `` keeps its spaces), a missing value is empty. Pure.
"""
from __future__ import annotations

import click

from broker.config.properties import parse_properties
from broker.config.properties import read_properties as _read

__all__ = ["parse_properties", "property_args", "read_properties"]


def property_args(values, option: str = "--property") -> dict[str, str]:
    """Repeated ``k=v`` option values as a dict, a later key winning; ``=v`` (no name) is refused."""
    out = {}
    for item in values:
        key, _, value = item.partition("=")
        if not key:
            raise click.BadParameter(f"{item!r} has no property name; use name=value", param_hint=f"'{option}'")
        out[key] = value
    return out


def read_properties(path: str) -> dict[str, str]:
    """A ``.properties`` file given to a command; a malformed one fails the command, naming it."""
    try:
        return _read(path)
    except ValueError as e:
        raise click.ClickException(f"{path}: {e}") from None
