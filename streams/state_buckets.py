"""A store's entries in Spark's ``MapState``, many entries to a map entry (a *bucket*).

Each ``MapState`` call is a round trip to the JVM (~100 µs), so one map entry per store entry
made a batch that touched 10,000 keys pay 20,000 round trips. Entries are instead grouped by
``crc32(key) mod 2**level`` into buckets (a pickled ``{key bytes: value bytes}`` behind a format
byte), and a batch reads and writes each bucket it touches once. The level grows with the store,
one bit at a time, so a bucket holds about ``TARGET`` entries on average: few enough that touching
one key of a large store reads little, many enough that touching every key of a small one is a
few hundred calls. Growing is linear hashing's split: bucket ``i``'s entries go to ``i`` or
``i + 2**level``.

A header entry holds the level and the entry count. The changelog still gets one row per store
entry (the bytes the bucket holds), so restoring and interactive queries do not see buckets; a
restore groups the changelog into buckets in Spark (:func:`bucket_column`) and writes each once.
"""
from __future__ import annotations

import pickle
import struct
import zlib
from typing import Iterator

from streams.errors import StreamsError
from streams.state_codec import decode_key, decode_value, encode_key, encode_value

HEADER = b"\xff\xff"          # store keys are JSON text: they never start with 0xff
BUCKET = b"\xff\x00"
BLOB_FORMAT = 2
MIN_LEVEL = 4
TARGET = 64                   # entries per bucket on average before the buckets double


class StateLayoutError(StreamsError):
    """A checkpoint whose state has entries but no bucket header: written one entry per map entry,
    before buckets. Not read (its entries would be missed, silently): the message says to rebuild."""
    code, name, retriable, grpc_status = 1270, "STATE_LAYOUT_UNKNOWN", False, "FAILED_PRECONDITION"


def bucket_of(kb: bytes, level: int) -> int:
    return zlib.crc32(kb) & ((1 << level) - 1)


def bucket_key(bucket: int) -> bytes:
    return BUCKET + bucket.to_bytes(4, "big")


def level_for(count: int, level: int = MIN_LEVEL) -> int:
    """The smallest level from ``level`` up whose buckets hold ``TARGET`` entries on average."""
    while count > TARGET << level:
        level += 1
    return level


def encode_blob(entries: dict) -> bytes:
    return bytes([BLOB_FORMAT]) + pickle.dumps(entries, protocol=5)


def decode_blob(data: bytes) -> dict:
    if not data or data[0] != BLOB_FORMAT:
        raise ValueError(f"state bucket format {data[:1]!r} is not {BLOB_FORMAT}: written by another version?")
    return pickle.loads(data[1:])


def encode_header(level: int, count: int) -> bytes:
    return struct.pack(">BIQ", BLOB_FORMAT, level, count)


def decode_header(data: bytes) -> tuple[int, int]:
    fmt, level, count = struct.unpack(">BIQ", data)
    if fmt != BLOB_FORMAT:
        raise ValueError(f"state header format {fmt} is not {BLOB_FORMAT}: written by another version?")
    return level, count


def bucket_column(key_col: str = "key", level_col: str = "level") -> str:
    """The SQL expression of :func:`bucket_of` (Spark's ``crc32`` is zlib's)."""
    return f"CAST(crc32({key_col}) & (shiftleft(CAST(1 AS BIGINT), {level_col}) - 1) AS INT)"


class BucketedBacking:
    """A store's backing over a ``MapState``: each bucket read once and written once a batch,
    every changed entry also a changelog row."""

    def __init__(self, state, topic: str | None):
        self.state, self.topic = state, topic
        self.cache: dict = {}            # store key -> value (None: absent)
        self.dirty: set = set()
        self.buckets: dict[int, dict] = {}   # loaded buckets: id -> {key bytes: value bytes}
        self.stored: set[int] = set()        # loaded buckets that exist in the MapState
        self.header: tuple[int, int] | None = None

    def _level(self) -> int:
        if self.header is None:
            row = self.state.getValue((HEADER,))
            if row is None and self.state.exists():
                raise StateLayoutError(
                    "this checkpoint's state was written without buckets, by an earlier version of Riverlog; "
                    "stop the application, delete its checkpoint (state.dir/<application.id>) and start it "
                    "again: it rebuilds its state from the changelog topics")
            self.header = decode_header(row[0]) if row is not None else (MIN_LEVEL, 0)
        return self.header[0]

    def _bucket(self, bucket: int) -> dict:
        entries = self.buckets.get(bucket)
        if entries is None:
            row = self.state.getValue((bucket_key(bucket),))
            entries = {} if row is None else decode_blob(row[0])
            if row is not None:
                self.stored.add(bucket)
            self.buckets[bucket] = entries
        return entries

    def get(self, key):
        if key in self.cache:
            return self.cache[key]
        kb = encode_key(key)
        vb = self._bucket(bucket_of(kb, self._level())).get(kb)
        value = decode_value(vb) if vb is not None else None
        self.cache[key] = value
        return value

    def put(self, key, value):
        self.cache[key] = value
        self.dirty.add(key)

    def delete(self, key):
        self.cache[key] = None
        self.dirty.add(key)

    def _stored_entries(self, stored: list | None = None) -> dict:
        """Every entry in the MapState, the loaded (and perhaps changed) buckets over it."""
        out: dict = {}
        loaded = {bucket_key(b) for b in self.buckets}
        for (k,), (v,) in (stored if stored is not None else self.state.iterator()):
            if k != HEADER and k not in loaded:
                out.update(decode_blob(v))
        for entries in self.buckets.values():
            out.update(entries)
        return out

    def items(self):
        seen = {decode_key(kb): decode_value(vb) for kb, vb in self._stored_entries().items()}
        for k in self.dirty:
            seen[k] = self.cache[k]
        return iter([(k, v) for k, v in seen.items() if v is not None])

    def flush(self, partition: int, timestamp) -> Iterator[tuple]:
        if not self.dirty:
            return iter(())
        level = self._level()
        count = self.header[1]
        rows, changed = [], set()
        for key in sorted(self.dirty, key=encode_key):
            kb = encode_key(key)
            value = self.cache[key]
            b = bucket_of(kb, level)
            entries = self._bucket(b)
            if value is None:
                vb = None
                if entries.pop(kb, None) is not None:
                    count -= 1
            else:
                vb = encode_value(value)
                count += kb not in entries
                entries[kb] = vb
            changed.add(b)
            if self.topic is not None:
                rows.append((self.topic, partition, kb, vb, timestamp, []))
        grown = level_for(count, level)
        if grown > level:
            self._regroup(grown)
        else:
            for b in sorted(changed):
                self._write(b, self.buckets[b])
        if (grown, count) != self.header:
            self.state.updateValue((HEADER,), (encode_header(grown, count),))
            self.header = (grown, count)
        self.dirty.clear()
        return iter(rows)

    def _write(self, bucket: int, entries: dict) -> None:
        if entries:
            self.state.updateValue((bucket_key(bucket),), (encode_blob(entries),))
            self.stored.add(bucket)
        elif bucket in self.stored:
            self.state.removeKey((bucket_key(bucket),))
            self.stored.discard(bucket)

    def _regroup(self, level: int) -> None:
        """Every entry into the buckets of ``level`` (old buckets left empty are removed)."""
        stored = list(self.state.iterator())
        old = {k for (k,), _ in stored if k != HEADER}
        regrouped: dict[int, dict] = {}
        for kb, vb in self._stored_entries(stored).items():
            regrouped.setdefault(bucket_of(kb, level), {})[kb] = vb
        for b, entries in regrouped.items():
            self.state.updateValue((bucket_key(b),), (encode_blob(entries),))
        for k in old - {bucket_key(b) for b in regrouped}:
            self.state.removeKey((k,))
        self.buckets, self.stored = regrouped, set(regrouped)
