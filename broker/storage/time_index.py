"""Sparse time index: how far into a segment records stay older than a timestamp.

File layout (``<base offset>.timeindex``): 12-byte entries, big-endian ``int64 timestamp`` and
``uint32 relative_offset``. An entry (t, o) says: every record before offset ``base + o`` has a
timestamp <= t. Entries are added when the segment's largest timestamp grew and
``index.interval.bytes`` passed, and once more when the segment stops being active, so the last
entry carries the segment's largest timestamp.
"""
from __future__ import annotations

import bisect
import struct

from broker.storage.index_file import IndexFile


class TimeIndex(IndexFile):
    ENTRY = struct.Struct(">qI")

    def maybe_append(self, timestamp: int, next_offset: int) -> None:
        """Record that records below ``next_offset`` are no newer than ``timestamp``."""
        relative = next_offset - self.base_offset
        if self.keys and (timestamp <= self.keys[-1] or relative <= self.values[-1]):
            return
        self._append(timestamp, relative)

    def scan_start(self, timestamp: int) -> int:
        """The offset from which a record with a timestamp >= ``timestamp`` can first appear."""
        i = bisect.bisect_left(self.keys, timestamp) - 1
        return self.base_offset + (self.values[i] if i >= 0 else 0)

    def max_timestamp(self) -> int:
        return self.keys[-1] if self.keys else -1

    def truncate_to(self, offset: int) -> None:
        """Drop entries that describe records at or after ``offset``."""
        relative = offset - self.base_offset
        self.truncate_entries(bisect.bisect_right(self.values, relative))
