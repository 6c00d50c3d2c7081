"""Debezium's shapes for PostgreSQL types that are neither numbers, text nor time: enums,
``hstore``, ``ltree`` and ``point`` (PostgresValueConverter.schemaBuilder / converter).

- an enum is a string named ``io.debezium.data.Enum`` whose ``allowed`` parameter lists its
  labels in ``enumsortorder``, joined by ``,``; an enum array is an array of those;
- ``hstore`` follows ``hstore.handling.mode``: ``json`` (default) a ``io.debezium.data.Json``
  string ``{"a":"1","b c":null}``, ``map`` a Connect ``map<string, string>`` (keys required,
  values optional). Both list the keys in the order of the ``java.util.HashMap`` pgjdbc's
  ``HStoreConverter.fromString`` parses into, so the bytes equal Debezium's;
- ``ltree`` is a string named ``io.debezium.data.Ltree``;
- ``point`` is ``io.debezium.data.geometry.Point``: ``{x, y, wkb, srid}`` with ``wkb`` the
  21-byte little-endian WKB point (``Point.buildWKBPoint``) and ``srid`` null (``Point.createValue``).
"""
from __future__ import annotations

import base64
import json
import re
import struct
from typing import Any

HSTORE_MODES = ("json", "map")
POINT = 600

POINT_SCHEMA = {"type": "struct", "fields": [
    {"type": "float64", "optional": False, "field": "x"},
    {"type": "float64", "optional": False, "field": "y"},
    {"type": "bytes", "optional": True, "field": "wkb"},
    {"type": "int32", "optional": True, "field": "srid"}],
    "name": "io.debezium.data.geometry.Point", "version": 1, "doc": "Geometry (POINT)"}

_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def enum_schema(labels: tuple) -> dict:
    return {"type": "string", "name": "io.debezium.data.Enum", "version": 1, "parameters": {"allowed": ",".join(labels)}}


LTREE_SCHEMA = {"type": "string", "name": "io.debezium.data.Ltree", "version": 1}


def hstore_schema(mode: str) -> dict:
    if mode == "map":
        return {"type": "map", "keys": {"type": "string", "optional": False},
                "values": {"type": "string", "optional": True}}
    return {"type": "string", "name": "io.debezium.data.Json", "version": 1}


def hstore_converter(mode: str):
    """hstore's output text (``"a"=>"1", "b c"=>NULL``) as ``mode`` writes it."""
    if mode == "map":
        return parse_hstore
    return lambda text: _JSON.encode(parse_hstore(text))


def hstore_placeholder(placeholder: str, mode: str) -> Any:
    """``UnchangedToastedPlaceholder``'s hstore value, ``{placeholder: placeholder}`` (as JSON in json mode)."""
    value = {placeholder: placeholder}
    return value if mode == "map" else _JSON.encode(value)


_HSTORE_ITEM = re.compile(r'\s*"((?:[^"\\]|\\.)*)"\s*=>\s*(?:"((?:[^"\\]|\\.)*)"|(NULL))\s*(,|$)', re.S)
_UNESCAPE = re.compile(r"\\(.)", re.S)


def parse_hstore(text: str) -> dict:
    """hstore_out's text as a dict in Java ``HashMap`` iteration order."""
    pairs, pos = [], 0
    while pos < len(text) and text[pos:].strip():
        match = _HSTORE_ITEM.match(text, pos)
        if match is None:
            raise ValueError(f"not hstore output at offset {pos}")
        key = _UNESCAPE.sub(r"\1", match.group(1))
        value = None if match.group(3) else _UNESCAPE.sub(r"\1", match.group(2))
        pairs.append((key, value))
        pos = match.end()
    return dict(pairs[i] for i in java_hashmap_order([k for k, _ in pairs]))


def _java_hash(s: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, as an unsigned 32-bit number."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: list) -> list:
    """Indexes of distinct ``keys`` in the order a ``java.util.HashMap`` filled in that order
    iterates them: by bucket (``(h ^ h >>> 16) & (capacity - 1)``, the capacity doubling from 16
    while the size exceeds 3/4 of it), then by insertion within a bucket (a resize keeps it)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(k: str) -> int:
        h = _java_hash(k)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(range(len(keys)), key=lambda i: (bucket(keys[i]), i))


def wkb_point(x: float, y: float) -> bytes:
    """Debezium's ``Point.buildWKBPoint``: byte order 1 (little-endian), type 1, x, y."""
    return struct.pack("<BIdd", 1, 1, x, y)


def point(text: str) -> dict:
    """A point's output text ``(1.5,2)`` as Debezium's Point struct."""
    x, y = (float(p) for p in text.strip().strip("()").split(","))
    return {"x": x, "y": y, "wkb": base64.b64encode(wkb_point(x, y)).decode("ascii"), "srid": None}


def special(oid: int, hstore_mode: str, placeholder: str, registry=None) -> tuple | None:
    """(schema body, converter, unchanged-TOAST value[, required-field fallback]) for a point, an
    enum or an extension type Debezium knows by name (its TypeRegistry's ``hstoreOid``/``ltreeOid``),
    or None. ``registry`` is the catalog's :class:`~spark_source.postgres.type_registry.TypeRegistry`."""
    if oid == POINT:
        return dict(POINT_SCHEMA), point, None
    t = registry.get(oid) if registry is not None else None
    if t is None:
        return None
    if t.kind == "e":
        return enum_schema(t.labels), str, placeholder
    if t.name == "hstore":
        # a required hstore's fallback: Debezium's convertHstoreToJsonString gives "{}", the map mode an empty map
        return (hstore_schema(hstore_mode), hstore_converter(hstore_mode), hstore_placeholder(placeholder, hstore_mode),
                "{}" if hstore_mode == "json" else None)
    if t.name == "ltree":
        return dict(LTREE_SCHEMA), str, placeholder
    return None
