"""``column.propagate.source.type`` / ``datatype.propagate.source.type``: a column's PostgreSQL type
in its field's schema parameters, as Debezium's ``PropagateSourceMetadataToSchemaParameter`` writes
them from the column its PostgreSQL connector builds out of a Relation message:

- ``__debezium.source.column.type``: the type's name (``pg_type.typname``: ``int4``, ``varchar``,
  ``bpchar``, ``_text`` for ``text[]``, a domain's or enum's own name) in upper case;
- ``__debezium.source.column.length``: pgjdbc's precision (:func:`column_mappers.source_length`:
  ``varchar(128)`` 128, ``numeric(5,2)`` 5, ``int4`` 10, ``text`` 2147483647);
- ``__debezium.source.column.scale``: pgjdbc's scale (``numeric(5,2)`` 2, ``float4`` 8, a
  timestamp's fractional digits, 6 without a modifier, 0 for most types);
- ``__debezium.source.column.name``: the column's name.

A domain reads length and scale from its base type and modifier, its name is its own. The snapshot
names a column as the stream does; Debezium's snapshot, read through JDBC's metadata, calls an
``int4``/``int8``/``int2`` column whose default is a sequence ``SERIAL``/``BIGSERIAL``/``SMALLSERIAL``.
A built-in type missing from :data:`BUILTIN_NAMES` gets no type parameter.
"""
from __future__ import annotations

from typing import Optional

from spark_source.postgres.types import ARRAY_ELEMENT, FLOAT4, FLOAT8, INTERVAL, NUMERIC, TIME, TIMESTAMP, \
    TIMESTAMPTZ, TIMETZ

TYPE, LENGTH, SCALE, NAME = ("__debezium.source.column.type", "__debezium.source.column.length",
                             "__debezium.source.column.scale", "__debezium.source.column.name")
BUILTIN_NAMES = {
    16: "bool", 17: "bytea", 18: "char", 19: "name", 20: "int8", 21: "int2", 22: "int2vector", 23: "int4",
    24: "regproc", 25: "text", 26: "oid", 27: "tid", 28: "xid", 29: "cid", 30: "oidvector", 114: "json",
    142: "xml", 600: "point", 601: "lseg", 602: "path", 603: "box", 604: "polygon", 628: "line", 650: "cidr",
    700: "float4", 701: "float8", 718: "circle", 774: "macaddr8", 790: "money", 829: "macaddr", 869: "inet",
    1042: "bpchar", 1043: "varchar", 1082: "date", 1083: "time", 1114: "timestamp", 1184: "timestamptz",
    1186: "interval", 1266: "timetz", 1560: "bit", 1562: "varbit", 1700: "numeric", 1790: "refcursor",
    2205: "regclass", 2206: "regtype", 2950: "uuid", 2970: "txid_snapshot", 3220: "pg_lsn", 3614: "tsvector",
    3615: "tsquery", 3802: "jsonb", 4072: "jsonpath", 3904: "int4range", 3906: "numrange", 3908: "tsrange",
    3910: "tstzrange", 3912: "daterange", 3926: "int8range", 5069: "xid8"}
"""``pg_type.typname`` of the built-in types (oids below 16384 are fixed across PostgreSQL versions)."""
_ARRAYS = {**ARRAY_ELEMENT, 1017: 600, 1018: 601, 1019: 602, 1020: 603, 1027: 604, 629: 628, 719: 718,
           3643: 3614, 3645: 3615, 4073: 4072, 1011: 28, 1012: 29, 1010: 27, 2201: 1790, 2210: 2205, 2211: 2206,
           3221: 3220, 2949: 2970, 271: 5069, 1006: 22, 1013: 30, 1008: 24}


def type_name(oid: int, types=None) -> Optional[str]:
    """``pg_type.typname`` of a column's own type (an array's is ``_`` + its element's)."""
    if oid in BUILTIN_NAMES:
        return BUILTIN_NAMES[oid]
    if oid in _ARRAYS and _ARRAYS[oid] in BUILTIN_NAMES:
        return "_" + BUILTIN_NAMES[_ARRAYS[oid]]
    t = types.get(oid) if types is not None else None
    return t.name if t is not None else None


def source_scale(oid: int, typmod: int) -> int:
    """pgjdbc's ``TypeInfoCache.getScale`` of the root type (an array's: its element's)."""
    oid = ARRAY_ELEMENT.get(oid, oid)
    if oid in (FLOAT4, FLOAT8):
        return 8 if oid == FLOAT4 else 17
    if oid == NUMERIC:
        return 0 if typmod == -1 else (typmod - 4) & 0xFFFF
    if oid in (TIME, TIMETZ, TIMESTAMP, TIMESTAMPTZ):
        return 6 if typmod == -1 else typmod
    if oid == INTERVAL:
        return 6 if typmod == -1 else typmod & 0xFFFF
    return 0


def parameters(column: str, name: Optional[str], length: int, scale: int) -> dict:
    """The parameters ``alterFieldSchema`` adds, in its order (length left out when unset, -1)."""
    out = {} if name is None else {TYPE: name.upper()}
    if length != -1:
        out[LENGTH] = str(length)
    out[SCALE] = str(scale)
    out[NAME] = column
    return out
