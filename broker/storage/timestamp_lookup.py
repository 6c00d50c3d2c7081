"""Finding records by timestamp across a log's segments: ListOffsets by time (Kafka's
``UnifiedLog.fetchOffsetByTimestamp``) and its ``MAX_TIMESTAMP``.

Kept apart from :class:`~broker.storage.log.Log` because it only reads: each segment's time index
narrows the search to batches, and a batch is opened only to find the record inside it. Timestamps
need not grow with offsets, so a segment that holds no match hands the search on to the next one.
Same threading contract as the log: the owning partition's lock is held.
"""
from __future__ import annotations

from collections.abc import Sequence

from broker.storage.segment import LogSegment


def offset_for_timestamp(segments: Sequence[LogSegment], timestamp: int, start: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after offset ``start`` whose timestamp is
    >= ``timestamp``, or None; ``segments`` from the one holding ``start``, oldest first.

    Records below ``start`` (DeleteRecords may move the log start inside a batch) are skipped one
    by one, so a record just past it is never passed over."""
    for segment in segments:
        for found in segment.batches_at_or_after(timestamp, start):
            hit = _first_record_at_or_after(segment, found, timestamp, start)
            if hit is not None:
                return hit
    return None


def max_timestamp(segments: Sequence[LogSegment]) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record holding the largest timestamp of ``segments``, for
    ListOffsets' MAX_TIMESTAMP (Kafka's ``offsetOfMaxTimestamp`` of the batch holding it)."""
    best = None
    for segment in segments:
        if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
            best = segment
    if best is None:
        return None
    for found in best.batches_at_or_after(best.max_timestamp, best.base_offset):
        hit = _first_record_at_or_after(best, found, best.max_timestamp, found.header.base_offset)
        if hit is not None:  # else a batch the cleaner emptied, which keeps its timestamps
            return hit
    return None


def _first_record_at_or_after(segment: LogSegment, found, timestamp: int, start: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of batch ``found`` at or past offset ``start`` whose
    timestamp is >= ``timestamp``; every record of a LogAppendTime batch carries its append time."""
    from broker.records.arrow_body import first_index_at_or_after
    header = found.header
    skip = max(0, start - header.base_offset)
    if skip >= header.record_count:  # past its records (a batch the cleaner emptied or cut short)
        return None
    if header.is_log_append_time:
        return header.base_offset + skip, header.max_timestamp
    index, ts = first_index_at_or_after(segment.read_batch(found), timestamp, skip)
    return None if index is None else (header.base_offset + index, ts)
