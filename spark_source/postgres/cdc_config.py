"""The CDC envelope's options under Debezium's names, read and checked once."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from spark_source.postgres import logical_messages
from spark_source.postgres.column_lists import ColumnLists
from spark_source.postgres.type_modes import PLACEHOLDER, CdcConfigError, TypeModes, placeholder_bytes

VERSION = "riverlog-0.1.0"
"""``source.version``: the producer of the events (Riverlog, not a Debezium release)."""


TOPIC_NAME = re.compile(r"[a-zA-Z0-9_.\-]+")
"""``CommonConnectorConfig.TOPIC_NAME_PATTERN``: what ``topic.prefix`` may hold."""


def _mode(options: dict, option: str, default: str) -> str:
    """An enumerated mode, trimmed and in any case, as Debezium's ``…HandlingMode.parse`` reads it."""
    return str(options.get(option, default)).strip().lower()


def _skipped(value: Any) -> frozenset:
    """``skipped.operations`` as ``CommonConnectorConfig.validateSkippedOperation`` checks it: any of
    r, c, u, d, t, or ``none`` alone. ``r`` skips nothing here, as in Debezium: only streamed
    changes are filtered (``EventDispatcher.dispatchDataChangeEvent``), never snapshot rows."""
    parts = [s.strip() for s in str(value).split(",") if s.strip()]
    bad = sorted(set(parts) - {"r", "c", "u", "d", "t", "none"})
    if bad:
        raise CdcConfigError(f"skipped.operations has {bad}; allowed: r, c, u, d, t, none",
                             option="skipped.operations")
    if "none" in parts and len(set(parts)) > 1:
        raise CdcConfigError("skipped.operations: 'none' cannot be specified with other skipped operation types",
                             option="skipped.operations")
    return frozenset(parts) - {"none"}


def _placeholder(value: str) -> str:
    placeholder_bytes(value)       # a malformed 'hex:' fails the start, naming the option
    return value


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
    skip_messages_without_change: bool = False
    columns: ColumnLists = ColumnLists()

    @classmethod
    def from_options(cls, options: dict, names_keep_case: bool = True) -> "CdcConfig":
        """Debezium's option names: ``topic.prefix``, ``database.dbname``, ``decimal.handling.mode``,
        ``time.precision.mode``, ``binary.handling.mode``, ``interval.handling.mode``,
        ``money.fraction.digits``, ``hstore.handling.mode`` (json or map), ``unavailable.value.placeholder``, ``tombstones.on.delete``,
        ``provide.transaction.metadata``, ``topic.transaction``, ``skipped.operations`` (c,u,d,t or
        none; default t), ``schemas.enable`` (JsonConverter's, for key and value),
        the modes trimmed and in any case, ``topic.prefix`` of Kafka's topic characters only,
        ``message.prefix.include.list`` / ``message.prefix.exclude.list`` (regular expressions),
        ``skip.messages.without.change`` (false), ``column.include.list`` / ``column.exclude.list``
        and ``message.key.columns`` (:mod:`column_lists`), the column mappers
        ``column.truncate.to.<N>.chars``, ``column.mask.with.<N>.chars`` and
        ``column.mask.hash[.v2].<algorithm>.with.salt.<salt>``, ``column.propagate.source.type``,
        ``datatype.propagate.source.type`` (:mod:`column_mappers`; with
        ``names_keep_case`` False the names were lower-cased on the way, as Spark passes them)."""
        get = options.get
        prefix = get("topic.prefix")
        if not prefix:
            raise CdcConfigError("topic.prefix is required (it names the topics: <topic.prefix>.<schema>.<table>)",
                                 option="topic.prefix")
        if not TOPIC_NAME.fullmatch(str(prefix)):
            raise CdcConfigError(f"topic.prefix={prefix!r} has invalid format (only the underscore, hyphen, dot and "
                                 "alphanumeric characters are allowed): set topic.prefix", option="topic.prefix")
        skipped = _skipped(get("skipped.operations", "t"))
        try:
            digits = int(get("money.fraction.digits", 2))
        except ValueError:
            raise CdcConfigError("money.fraction.digits must be an integer", option="money.fraction.digits") from None
        modes = TypeModes(_mode(options, "decimal.handling.mode", "precise"),
                          _mode(options, "time.precision.mode", "adaptive"),
                          _mode(options, "binary.handling.mode", "bytes"),
                          _mode(options, "interval.handling.mode", "numeric"), digits,
                          _mode(options, "hstore.handling.mode", "json"))
        include = logical_messages.patterns("message.prefix.include.list", get("message.prefix.include.list"))
        exclude = logical_messages.patterns("message.prefix.exclude.list", get("message.prefix.exclude.list"))
        if include and exclude:
            raise CdcConfigError("message.prefix.include.list and message.prefix.exclude.list cannot both be set",
                                 option="message.prefix.include.list")
        return cls(prefix, get("database.dbname", ""), modes,
                   _placeholder(get("unavailable.value.placeholder", PLACEHOLDER)),
                   _bool("tombstones.on.delete", get("tombstones.on.delete", True)),
                   _bool("provide.transaction.metadata", get("provide.transaction.metadata", False)),
                   get("topic.transaction", "transaction"), skipped,
                   _bool("schemas.enable", get("schemas.enable", True)),
                   message_prefix_include_list=include, message_prefix_exclude_list=exclude,
                   skip_messages_without_change=_bool("skip.messages.without.change",
                                                      get("skip.messages.without.change", False)),
                   columns=ColumnLists.from_options(get, tuple(options), names_keep_case))
