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

``column.mask.with.<N>.chars`` (a column list) replaces every value of a matched text column
(``text``, ``varchar``, ``char``, ``name``, a domain over one: pgjdbc's CHAR / VARCHAR, which
Debezium's ``MaskStrings`` masks) with N asterisks, NULL and the TOAST placeholder included, and
marks the field ``"parameters": {"masked": "true"}`` (any matched column: ``alterFieldSchema``
does not look at the type). The record key is never masked. Where two options' lists match one
column, the option first by name masks it (Debezium leaves that order to its configuration).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

from spark_source.postgres import regex_lists
from spark_source.postgres.type_modes import CdcConfigError

MASK_OPTION = re.compile(r"column\.mask\.with\.(\d+)\.chars")
MASKABLE_OIDS = frozenset({25, 1043, 1042, 19, 18})
"""text, varchar, bpchar, name and "char": the types pgjdbc reports as CHAR or VARCHAR."""
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
    masks: tuple = ()        # ((compiled patterns, mask text), ...) in option order

    @classmethod
    def from_options(cls, get, keys=()) -> "ColumnLists":
        """``get`` reads an option; ``keys`` are the option names given (for the masks' names)."""
        include = _compiled("column.include.list", regex_lists.split(get("column.include.list")))
        exclude = _compiled("column.exclude.list", regex_lists.split(get("column.exclude.list")))
        if include and exclude:
            raise CdcConfigError("column.include.list and column.exclude.list cannot both be set",
                                 option="column.exclude.list")
        masks = []
        for key in sorted(k for k in keys if MASK_OPTION.fullmatch(k)):
            chars = int(MASK_OPTION.fullmatch(key).group(1))
            masks.append((_compiled(key, regex_lists.split(get(key))), "*" * chars))
        return cls(include, exclude, _key_patterns(get("message.key.columns")), tuple(masks))

    def mask(self, schema: str, table: str, column: str) -> Optional[str]:
        """The mask text of a column ``column.mask.with.<N>.chars`` names, else None."""
        name = f"{schema}.{table}.{column}"
        return next((text for patterns, text in self.masks if any(p.fullmatch(name) for p in patterns)), None)

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


def masked(lists: ColumnLists, schema: str, table: str, columns, fields: list, root_oid) -> tuple[list, dict]:
    """``fields`` (one per column) with ``masked`` parameters where a mask applies, and
    ``{column: mask text}`` for the masked text columns; ``root_oid(column)`` is its type's root."""
    if not lists.masks:
        return fields, {}
    out, masks = [], {}
    for column, field in zip(columns, fields):
        text = lists.mask(schema, table, column.name)
        if text is not None:
            field = {**field, "parameters": {**field.get("parameters", {}), "masked": "true"}}
            field = {k: field[k] for k in ("type", "fields", "items", "keys", "values", "optional", "name", "version",
                                           "doc", "parameters", "default", "field") if k in field}
            if root_oid(column) in MASKABLE_OIDS:
                masks[column.name] = text
        out.append(field)
    return out, masks
