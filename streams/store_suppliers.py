"""Kafka's ``Stores`` factory for ``Materialized.as_(supplier)``: key-value, window and session
store suppliers, with the checks Kafka's factories make. Every Riverlog store is the same kind of
store (a Spark state store behind its changelog), so an in-memory, a persistent and a timestamped
supplier name the store and give its retention; they choose no storage engine.

    counts = grouped.count(Materialized.as_(Stores.inMemoryKeyValueStore("counts")))
    per_minute = grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(60_000)).count(
        Materialized.as_(Stores.persistentWindowStore("per-minute", "1 day", 60_000, False)))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from streams.errors import TopologyError
from streams.versioned import Stores as _VersionedStores


def _name(name) -> str:
    if name is None:        # Kafka's Objects.requireNonNull(name, "name cannot be null")
        raise TopologyError("name cannot be null", argument="name")
    from streams.parameters import check_name
    return check_name(name, "store name")


def _ms(value, what: str) -> int:
    from streams.windows import duration_ms
    ms = duration_ms(value, what)
    if ms < 0:
        raise TopologyError(f"{what} cannot be negative", argument=what)
    return ms


@dataclass(frozen=True)
class KeyValueBytesStoreSupplier:
    """A key-value store's name (Kafka's ``KeyValueBytesStoreSupplier``)."""
    name: str
    store_kind: ClassVar[str] = "keyValue"


@dataclass(frozen=True)
class WindowBytesStoreSupplier:
    """A window store's name, retention and window size (Kafka's ``WindowBytesStoreSupplier``)."""
    name: str
    retentionPeriod: int
    windowSize: int
    retainDuplicates: bool = False
    store_kind: ClassVar[str] = "window"


@dataclass(frozen=True)
class SessionBytesStoreSupplier:
    """A session store's name and retention (Kafka's ``SessionBytesStoreSupplier``)."""
    name: str
    retentionPeriod: int
    store_kind: ClassVar[str] = "session"


def _window(name, retentionPeriod, windowSize, retainDuplicates) -> WindowBytesStoreSupplier:
    name = _name(name)
    retention, size = _ms(retentionPeriod, "retentionPeriod"), _ms(windowSize, "windowSize")
    if size > retention:    # Kafka's Stores.persistentWindowStore
        raise TopologyError(f"The retention period of the window store {name} must be no smaller than its window "
                            f"size. Got size=[{size}], retention=[{retention}]", argument="retentionPeriod")
    if retainDuplicates:
        # a duplicate-keeping store serves a stream-stream join's windows; an aggregation updates
        # one value per window, which such a store would keep adding to instead
        raise TopologyError(f"window store {name}: retainDuplicates=True keeps every put of a window; "
                            "an aggregation's store keeps one value per window", argument="retainDuplicates")
    return WindowBytesStoreSupplier(name, retention, size, False)


class Stores(_VersionedStores):
    """Kafka's ``Stores`` store-supplier factories (``persistentVersionedKeyValueStore`` too)."""

    @staticmethod
    def persistentKeyValueStore(name) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(_name(name))

    @staticmethod
    def persistentTimestampedKeyValueStore(name) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(_name(name))

    @staticmethod
    def inMemoryKeyValueStore(name) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(_name(name))

    @staticmethod
    def persistentWindowStore(name, retentionPeriod, windowSize, retainDuplicates) -> WindowBytesStoreSupplier:
        return _window(name, retentionPeriod, windowSize, retainDuplicates)

    @staticmethod
    def persistentTimestampedWindowStore(name, retentionPeriod, windowSize,
                                         retainDuplicates) -> WindowBytesStoreSupplier:
        return _window(name, retentionPeriod, windowSize, retainDuplicates)

    @staticmethod
    def inMemoryWindowStore(name, retentionPeriod, windowSize, retainDuplicates) -> WindowBytesStoreSupplier:
        return _window(name, retentionPeriod, windowSize, retainDuplicates)

    @staticmethod
    def persistentSessionStore(name, retentionPeriod) -> SessionBytesStoreSupplier:
        return SessionBytesStoreSupplier(_name(name), _ms(retentionPeriod, "retentionPeriod"))

    @staticmethod
    def inMemorySessionStore(name, retentionPeriod) -> SessionBytesStoreSupplier:
        return SessionBytesStoreSupplier(_name(name), _ms(retentionPeriod, "retentionPeriod"))
