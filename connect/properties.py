"""Java's ``.properties`` format, as ``java.util.Properties.load`` reads it, for Kafka's
``worker.properties`` and connector ``.properties`` files; and connector files in either format.

    parse_properties("bootstrap.servers=127.0.0.1:9092\\n# a comment\\ngroup.id = connect")
    connector_file("file-source.json")      # ("file-source", {"name": ..., "connector.class": ...})

Keys end at the first unescaped ``=``, ``:`` or whitespace; ``#`` and ``!`` start comments; a line
ending in an odd number of backslashes continues on the next (leading whitespace dropped);
``\\t \\n \\r \\f \\uXXXX`` and ``\\<char>`` are unescaped. Pure.
"""
from __future__ import annotations

import json
from typing import Any

from connect.errors import ConfigError

__all__ = ["connector_file", "parse_properties", "read_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=:"
_WHITESPACE = " \t\f"


def _logical_lines(text: str):
    pending = None
    for raw in text.splitlines():
        line = raw.lstrip(_WHITESPACE)
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continues = trailing % 2 == 1
        part = line[:-1] if continues else line
        pending = part if pending is None else pending + part
        if not continues:
            yield pending
            pending = None
    if pending is not None:
        yield pending


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and len(text) >= i + 6:
            try:
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            except ValueError:
                raise ConfigError(f"Malformed \\uxxxx encoding in {text!r}") from None
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in _SEPARATORS or c in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(_WHITESPACE)
    if rest[:1] in tuple(_SEPARATORS):
        rest = rest[1:].lstrip(_WHITESPACE)
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Every key and value of a ``.properties`` text (a later key wins, as in Java)."""
    return dict(_split(line) for line in _logical_lines(text))


def read_properties(path: str) -> dict[str, str]:
    with open(path, encoding="utf-8") as f:        # Java 9+ reads properties files as UTF-8
        return parse_properties(f.read())


def connector_file(path: str) -> tuple[str, dict[str, Any], str | None]:
    """A connector config file: JSON (``{"name", "config", "initial_state"}`` as ``POST /connectors``
    takes it, or a flat config with ``name``) or ``.properties``, as ``connect-standalone`` accepts
    both; with the connector's name, config and initial state (None unless the JSON says: as
    Kafka's, the connector then starts without a target-state record, i.e. RUNNING)."""
    initial_state = None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json") or text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: expected a JSON object, {{\"name\": ..., \"config\": {{...}}}}")
        config = dict(doc["config"]) if isinstance(doc.get("config"), dict) else dict(doc)
        name = doc.get("name") or config.get("name")
        if isinstance(doc.get("config"), dict) and doc.get("initial_state") is not None:
            initial_state = str(doc["initial_state"]).strip().upper()
            if initial_state not in ("RUNNING", "PAUSED", "STOPPED"):
                raise ConfigError(f"{path}: initial_state {doc['initial_state']!r} is not RUNNING, PAUSED or STOPPED")
    else:
        config = parse_properties(text)
        name = config.get("name")
    if not name:
        raise ConfigError(f"{path} names no connector: add \"name\"")
    config.setdefault("name", name)
    if config["name"] != name:
        raise ConfigError(f"{path}: connector name configuration ({config['name']}) doesn't match "
                          f"the connector's name ({name})")
    return str(name), config, initial_state
