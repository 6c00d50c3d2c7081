"""Java's text forms of values, as Kafka's Connect classes print them: ``Double.toString`` and
``String.valueOf`` of a JSON value as Jackson reads it. Kafka's messages quote offsets and
partitions in these forms, its FileStreamSink writes values with them and ``Values.parseString``
formats floats so; one implementation serves them all."""
from __future__ import annotations

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


__all__ = ["java_double", "java_string"]
