"""Java's ``.properties`` format as ``java.util.Properties.load`` reads it: Kafka's
``server.properties`` and its tools' ``--reader-config`` / ``--formatter-config`` /
``--producer.config`` files.

``#``/``!`` start comments; keys end at the first unescaped ``=``, ``:`` or whitespace; a line
ending in an odd number of backslashes continues on the next (its leading whitespace dropped);
``\\t \\n \\r \\f \\uXXXX \\<char>`` are unescaped (so ``key.separator=\\t`` is a tab, as in
Kafka); a malformed ``\\uxxxx`` is refused (``ValueError``), as Java refuses it. Values keep their
spaces, as Java's do. Pure; also what ``connect`` reads ``worker.properties`` and connector files with.
"""
from __future__ import annotations

__all__ = ["parse_properties", "read_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"
_HEX = "0123456789abcdefABCDEF"


def _logical_lines(text: str):
    pending = None
    for raw in text.splitlines():
        line = raw.lstrip(_WHITESPACE)
        if pending is None and (not line or line[0] in "#!"):
            continue
        continues = (len(line) - len(line.rstrip("\\"))) % 2 == 1
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
        elif text[i + 1] == "u":
            digits = text[i + 2:i + 6]
            if len(digits) < 4 or not all(h in _HEX for h in digits):
                raise ValueError(f"Malformed \\uxxxx encoding in {text!r}")   # Properties.load's refusal
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line) and line[i] not in "=:" + _WHITESPACE:
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Every key and value of a ``.properties`` text (a later key wins, as in Java)."""
    return dict(_split(line) for line in _logical_lines(text))


def read_properties(path: str) -> dict[str, str]:
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read())
