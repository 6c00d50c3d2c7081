"""Sparse offset index: where in the segment's ``.log`` a batch starts.

File layout (``<base offset>.index``): 8-byte entries, big-endian ``uint32 relative_offset``
(batch base offset minus segment base offset) and ``uint32 position`` (byte offset of that batch
in the .log). One entry is added whenever ``index.interval.bytes`` of log were written since the
last one, so a lookup lands at most that many bytes before the wanted batch.
"""
from __future__ import annotations

import struct

from broker.storage.index_file import IndexFile


class OffsetIndex(IndexFile):
    ENTRY = struct.Struct(">II")

    def append(self, offset: int, position: int) -> None:
        self._append(offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(batch base offset, position) of the last indexed batch at or before ``offset``."""
        i = self.floor(offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.keys[i], self.values[i]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for batches at or after ``offset``."""
        self.truncate_entries(self.floor(offset - self.base_offset - 1) + 1)

    def last_position(self) -> int:
        return self.values[-1] if self.values else 0
