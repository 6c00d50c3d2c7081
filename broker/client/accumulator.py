"""The producer's record accumulator: records in produce order, turned into partition batches.

``produce()`` only appends a record's fields to its topic's flat list (no tuple per record, no
hashing, no Arrow) under one plain lock, which keeps the per-record call cheap; slicing that list
per field gives the columns at drain. The sender thread later drains a topic's records in one go,
converts them to one Arrow batch, places keyed records with Kafka's murmur2 (vectorised) and unkeyed
ones stickily (one partition per batch, moving on after each), groups by partition preserving
produce order, and cuts batches of at most ``batch.size`` bytes / ``batch.num.messages`` records.
``RecordAccumulator`` is the one object the application's thread and the sender thread share:
the buffers, the ``buffer.memory`` and outstanding-record accounting, and the condition both wait
on (the sender is woken through it). Everything else here is pure: ``build_batches`` and friends
run on the sender thread without a lock.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.client.partitioner import partitions_with
from broker.clock import SYSTEM_CLOCK, Clock
from broker.errors import ClientClosedError, QueueFullError
from broker.records.arrow_body import HEADER_TYPE, SCHEMA, encode_batch, record_batch

RECORD_OVERHEAD = 32  # Arrow bytes per record besides key and value (offsets, timestamp, validity)
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
                 max_records: int = 1 << 62):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.linger = linger_s
        self.batch_size = batch_size
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
            buf.rows += (key, value, timestamp, headers, partition, callback)
            if key is not None or partition >= 0:
                buf.keyed = True
            buf.bytes += size
            self.buffered_bytes += size
            self.outstanding += 1
            if buf.bytes >= self.batch_size:
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
        return self.flushing or self.closed or buf.bytes >= self.batch_size * (4 if buf.keyed else 1)

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


@dataclass
class ProducerBatch:
    """One framed batch bound for one partition, and what its delivery reports need."""
    topic: str
    partition: int
    data: bytes
    records: pa.RecordBatch
    callbacks: list | None
    created: float
    size: int = 0
    size_charged: int = 0  # buffer.memory bytes released when the batch is reported
    attempts: int = 0
    retry_at: float = 0.0
    sequence: int = 0  # the sender's enqueue order; a partition's batches are written in this order
    base_sequence: int | None = None  # idempotence: set (in the header too) when first sent
    producer_epoch: int = -1
    purged: bool = False  # purge() reported it while in flight: its answer reports nothing

    @property
    def count(self) -> int:
        return self.records.num_rows


@dataclass
class StickyPartitioner:
    """Unkeyed records go to one partition per batch, then to the next (Kafka's KIP-480 idea)."""
    current: dict[str, int] = field(default_factory=dict)

    def runs(self, topic: str, num_partitions: int, count: int) -> np.ndarray:
        start = self.current.get(topic)
        if start is None or start >= num_partitions:
            start = random.randrange(num_partitions)
        parts = (start + np.arange(count)) % num_partitions
        self.current[topic] = int((start + count) % num_partitions)
        return parts.astype(np.int32)


def normalise_table(table, now_ms: int) -> pa.RecordBatch:
    """A user's table (key/value/timestamp/headers columns, any subset but value) as one ``SCHEMA`` batch."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    names = set(table.column_names)
    if "value" not in names:
        raise ValueError("produce_batch needs a 'value' column (binary or string)")
    unknown = names - {"key", "value", "timestamp", "headers"}
    if unknown:
        raise ValueError(f"produce_batch got unexpected column(s) {sorted(unknown)}; "
                         "expected key, value, timestamp, headers")
    n = table.num_rows

    def binary(name):
        if name not in names:
            return pa.nulls(n, pa.binary())
        col = table.column(name)
        return col.cast(pa.binary()) if col.type != pa.binary() else col

    if "timestamp" in names:
        ts = table.column("timestamp")
        if pa.types.is_timestamp(ts.type):
            # Kafka's timestamps are milliseconds: finer precision is dropped, as Spark's Kafka sink does
            ts = ts.cast(pa.timestamp("ms", tz=ts.type.tz), safe=False).cast(pa.int64())
        else:
            ts = ts.cast(pa.int64())
        ts = pc.fill_null(ts, now_ms)
    else:
        ts = pa.array(np.full(n, now_ms, dtype=np.int64))
    headers = table.column("headers").cast(HEADER_TYPE) if "headers" in names else pa.nulls(n, HEADER_TYPE)
    columns = [binary("key"), binary("value"), ts, headers]
    combined = pa.Table.from_arrays(columns, schema=SCHEMA).combine_chunks()
    batches = combined.to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=SCHEMA)


def partition_column(table, partition: int) -> tuple[object, np.ndarray | None]:
    """A ``produce_batch()`` table's ``partition`` column taken out: the table without it and each
    row's partition as int32 (null: ``partition``, -1 the partitioner), or None without the column.
    Another negative partition is librdkafka's _UNKNOWN_PARTITION on delivery, as in ``produce()``."""
    names = table.schema.names
    if "partition" not in names:
        return table, None
    column = table.column(names.index("partition"))
    if not pa.types.is_integer(column.type):
        raise ValueError(f"produce_batch's 'partition' column must be an integer type, got {column.type}")
    try:
        parts = pc.fill_null(column.cast(pa.int32()), partition)
    except pa.ArrowInvalid:
        raise OverflowError("a 'partition' of produce_batch does not fit a signed 32-bit integer") from None
    if isinstance(parts, pa.ChunkedArray):
        parts = parts.combine_chunks()
    rest = table.drop_columns(["partition"]) if isinstance(table, pa.Table) else \
        pa.RecordBatch.from_arrays([table.column(i) for i, n in enumerate(names) if n != "partition"],
                                   names=[n for n in names if n != "partition"])
    return rest, parts.to_numpy(zero_copy_only=False).astype(np.int32)


def record_bytes(batch: pa.RecordBatch) -> np.ndarray:
    """Each ``SCHEMA`` record's key, value and header bytes (header keys in UTF-8 and values): what
    ``produce()`` holds against message.max.bytes, as librdkafka's ``rd_kafka_msg_max_wire_size``
    counts a message's key, payload and headers."""
    sizes = record_sizes(batch) - RECORD_OVERHEAD
    headers = batch.column(3)
    if headers.null_count == len(headers):
        return sizes
    entries = pc.list_flatten(headers)
    if len(entries):
        entry = pc.add(pc.fill_null(pc.binary_length(entries.field("key")), 0),
                       pc.fill_null(pc.binary_length(entries.field("value")), 0))
        sizes += np.bincount(pc.list_parent_indices(headers).to_numpy(zero_copy_only=False),
                             entry.to_numpy(zero_copy_only=False), len(sizes)).astype(np.int64)
    return sizes


def assign_partitions(batch: pa.RecordBatch, explicit: np.ndarray, num_partitions: int,
                      topic: str, sticky: StickyPartitioner, batch_size: int,
                      partitioner: str = "murmur2_random", sizes: np.ndarray | None = None) -> np.ndarray:
    """Partition of every record: explicit ones kept, the others by ``partitioner`` (murmur2 of the
    key by default), those it leaves to chance sticky by batch (``sizes``: ``record_sizes(batch)``)."""
    parts = explicit.copy()
    todo = parts == -1   # librdkafka's RD_KAFKA_PARTITION_UA; other negatives stay (the sender fails them)
    if not todo.any():
        return parts
    keys = batch.column(0)
    keyed = (np.full(len(parts), -1, dtype=np.int32)
             if keys.null_count == len(keys) and partitioner.endswith("random")
             else partitions_with(partitioner, keys, num_partitions))
    use_key = todo & (keyed >= 0)
    parts[use_key] = keyed[use_key]
    unkeyed = todo & (keyed < 0)
    if unkeyed.any():
        sizes = (record_sizes(batch) if sizes is None else sizes)[unkeyed]
        run_of = (np.cumsum(sizes) - sizes) // max(1, batch_size)
        runs = sticky.runs(topic, num_partitions, int(run_of[-1]) + 1)
        parts[unkeyed] = runs[run_of]
    return parts


def record_sizes(batch: pa.RecordBatch) -> np.ndarray:
    """Each record's key and value bytes plus ``RECORD_OVERHEAD`` (what buffer.memory is charged)."""
    sizes = np.full(batch.num_rows, RECORD_OVERHEAD, dtype=np.int64)
    for i in (0, 1):
        column = batch.column(i)
        if column.null_count == len(column):
            continue
        if column.null_count:
            sizes += pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False)
        else:  # from the offsets: no kernel call, no copy
            offsets = np.frombuffer(column.buffers()[1], dtype=np.int64 if pa.types.is_large_binary(column.type)
                                    else np.int32)[column.offset: column.offset + len(column) + 1]
            sizes += np.diff(offsets)
    return sizes


def build_batches(topic: str, batch: pa.RecordBatch, parts: np.ndarray, callbacks: list | None,
                  created: float, batch_size: int, batch_records: int, compression: str,
                  max_bytes: int, sizes: np.ndarray | None = None) -> list[ProducerBatch]:
    """Group ``batch`` by partition (stable) and frame batches within the size limits
    (``sizes``: ``record_sizes(batch)``, if the caller has it).

    Sizes are estimated from keys and values to cut batches near ``batch_size``; a framed batch
    that still exceeds ``max_bytes`` (message.max.bytes) is split in two until it fits.
    """
    out: list[ProducerBatch] = []
    if batch.num_rows == 0:
        return out
    if (parts == parts[0]).all():
        groups = [(int(parts[0]), np.arange(batch.num_rows))]
        ordered, order = batch, None
        sizes = record_sizes(batch) if sizes is None else sizes
    else:
        order = np.argsort(parts, kind="stable")
        ordered = batch.take(pa.array(order))
        sorted_parts = parts[order]
        bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [len(order)]))
        groups = [(int(sorted_parts[s]), np.arange(s, e)) for s, e in zip(starts, ends)]
        sizes = record_sizes(ordered) if sizes is None else sizes[order]
    for partition, rows in groups:
        start, stop = int(rows[0]), int(rows[-1]) + 1
        cum = np.cumsum(sizes[start:stop])
        cut = start
        while cut < stop:
            limit = np.searchsorted(cum, (cum[cut - start - 1] if cut > start else 0) + batch_size, "right")
            end = min(stop, start + max(int(limit), cut - start + 1), cut + batch_records)
            piece = ordered.slice(cut, end - cut)
            cbs = None
            if callbacks is not None:
                idx = range(cut, end) if order is None else order[cut:end]
                cbs = [callbacks[i] for i in idx]
                if not any(cbs):
                    cbs = None
            for part, part_cbs, data in _encode_within(piece, cbs, compression, max_bytes):
                out.append(ProducerBatch(topic, partition, data, part, part_cbs, created, size=len(data)))
            cut = end
    return out


def _encode_within(piece: pa.RecordBatch, callbacks, compression: str, max_bytes: int):
    data = encode_batch(piece, compression)
    if len(data) <= max_bytes or piece.num_rows == 1:
        yield piece, callbacks, data
        return
    half = piece.num_rows // 2
    for start, stop in ((0, half), (half, piece.num_rows)):
        yield from _encode_within(piece.slice(start, stop - start),
                                  None if callbacks is None else callbacks[start:stop], compression, max_bytes)
