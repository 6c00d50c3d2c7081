"""Log compaction (Kafka's LogCleaner): keep the latest record of every key, offsets unchanged.

For ``cleanup.policy`` containing ``compact``. A clean has three steps, so the owner can do the
heavy one without its lock:

1. :func:`broker.storage.cleaner_plan.plan_cleaning` (under the partition lock) picks the *cleanable* segments: sealed
   segments from the log start, each wholly below the high watermark, the last stable offset
   (the first offset of the oldest open transaction) and the active segment, stopping at the
   first whose newest record is younger than ``min.compaction.lag.ms``
   (segment granularity, as Kafka); the range never ends below the checkpoint (Kafka's
   ``cleanableOffsets``), so a high watermark that restarted low re-cleans up to it instead of
   moving it back. It is due when the dirty share of their bytes (past the
   ``cleaner-offset-checkpoint``) reaches ``min.cleanable.dirty.ratio``, when the oldest dirty
   record is older than ``max.compaction.lag.ms``, or when the earliest delete horizon of the
   tombstones and markers the last clean kept has passed.
   It opens its own file descriptors on the segments, so retention or truncation may remove them
   meanwhile, and takes a copy of the partition's aborted transactions.
2. :func:`build_cleaned` (no lock; sealed segments are immutable) maps every key of the cleanable
   range to its latest offset (aborted records left out), then copies each group of source
   segments (consecutive, together at
   most ``segment.bytes``) into one ``<base>.log.cleaned`` segment. A batch whose records all
   survive is copied byte for byte; otherwise each run of consecutive surviving records becomes
   its own batch at its original base offset (offsets inside a batch are positional), keeping the
   source batch's leader epoch, attributes, producer id and epoch, with the run's first sequence
   number. In a producer's last batch the last run keeps the batch's last offset (its header's
   last offset delta reaches past its last record), so the producer's last sequence number
   survives (Kafka's ``overrideLastOffset``, which Kafka applies to every batch; only the last one
   of a producer matters to its state). A producer's last batch of which nothing survives stays as an empty
   batch (no record, its offsets, producer id, epoch and sequences; Kafka's ``RETAIN_EMPTY`` and
   ``writeEmptyHeader``), never transactional (replayed, it must not open a transaction). Gaps
   stay gaps. A batch given a delete horizon (below) is rewritten for that.
3. :func:`swap_cleaned` (under the lock) re-checks that every source segment is still in the log,
   sealed, with the size it had and never truncated since, then swaps each group in
   (``Log.replace_segments``: crash-safe) and moves the checkpoint to the end of the cleaned range.
   The owner then forgets the aborted transactions wholly below that end
   (:func:`aborted_after_clean`): their records are gone.

Which records survive: the latest record of each key in the cleanable range. Records without a key
are dropped (Kafka drops them too; a compacted topic refuses them at produce time).

**Delete horizon** (KIP-534; Kafka's ``MemoryRecords.filterTo`` and ``shouldRetainRecord``). The
first clean that keeps a **tombstone** (null value, latest for its key) stamps its batch with the
horizon ``now + delete.retention.ms`` (``records.batch.DELETE_HORIZON``); later cleans keep an
existing horizon, never extend it, and remove the tombstone once ``now >= horizon``. So it lives at
least ``delete.retention.ms`` after the clean that first found it, whatever its own timestamp (a
CDC source time, a late produce). Record timestamps and the batch's max timestamp stay as produced
(retention and lookups by time are unaffected); a batch kept whole only gets its header restamped,
and runs cut from a batch carry its horizon. Crashes: the horizon lives in the cleaned segments,
swapped in crash-safely, so the log holds either the unstamped batches (the next clean stamps a
later horizon) or the stamped ones. The checkpoint's ``delete_horizon_ms`` holds the earliest
horizon kept, only to make a clean due; a stale value (or an older checkpoint's tombstone
timestamp) makes a clean earlier or later, never a removal before the horizon.

**Transactions** (as Kafka's cleaner). Every transaction with records in the cleanable range has
ended, because the range stops at the last stable offset; whether it aborted comes from the
partition's aborted ranges (``ProducerStateManager.aborted``: producer id, first offset, marker
offset), which ``cleaner_transactions.Transactions`` consults in offset order:

- an aborted record never enters the key map (it must not shadow a committed value) and is
  removed;
- a marker (control batch) stays while records of its transaction remain, and while the partition
  still lists its transaction as aborted (its records go in this clean, and the owner forgets the
  range only after the swap, persisting that in the producer-state snapshot; removing the marker
  first could leave a listed range without its marker after a crash, and ``read_committed``
  readers would then skip the producer's later transactions). Otherwise it follows the delete
  horizon like a tombstone (Kafka's ``containsMarkerForEmptyTxn``), so a reader that started within
  ``delete.retention.ms`` still finds the end of the transaction it began to read. The horizon is
  set from the clean that removes the last records of its transaction (Kafka sets it one clean
  later, when its aborted-transaction index no longer lists it; here the listing still blocks the
  removal, whatever the horizon).

Producer state: a replica that copies a cleaned log (added by a reassignment, rebuilt from an
empty disk) replays its batches, so each producer's last batch keeps its last offset and sequence
(above). It is the producer's last of the cleanable range, and with ``CleaningPlan.producers`` the
one the partition's state names (Kafka's ``isBatchLastRecordOfProducer``: an expired producer's
goes); an empty batch goes once a later batch of its producer is cleaned.

The key map holds every distinct key of the cleanable range in memory (Arrow binary arrays,
reduced per segment); Kafka bounds it with ``log.cleaner.dedupe.buffer.size`` and cleans in
several passes instead.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.records import arrow_arrays
from broker.records.arrow_body import HEADER_TYPE, SCHEMA, decode_body, encode_body
from broker.records.batch import (COMPRESSION_LZ4, COMPRESSION_MASK, COMPRESSION_ZSTD, DELETE_HORIZON, HEADER_SIZE,
                                  TRANSACTIONAL, BatchHeader, build_batch, increment_sequence, iter_headers,
                                  parse_header, stamp_delete_horizon)
from broker.storage.cleaner_checkpoint import CleanerCheckpoint
from broker.storage.cleaner_plan import CleaningPlan, plan_cleaning
from broker.storage.cleaner_transactions import Transactions, aborted_after_clean  # noqa: F401 (re-exported)
from broker.storage.log import Log
from broker.storage.segment import LogSegment

_COMPRESSION_NAMES = {COMPRESSION_LZ4: "lz4", COMPRESSION_ZSTD: "zstd"}
_EMPTY_RECORDS = arrow_arrays.empty_batch(SCHEMA)
_READ_CHUNK = 4 << 20
_WRITE_CHUNK = 1 << 20


class CleaningAborted(Exception):
    """The owner asked the cleaner to stop (shutdown) before the cleaned segments were complete."""


@dataclass
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    aborted_dropped: int = 0      # records of aborted transactions removed
    markers_dropped: int = 0      # transaction markers removed
    delete_horizon_ms: int = -1  # earliest horizon of the tombstones and markers kept: when a clean is due
    seconds: float = 0.0

    def keep_deletable(self, horizon_ms: int) -> None:
        """A tombstone or marker that a later clean will remove once ``horizon_ms`` has come."""
        if self.delete_horizon_ms < 0 or horizon_ms < self.delete_horizon_ms:
            self.delete_horizon_ms = horizon_ms


@dataclass
class CleanedSegments:
    plan: CleaningPlan
    segments: list[LogSegment] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)


class CleanResult(NamedTuple):
    swapped: bool
    stats: CleanStats


# ----------------------------------------------------------------------------------------- build
def build_cleaned(log: Log, plan: CleaningPlan, now_ms: int,
                  aborted: Callable[[], bool] = lambda: False) -> CleanedSegments:
    """Write the cleaned segments (``.cleaned`` files, fsynced). Reads only the plan's own file
    descriptors and creates only new files, so it needs no lock."""
    started = time.perf_counter()
    out = CleanedSegments(plan)
    try:
        latest, last_batches = _latest_offsets(plan, aborted)
        txns = Transactions(plan.aborted)
        delete_retention = log.config["delete.retention.ms"]
        for group in plan.groups:
            first = plan.sources[group[0]].segment
            segment = log.new_cleaned_segment(first.base_offset)
            out.segments.append(segment)
            writer = _SegmentWriter(segment)
            for i in group:
                source = plan.sources[i]
                out.stats.bytes_read += source.size
                for header, batch in _batches(source.fd, source.size):
                    if aborted():
                        raise CleaningAborted()
                    keep_empty = _is_producers_last(header, last_batches, plan.producers)
                    _clean_batch(header, batch, latest, txns, now_ms, delete_retention, writer, out.stats,
                                 keep_empty)
            writer.flush()
            segment.seal()
            segment.flush(fsync=True)
            out.stats.bytes_written += segment.size
    except BaseException:
        discard(out)
        raise
    out.stats.seconds = time.perf_counter() - started
    return out


def _latest_offsets(plan: CleaningPlan, aborted) -> tuple[np.ndarray, dict[int, int]]:
    """Sorted offsets of the latest record of every key in the cleanable range, records of
    aborted transactions left out; and each producer's last data batch there (id -> last offset)."""
    txns = Transactions(plan.aborted)
    reduced: list[pa.Table] = []
    last_batches: dict[int, int] = {}
    for source in plan.sources:
        keys, offsets = [], []
        for header, batch in _batches(source.fd, source.size):
            if aborted():
                raise CleaningAborted()
            if header.producer_id >= 0 and not header.is_control:
                last_batches[header.producer_id] = header.last_offset
            if header.is_control or txns.is_aborted(header) or header.record_count == 0:
                continue
            column = decode_body(batch[HEADER_SIZE:]).column(0)
            keys.append(column)
            offsets.append(np.arange(header.base_offset, header.base_offset + len(column), dtype=np.int64))
        if keys:
            reduced.append(_reduce(pa.chunked_array(keys, pa.binary()), np.concatenate(offsets)))
    if not reduced:
        return np.empty(0, dtype=np.int64), last_batches
    table = pa.concat_tables(reduced)
    final = _reduce(table.column("key"), table.column("offset").to_numpy())
    return np.sort(final.column("offset").to_numpy()), last_batches


def _is_producers_last(header: BatchHeader, last_batches: dict[int, int], producers: dict[int, int] | None) -> bool:
    """Whether ``header`` is its producer's last data batch, whose last offset and sequence must
    outlive its records: the last of the cleanable range, and when the partition's producer state
    is known, the one it names (an expired producer's goes, as in Kafka)."""
    pid = header.producer_id
    if pid < 0 or header.is_control or last_batches.get(pid) != header.last_offset:
        return False
    return producers is None or producers.get(pid) == header.last_offset


def _reduce(keys, offsets) -> pa.Table:
    """(key, latest offset) per distinct non-null key; copies, so fetched pages can be freed."""
    table = pa.table({"key": keys, "offset": offsets})
    table = table.filter(pc.is_valid(table.column("key")))
    grouped = table.group_by("key").aggregate([("offset", "max")])
    return pa.table({"key": grouped.column("key"), "offset": grouped.column("offset_max")})


def _clean_batch(header: BatchHeader, batch: memoryview, latest: np.ndarray, txns: Transactions, now_ms: int,
                 delete_retention_ms: int, writer: "_SegmentWriter", stats: CleanStats,
                 keep_empty: bool = False) -> None:
    """``keep_empty``: the batch is its producer's last; its last offset and sequence outlive its
    records (its last run reaches to its last offset, or if no record survives an empty batch
    stands in for it)."""
    if header.is_control:
        _clean_marker(header, batch, txns, now_ms, delete_retention_ms, writer, stats)
        return
    if txns.is_aborted(header) or header.record_count == 0:
        stats.records_read += header.record_count
        stats.aborted_dropped += header.record_count
        if keep_empty:
            _add_empty(header, writer)
        return
    records = decode_body(batch[HEADER_SIZE:])
    n = records.num_rows
    stats.records_read += n
    offsets = np.arange(header.base_offset, header.base_offset + n, dtype=np.int64)
    found = np.minimum(np.searchsorted(latest, offsets), max(len(latest) - 1, 0))
    keep = latest[found] == offsets if len(latest) else np.zeros(n, dtype=bool)
    tombstones = keep & ~records.column(1).is_valid().to_numpy(zero_copy_only=False)
    horizon = header.delete_horizon_ms
    if tombstones.any():
        if horizon is not None and now_ms >= horizon:   # Kafka's shouldRetainRecord
            stats.tombstones_dropped += int(tombstones.sum())
            keep &= ~tombstones
        else:
            if horizon is None:   # Kafka's needToSetDeleteHorizon: the first clean that keeps it
                horizon = now_ms + delete_retention_ms
                if keep.all():
                    batch = memoryview(stamp_delete_horizon(batch, horizon))
                    header = parse_header(batch)
            stats.keep_deletable(horizon)
    stats.records_kept += int(keep.sum())
    if keep.any():
        txns.kept_records(header)
    if keep.all():
        writer.add(header, batch)
        return
    rows = np.flatnonzero(keep)
    if not len(rows):
        if keep_empty:
            _add_empty(header, writer)
        return
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    runs = np.split(rows, breaks)
    for i, run in enumerate(runs):
        start, length = int(run[0]), len(run)
        # A producer's last batch: its last run reaches to the batch's last offset, so the
        # producer's last sequence stays (other batches' sequences are superseded by it).
        reach = header.last_offset_delta - start if keep_empty and i == len(runs) - 1 else length - 1
        data = _rebatch(header, records.slice(start, length), start, horizon, reach)
        writer.add(parse_header(data), memoryview(data))


def _add_empty(header: BatchHeader, writer: "_SegmentWriter") -> None:
    """A batch with no record in place of ``header``'s: its offsets, leader epoch, producer id,
    epoch and first sequence (so its last sequence) and timestamps, uncompressed, never
    transactional (replayed, it must not open a transaction its marker may no longer close) and
    without a delete horizon (it holds no tombstone)."""
    attributes = header.attributes & ~(COMPRESSION_MASK | TRANSACTIONAL | DELETE_HORIZON)
    data = build_batch(
        encode_body(_EMPTY_RECORDS), record_count=0, last_offset_delta=header.last_offset_delta,
        magic=header.magic, attributes=attributes, base_offset=header.base_offset,
        base_timestamp=header.max_timestamp if header.delete_horizon_ms is not None else header.base_timestamp,
        max_timestamp=header.max_timestamp, producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, partition_leader_epoch=header.partition_leader_epoch)
    writer.add(parse_header(data), memoryview(data))


def _clean_marker(header: BatchHeader, batch: memoryview, txns: Transactions, now_ms: int,
                  delete_retention_ms: int, writer: "_SegmentWriter", stats: CleanStats) -> None:
    """A transaction marker goes once nothing of its transaction is left and its delete horizon
    has passed (Kafka's ``discardBatchRecords`` for control batches); the first clean that finds
    its transaction empty stamps the horizon."""
    removable = txns.marker_removable(header)
    horizon = header.delete_horizon_ms
    if removable and horizon is not None and now_ms >= horizon:
        stats.markers_dropped += 1
        return
    if removable is not False:
        if horizon is None:
            horizon = now_ms + delete_retention_ms
            batch = memoryview(stamp_delete_horizon(batch, horizon))
            header = parse_header(batch)
        stats.keep_deletable(horizon)
    writer.add(header, batch)


def _rebatch(source: BatchHeader, records: pa.RecordBatch, start: int, horizon: int | None,
             last_offset_delta: int) -> bytes:
    """Records ``start..`` of ``source`` as their own batch, at their original offsets, with the
    delete horizon ``horizon`` (None: none), its last offset ``last_offset_delta`` past its first."""
    if records.column(3).null_count == records.num_rows:
        records = records.set_column(3, "headers", pa.nulls(records.num_rows, HEADER_TYPE))
    compression = _COMPRESSION_NAMES.get(source.compression, "none")
    bounds = pc.min_max(records.column(2))
    max_timestamp = source.max_timestamp if source.is_log_append_time else bounds["max"].as_py()
    return build_batch(
        encode_body(records, compression), record_count=records.num_rows, magic=source.magic,
        attributes=source.attributes | (DELETE_HORIZON if horizon is not None else 0),
        base_offset=source.base_offset + start,
        base_timestamp=bounds["min"].as_py() if horizon is None else horizon, max_timestamp=max_timestamp,
        producer_id=source.producer_id, producer_epoch=source.producer_epoch,
        base_sequence=increment_sequence(source.base_sequence, start) if source.base_sequence >= 0
        else source.base_sequence,
        partition_leader_epoch=source.partition_leader_epoch, last_offset_delta=last_offset_delta)


class _SegmentWriter:
    """Buffers batches and appends them to the cleaned segment about a megabyte at a time."""

    def __init__(self, segment: LogSegment):
        self.segment = segment
        self.parts: list = []
        self.headers: list[BatchHeader] = []
        self.pending = 0

    def add(self, header: BatchHeader, batch) -> None:
        self.parts.append(batch)
        self.headers.append(header)
        self.pending += header.size
        if self.pending >= _WRITE_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.headers:
            self.segment.append(self.parts, self.headers, None)
            self.parts, self.headers, self.pending = [], [], 0


def _batches(fd: int, size: int) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a segment file below ``size``, read a few megabytes at a time."""
    position = 0
    while position < size:
        chunk = os.pread(fd, min(_READ_CHUNK, size - position), position)
        used = 0
        for relative, header in iter_headers(chunk):
            yield header, memoryview(chunk)[relative:relative + header.size]
            used = relative + header.size
        if used == 0:
            header = parse_header(os.pread(fd, HEADER_SIZE, position))
            whole = os.pread(fd, header.size, position)
            if len(whole) < header.size:
                raise EOFError(f"segment ends inside the batch at byte {position}")
            yield header, memoryview(whole)
            used = header.size
        position += used


# ------------------------------------------------------------------------------------------ swap
def swap_cleaned(log: Log, cleaned: CleanedSegments) -> bool:
    """Swap the cleaned segments in if their sources are all still there, unchanged; else discard
    them. Moves the cleaner checkpoint when every group was swapped."""
    plan = cleaned.plan
    try:
        current = {id(s) for s in log.segments[:-1]}
        intact = all(id(s.segment) in current and s.segment.fd >= 0 and s.segment.size == s.size
                     and s.segment.truncations == s.truncations for s in plan.sources)
        if not intact:
            discard(cleaned)
            return False
        for group, segment in zip(plan.groups, cleaned.segments):
            log.replace_segments(segment, [plan.sources[i].segment for i in group])
        log.set_cleaner_checkpoint(CleanerCheckpoint(plan.end_offset, cleaned.stats.delete_horizon_ms))
        return True
    finally:
        plan.close()


def discard(cleaned: CleanedSegments) -> None:
    """Remove unswapped cleaned segments and release the plan's file descriptors."""
    for segment in cleaned.segments:
        if segment.log_path.endswith(".cleaned"):
            segment.delete()
    cleaned.plan.close()


def clean(log: Log, high_watermark: int, now_ms: int, last_stable_offset: int | None = None,
          aborted=(), producers: dict[int, int] | None = None) -> CleanResult | None:
    """Plan, build and swap in one call (single-threaded owners and tests); None if not due."""
    plan = plan_cleaning(log, high_watermark, now_ms, last_stable_offset, aborted, producers)
    if plan is None:
        return None
    cleaned = build_cleaned(log, plan, now_ms)
    return CleanResult(swap_cleaned(log, cleaned), cleaned.stats)
