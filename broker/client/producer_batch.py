"""Drained records into partition batches: pure functions the sender thread runs without a lock.

A topic's drained records arrive as one Arrow batch. ``assign_partitions`` places keyed records
with the configured partitioner (Kafka's murmur2 by default, vectorised) and unkeyed ones
stickily (``StickyPartitioner``: one partition for ``sticky.partitioning.linger.ms``, as librdkafka);
``build_batches`` groups them by partition preserving produce order and cuts ``ProducerBatch``es
of at most ``batch.size`` bytes / ``batch.num.messages`` records, each framed once. A user's
Arrow table is brought to the record schema by ``normalise_table`` first.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.client.partitioner import partitions_with
from broker.records import arrow_arrays
from broker.records.arrow_body import HEADER_TYPE, SCHEMA, encode_batch

RECORD_OVERHEAD = 32  # Arrow bytes per record besides key and value (offsets, timestamp, validity)

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
    attempts: int = 0  # times sent again after a failure (a resend goes alone in its request)
    retries: int = 0   # those that count against ``retries``: not after stale metadata (librdkafka's)
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
    """Where unkeyed records go: librdkafka's sticky partitioner (``rd_kafka_msg_sticky_partition``).

    A topic's unkeyed records stick to one partition for ``linger`` seconds
    (``sticky.partitioning.linger.ms``) from when it was picked, then a random one is picked; with
    ``linger`` 0 each record goes to a random partition. librdkafka measures the time per record at
    ``produce()``; here it is the sender's clock when a topic's records are drained (every
    ``linger.ms``), so a drain's records share the partition. Records drained together beyond
    ``batch.size`` bytes (a large ``produce_batch``) go on to the next partitions in turn, a batch
    each (``runs``), rather than all to one partition.

    Only partitions with a leader (``available``, when the caller knows them) are chosen, as
    Kafka's ``BuiltInPartitioner`` and librdkafka's random partitioner avoid a partition without
    one: records sent there would wait for a leader, maybe until delivery.timeout.ms, while the
    topic's other partitions take writes; a kept partition that lost its leader is left at once,
    as librdkafka's. With none available every partition is a candidate."""
    current: dict[str, int] = field(default_factory=dict)  # where the topic's next run starts
    linger: float = 0.010
    kept: dict[str, tuple[int, float]] = field(default_factory=dict)  # the partition kept, until when

    def runs(self, topic: str, num_partitions: int, count: int, available=None,
             now: float | None = None) -> np.ndarray:
        """``count`` runs' partitions, in turn from the kept partition while its time lasts (else a
        random one); without ``now``, from where the previous call stopped."""
        candidates = self._candidates(num_partitions, available)
        start = self.current.get(topic)
        kept, until = self.kept.get(topic, (None, -math.inf))
        if now is not None:
            start = kept if now < until else None
        at = np.flatnonzero(candidates == start) if start is not None else ()
        first = int(at[0]) if len(at) else random.randrange(len(candidates))
        picks = candidates[(first + np.arange(count + 1)) % len(candidates)]
        self.current[topic] = int(picks[-1])
        if now is not None and (count > 1 or int(picks[0]) != kept or now >= until):
            self.kept[topic] = (int(picks[count - 1]), now + self.linger)
        return picks[:-1].astype(np.int32)

    def scattered(self, num_partitions: int, count: int, available=None) -> np.ndarray:
        """``linger`` 0: a random partition for each record (librdkafka's random partitioner)."""
        candidates = self._candidates(num_partitions, available)
        return candidates[np.random.randint(0, len(candidates), count)].astype(np.int32)

    @staticmethod
    def _candidates(num_partitions: int, available) -> np.ndarray:
        live = sorted(p for p in available if 0 <= p < num_partitions) if available is not None else ()
        return np.asarray(live, dtype=np.int32) if live else np.arange(num_partitions, dtype=np.int32)


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
        ts = pc.fill_null(ts, arrow_arrays.scalar(now_ms))
    else:
        ts = arrow_arrays.full(n, now_ms)
    headers = table.column("headers").cast(HEADER_TYPE) if "headers" in names else pa.nulls(n, HEADER_TYPE)
    columns = [binary("key"), binary("value"), ts, headers]
    combined = pa.Table.from_arrays(columns, schema=SCHEMA).combine_chunks()
    batches = combined.to_batches()
    return batches[0] if batches else arrow_arrays.empty_batch(SCHEMA)


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
                      partitioner: str = "murmur2_random", sizes: np.ndarray | None = None,
                      available=None, now: float | None = None) -> np.ndarray:
    """Partition of every record: explicit ones kept, the others by ``partitioner`` (murmur2 of the
    key by default), those it leaves to chance by ``sticky`` as of ``now`` (``sizes``:
    ``record_sizes(batch)``) on the ``available`` partitions (those with a leader; None: all)."""
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
    if unkeyed.any() and now is not None and sticky.linger <= 0:
        parts[unkeyed] = sticky.scattered(num_partitions, int(unkeyed.sum()), available)
    elif unkeyed.any():
        sizes = (record_sizes(batch) if sizes is None else sizes)[unkeyed]
        run_of = (np.cumsum(sizes) - sizes) // max(1, batch_size)
        runs = sticky.runs(topic, num_partitions, int(run_of[-1]) + 1, available, now)
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
        ordered = batch.take(arrow_arrays.integers(order))
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
