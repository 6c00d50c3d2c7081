"""Which columns an event carries, and which key it has: Debezium's ``column.include.list`` /
``column.exclude.list`` and ``message.key.columns``.

A column list is a :mod:`regex_lists` list matched against ``<schema>.<table>.<column>`` (Debezium's
``ColumnFilterMode.SCHEMA``): an included column (or one no exclude pattern matches) is in the
value's ``before`` and ``after``; the record key keeps its columns whatever the lists say, as
Debezium's ``TableSchemaBuilder`` builds the key from the unfiltered table.

``message.key.columns`` is ``<table regex>:<column>[,<column>...]`` entries separated by ``;``
(``public.orders:customer_id;(.*).items:sku,line``). Each ``<table regex>.<column>`` is a
pattern over ``<schema>.<table>.<column>`` (case ignored, matched whole); a table's key is the
columns matched, pattern after pattern and in table order within one, as Debezium's
``Key.CustomKeyMapper`` gives them, and its primary key when none matches.

The column mappers (``column.truncate.to.<N>.chars``, ``column.mask.with.<N>.chars``,
``column.mask.hash[.v2].<algorithm>.with.salt.<salt>``, ``column.propagate.source.type``,
``datatype.propagate.source.type``) rewrite a value column's values or mark its field:
:mod:`column_mappers`. The record key is never mapped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

from spark_source.postgres import column_mappers, regex_lists
from spark_source.postgres.column_mappers import MASKABLE_OIDS  # noqa: F401  (re-exported)
from spark_source.postgres.type_modes import CdcConfigError

MASK_OPTION = column_mappers.MASK
is_mapper_option = column_mappers.is_option
"""Whether an option's name is a column mapper's (truncate, mask or hash)."""
_ENTRY = re.compile(r"^\s*([^\s:]+):([^:\s]+)\s*$")
"""``CustomKeyMapper.MSG_KEY_COLUMNS_PATTERN``: one ``table:column1,column2`` entry."""


def _compiled(option: str, patterns: Sequence[str]) -> tuple[re.Pattern, ...]:
    try:
        return regex_lists.compile_all(patterns)
    except re.error as e:
        raise CdcConfigError(f"{option}: {e.pattern!r} is not a regular expression: {e}", option=option) from None


def _key_patterns(value: Optional[str]) -> tuple[re.Pattern, ...]:
    if value is None:
        return ()
    text = str(value)
    if not text.strip():
        raise CdcConfigError("message.key.columns must not be empty", option="message.key.columns")
    patterns = []
    for entry in text.split(";"):
        match = _ENTRY.match(entry)
        if match is None:
            raise CdcConfigError(f"message.key.columns: {entry.strip()!r} has an invalid format (expecting "
                                 "'<schema>.<table>:<column>[,<column>...]' entries separated by ';')",
                                 option="message.key.columns")
        patterns += [f"{match.group(1)}.{column}" for column in match.group(2).split(",") if column]
    return _compiled("message.key.columns", patterns)


@dataclass(frozen=True)
class ColumnLists:
    """The parsed options; ``ColumnLists()`` keeps every column and the primary key."""
    include: tuple = ()
    exclude: tuple = ()
    key_columns: tuple = ()
    mappers: tuple = ()      # column_mappers.ColumnMapper, in the order they apply

    @classmethod
    def from_options(cls, get, keys=(), names_keep_case: bool = True) -> "ColumnLists":
        """``get`` reads an option; ``keys`` are the option names given (for the mappers' names);
        ``names_keep_case`` False: they were lower-cased on the way (Spark's options)."""
        include = _compiled("column.include.list", regex_lists.split(get("column.include.list")))
        exclude = _compiled("column.exclude.list", regex_lists.split(get("column.exclude.list")))
        if include and exclude:
            raise CdcConfigError("column.include.list and column.exclude.list cannot both be set",
                                 option="column.exclude.list")
        return cls(include, exclude, _key_patterns(get("message.key.columns")),
                   column_mappers.parse(get, keys, names_keep_case))

    def mapper(self, schema: str, table: str, column: str,
               type_name: Optional[str] = None) -> Optional[column_mappers.ColumnMapper]:
        """The mapper of a value column: the first whose list matches it (Debezium's ``mapperFor``)."""
        return next((m for m in self.mappers if m.matches(f"{schema}.{table}", column, type_name)), None)

    def mask(self, schema: str, table: str, column: str) -> Optional[str]:
        """The mask text of a column ``column.mask.with.<N>.chars`` maps, else None."""
        mapper = self.mapper(schema, table, column)
        return "*" * mapper.size if mapper is not None and mapper.kind == "mask" else None

    def value_columns(self, schema: str, table: str, columns: Sequence[str]) -> tuple[str, ...]:
        """The columns of the event's ``before`` / ``after``, in table order."""
        if self.include:
            return tuple(c for c in columns if any(p.fullmatch(f"{schema}.{table}.{c}") for p in self.include))
        if self.exclude:
            return tuple(c for c in columns if not any(p.fullmatch(f"{schema}.{table}.{c}") for p in self.exclude))
        return tuple(columns)

    def message_key(self, schema: str, table: str, columns: Sequence[str]) -> tuple[str, ...]:
        """The columns ``message.key.columns`` gives the table's key; empty: its primary key."""
        chosen: list[str] = []
        for pattern in self.key_columns:
            chosen += [c for c in columns if pattern.fullmatch(f"{schema}.{table}.{c}") and c not in chosen]
        return tuple(chosen)


def mapped(lists: ColumnLists, schema: str, table: str, columns, fields: list, types=None) -> tuple[list, dict]:
    """``fields`` (one per column) with the parameters their mapper adds, and ``{column: function}``
    for the columns whose values it rewrites. ``types`` (a TypeRegistry) resolves domains and enums."""
    if not lists.mappers:
        return fields, {}
    out, converters = [], {}
    for column, field in zip(columns, fields):
        source = column_mappers.SourceColumn.of(column, types)
        mapper = lists.mapper(schema, table, column.name, source.type_name)
        if mapper is not None:
            parameters = mapper.parameters(source)
            if parameters:
                field = {**field, "parameters": {**field.get("parameters", {}), **parameters}}
                field = {k: field[k] for k in ("type", "fields", "items", "keys", "values", "optional", "name",
                                               "version", "doc", "parameters", "default", "field") if k in field}
            convert = mapper.converter(source, field)
            if convert is not None:
                converters[column.name] = convert
        out.append(field)
    return out, converters
