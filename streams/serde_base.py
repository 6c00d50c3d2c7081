"""The :class:`Serde` contract and :class:`SerializationError`, apart from the serdes themselves
so that :mod:`streams.serdes_json` and :mod:`streams.serdes_struct` (whose functions Spark
unpickles on executors, importing their module first) can build on it without an import cycle."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql import types as T

from broker.errors import InvalidConfigError, RiverlogError


class SerializationError(RiverlogError):
    """A value could not be serialized or a record's bytes could not be deserialized (Kafka's
    ``SerializationException``). ``details`` carries ``serde`` and, when known, ``topic``,
    ``field`` and ``length``."""
    code, grpc_status = 1210, "INVALID_ARGUMENT"


ON_ERROR = ("fail", "null")


@dataclass(frozen=True)
class Serde:
    """A serializer and deserializer pair, immutable and picklable (it travels to Spark executors).

    Python side: :meth:`serialize` / :meth:`deserialize`. Spark side: :meth:`decode` turns the
    ``value`` (or ``key``) binary column into a typed column with the same values, :meth:`encode`
    turns a typed column into the bytes :meth:`serialize` writes."""

    kafka_name: ClassVar[str] = ""

    @property
    def name(self) -> str:
        return self.kafka_name

    def __repr__(self) -> str:
        return f"Serdes.{self.name}"

    # ------------------------------------------------------------------------------ Python side
    def serialize(self, obj, topic: str | None = None) -> bytes | None:
        if obj is None:
            return None
        try:
            return self._serialize(obj)
        except SerializationError:
            raise
        except (TypeError, ValueError, OverflowError, struct.error, UnicodeError) as e:
            raise self.error(f"cannot serialize {type(obj).__name__} {_short(obj)}: {e}", topic) from None

    def deserialize(self, data: bytes | None, topic: str | None = None) -> Any:
        if data is None:
            return None
        return self._deserialize(bytes(data), topic)

    def _serialize(self, obj) -> bytes:
        raise NotImplementedError

    def _deserialize(self, data: bytes, topic: str | None) -> Any:
        raise NotImplementedError

    def error(self, message: str, topic: str | None = None, **details) -> SerializationError:
        where = f" (topic '{topic}')" if topic else ""
        return SerializationError(f"{self.name} serde: {message}{where}", serde=self.name, topic=topic, **details)

    # ------------------------------------------------------------------------------- Spark side
    def spark_type(self) -> T.DataType:
        raise NotImplementedError

    def decode(self, col, *, on_error: str = "fail", topic: str | None = None, record: tuple | None = None):
        """``col`` (BINARY) as :meth:`spark_type`, the values :meth:`deserialize` returns; a bad record
        fails the query (``on_error="fail"``) or becomes null (``"null"``).

        ``record``, the rows' ``(topic, partition, offset)`` columns, makes the failure name the
        record as Kafka's ``LogAndFailExceptionHandler`` logs it ("topic: t, partition: 0, offset:
        3"), so a poison record can be found (Spark's error carries no row otherwise)."""
        from pyspark.sql import functions as F
        _check_on_error(on_error)
        where = topic if record is None else _Where(topic, tuple(record))
        return F.when(col.isNull(), F.lit(None)).otherwise(self._decode(col, on_error, where)).cast(self.spark_type())

    def encode(self, col):
        """``col`` (of :meth:`spark_type`) as BINARY, the bytes :meth:`serialize` writes."""
        from pyspark.sql import functions as F
        return F.when(col.isNull(), F.lit(None)).otherwise(self._encode(col)).cast("binary")

    def _decode(self, col, on_error: str, topic: str | None):
        raise NotImplementedError

    def _encode(self, col):
        raise NotImplementedError

    def _bad(self, on_error: str, message, topic: str | None):
        """The Spark value of a bad record: ``raise_error`` with ``message`` (a str or a string
        column), or null."""
        from pyspark.sql import functions as F
        if on_error == "null":
            return F.lit(None)
        if isinstance(topic, _Where):
            where = topic.columns()
        else:
            where = [F.lit(f" (topic '{topic}')" if topic else "")]
        parts = [F.lit(f"{self.name} serde: "), message if not isinstance(message, str) else F.lit(message), *where]
        return F.raise_error(F.concat(*parts))


@dataclass(frozen=True)
class _Where:
    """Where a Spark-side record comes from: the topic name given to ``decode`` and the rows'
    ``(topic, partition, offset)`` columns. A str-like stand-in for ``topic`` on the Spark side
    only (:meth:`Serde.error` and Python UDFs get :func:`topic_name`)."""
    topic: str | None
    record: tuple

    def columns(self) -> list:
        from pyspark.sql import functions as F
        topic, partition, offset = self.record
        return [F.lit(" (topic: "), F.coalesce(topic.cast("string"), F.lit(self.topic or "null")),
                F.lit(", partition: "), F.coalesce(partition.cast("string"), F.lit("null")),
                F.lit(", offset: "), F.coalesce(offset.cast("string"), F.lit("null")), F.lit(")")]


def topic_name(topic) -> str | None:
    """The topic's name, given a topic or a :class:`_Where`."""
    return topic.topic if isinstance(topic, _Where) else topic


def _check_on_error(on_error: str) -> None:
    if on_error not in ON_ERROR:
        raise InvalidConfigError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")


def _short(obj) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."
