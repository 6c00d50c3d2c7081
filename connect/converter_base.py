"""Kafka Connect's ``Converter`` interface as Spark column expressions, and :class:`Converted`, what
every converter returns for a column.

``to_column(binary)`` is Kafka's ``toConnectData`` and ``from_column(typed, type)`` its
``fromConnectData``; both return a :class:`Converted` — the new column plus a per-row ``failed``
flag and message — instead of throwing, so one bad record goes to the dead-letter queue rather
than failing the batch.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql.types import DataType


@dataclass(frozen=True)
class Converted:
    """A converter's result for one column: ``value`` (null where ``failed``) and ``message``."""
    value: Column
    failed: Column
    message: Column
    misfit: Column | None = None   # rows that do not fit a type carried from an earlier batch
    # Hidden columns to compute first, stage by stage, that the columns above read by name: Spark
    # keeps a projection whose column is read several times, so a JSON text is parsed once per row.
    stages: tuple[dict[str, Column], ...] = ()
    # Rows whose value is a null with a schema, not a tombstone (see connect.record_frame.typed_null)
    typed_null: Column | None = None


def _config_errors(config: dict, known: dict) -> dict:
    errors = {}
    for name, allowed in known.items():
        if name in config and allowed is not None and str(config[name]).upper() not in allowed:
            errors[name] = [f"invalid value {config[name]!r}; expected one of {sorted(allowed)}"]
    return errors


def _bool(config: dict, name: str, default: bool, errors: dict) -> bool:
    value = config.get(name, default)
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in ("true", "false"):
        return str(value).strip().lower() == "true"
    errors.setdefault(name, []).append(f"invalid value {value!r}; expected true or false")
    return default


class Converter:
    """Base: a converter for keys (``is_key``) or values, as Kafka's ``configure(configs, isKey)``."""
    class_name = ""

    def __init__(self, config: dict | None = None, is_key: bool = False):
        self.config = dict(config or {})
        self.is_key = is_key

    def to_column(self, binary: Column) -> Converted:
        raise NotImplementedError

    def from_column(self, typed: Column, data_type: DataType, metadata: dict | None = None,
                    typed_null: Column | None = None) -> Converted:
        """``typed_null``: rows whose null value has a schema (Kafka's String and ByteArray
        converters write null bytes for it all the same; the JsonConverter does not)."""
        raise NotImplementedError

    def output_type(self) -> DataType | None:
        """The Spark type ``to_column`` produces, when known without data."""
        return None
