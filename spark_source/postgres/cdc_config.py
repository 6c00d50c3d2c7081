"""The CDC envelope's options under Debezium's names, read and checked once."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_source.postgres import logical_messages
from spark_source.postgres.types import PLACEHOLDER, CdcConfigError, TypeModes

VERSION = "riverlog-0.1.0"
"""``source.version``: the producer of the events (Riverlog, not a Debezium release)."""


def _bool(option: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise CdcConfigError(f"{option}={value!r} is not true or false", option=option, value=value)
    return text == "true"


@dataclass(frozen=True)
class CdcConfig:
    """The envelope's options under Debezium's names (``from_options`` reads them)."""
    topic_prefix: str
    database: str
    modes: TypeModes = TypeModes()
    unavailable_value_placeholder: str = PLACEHOLDER
    tombstones_on_delete: bool = True
    provide_transaction_metadata: bool = False
    topic_transaction: str = "transaction"
    skipped_operations: frozenset = frozenset({"t"})
    schemas_enable: bool = True
    version: str = VERSION
    message_prefix_include_list: tuple = ()
    message_prefix_exclude_list: tuple = ()

    @classmethod
    def from_options(cls, options: dict) -> "CdcConfig":
        """Debezium's option names: ``topic.prefix``, ``database.dbname``, ``decimal.handling.mode``,
        ``time.precision.mode``, ``binary.handling.mode``, ``interval.handling.mode``,
        ``money.fraction.digits``, ``hstore.handling.mode`` (json or map), ``unavailable.value.placeholder``, ``tombstones.on.delete``,
        ``provide.transaction.metadata``, ``topic.transaction``, ``skipped.operations`` (c,u,d,t or
        none; default t), ``schemas.enable`` (JsonConverter's, for key and value),
        ``message.prefix.include.list`` / ``message.prefix.exclude.list`` (regular expressions)."""
        get = options.get
        prefix = get("topic.prefix")
        if not prefix:
            raise CdcConfigError("topic.prefix is required (it names the topics: <topic.prefix>.<schema>.<table>)",
                                 option="topic.prefix")
        skipped = {s.strip() for s in str(get("skipped.operations", "t")).split(",") if s.strip()}
        skipped.discard("none")
        bad = skipped - {"c", "u", "d", "t"}
        if bad:
            raise CdcConfigError(f"skipped.operations has {sorted(bad)}; allowed: c, u, d, t, none",
                                 option="skipped.operations")
        try:
            digits = int(get("money.fraction.digits", 2))
        except ValueError:
            raise CdcConfigError("money.fraction.digits must be an integer", option="money.fraction.digits") from None
        modes = TypeModes(get("decimal.handling.mode", "precise"), get("time.precision.mode", "adaptive"),
                          get("binary.handling.mode", "bytes"), get("interval.handling.mode", "numeric"), digits,
                          get("hstore.handling.mode", "json"))
        include = logical_messages.patterns("message.prefix.include.list", get("message.prefix.include.list"))
        exclude = logical_messages.patterns("message.prefix.exclude.list", get("message.prefix.exclude.list"))
        if include and exclude:
            raise CdcConfigError("message.prefix.include.list and message.prefix.exclude.list cannot both be set",
                                 option="message.prefix.include.list")
        return cls(prefix, get("database.dbname", ""), modes,
                   get("unavailable.value.placeholder", PLACEHOLDER),
                   _bool("tombstones.on.delete", get("tombstones.on.delete", True)),
                   _bool("provide.transaction.metadata", get("provide.transaction.metadata", False)),
                   get("topic.transaction", "transaction"), frozenset(skipped),
                   _bool("schemas.enable", get("schemas.enable", True)),
                   message_prefix_include_list=include, message_prefix_exclude_list=exclude)
