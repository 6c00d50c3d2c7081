"""Append-only index files of fixed-size entries, mirrored in memory.

Both segment indexes share this shape: a file of big-endian fixed-size entries whose first field
is sorted. Entries are appended in memory and written on ``flush`` (the segment fsyncs them with
its log). Indexes are derived data: after an unclean shutdown a segment rebuilds them from its
log instead of trusting them, and ``load`` refuses a file whose size or ordering is off.
"""
from __future__ import annotations

import bisect
import os
import struct


class IndexFile:
    """Entries as two parallel lists (sorted keys, values); not thread-safe (the Log locks)."""

    ENTRY: struct.Struct

    def __init__(self, path: str, base_offset: int, keys: list[int] | None = None,
                 values: list[int] | None = None):
        self.path = path
        self.base_offset = base_offset
        self.keys = keys or []
        self.values = values or []
        self._written = len(self.keys)

    @classmethod
    def load(cls, path: str, base_offset: int):
        """The index stored at ``path``, or None when missing, torn or out of order."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        if len(raw) % cls.ENTRY.size:
            return None
        keys, values = [], []
        for key, value in cls.ENTRY.iter_unpack(raw):
            if keys and (key < keys[-1] or value < values[-1]):
                return None
            keys.append(key)
            values.append(value)
        return cls(path, base_offset, keys, values)

    def __len__(self) -> int:
        return len(self.keys)

    def _append(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)

    def floor(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``, or -1."""
        return bisect.bisect_right(self.keys, key) - 1

    def truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries; the file is rewritten on the next flush."""
        if count < len(self.keys):
            del self.keys[count:]
            del self.values[count:]
            self._written = -1

    def flush(self, fsync: bool = False) -> None:
        if self._written == len(self.keys) and os.path.exists(self.path):
            return
        rewrite = self._written < 0 or not os.path.exists(self.path)
        start = 0 if rewrite else self._written
        data = b"".join(self.ENTRY.pack(k, v) for k, v in zip(self.keys[start:], self.values[start:]))
        with open(self.path, "wb" if rewrite else "ab") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        self._written = len(self.keys)

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
