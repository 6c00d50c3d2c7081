"""Opening a log's directory: its segments loaded and, after an unclean shutdown, recovered.

Kept apart from ``broker.storage.log`` because it runs once, before the log serves anything, and
holds every crash rule in one place (Kafka's ``LogLoader``).

After an unclean shutdown every segment at or past the recovery point is scanned and cut at the
first torn or corrupt batch; segments after a cut are removed, so a reader never sees a partial
batch and offsets never skip (Kafka's ``LogLoader.recoverLog``). A segment below the recovery point
(or any, after a clean shutdown) is only scanned when its indexes do not match its file; a cut
there removes nothing else, as in Kafka's ``recoverSegment``: what follows was fsynced, and
dropping it would lose acknowledged records for damage that never touched them. Index files
without a ``.log`` are deleted (Kafka's ``loadSegmentFiles``). If the cut leaves the log end below
the (fsynced) log start offset, every segment is deleted and the log restarts empty at the log
start offset (Kafka's ``LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd``), so new records get
offsets a reader can reach.
"""
from __future__ import annotations

import logging
import os
from typing import NamedTuple

from broker.storage.checkpoint import read_int
from broker.storage.cleaner_checkpoint import read_cleaner_checkpoint
from broker.storage.leader_epoch_cache import LeaderEpochCache
from broker.storage.producer_snapshots import restore_snapshot
from broker.storage.producer_state import SNAPSHOT_FILE, ProducerStateManager
from broker.storage.segment import LogSegment
from broker.storage.segment_swap import finish_interrupted_swaps

log = logging.getLogger(__name__)

RECOVERY_POINT_FILE = "recovery-point"
LOG_START_FILE = "log-start-offset"


class LoadedLog(NamedTuple):
    segments: list[LogSegment]  # never empty
    recovery_point: int
    log_start_offset: int
    # The log end was below the log start offset: the log restarted empty there, its leader-epoch
    # checkpoint and producer-state snapshot emptied, as Kafka does.
    restarted_at_log_start: bool


def load_log(directory: str, index_interval_bytes: int, now: int, clean_shutdown: bool) -> LoadedLog:
    """Load (and after an unclean shutdown, recover) the segments in ``directory``, creating it if new."""
    os.makedirs(directory, exist_ok=True)
    rebuild = finish_interrupted_swaps(directory)
    bases = sorted(int(n[:-4]) for n in os.listdir(directory) if n.endswith(".log") and n[:-4].isdigit())
    recovery_point = read_int(os.path.join(directory, RECOVERY_POINT_FILE), 0)
    log_start = read_int(os.path.join(directory, LOG_START_FILE), bases[0] if bases else 0)
    interval = index_interval_bytes
    segments: list[LogSegment] = []
    _remove_orphaned_indexes(directory, bases)
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        unflushed = not clean_shutdown and (next_base is None or next_base > recovery_point)
        segment = LogSegment.open(directory, base, interval, now, recover=unflushed or base in rebuild)
        segments.append(segment)
        # Only a cut in the unflushed tail drops what follows (Kafka's LogLoader.recoverLog). A
        # fsynced segment repaired because its indexes did not match its file (Kafka's
        # recoverSegment from loadSegmentFiles) is cut alone: the later segments were fsynced too.
        if segment.truncated_bytes and next_base is not None and unflushed:
            log.warning("removing %d segment(s) that follow the damage in %s",
                        len(bases) - i - 1, segment.log_path)
            _delete_bases(directory, bases[i + 1:], interval, now)
            break
    restarted = bool(segments) and log_start > segments[-1].next_offset
    if restarted:
        # Kafka's LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd: the log start offset was
        # fsynced, the tail it pointed into was not (or segment files were removed). Appending
        # from the old end would give new records offsets below the start, never readable.
        log.warning("deleting all segments of %s: its log end offset %d is below its log start offset "
                    "%d (unflushed records lost in an unclean shutdown, or segment files removed)",
                    directory, segments[-1].next_offset, log_start)
        # The leader epochs and producers of the records that go are forgotten first: a crash
        # from here on finds either the same state again or no segment, and no stale history.
        LeaderEpochCache.load(directory).clear()
        ProducerStateManager(directory).truncate_fully_and_start_at(log_start)
        for segment in segments:
            segment.delete()
        segments = []
    if not segments:
        segments.append(LogSegment(directory, log_start, interval, now))
    # A torn tail cut below the producer-state snapshot: the newest older one is loaded instead.
    log_start = max(log_start, segments[0].base_offset)
    restore_snapshot(directory, os.path.join(directory, SNAPSHOT_FILE), segments[-1].next_offset,
                     read_cleaner_checkpoint(directory).first_dirty_offset, log_start)
    return LoadedLog(segments, min(recovery_point, segments[-1].next_offset), log_start, restarted)


def _remove_orphaned_indexes(directory: str, bases: list[int]) -> None:
    """Delete ``.index`` / ``.timeindex`` files whose ``.log`` is gone (a crash inside
    ``LogSegment.delete``, which unlinks the log first), as Kafka's ``LogLoader.loadSegmentFiles``
    does: a segment later made at the same base offset would otherwise append its entries to them
    and, after a clean restart, trust positions that point into the middle of its batches."""
    live = set(bases)
    for name in os.listdir(directory):
        stem, dot, ext = name.partition(".")
        if dot and ext in ("index", "timeindex") and stem.isdigit() and int(stem) not in live:
            log.warning("removing orphaned index file %s: it has no .log file", os.path.join(directory, name))
            os.unlink(os.path.join(directory, name))


def _delete_bases(directory: str, bases: list[int], interval: int, now: int) -> None:
    for base in bases:
        LogSegment(directory, base, interval, now).delete()
