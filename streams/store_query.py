"""Kafka's ``StoreQueryParameters`` and ``QueryableStoreTypes``: what ``StreamsApp.store`` is asked
for in Kafka's own words, so ``streams.store(StoreQueryParameters.fromNameAndType("counts",
QueryableStoreTypes.keyValueStore()))`` reads as it does in Java.

    app.store(StoreQueryParameters.fromNameAndType("counts", QueryableStoreTypes.timestampedKeyValueStore())
              .withPartition(2))

A type that does not fit the store's kind is refused with Kafka's ``InvalidStateStoreException``
message; ``enableStaleStores()`` is kept and has no effect: every view is read from the committed
changelog, which is what an active and a standby store both restore from.
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class QueryableStoreType:
    """Which read-only view is wanted: the store kind it accepts, and whether values come as
    Kafka's ``ValueAndTimestamp``."""
    name: str
    kind: str
    timestamped: bool = False

    def accepts(self, kind: str) -> bool:
        return kind == self.kind

    def __str__(self) -> str:
        return self.name


class QueryableStoreTypes:
    """Kafka's ``QueryableStoreTypes`` factory methods."""

    @staticmethod
    def keyValueStore() -> QueryableStoreType:
        return QueryableStoreType("KeyValueStoreType", "keyValue")

    @staticmethod
    def timestampedKeyValueStore() -> QueryableStoreType:
        return QueryableStoreType("TimestampedKeyValueStoreType", "keyValue", timestamped=True)

    @staticmethod
    def windowStore() -> QueryableStoreType:
        return QueryableStoreType("WindowStoreType", "window")

    @staticmethod
    def timestampedWindowStore() -> QueryableStoreType:
        return QueryableStoreType("TimestampedWindowStoreType", "window", timestamped=True)

    @staticmethod
    def sessionStore() -> QueryableStoreType:
        return QueryableStoreType("SessionStoreType", "session")


@dataclass(frozen=True)
class StoreQueryParameters:
    """Kafka's ``StoreQueryParameters``: immutable, each ``with…`` gives a new one."""
    _store_name: str
    _type: QueryableStoreType
    _partition: int | None = None
    _stale: bool = False

    @staticmethod
    def fromNameAndType(storeName: str, queryableStoreType: QueryableStoreType) -> "StoreQueryParameters":
        return StoreQueryParameters(storeName, queryableStoreType)

    def withPartition(self, partition: int | None) -> "StoreQueryParameters":
        return replace(self, _partition=partition)

    def enableStaleStores(self) -> "StoreQueryParameters":
        return replace(self, _stale=True)

    def storeName(self) -> str:
        return self._store_name

    def queryableStoreType(self) -> QueryableStoreType:
        return self._type

    def partition(self) -> int | None:
        return self._partition

    def staleStoresEnabled(self) -> bool:
        return self._stale
