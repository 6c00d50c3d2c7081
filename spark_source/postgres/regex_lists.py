"""Debezium's list options of regular expressions (``table.include.list``, ``table.exclude.list``,
``message.prefix.include.list``, …), read as Debezium reads them (``Strings.setOfRegex`` with
``Pattern.CASE_INSENSITIVE``).

The text is split on commas as ``RegExSplitter`` splits it: a backslash escapes the character
after it, so ``\\,`` is a comma inside a pattern (``public\\.t_\\d{1\\,2}``) and is then written
as a plain ``,``; each part is trimmed and empty parts are dropped. A pattern matches the whole
name, ignoring case, so ``Public.Customers`` selects ``public.customers``. As in Java's
``java.util.regex`` without ``UNICODE_CASE`` / ``UNICODE_CHARACTER_CLASS``, case is ignored for ASCII
letters only and ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII (``re.ASCII``): ``public\\.\\w+`` does
not select ``public.café``, nor ``public\\.café`` ``public.CAFÉ``, as with Debezium.

    >>> split(r"public\\.a, public\\.t_\\d{1\\,2}")
    ('public\\\\.a', 'public\\\\.t_\\\\d{1,2}')
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

FLAGS = re.IGNORECASE | re.ASCII
"""``Pattern.CASE_INSENSITIVE`` with Java's ASCII-only defaults (see the module)."""


def split(text: Optional[str]) -> tuple[str, ...]:
    """The patterns of a comma-separated list (RegExSplitter's rules, see the module)."""
    parts, start, i, text = [], 0, 0, text or ""
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == ",":
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return tuple(p.strip().replace("\\,", ",") for p in parts if p.strip())


def compile_all(patterns: Iterable[str]) -> tuple[re.Pattern, ...]:
    """Compiled as Debezium compiles them (:data:`FLAGS`); ``re.error`` for a bad one."""
    return tuple(re.compile(p, FLAGS) for p in patterns)


def matches(patterns: Iterable[str], name: str) -> bool:
    """Whether any pattern matches the whole ``name``, ignoring ASCII case (:data:`FLAGS`)."""
    return any(re.fullmatch(p, name, FLAGS) for p in patterns)
