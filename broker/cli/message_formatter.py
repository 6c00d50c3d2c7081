"""How ``riverlog consume`` prints a record: Kafka's console consumer's ``DefaultMessageFormatter``
and its ``--property`` names, as a pure function of the record.

    fmt = MessageFormatter.from_properties({"print.key": "true", "print.offset": "true"})
    fmt.format(msg)        # b"Offset:7\\tuser-1\\t{...}\\n"

Fields, each enabled by its ``print.*`` property, in Kafka's order: ``CreateTime:ms`` /
``LogAppendTime:ms`` / ``NO_TIMESTAMP``, ``Partition:p``, ``Offset:o``, ``Delivery:NOT_PRESENT``
(a console consumer has no delivery count), ``Epoch:e`` / ``Epoch:NOT_PRESENT``, the headers
(``k:v`` joined by ``headers.separator``, or ``NO_HEADERS``), the key, the value (on by default).
``key.separator`` goes between fields, ``line.separator`` after the last; a null key, value or
header value prints ``null.literal``. Keys and values are written as their bytes, as Kafka writes
them. Kafka's deserializer classes are Java classes, so ``*.deserializer`` properties are refused.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FORMATTER_PROPERTIES", "MessageFormatter", "MessageFormatterError"]

FORMATTER_PROPERTIES = {
    "print.timestamp": "false", "print.key": "false", "print.value": "true", "print.partition": "false",
    "print.offset": "false", "print.delivery": "false", "print.epoch": "false", "print.headers": "false",
    "key.separator": "\t", "line.separator": "\n", "headers.separator": ",", "null.literal": "null",
}
_TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


class MessageFormatterError(ValueError):
    """Formatter properties the console consumer does not take."""


def _flag(value) -> bool:
    return str(value).strip().lower() == "true"


@dataclass(frozen=True)
class MessageFormatter:
    print_timestamp: bool = False
    print_key: bool = False
    print_value: bool = True
    print_partition: bool = False
    print_offset: bool = False
    print_delivery: bool = False
    print_epoch: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict) -> MessageFormatter:
        """The formatter of ``--property`` / ``--formatter-config`` values
        (``DefaultMessageFormatter.configure``); an unknown name is refused, naming the known ones."""
        unknown = sorted(set(props) - set(FORMATTER_PROPERTIES))
        if unknown:
            hint = ("; Kafka's deserializer classes are Java classes: keys and values print as their bytes"
                    if any("deserializer" in name for name in unknown) else "")
            raise MessageFormatterError(
                f"unknown formatter propert{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                f"it takes {', '.join(FORMATTER_PROPERTIES)}{hint}")
        values = {**FORMATTER_PROPERTIES, **props}
        return cls(**{name.replace(".", "_"): _flag(values[name]) for name in values if name.startswith("print.")},
                   key_separator=str(values["key.separator"]).encode(),
                   line_separator=str(values["line.separator"]).encode(),
                   headers_separator=str(values["headers.separator"]).encode(),
                   null_literal=str(values["null.literal"]).encode())

    def _bytes(self, data) -> bytes:
        if data is None:
            return self.null_literal
        return data.encode() if isinstance(data, str) else bytes(data)

    def format(self, msg) -> bytes:
        """The bytes Kafka's formatter writes for ``msg`` (a consumer Message), line separator
        included; nothing at all when every field is off."""
        fields = []
        if self.print_timestamp:
            kind, ts = msg.timestamp()
            fields.append(f"{_TIMESTAMP_TYPES[kind]}:{ts}".encode() if kind in _TIMESTAMP_TYPES else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(f"Partition:{msg.partition()}".encode())
        if self.print_offset:
            fields.append(f"Offset:{msg.offset()}".encode())
        if self.print_delivery:
            fields.append(b"Delivery:NOT_PRESENT")
        if self.print_epoch:
            epoch = msg.leader_epoch()
            fields.append(f"Epoch:{'NOT_PRESENT' if epoch is None or epoch < 0 else epoch}".encode())
        if self.print_headers:
            headers = msg.headers() or []
            fields.append(self.headers_separator.join(self._bytes(k) + b":" + self._bytes(v) for k, v in headers)
                          if headers else b"NO_HEADERS")
        if self.print_key:
            fields.append(self._bytes(msg.key()))
        if self.print_value:
            fields.append(self._bytes(msg.value()))
        if not fields:
            return b""
        return self.key_separator.join(fields) + self.line_separator
