"""Which segments of a compacted log a clean takes, and whether a clean is due (step 1 of
``broker.storage.cleaner``; Kafka's ``LogCleanerManager.cleanableOffsets`` and ``grabFilthiestLog``).

Kept apart from the rewrite because it runs under the partition lock and only reads the log's
state; the plan it returns owns its own file descriptors, so the rewrite needs no lock.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from broker.config import LONG_MAX
from broker.storage.log import Log
from broker.storage.segment import LogSegment

_INT_MAX = 2**31 - 1


@dataclass
class _Source:
    segment: LogSegment
    size: int
    fd: int
    truncations: int = 0   # the segment's ``truncations`` when planned


@dataclass
class CleaningPlan:
    sources: list[_Source]
    groups: list[list[int]]   # indexes into ``sources``; one cleaned segment per group
    end_offset: int           # first offset after the cleanable range (the next checkpoint)
    dirty_ratio: float
    reason: str
    aborted: tuple = ()       # the partition's aborted transactions (producer_id, first_offset, last_offset)
    producers: dict | None = None  # producer id -> last offset of its last batch (None: not known)

    def close(self) -> None:
        for s in self.sources:
            if s.fd >= 0:
                os.close(s.fd)
                s.fd = -1


def plan_cleaning(log: Log, high_watermark: int, now_ms: int, last_stable_offset: int | None = None,
                  aborted=(), producers: dict[int, int] | None = None) -> CleaningPlan | None:
    """The cleanable segments and why they are due, or None when no clean is due.

    ``last_stable_offset``: the first offset of the oldest open transaction (None: the high
    watermark); nothing at or past it is cleaned, since its transactions may still commit or abort.
    ``aborted``: the partition's aborted transactions (see ``cleaner_transactions``).
    ``producers``: the partition's producers (id -> last offset of its last batch), so the cleaner
    keeps the last sequence of those only (None: of every producer in the range)."""
    config = log.config
    if "compact" not in config["cleanup.policy"]:
        return None
    segments = log.segments
    first_dirty = _first_dirty_offset(log)
    # Never below the checkpoint (Kafka's cleanableOffsets: max(firstDirtyOffset, firstUncleanable)):
    # after a restart the high watermark starts again at the log start, and a clean ending there
    # would move the checkpoint back over segments already cleaned.
    bound = min(log.active.base_offset, max(first_dirty, min(
        high_watermark, high_watermark if last_stable_offset is None else last_stable_offset)))
    lag = config["min.compaction.lag.ms"]
    chosen: list[LogSegment] = []
    for i, segment in enumerate(segments[:-1]):
        upper = segments[i + 1].base_offset
        # min.compaction.lag.ms holds back dirty segments only (Kafka's firstUncleanableDirtyOffset).
        if upper > bound or (lag > 0 and upper > first_dirty and segment.largest_timestamp() > now_ms - lag):
            break
        chosen.append(segment)
    if not chosen:
        return None
    end = segments[len(chosen)].base_offset
    uppers = [s.base_offset for s in segments[1:len(chosen) + 1]]
    dirty = [s for s, upper in zip(chosen, uppers) if upper > first_dirty]
    total = sum(s.size for s in chosen)
    dirty_bytes = sum(s.size for s in dirty)
    ratio = dirty_bytes / total if total else 0.0
    reason = _due(log, dirty, dirty_bytes, ratio, now_ms)
    if reason is None:
        return None
    sources = [_Source(s, s.size, os.open(s.log_path, os.O_RDONLY), s.truncations) for s in chosen]
    return CleaningPlan(sources, _group(chosen, uppers, config["segment.bytes"]), end, ratio, reason,
                        tuple(a for a in aborted if a.first_offset < end),
                        None if producers is None else dict(producers))


def _first_dirty_offset(log: Log) -> int:
    """Where the dirty part starts: the cleaner checkpoint, or the log start when the checkpoint
    lies outside the log (Kafka's ``LogCleanerManager.cleanableOffsets``). One past the log end
    (a log restored from an older copy, a damaged or hand-edited checkpoint) would otherwise take
    every segment for clean and leave the log uncompacted until its end passed the checkpoint."""
    checkpoint = log.cleaner_checkpoint.first_dirty_offset
    if checkpoint < log.log_start_offset or checkpoint > log.log_end_offset:
        return log.log_start_offset
    return checkpoint


def _due(log: Log, dirty: list[LogSegment], dirty_bytes: int, ratio: float, now_ms: int) -> str | None:
    config = log.config
    if dirty_bytes and ratio > config["min.cleanable.dirty.ratio"]:   # strictly, as LogCleanerManager:
        return "min.cleanable.dirty.ratio"                               # 1.0 leaves it to the lag
    max_lag = config["max.compaction.lag.ms"]
    # The oldest first batch of any dirty segment (Kafka's maxCompactionDelay), not only the first
    # segment's: timestamps need not grow with offsets.
    firsts = [s.first_timestamp for s in dirty if s.first_timestamp > 0]
    if firsts and max_lag < LONG_MAX and min(firsts) < now_ms - max_lag:
        return "max.compaction.lag.ms"
    horizon = log.cleaner_checkpoint.delete_horizon_ms  # the earliest delete horizon kept
    if horizon >= 0 and now_ms >= horizon:
        return "delete.retention.ms"
    return None


def _group(segments: list[LogSegment], uppers: list[int], max_bytes: int) -> list[list[int]]:
    """Consecutive segments whose sizes add up to at most ``max_bytes`` (and whose offsets fit one
    segment's 32-bit relative offsets) become one cleaned segment."""
    groups: list[list[int]] = []
    size = 0
    for i, segment in enumerate(segments):
        if groups and size + segment.size <= max_bytes \
                and uppers[i] - segments[groups[-1][0]].base_offset <= _INT_MAX:
            groups[-1].append(i)
            size += segment.size
        else:
            groups.append([i])
            size = segment.size
    return groups
