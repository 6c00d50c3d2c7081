"""How ``riverlog produce`` turns an input line into a record: Kafka's console producer's
``LineMessageReader`` and its ``--property`` names, as a pure function of the line.

    reader = LineReader.from_properties({"parse.key": "true", "key.separator": ":"})
    reader.parse(b"user-1:{...}", 1)       # ([], b"user-1", b"{...}")

With ``parse.headers=true`` and ``parse.key=true`` a line is ``h1:v1,h2:v2<TAB>key<TAB>value``
(``headers.key.separator``, ``headers.separator``, ``headers.delimiter``, ``key.separator``).
Each demarcation is the first one found, left to right; a field equal to ``null.marker`` is null
(a header key cannot be). A missing demarcation stops the producer unless ``ignore.error=true``,
which then sends no headers / a null key / a header with a null value, as Kafka does. Lines are
bytes (separators are matched as UTF-8), so input that is not UTF-8 is sent as it was read.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["READER_PROPERTIES", "LineReader", "LineReaderError", "java_split"]

# Every property the reader takes, with Kafka's default and what it does (shown by errors).
READER_PROPERTIES = {
    "parse.key": "false", "key.separator": "\t", "parse.headers": "false", "headers.delimiter": "\t",
    "headers.separator": ",", "headers.key.separator": ":", "ignore.error": "false", "null.marker": None,
}


class LineReaderError(ValueError):
    """A line the reader cannot split, or reader properties that contradict each other."""


def _flag(value) -> bool:
    """Kafka's ``toString().trim().equalsIgnoreCase("true")``: anything else is false."""
    return str(value).strip().lower() == "true"


def java_split(text: bytes, separator: bytes) -> list[bytes]:
    """``String.split`` of a literal separator: trailing empty strings are dropped, but an empty
    text is one empty field."""
    if not text:
        return [b""]
    parts = text.split(separator)
    while parts and parts[-1] == b"":
        parts.pop()
    return parts


@dataclass(frozen=True)
class LineReader:
    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, props: dict) -> LineReader:
        """The reader of ``--property`` values (``LineMessageReader.configure``): unknown names
        are refused (a typo would otherwise be ignored), and demarcations that could not be told
        apart are refused with Kafka's messages."""
        unknown = sorted(set(props) - set(READER_PROPERTIES) - {"topic"})
        if unknown:
            raise LineReaderError(f"unknown line reader propert{'y' if len(unknown) == 1 else 'ies'} "
                                  f"{', '.join(unknown)}; it takes {', '.join(READER_PROPERTIES)}")
        reader = cls(
            parse_key=_flag(props.get("parse.key", "false")),
            key_separator=str(props.get("key.separator", "\t")),
            parse_headers=_flag(props.get("parse.headers", "false")),
            headers_delimiter=str(props.get("headers.delimiter", "\t")),
            headers_separator=str(props.get("headers.separator", ",")),
            headers_key_separator=str(props.get("headers.key.separator", ":")),
            ignore_error=_flag(props.get("ignore.error", "false")),
            null_marker=None if props.get("null.marker") is None else str(props["null.marker"]))
        reader._check()
        return reader

    def _check(self) -> None:
        for (a, va), (b, vb) in (
                (("headers.delimiter", self.headers_delimiter), ("headers.separator", self.headers_separator)),
                (("headers.delimiter", self.headers_delimiter), ("headers.key.separator", self.headers_key_separator)),
                (("headers.separator", self.headers_separator), ("headers.key.separator", self.headers_key_separator)),
                (("null.marker", self.null_marker), ("key.separator", self.key_separator)),
                (("null.marker", self.null_marker), ("headers.separator", self.headers_separator)),
                (("null.marker", self.null_marker), ("headers.delimiter", self.headers_delimiter)),
                (("null.marker", self.null_marker), ("headers.key.separator", self.headers_key_separator))):
            if va == vb:
                raise LineReaderError(f"{a} and {b} may not be equal")
        for name, value in (("key.separator", self.key_separator), ("headers.delimiter", self.headers_delimiter),
                            ("headers.separator", self.headers_separator),
                            ("headers.key.separator", self.headers_key_separator)):
            if value == "":
                raise LineReaderError(f"{name} may not be empty")

    def parse(self, line: bytes, number: int) -> tuple[list[tuple[str, bytes | None]], bytes | None, bytes | None]:
        """(headers, key, value) of input line ``number`` (from 1); raises LineReaderError with
        Kafka's message for a missing demarcation unless ``ignore.error``."""
        marker = None if self.null_marker is None else self.null_marker.encode()
        headers = self._field(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", number)
        start = 0 if headers is None else len(headers) + len(self.headers_delimiter.encode())
        key = self._field(self.parse_key, line, start, self.key_separator, "key separator", number)
        if key is not None:
            start += len(key) + len(self.key_separator.encode())
        value = line[start:]
        parsed = [] if headers is None or headers == marker else self._headers(headers, marker, number)
        return (parsed, None if key == marker else key, None if value == marker else value)

    def _field(self, enabled: bool, line: bytes, start: int, demarcation: str, what: str, number: int):
        if not enabled:
            return None
        end = line.find(demarcation.encode(), start)
        if end < 0:
            if self.ignore_error:
                return None
            raise LineReaderError(f"No {what} found on line number {number}: '{_show(line)}'")
        return line[start:end]

    def _headers(self, text: bytes, marker: bytes | None, number: int) -> list[tuple[str, bytes | None]]:
        out = []
        key_sep = self.headers_key_separator.encode()
        for pair in java_split(text, self.headers_separator.encode()):
            key, found, value = pair.partition(key_sep)
            if not found:
                if not self.ignore_error:
                    raise LineReaderError(f"No header key separator found in pair '{_show(pair)}' "
                                          f"on line number {number}")
                out.append((_show(pair), None))
                continue
            if key == marker:
                raise LineReaderError(f"Header keys should not be equal to the null marker '{self.null_marker}' "
                                      "as they can't be null")
            out.append((key.decode("utf-8", errors="replace"), None if value == marker else value))
        return out


def _show(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
