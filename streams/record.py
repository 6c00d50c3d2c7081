"""A record as processors see it, and the change a KTable forwards.

Keys and values are deserialized Python values (JSON structs are dicts). Timestamps are
milliseconds since the epoch, as in Kafka; expressions see ``timestamp`` as a UTC datetime, as
Spark's column is.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


_SAME: Any = object()   # with_: the field is kept


@dataclass(frozen=True, slots=True)
class Record:
    key: Any
    value: Any
    timestamp: int
    headers: tuple = ()

    def with_(self, key: Any = _SAME, value: Any = _SAME, timestamp: Any = _SAME, headers: Any = _SAME) -> "Record":
        """A copy with some fields changed (every processor forwards through this, so it spells
        the fields out: ``dataclasses.replace`` was the single largest cost of a task's Python)."""
        return Record(self.key if key is _SAME else key, self.value if value is _SAME else value,
                      self.timestamp if timestamp is _SAME else timestamp,
                      self.headers if headers is _SAME else headers)

    def row(self, topic: str | None = None, partition: int | None = None, offset: int | None = None) -> dict:
        """The record as SQL expressions see it: Spark's column names and types (headers as
        ``struct<key, value>``; a windowed key as ``struct<key, start, end>`` with timestamps)."""
        key = self.key
        if isinstance(key, Windowed):
            key = {"key": key.key, "start": _time(key.start), "end": _time(key.end)}
        return {"key": key, "value": self.value, "timestamp": _time(self.timestamp),
                "topic": topic, "partition": partition, "offset": offset,
                "headers": [{"key": k, "value": v} for k, v in self.headers]}



@dataclass(frozen=True, slots=True)
class ConsumerRecord(Record):
    """What a timestamp extractor is given: the deserialized record with where it was read (Kafka's
    extractors get a ``ConsumerRecord``), so an extractor's error can name it. A topic name
    extractor (``to(fn)``) gets one too, as Kafka's ``RecordContext``: the input record's topic,
    partition and offset."""
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    def __str__(self) -> str:
        return (f"ConsumerRecord(topic = {self.topic}, partition = {self.partition}, offset = {self.offset}, "
                f"CreateTime = {self.timestamp}, key = {self.key}, value = {self.value})")

def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(frozen=True, slots=True)
class Change:
    """A KTable update: the key's new value and the value it replaces (None for none/deleted)."""
    new: Any
    old: Any = None
    is_latest: bool = True      # False: an out-of-order update of a versioned table (KIP-914)


@dataclass(frozen=True, slots=True)
class Windowed:
    """A windowed key: Kafka's ``Windowed<K>``; ``end`` is exclusive for time windows and
    inclusive for sliding and session windows, as in Kafka."""
    key: Any
    start: int
    end: int
