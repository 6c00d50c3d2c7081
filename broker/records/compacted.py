"""Replaying a compacted key/value topic: what survives is the latest value of each key."""
from __future__ import annotations

from collections.abc import Iterable


def latest_values(records: Iterable[tuple[bytes, bytes | None]]) -> dict[bytes, bytes]:
    """The last value of every key, oldest record first; a null value (tombstone) deletes the key."""
    latest: dict[bytes, bytes] = {}
    for key, value in records:
        if value is None:
            latest.pop(key, None)
        else:
            latest[key] = value
    return latest
