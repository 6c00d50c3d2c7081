"""Java's text forms of values, as Kafka's Connect classes print them: ``Double.toString`` and
``String.valueOf`` of a JSON value as Jackson reads it. Kafka's messages quote offsets and
partitions in these forms, its FileStreamSink writes values with them and ``Values.parseString``
formats floats so; one implementation serves them all. And the text Jackson gives a JSON scalar
read into a ``String`` (a connector config's values: ``true``, a number as written)."""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any


def java_double(x: float, float32: bool = False) -> str:
    """Java's ``Double.toString`` (``Float.toString`` with ``float32``): the shortest digits that
    read back as the same number, plain between 10^-3 and 10^7 (``3.0``, ``0.001``), else
    computerized scientific notation (``1.0E7``, ``1.0E-4``); ``NaN``, ``Infinity``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    text = repr(float(x))
    if float32:
        try:
            import numpy
            text = str(numpy.float32(x))
        except ImportError:  # pragma: no cover - numpy comes with pyspark's pandas support
            pass
    sign, digits, exp = Decimal(text).normalize().as_tuple()
    ds = "".join(map(str, digits))
    point = len(ds) + exp  # the decimal point sits after this many digits
    out = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{out}0.{'0' * -point}{ds}"
        whole, frac = ds[:point].ljust(point, "0"), ds[point:]
        return f"{out}{whole}.{frac or '0'}"
    return f"{out}{ds[0]}.{ds[1:] or '0'}E{point - 1}"


def java_string(value: Any) -> str:
    """Java's ``String.valueOf`` of a JSON value as Jackson reads it (Kafka's messages quote it so)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{java_string(k)}={java_string(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java_string(v) for v in value) + "]"
    return str(value)


class JsonFraction(float):
    """A JSON number with a fraction or exponent that remembers its text as written (``1.50``,
    ``1e3``): Jackson reads such a number into a ``String`` as that text, where ``str`` of the
    float would give ``1.5`` and ``1000.0``."""
    text: str

    def __new__(cls, text: str) -> "JsonFraction":
        value = super().__new__(cls, text)
        value.text = text
        return value


def _non_standard(token: str):
    raise ValueError(f"Non-standard token '{token}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow")


def json_loads(text: str | bytes):
    """``json.loads`` as Jackson reads JSON: each fractional number keeps its text
    (:class:`JsonFraction`, a float), and ``NaN``/``Infinity``, which are not JSON, are refused."""
    return json.loads(text, parse_float=JsonFraction, parse_constant=_non_standard)


def config_text(value: Any) -> Any:
    """A config value as Jackson reads a JSON scalar into ``Map<String, String>``: a string as it
    is, ``true``/``false``, a number as written (:func:`json_loads` keeps it), null as None; other
    values (a list, an object) unchanged, for the caller to refuse or validate."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, JsonFraction):
        return value.text
    if isinstance(value, (int, float)):
        return str(value)
    return value


__all__ = ["JsonFraction", "config_text", "java_double", "java_string", "json_loads"]
