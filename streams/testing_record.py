"""The records of :mod:`streams.testing`: Kafka's ``TestRecord`` and ``KeyValue``, the exact
conversion of the driver's times (Kafka's ``Instant`` / ``Duration``) to milliseconds, and the
error an empty output topic raises.

    TestRecord("v")                          # Kafka's TestRecord(value): a null key
    TestRecord("k", "v", 1_000)              # key, value, timestamp (ms, or a datetime)
    TestRecord("k", "v", [("h", b"1")], 1_000)   # Kafka's (key, value, headers, recordTime) order
"""
from __future__ import annotations

from collections import namedtuple
from datetime import datetime, timedelta, timezone

from broker.errors import InvalidRequestError

KeyValue = namedtuple("KeyValue", ["key", "value"])

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
_UNSET = object()


def millis(t) -> int:
    """Milliseconds of an epoch time (``datetime``, Kafka's ``Instant.toEpochMilli``), a duration
    (``timedelta``, ``Duration.toMillis``) or a number. Integer arithmetic: float seconds times
    1000 loses a millisecond (``timedelta(milliseconds=1001)`` would give 1000). A naive datetime
    is local time, as ``datetime.timestamp()`` reads it."""
    if isinstance(t, datetime):
        return (t.astimezone(timezone.utc) - _EPOCH) // _MS
    if isinstance(t, timedelta):
        return t // _MS
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise TypeError(f"a time is milliseconds (int), a datetime or a timedelta, not {type(t).__name__}: {t!r}")
    return int(t)


def is_time(t) -> bool:
    """Whether ``t`` reads as a timestamp argument (Kafka's ``Instant``)."""
    return isinstance(t, datetime)


class NoSuchElementError(InvalidRequestError, IndexError):
    """Kafka's ``NoSuchElementException`` from ``TestOutputTopic.readRecord``: the topic has no
    record left to read ("Empty topic"), or the topology never wrote to it ("Uninitialized topic").
    Check ``isEmpty()`` first, or read with ``readRecordsToList()``. An ``IndexError`` too."""


class TestRecord:
    """Kafka's ``TestRecord``: key, value, ``timestamp`` (epoch ms, or None for the input topic's
    clock to give one) and ``headers`` (``(key, bytes)`` pairs). Equal when all four are, as Kafka's."""
    __test__ = False   # not a pytest test class
    __slots__ = ("key", "value", "timestamp", "headers")

    def __init__(self, key=_UNSET, value=_UNSET, timestamp=None, headers=()):
        if value is _UNSET:                        # TestRecord(value)
            key, value = None, (None if key is _UNSET else key)
        if isinstance(timestamp, (list, tuple, dict)):      # Kafka's (key, value, headers[, recordTime])
            if isinstance(headers, (list, tuple, dict)) and headers:
                raise TypeError("TestRecord(key, value, timestamp, headers): both the timestamp and the headers "
                                "are header lists")
            timestamp, headers = (None if isinstance(headers, (list, tuple, dict)) else headers), timestamp
        ts = None if timestamp is None else millis(timestamp)
        if ts is not None and ts < 0:
            raise ValueError(f"Invalid timestamp: {ts}. Timestamp should always be non-negative or null.")
        items = headers.items() if isinstance(headers, dict) else (headers or ())
        for name, v in (("key", key), ("value", value), ("timestamp", ts),
                        ("headers", tuple(tuple(h) for h in items))):
            object.__setattr__(self, name, v)

    def __setattr__(self, name, value):
        raise AttributeError("TestRecord is immutable")

    def _fields(self) -> tuple:
        return self.key, self.value, self.timestamp, self.headers

    def __eq__(self, other):
        return isinstance(other, TestRecord) and self._fields() == other._fields()

    def __hash__(self):
        return hash(tuple(repr(f) for f in self._fields()))

    def __repr__(self):
        return f"TestRecord(key={self.key!r}, value={self.value!r}, timestamp={self.timestamp!r}, " \
               f"headers={self.headers!r})"

    def getKey(self):
        return self.key

    def getValue(self):
        return self.value

    def getHeaders(self) -> tuple:
        return self.headers

    def getRecordTime(self) -> datetime | None:
        """The timestamp as an aware UTC ``datetime`` (Kafka's ``Instant``); ``timestamp`` is the ms."""
        return None if self.timestamp is None else _EPOCH + self.timestamp * _MS
