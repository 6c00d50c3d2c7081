"""Decoded records waiting for the application: one ``Chunk`` per decoded batch, in arrival order.

Kafka's consumer calls these its completed fetches and its fetch buffer. The fetcher appends
chunks as responses are decoded; ``poll()`` walks the head chunk record by record
(``FetchState.take_one``, where the position moves in the same step: it runs once per record) and
``poll_batch()`` slices it (:meth:`FetchBuffer.take_slice`).
The owner (:class:`broker.client.fetch_state.FetchState`) decides which chunk is current and
records the positions that follow: the buffer knows records, not partitions' lifecycles.

Bytes are counted so prefetching stops at ``queued.max.messages.kbytes``. An error event that must
keep its place among a partition's records (a batch that could not be decoded) is a chunk with no
rows and an ``error``.

Not thread-safe: the consumer calls it under its own lock.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from broker.errors import RiverlogError
from broker.records import arrow_arrays
from broker.records.arrow_body import SCHEMA

BATCH_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.int64()), ("timestamp_type", pa.int8()),
    ("key", pa.binary()), ("value", pa.binary()),
    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
])

NO_RECORDS = arrow_arrays.empty_batch(SCHEMA)


@dataclass
class Chunk:
    """Decoded records of one partition awaiting the application."""
    topic: str
    partition: int
    generation: int
    base_offset: int
    records: pa.RecordBatch
    log_append_time: bool
    cursor: int = 0
    rows: tuple | None = None  # Python lists, made when poll() first walks the chunk
    end_offset: int = -1       # the position once the chunk is used up: past markers and aborted batches
    error: RiverlogError | None = None  # an error event in its place among the records (no rows)
    leader_epoch: int = -1     # the batch's partition leader epoch: the position's once a record is taken
    jumped: bool = False       # end_offset is an offset reset's: the position's epoch is unknown past it
    end_epoch: int = -1        # the epoch of the batch end_offset follows (a marker, an aborted batch), -1 unknown

    @property
    def remaining(self) -> int:
        return self.records.num_rows - self.cursor

    def python_rows(self) -> tuple:
        """(keys, values, timestamps, headers or None) as Python lists, made once per chunk when
        ``poll()`` first walks it: one conversion per column instead of one per record."""
        if self.rows is None:
            r = self.records
            self.rows = (r.column(0).to_pylist(), r.column(1).to_pylist(), r.column(2).to_pylist(),
                         r.column(3).to_pylist() if r.column(3).null_count < r.num_rows else None)
        return self.rows

    def next_position(self, after: int) -> int:
        """The position once the records up to ``after`` are taken: past the markers and aborted
        batches that follow the last record when the chunk is used up."""
        return max(after, self.end_offset) if self.cursor == self.records.num_rows else after

    def epoch_at(self, position: int, record_epoch: int) -> int:
        """The epoch of ``position`` once the chunk's records up to it are taken: the last record's,
        or past the markers and aborted batches after it theirs; unknown past an offset reset."""
        if position <= self.base_offset + self.records.num_rows:
            return record_epoch
        return -1 if self.jumped else self.end_epoch


class FetchBuffer:
    """The bounded queue of chunks between the fetcher and the application."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes = limit_bytes
        self.chunks: collections.deque[Chunk] = collections.deque()
        self.queued_bytes = 0

    def full(self) -> bool:
        return self.queued_bytes >= self.limit_bytes

    def append(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)
        self.queued_bytes += chunk.records.nbytes

    def clear(self) -> None:
        self.chunks.clear()
        self.queued_bytes = 0

    def drop(self, key: tuple[str, int]) -> None:
        """Forget everything queued for one partition (it was sought, or unassigned)."""
        kept = collections.deque()
        for chunk in self.chunks:
            if (chunk.topic, chunk.partition) == key:
                self.queued_bytes -= chunk.records.nbytes
            else:
                kept.append(chunk)
        self.chunks = kept

    def take(self, key: tuple[str, int]) -> list[Chunk]:
        """Take out, in order, everything queued for one partition (set aside while it is paused)."""
        taken = [c for c in self.chunks if (c.topic, c.partition) == key]
        self.drop(key)
        return taken

    def last_of(self, key: tuple[str, int], generation: int) -> Chunk | None:
        return next((c for c in reversed(self.chunks)
                     if (c.topic, c.partition) == key and c.generation == generation), None)

    def pop_head(self) -> None:
        chunk = self.chunks.popleft()
        self.queued_bytes -= chunk.records.nbytes

    @staticmethod
    def take_slice(chunk: Chunk, n: int) -> tuple[pa.RecordBatch, int]:
        """(the head chunk's next ``n`` records in ``BATCH_SCHEMA``, the position after them)."""
        records = chunk.records.slice(chunk.cursor, n)
        start = chunk.base_offset + chunk.cursor
        chunk.cursor += n
        batch = pa.RecordBatch.from_arrays([
            arrow_arrays.repeated_string(chunk.topic, n),
            arrow_arrays.full(n, chunk.partition, pa.int32()),
            arrow_arrays.integers(np.arange(start, start + n, dtype=np.int64)),
            records.column(2),
            arrow_arrays.full(n, 1 if chunk.log_append_time else 0, pa.int8()),
            records.column(0), records.column(1), records.column(3),
        ], schema=BATCH_SCHEMA)
        return batch, chunk.next_position(start + n)
