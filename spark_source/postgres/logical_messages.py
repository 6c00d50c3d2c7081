"""Debezium's logical decoding message events: ``pg_logical_emit_message(transactional, prefix,
content)`` as an ``op: "m"`` record on ``<topic.prefix>.message``.

The key is ``{"prefix"}`` (``io.debezium.connector.postgresql.MessageKey``); the value is
``{"op": "m", "ts_ms", "source", "message": {"prefix", "content"}}``
(``io.debezium.connector.postgresql.MessageValue``; unlike a change event's envelope it has no
``ts_us`` / ``ts_ns``, as ``PostgresSchemaFactory`` builds it), ``content`` under ``binary.handling.mode``.
A transactional message carries its transaction's ``txId`` and commit time; a non-transactional
one has ``txId`` null and the connector's clock in ``source.ts_ms``, as Debezium documents. Schema
and table are "". Prefixes are chosen with ``message.prefix.include.list`` /
``message.prefix.exclude.list`` (comma-separated regular expressions matching the whole prefix,
case ignored);
Riverlog's own heartbeats (prefix ``riverlog.heartbeat``) are never events.
"""
from __future__ import annotations

import re
from typing import Optional

from spark_source.postgres import regex_lists
from spark_source.postgres.type_modes import CdcConfigError

HEARTBEAT_PREFIX = "riverlog.heartbeat"
TOPIC_SUFFIX = "message"

KEY_SCHEMA = {"type": "struct", "fields": [{"type": "string", "optional": True, "field": "prefix"}],
              "optional": False, "name": "io.debezium.connector.postgresql.MessageKey", "version": 1}


def patterns(option: str, text: Optional[str]) -> tuple:
    """A Debezium list option: comma-separated regular expressions, each matched against the whole
    name, ignoring case (:mod:`regex_lists`)."""
    out = []
    for part in regex_lists.split(text):
        try:
            out.extend(regex_lists.compile_all([part]))
        except re.error as e:
            raise CdcConfigError(f"{option}: {part!r} is not a regular expression ({e})", option=option) from None
    return tuple(out)


def wanted(prefix: str, include: tuple, exclude: tuple) -> bool:
    if prefix == HEARTBEAT_PREFIX:
        return False
    if include:
        return any(p.fullmatch(prefix) for p in include)
    return not any(p.fullmatch(prefix) for p in exclude)


def value_schema(source_schema: dict, content_type: str) -> dict:
    block = {"type": "struct", "fields": [{"type": "string", "optional": True, "field": "prefix"},
                                          {"type": content_type, "optional": True, "field": "content"}],
             "optional": False, "name": "io.debezium.connector.postgresql.Message", "version": 1, "field": "message"}
    return {"type": "struct", "fields": [
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
        source_schema, block], "optional": False, "name": "io.debezium.connector.postgresql.MessageValue",
        "version": 1}


def value_payload(source: dict, prefix: str, content: str, now_us: int) -> dict:
    return {"op": "m", "ts_ms": now_us // 1000, "source": source, "message": {"prefix": prefix, "content": content}}
