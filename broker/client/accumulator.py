"""The producer's record accumulator: records in produce order, until the sender drains them.

``produce()`` only appends a record's fields to its topic's flat list (no tuple per record, no
hashing, no Arrow) under one plain lock, which keeps the per-record call cheap; slicing that list
per field gives the columns at drain. The sender thread later drains a topic's records in one go
and converts them to one Arrow batch, which :mod:`broker.client.producer_batch` places on
partitions and cuts into batches. ``RecordAccumulator`` is the one object the application's
thread and the sender thread share: the buffers, the ``buffer.memory`` and outstanding-record
accounting, and the condition both wait on (the sender is woken through it).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from broker.clock import SYSTEM_CLOCK, Clock
from broker.errors import ClientClosedError, QueueFullError
from broker.records.arrow_body import record_batch

FIELDS = 6  # items per record in a _ListChunk: key, value, timestamp, headers, partition, callback


class _ListChunk:
    """Records from ``produce()``, flat: ``FIELDS`` consecutive items per record. Appending the
    items costs less than a tuple per record (which the garbage collector would also track), and
    a stride slice gives each column in one C call."""

    __slots__ = ("rows",)

    def __init__(self):
        self.rows: list = []

    @property
    def count(self) -> int:
        return len(self.rows) // FIELDS

    def to_arrow(self) -> tuple[pa.RecordBatch, np.ndarray, list | None]:
        rows = self.rows
        n = len(rows) // FIELDS
        headers, partitions, callbacks = rows[3::FIELDS], rows[4::FIELDS], rows[5::FIELDS]
        batch = record_batch(rows[0::FIELDS], rows[1::FIELDS], rows[2::FIELDS],
                             None if headers.count(None) == n else headers)
        explicit = (np.full(n, -1, dtype=np.int32) if partitions.count(-1) == n
                    else np.asarray(partitions, dtype=np.int32))
        return batch, explicit, None if callbacks.count(None) == n else callbacks

    def split_unencodable(self) -> tuple["_ListChunk", list[tuple[pa.RecordBatch, object, Exception]]]:
        """The records Arrow can hold, as a chunk, and each one it cannot, as (a one-record batch
        with its key, value and an int timestamp, its callback, why), so a bad record fails alone
        instead of taking the chunk's other records with it. The failure path only: one Arrow call
        per record."""
        good, bad = _ListChunk(), []
        rows = self.rows
        for i in range(0, len(rows), FIELDS):
            key, value, timestamp, headers, _, callback = rows[i:i + FIELDS]
            try:
                record_batch([key], [value], [timestamp], [headers])
            except Exception as e:  # noqa: BLE001 - whatever Arrow refuses: ArrowInvalid, TypeError...
                shown = record_batch([key if isinstance(key, bytes) else None],
                                     [value if isinstance(value, bytes) else None],
                                     [timestamp if type(timestamp) is int and -2**63 <= timestamp < 2**63 else 0])
                bad.append((shown, callback, e))
            else:
                good.rows.extend(rows[i:i + FIELDS])
        return good, bad


@dataclass
class _TableChunk:
    """One ``produce_batch()`` piece: one partition for every row, or each row's (``partition``
    column; -1: the partitioner), which keeps rows for one partition in produce order however
    explicit and partitioner-placed rows alternate."""
    batch: pa.RecordBatch
    partition: int | np.ndarray
    callback: object

    @property
    def count(self) -> int:
        return self.batch.num_rows

    def to_arrow(self):
        n = self.batch.num_rows
        parts = self.partition if isinstance(self.partition, np.ndarray) else np.full(n, self.partition, np.int32)
        return self.batch, parts, ([self.callback] + [None] * (n - 1) if self.callback and n else None)


class TopicBuffer:
    """Records of one topic not yet drained; ``since`` is when the oldest arrived (monotonic): a
    buffer is made for its first record and leaves the accumulator whole when drained.

    ``rows``: the open chunk's flat list ``produce()`` appends to (None after a table: the next
    record opens a new chunk). ``hold_until``: records put back while the topic's metadata is
    unknown wait until then (even during a flush) before the sender looks the topic up again.
    """

    __slots__ = ("chunks", "rows", "bytes", "since", "keyed", "hold_until")

    def __init__(self, since: float = 0.0):
        self.chunks: list = []
        self.rows: list | None = None
        self.bytes = 0
        self.since = since
        self.keyed = False
        self.hold_until = 0.0

    @property
    def count(self) -> int:
        return sum(chunk.count for chunk in self.chunks)

    def open_rows(self) -> list:
        """The flat list ``produce()`` appends a record's ``FIELDS`` items to (a new chunk after a table)."""
        if self.rows is None:
            chunk = _ListChunk()
            self.chunks.append(chunk)
            self.rows = chunk.rows
        return self.rows

    def append_row(self, key, value, timestamp: int, headers=None, partition: int = -1, callback=None,
                   size: int = 0) -> None:
        """One record, outside the accumulator's accounting (the accumulator inlines this)."""
        self.open_rows().extend((key, value, timestamp, headers, partition, callback))
        self.bytes += size

    def absorb(self, newer: "TopicBuffer") -> None:
        """Put the records of ``newer`` (all produced after this buffer's) behind this buffer's.

        ``produce()`` goes on appending to the open chunk, which must therefore be the last one.
        """
        self.chunks.extend(newer.chunks)
        self.rows = newer.rows if newer.chunks else self.rows
        self.bytes += newer.bytes
        self.keyed = self.keyed or newer.keyed

    def add_table(self, batch: pa.RecordBatch, partition: int | np.ndarray, callback, size: int) -> None:
        self.rows = None
        self.chunks.append(_TableChunk(batch, partition, callback))
        self.keyed = True
        self.bytes += size


class RecordAccumulator:
    """Records produced and not yet drained, per topic, and what is owed to the application.

    ``outstanding`` counts records whose delivery report the application has not been served yet
    (``len(producer)``, at most ``max_records``: queue.buffering.max.messages); ``buffered_bytes``
    the ``buffer.memory`` they hold until reported. Every field is guarded by ``lock``, the plain
    lock under ``cond`` (``with lock`` is a C call, ``with cond`` two Python ones: ``append`` takes
    the lock); the sender thread waits on ``cond`` (answers and new records wake it).
    """

    def __init__(self, linger_s: float, batch_size: int, buffer_memory: int, clock: Clock = SYSTEM_CLOCK,
                 max_records: int = 1 << 62, batch_records: int = 10_000):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.linger = linger_s
        self.batch_size = batch_size
        # batch.num.messages: a buffer holding that many records is due without waiting for linger.ms,
        # as librdkafka sends a partition's queue once it holds a batch's worth
        # (rd_kafka_msgq_allow_wakeup_at), whichever of it and batch.size comes first.
        self.batch_records = batch_records
        self._batch_rows = batch_records * FIELDS
        self.buffer_memory = buffer_memory
        self.max_records = max_records
        self.clock = clock
        self._monotonic = clock.monotonic
        self.buffers: dict[str, TopicBuffer] = {}
        self.buffered_bytes = 0
        self.outstanding = 0
        self.flushing = 0
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise ClientClosedError("Producer has been closed")  # confluent-kafka's ERR_MSG_PRODUCER_CLOSED

    def append(self, topic: str, key, value, timestamp: int, headers, partition: int, callback, size: int) -> None:
        """One ``produce()`` record of ``size`` bytes (buffer.memory); its fields already checked.

        The hot path of per-record producing: a few C-level operations under ``lock``.
        """
        with self.lock:
            if self.buffered_bytes + size > self.buffer_memory or self.outstanding >= self.max_records:
                self._refuse(size)
            buf = self.buffers.get(topic)
            if buf is None or buf.rows is None:
                buf = self._open(topic, buf)
            rows = buf.rows
            rows += (key, value, timestamp, headers, partition, callback)   # a list: extended in place
            if key is not None or partition >= 0:
                buf.keyed = True
            buf.bytes += size
            self.buffered_bytes += size
            self.outstanding += 1
            if buf.bytes >= self.batch_size or len(rows) >= self._batch_rows:
                self.cond.notify()

    def _refuse(self, size: int) -> None:
        self.check_open()
        if self.outstanding >= self.max_records:
            raise QueueFullError(f"{self.max_records} records are waiting for delivery (queue.buffering.max.messages):"
                                 " serve delivery reports with poll() and retry")
        raise QueueFullError(f"buffer.memory={self.buffer_memory} is used up; call poll() and retry")

    def _open(self, topic: str, buf: TopicBuffer | None) -> TopicBuffer:
        """The topic's buffer with an open chunk; a new buffer wakes the sender (its linger starts now)."""
        if buf is None:
            self.check_open()
            buf = self.buffers[topic] = TopicBuffer(self._monotonic())
            self.cond.notify()
        buf.open_rows()
        return buf

    def add_table(self, topic: str, piece: pa.RecordBatch, partition: int | np.ndarray, callback, size: int,
                  max_block_ms: int) -> None:
        """One ``produce_batch()`` piece (``partition``: its rows', or each row's); waits up to
        ``max.block.ms`` for buffer space."""
        deadline = self._monotonic() + max_block_ms / 1000.0
        with self.cond:
            while self.buffered_bytes and self.buffered_bytes + size > self.buffer_memory:
                remaining = deadline - self._monotonic()
                if remaining <= 0:
                    raise QueueFullError(f"buffer.memory stayed full for max.block.ms={max_block_ms}")
                self.cond.notify()
                self.cond.wait(min(remaining, 0.05))
            self.check_open()
            buf = self.buffers.get(topic)
            if buf is None:
                buf = self.buffers[topic] = TopicBuffer(self._monotonic())
            buf.add_table(piece, partition, callback, size)
            self.buffered_bytes += size
            self.outstanding += piece.num_rows
            self.cond.notify()

    def release(self, charged: int, records: int = 0) -> None:
        """``charged`` bytes of buffer.memory and ``records`` outstanding records are settled."""
        with self.cond:
            self.buffered_bytes -= charged
            self.outstanding -= records
            self.cond.notify_all()

    def _full(self, buf: TopicBuffer) -> bool:
        """Flushing, closing, or a batch's worth (bytes or records) held; a keyed topic's records
        spread over its partitions, so it waits for four."""
        spread = 4 if buf.keyed else 1
        return bool(self.flushing or self.closed or buf.bytes >= self.batch_size * spread
                    or buf.count >= self.batch_records * spread)

    def wait_time(self, now: float) -> float:
        """How long the sender may sleep before a buffer is due (linger.ms, or a held topic); caller holds ``cond``."""
        waits = [1.0]
        for buf in self.buffers.values():
            if buf.hold_until > now:
                waits.append(buf.hold_until - now)
            elif self._full(buf):
                return 0
            else:
                waits.append(buf.since + self.linger - now)
        return max(0.0, min(waits))

    def take_ready(self, now: float) -> dict[str, TopicBuffer]:
        """The buffers due now, removed; caller holds ``cond``."""
        ready = {}
        for topic, buf in list(self.buffers.items()):
            if buf.hold_until > now:
                continue
            if self._full(buf) or now - buf.since >= self.linger:
                ready[topic] = buf
                del self.buffers[topic]
        return ready

    def hold(self, topic: str, buf: TopicBuffer, until: float) -> None:
        """Put drained records back (their topic's metadata is unknown) ahead of newer ones."""
        with self.cond:
            newer = self.buffers.get(topic)
            if newer is not None:
                buf.absorb(newer)
            buf.hold_until = until
            self.buffers[topic] = buf
