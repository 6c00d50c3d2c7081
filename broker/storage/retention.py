"""Retention: which whole segments of a log may go, and removing them (Kafka's ``deleteOldSegments``).

Rules, applied to the oldest segments in order and stopping at the first that is kept, as in
Kafka:

- a segment wholly below the log start offset goes under any ``cleanup.policy`` (DeleteRecords or
  a leader's start offset moved it);
- with ``cleanup.policy`` containing ``delete``: a segment whose newest record is older than
  ``retention.ms`` (-1 keeps forever; a segment whose records carry no timestamp is as old as its
  file's last modification, Kafka's ``LogSegment.largestTimestamp``), and the oldest segments while
  the partition is larger than ``retention.bytes`` (-1 unbounded) by at least their size.

Never a segment holding an offset at or past the high watermark (the caller passes it in): a
consumer must not lose records that are not yet committed. The active segment may go by
``retention.ms`` or ``retention.bytes`` once the high watermark reached the log end, as in Kafka,
so an idle topic's expired records do not stay forever; an empty active segment never does. The
log start offset moves to the first segment left and is persisted before any file goes, so a crash
in between leaves segments that the next pass removes.

Plain and synchronous: the caller holds the partition lock and supplies the time.
"""
from __future__ import annotations

from typing import NamedTuple

from broker.errors import OffsetOutOfRangeError
from broker.storage.log import Log

BELOW_LOG_START, RETENTION_MS, RETENTION_BYTES = "log start offset", "retention.ms", "retention.bytes"


class RetentionResult(NamedTuple):
    segments: int             # segments removed
    bytes: int                # their size
    reasons: tuple[str, ...]  # why each went, in order
    log_start_offset: int


def deletable_segments(log: Log, now_ms: int, high_watermark: int, *,
                       only_below_start: bool = False) -> list[str]:
    """The reason each of the oldest segments may go, one per segment, oldest first."""
    config = log.config
    delete_policy = "delete" in config["cleanup.policy"] and not only_below_start
    retention_ms = config["retention.ms"] if delete_policy else -1
    retention_bytes = config["retention.bytes"] if delete_policy else -1
    excess = log.size_bytes - retention_bytes if retention_bytes >= 0 else -1
    reasons: list[str] = []
    segments = log.segments
    for i, segment in enumerate(segments):
        active = i == len(segments) - 1
        upper = log.log_end_offset if active else segments[i + 1].base_offset
        if upper > high_watermark or (active and segment.size == 0):
            break
        if not active and upper <= log.log_start_offset:
            reasons.append(BELOW_LOG_START)
        elif retention_ms >= 0 and now_ms - segment.largest_timestamp() > retention_ms:
            reasons.append(RETENTION_MS)
        elif retention_bytes >= 0 and excess >= segment.size:
            reasons.append(RETENTION_BYTES)
        else:
            break
        excess -= segment.size
    return reasons


def apply_retention(log: Log, now_ms: int, high_watermark: int) -> RetentionResult:
    """Remove the segments :func:`deletable_segments` names; the log start offset follows."""
    reasons = deletable_segments(log, now_ms, high_watermark)
    removed = log.delete_oldest_segments(len(reasons))
    return RetentionResult(len(removed), sum(s.size for s in removed), tuple(reasons[:len(removed)]),
                           log.log_start_offset)


def delete_records_before(log: Log, offset: int, high_watermark: int) -> int:
    """DeleteRecords: make ``offset`` (at most the high watermark) the log start and drop the
    segments wholly below it; returns the new log start offset (the partition's low watermark)."""
    if offset < 0 or offset > high_watermark:
        raise OffsetOutOfRangeError(
            f"cannot delete records before offset {offset}: it must be within [0, {high_watermark}] "
            f"(the high watermark); -1 means the high watermark",
            log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset)
    log.advance_log_start_offset(offset)
    log.delete_oldest_segments(len(deletable_segments(log, 0, high_watermark, only_below_start=True)))
    return log.log_start_offset
