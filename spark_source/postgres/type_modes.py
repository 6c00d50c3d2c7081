"""The CDC connector's value options under Debezium's names and defaults (``decimal.handling.mode``,
``time.precision.mode``, ``binary.handling.mode``, ``interval.handling.mode``,
``hstore.handling.mode``, ``money.fraction.digits``, ``unavailable.value.placeholder``).

Checked once, when :class:`TypeModes` is built, so a mode Debezium does not define fails the query
at start with a :class:`CdcConfigError` listing the allowed values, never while rows convert. What
each mode does to a value is in :mod:`spark_source.postgres.types`.
"""
from __future__ import annotations

from dataclasses import dataclass

from broker.errors import RiverlogError
from spark_source.postgres.special_types import HSTORE_MODES

PLACEHOLDER = "__debezium_unavailable_value"

DECIMAL_MODES = ("precise", "double", "string")
TIME_MODES = ("adaptive", "adaptive_time_microseconds", "connect")
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")
INTERVAL_MODES = ("numeric", "string")


class CdcConfigError(RiverlogError):
    """A CDC option has a value Debezium does not define; the message lists the allowed ones."""
    code, name, retriable, grpc_status = 1355, "CDC_INVALID_CONFIG", False, "INVALID_ARGUMENT"


def placeholder_bytes(placeholder: str) -> bytes:
    """``unavailable.value.placeholder``'s bytes, as Debezium's ``getUnavailableValuePlaceholder``
    reads them: after a ``hex:`` prefix the rest is hexadecimal octets, else the text's UTF-8.
    Hex Debezium would fail on later (an odd count, a non-hex digit) is refused here."""
    if not placeholder.startswith("hex:"):
        return placeholder.encode()
    digits = placeholder[4:]
    if len(digits) % 2 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise CdcConfigError(f"unavailable.value.placeholder={placeholder!r}: after 'hex:' give an even number of "
                             "hexadecimal digits", option="unavailable.value.placeholder", value=placeholder)
    return bytes.fromhex(digits)


def placeholder_text(placeholder: str) -> str:
    """The placeholder as string columns carry it: Java's ``new String(bytes)`` of its bytes (UTF-8,
    malformed sequences replaced by U+FFFD)."""
    return placeholder_bytes(placeholder).decode("utf-8", errors="replace")


def check_choice(option: str, value: str, allowed: tuple) -> str:
    if value not in allowed:
        raise CdcConfigError(f"{option}={value!r} is not one of {', '.join(allowed)}", option=option, value=value)
    return value


@dataclass(frozen=True)
class TypeModes:
    """The connector's value options (Debezium's names and defaults)."""
    decimal_handling_mode: str = "precise"
    time_precision_mode: str = "adaptive"
    binary_handling_mode: str = "bytes"
    interval_handling_mode: str = "numeric"
    money_fraction_digits: int = 2
    hstore_handling_mode: str = "json"

    def __post_init__(self):
        check_choice("decimal.handling.mode", self.decimal_handling_mode, DECIMAL_MODES)
        check_choice("time.precision.mode", self.time_precision_mode, TIME_MODES)
        check_choice("binary.handling.mode", self.binary_handling_mode, BINARY_MODES)
        check_choice("interval.handling.mode", self.interval_handling_mode, INTERVAL_MODES)
        check_choice("hstore.handling.mode", self.hstore_handling_mode, HSTORE_MODES)

__all__ = ["BINARY_MODES", "DECIMAL_MODES", "INTERVAL_MODES", "PLACEHOLDER", "TIME_MODES", "CdcConfigError",
           "TypeModes", "check_choice", "placeholder_bytes", "placeholder_text"]
