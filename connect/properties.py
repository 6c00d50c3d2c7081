"""Java's ``.properties`` format, as ``java.util.Properties.load`` reads it, for Kafka's
``worker.properties`` and connector ``.properties`` files; and connector files in either format.

    parse_properties("bootstrap.servers=127.0.0.1:9092\\n# a comment\\ngroup.id = connect")
    connector_file("file-source.json")      # ("file-source", {"name": ..., "connector.class": ...})

Keys end at the first unescaped ``=``, ``:`` or whitespace; ``#`` and ``!`` start comments; a line
ending in an odd number of backslashes continues on the next (leading whitespace dropped);
``\\t \\n \\r \\f \\uXXXX`` and ``\\<char>`` are unescaped (the reader is the broker's,
:mod:`broker.config.properties`). Pure.
"""
from __future__ import annotations

from typing import Any

from broker.config.properties import parse_properties as _parse
from connect.errors import ConfigError
from connect.java_text import config_text, json_loads

__all__ = ["connector_file", "parse_properties", "read_properties"]


def parse_properties(text: str) -> dict[str, str]:
    """Every key and value of a ``.properties`` text (a later key wins, as in Java); a malformed
    ``\\uxxxx`` escape is a :class:`ConfigError`."""
    try:
        return _parse(text)
    except ValueError as e:
        raise ConfigError(str(e)) from None


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
            doc = json_loads(text)
        except ValueError as e:
            raise ConfigError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: expected a JSON object, {{\"name\": ..., \"config\": {{...}}}}")
        # values as Jackson reads them into Map<String, String>: true, 1.50 (as POST /connectors)
        config = {k: config_text(v) for k, v in
                  (doc["config"] if isinstance(doc.get("config"), dict) else doc).items()}
        name = config_text(doc.get("name")) or config.get("name")
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
