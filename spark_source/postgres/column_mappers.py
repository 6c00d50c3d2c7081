"""Debezium's column mappers (``ColumnMappers``): options that rewrite a column's values in
``before`` / ``after`` and mark its field's schema. Each option's value is a column list (regular
expressions over ``<schema>.<table>.<column>``, as ``column.include.list``'s):

- ``column.truncate.to.<N>.chars`` (``TruncateColumn``): a value longer than N is cut to N — a
  string (a STRING field: text, json, uuid, a timestamptz's ISO text, …) in UTF-16 units, a byte
  array (an unnamed BYTES field: ``bytea`` under ``binary.handling.mode=bytes``) in bytes; other
  values are left alone. Only where the column's length (pgjdbc's precision: ``varchar(n)`` n,
  ``int4`` 10, text and most others 2147483647) is above N, and there the field gets
  ``"parameters": {"truncateLength": "N"}``, whatever its type.
- ``column.mask.with.<N>.chars`` (``MaskStrings``): N asterisks, NULL included.
- ``column.mask.hash.<algorithm>.with.salt.<salt>`` and ``column.mask.hash.v2.…`` (``MaskStrings``
  with a hash): the value's pseudonym (:mod:`column_masks`), cut to the column's length when it has
  one (``varchar(20)``: 20 hex digits); NULL stays NULL.

Both masks apply to text columns only (pgjdbc's CHAR/VARCHAR: ``text``, ``varchar``, ``char``,
``name``, ``"char"``, an enum, a domain over one); a matched column of another type keeps its values but
its field is marked ``"masked": "true"``, as ``alterFieldSchema`` does not look at the type. A
mapper sees the converted value, the TOAST placeholder included. The record key is never mapped.
- ``column.propagate.source.type`` (a column list) and ``datatype.propagate.source.type`` (a list
  matched against ``<schema>.<table>.<type name>``): the column's type, length, scale and name as
  schema parameters, values untouched (:mod:`source_types`).

One mapper per column: the first whose list matches, in ``ColumnMappers.create``'s order —
truncations, masks, V1 hashes, V2 hashes, ``column.propagate.source.type``,
``datatype.propagate.source.type`` — and by option name within a kind. Debezium registers the two
propagate options before the hashes, so there a column both match keeps its value unhashed; here
the hash wins (a column meant to be pseudonymized is never published as it is) and the field is
marked ``masked`` without the type parameters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from spark_source.postgres import column_masks, regex_lists, source_types
from spark_source.postgres.type_modes import CdcConfigError
from spark_source.postgres.types import ARRAY_ELEMENT, BIT, BOOL, BPCHAR, CHAR, DATE, FLOAT4, FLOAT8, INT2, INT4, \
    INT8, INTERVAL, NAME, NUMERIC, OID, TEXT, TIME, TIMESTAMP, TIMESTAMPTZ, TIMETZ, VARBIT, VARCHAR

TRUNCATE = re.compile(r"column\.truncate\.to\.(\d+)\.chars")
MASK = re.compile(r"column\.mask\.with\.(\d+)\.chars")
HASH = re.compile(r"column\.mask\.hash\.([^.]+)\.with\.salt\.(.+)")
HASH_V2 = re.compile(r"column\.mask\.hash\.v2\.([^.]+)\.with\.salt\.(.+)")
PROPAGATE = re.compile(r"column\.propagate\.source\.type")
PROPAGATE_BY_TYPE = re.compile(r"datatype\.propagate\.source\.type")
KINDS = ((TRUNCATE, "truncate"), (MASK, "mask"), (HASH, "hash"), (HASH_V2, "hash"), (PROPAGATE, "propagate"),
         (PROPAGATE_BY_TYPE, "propagate"))
"""The order the rules apply in: the first that matches a column wins (see the module on the hashes)."""
MASKABLE_OIDS = frozenset({TEXT, VARCHAR, BPCHAR, NAME, CHAR})
"""text, varchar, bpchar, name and "char": the built-in types pgjdbc reports as CHAR or VARCHAR."""
UNKNOWN_LENGTH = 2 ** 31 - 1
"""pgjdbc's ``unknownLength`` (``Integer.MAX_VALUE``): the length of text, bytea, json, …"""
JAVA_INT_MAX = 2 ** 31 - 1


def is_option(key: str) -> bool:
    """Whether ``key`` names a column mapper option (Debezium's patterns, case as given)."""
    return any(pattern.fullmatch(key) for pattern, _ in KINDS)


def is_text(root_oid: int, types=None) -> bool:
    """Whether Debezium's ``MaskStrings`` masks a column of this (root) type: pgjdbc's CHAR and
    VARCHAR, an enum included (``TypeRegistry.SqlTypeMapper`` maps ``typtype 'e'`` to VARCHAR)."""
    if root_oid in MASKABLE_OIDS:
        return True
    t = types.get(root_oid) if types is not None else None
    return t is not None and t.kind == "e"


def _display_size(oid: int, typmod: int) -> int:
    """pgjdbc's ``TypeInfoCache.getDisplaySize`` for the types whose precision is one."""
    if oid in (TIME, TIMETZ, TIMESTAMP, TIMESTAMPTZ):
        second = {-1: 7, 0: 0, 1: 3}.get(typmod, typmod + 1)
        return {TIME: 8, TIMETZ: 14, TIMESTAMP: 22, TIMESTAMPTZ: 28}[oid] + second
    return {DATE: 13, INTERVAL: 49, NUMERIC: 131089}.get(oid, UNKNOWN_LENGTH)


def source_length(oid: int, typmod: int) -> int:
    """A column's length as Debezium's PostgreSQL connector reads it (pgjdbc's ``getPrecision``,
    its display size where that is 0); ``oid``/``typmod`` are the root type's (a domain's base)."""
    oid = ARRAY_ELEMENT.get(oid, oid)
    fixed = {INT2: 5, OID: 10, INT4: 10, INT8: 19, FLOAT4: 8, FLOAT8: 17, CHAR: 1, BOOL: 1}
    if oid in fixed:
        return fixed[oid]
    if oid == NUMERIC:
        return _display_size(oid, typmod) if typmod == -1 else ((typmod - 4) & 0xFFFF0000) >> 16
    if oid in (BPCHAR, VARCHAR):
        return UNKNOWN_LENGTH if typmod == -1 else typmod - 4
    if oid in (DATE, TIME, TIMETZ, INTERVAL, TIMESTAMP, TIMESTAMPTZ):
        return _display_size(oid, typmod)
    if oid == BIT or (oid == VARBIT and typmod != -1):
        return typmod
    return UNKNOWN_LENGTH


@dataclass(frozen=True)
class SourceColumn:
    """What a mapper reads of a column: its name, its type's name (``pg_type.typname``, None if
    unknown), pgjdbc's length and scale of its root type, whether the masks apply (:func:`is_text`)."""
    name: str
    type_name: Optional[str]
    length: int
    scale: int
    text: bool

    @classmethod
    def of(cls, column, types=None) -> "SourceColumn":
        """From a Relation column; ``types`` (a TypeRegistry) resolves domains and enums."""
        oid, typmod = (column.type_oid, column.type_modifier) if types is None else \
            types.root(column.type_oid, column.type_modifier)
        return cls(column.name, source_types.type_name(column.type_oid, types), source_length(oid, typmod),
                   source_types.source_scale(oid, typmod), is_text(oid, types))


@dataclass(frozen=True)
class ColumnMapper:
    """One option: ``kind`` truncate (``size`` = N), mask (``size`` asterisks), hash or propagate
    (``by_type``: its list matches ``<schema>.<table>.<type name>``, else the column's name)."""
    option: str
    patterns: tuple
    kind: str
    size: int = 0
    algorithm: str = ""
    salt: bytes = b""
    version: int = 1
    by_type: bool = False

    def matches(self, table: str, column: str, type_name: Optional[str] = None) -> bool:
        """Whether the list matches ``<table>.<column>`` (or ``<table>.<type name>``), ``table``
        being ``<schema>.<table>``."""
        if self.by_type:
            return type_name is not None and any(p.fullmatch(f"{table}.{type_name}") for p in self.patterns)
        return any(p.fullmatch(f"{table}.{column}") for p in self.patterns)

    def truncates(self, length: int) -> bool:
        """``TruncateColumn.isTruncationPossible``: the length is unknown or above N."""
        return length < 0 or length > self.size

    def parameters(self, column: SourceColumn) -> dict:
        """What ``alterFieldSchema`` adds to the field's schema parameters."""
        if self.kind == "truncate":
            return {"truncateLength": str(self.size)} if self.truncates(column.length) else {}
        if self.kind == "propagate":
            return source_types.parameters(column.name, column.type_name, column.length, column.scale)
        return {"masked": "true"}

    def converter(self, column: SourceColumn, field: dict) -> Optional[Callable[[Any], Any]]:
        """The function applied to the column's converted values; None: they pass unchanged."""
        if self.kind == "propagate":
            return None
        if self.kind == "truncate":
            if not self.truncates(column.length):
                return None
            n = self.size
            if field.get("type") == "string":
                return lambda v: column_masks.truncate_text(v, n) if isinstance(v, str) else v
            if field.get("type") == "bytes" and "name" not in field:
                return lambda v: column_masks.truncate_base64(v, n) if isinstance(v, str) else v
            return None
        if not column.text:
            return None
        if self.kind == "mask":
            text = "*" * self.size
            return lambda v: text
        algorithm, salt, version = self.algorithm, self.salt, self.version
        cut = column.length if column.length > 0 else None
        return lambda v: None if v is None else column_masks.pseudonym(v, algorithm, salt, version)[:cut]


def _size(key: str, digits: str) -> int:
    size = int(digits)
    if size > JAVA_INT_MAX:
        raise CdcConfigError(f"{key}: {size} is larger than {JAVA_INT_MAX} (a Java int, as Debezium reads it)",
                             option=key)
    return size


def _hash(key: str, match: re.Match, version: int, names_keep_case: bool) -> dict:
    algorithm, salt = match.group(1), match.group(2)
    if column_masks.digest_name(algorithm) is None:
        raise CdcConfigError(f"{key}: {algorithm!r} is not a hash algorithm this source offers (Java MessageDigest "
                             "names: MD5, SHA-1, SHA-224, SHA-256, SHA-384, SHA-512, SHA-512/224, SHA-512/256, "
                             "SHA3-224, SHA3-256, SHA3-384, SHA3-512)", option=key)
    if not names_keep_case and salt.lower() != salt.upper():
        raise CdcConfigError(f"{key}: Spark passes option names in lower case, so a salt with letters may not be "
                             "the one given and would hash to other pseudonyms than Debezium's: use a salt of "
                             "digits and symbols, or the PostgresCdcSource connector, whose keys keep their case",
                             option=key)
    return {"algorithm": algorithm, "salt": salt.encode("utf-8"), "version": version}


def parse(get, keys: Sequence[str], names_keep_case: bool = True) -> tuple:
    """The mappers the options ``keys`` name (``get`` reads a value), in the order they apply.
    ``names_keep_case`` False: the names were lower-cased on the way (Spark's options)."""
    out = []
    for pattern, kind in KINDS:
        for key in sorted(k for k in keys if pattern.fullmatch(k)):
            match = pattern.fullmatch(key)
            try:
                patterns = regex_lists.compile_all(regex_lists.split(get(key)))
            except re.error as e:
                raise CdcConfigError(f"{key}: {e.pattern!r} is not a regular expression: {e}", option=key) from None
            if kind == "hash":
                extra = _hash(key, match, 2 if pattern is HASH_V2 else 1, names_keep_case)
            else:
                extra = {"by_type": pattern is PROPAGATE_BY_TYPE} if kind == "propagate" else \
                    {"size": _size(key, match.group(1))}
            out.append(ColumnMapper(key, patterns, kind, **extra))
    return tuple(out)
