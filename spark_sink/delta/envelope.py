"""Debezium JSON ``{"schema", "payload"}`` envelopes decoded with the schema parsed once per batch.

Pure. The schema part of a record is most of its bytes and the same text in every record of a
table (until its schema changes), so parsing it for every record is most of a batch's decoding.
:class:`EnvelopeDecoder` remembers the exact leading text ``{"schema":<schema>,"payload":`` of the
envelopes it has parsed; a record that starts with one of them has only its payload parsed, and
must end with the envelope's ``}`` (JSON whitespace around it allowed), else it is parsed whole.
A record so read is the same JSON document as the whole parse reads, so the result is the same;
anything else (another layout, bad JSON, another encoding) takes the whole parse, with its errors.

The schema a remembered prefix yields is one object shared by the records that carry it: callers
must not modify it (and may memoise on its identity, :meth:`ChangeParser._struct`).
"""
from __future__ import annotations

import json
import re
from typing import Any

_DECODER = json.JSONDecoder()
_HEAD = re.compile(r'\{[ \t\n\r]*"schema"[ \t\n\r]*:[ \t\n\r]*')
_PAYLOAD = re.compile(r'[ \t\n\r]*,[ \t\n\r]*"payload"[ \t\n\r]*:')
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_TAIL = re.compile(r"[ \t\n\r]*\}[ \t\n\r]*")
MAX_PREFIXES = 32


class EnvelopeDecoder:
    """``decode(raw) -> (schema | None, payload)``, as ``json.loads`` and the envelope check read it."""

    def __init__(self) -> None:
        self._prefixes: dict[bytes, Any] = {}   # '{"schema":<text>,"payload":' -> the parsed schema

    def decode(self, raw) -> tuple[Any, Any]:
        """Raises what ``json.loads(raw)`` raises for text that is not JSON."""
        if type(raw) is bytes and raw[:1] == b"{":
            for prefix, schema in self._prefixes.items():
                if raw.startswith(prefix):
                    found = _payload(raw, len(prefix))
                    if found is not _MISS:
                        return schema, found
                    break
        doc = json.loads(raw)
        if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
            if type(raw) is bytes and raw[:1] == b"{":
                self._learn(raw)
            return doc["schema"], doc["payload"]
        return None, doc

    def _learn(self, raw: bytes) -> None:
        """Remember the envelope's leading text, when it is laid out as ``{"schema":...,"payload":``."""
        try:
            text = raw.decode("utf-8", "surrogatepass")
            head = _HEAD.match(text)
            if head is None:
                return
            schema, end = _DECODER.raw_decode(text, head.end())
        except (ValueError, RecursionError):
            return
        separator = _PAYLOAD.match(text, end)
        if separator is None:
            return
        prefix = text[:separator.end()].encode("utf-8", "surrogatepass")
        if raw.startswith(prefix) and prefix not in self._prefixes:
            if len(self._prefixes) >= MAX_PREFIXES:
                self._prefixes.clear()
            self._prefixes[prefix] = schema


_MISS = object()


def _payload(raw: bytes, start: int) -> Any:
    """The JSON value from ``start`` when only the envelope's closing brace follows it, else _MISS."""
    try:
        text = raw[start:].decode("utf-8", "surrogatepass")
        value, end = _DECODER.raw_decode(text, _WHITESPACE.match(text).end())
    except (ValueError, RecursionError):
        return _MISS
    return value if _TAIL.fullmatch(text, end) else _MISS
