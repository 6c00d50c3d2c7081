"""A partition's log: ordered segments, appends at the end, reads by offset or timestamp.

Directory layout (``<topic>-<partition>/``): segments named by base offset (20 digits) with
``.log``, ``.index`` and ``.timeindex`` files; ``recovery-point`` holds the offset below which
everything was fsynced; ``log-start-offset`` the first offset still readable (retention,
DeleteRecords and a leader's start offset seen by a follower advance it; only a truncation below
it brings it down, as Kafka's ``truncateTo``);
``cleaner-offset-checkpoint`` where compaction stopped (``broker.storage.cleaner_checkpoint``).

Replacing segments (the cleaner) is crash-safe: see ``broker.storage.segment_swap``.

When the active segment rolls is ``broker.storage.segment_roll``; finding records by timestamp,
``broker.storage.timestamp_lookup``.

Durability follows Kafka: appends go to the page cache, ``flush.messages`` / ``flush.ms`` force
fsync, and a segment is fsynced when it rolls. Opening a log, and recovering it after an unclean
shutdown, is ``broker.storage.log_loader``.

Threading: not thread-safe; the owning partition holds one lock around every call.
"""
from __future__ import annotations

import bisect
import os
import shutil
from typing import NamedTuple

from broker.clock import Clock
from broker.config import Config
from broker.errors import CorruptRecordError, OffsetOutOfRangeError
from broker.records.batch import BatchHeader, stamp_log_append_time, with_offsets
from broker.storage import timestamp_lookup
from broker.storage.checkpoint import write_int
from broker.storage.cleaner_checkpoint import CleanerCheckpoint, read_cleaner_checkpoint, write_cleaner_checkpoint
from broker.storage.log_loader import LOG_START_FILE, RECOVERY_POINT_FILE, load_log
from broker.storage.producer_snapshots import clear_history, restore_snapshot
from broker.storage.producer_state import SNAPSHOT_FILE
from broker.storage.segment import LogSegment, segment_name
from broker.storage.segment_roll import should_roll
from broker.storage.segment_swap import CLEANED_SUFFIX, commit_swap, rename_cleaned


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    record_count: int


class Log:
    def __init__(self, directory: str, config: Config, clock: Clock, segments: list[LogSegment],
                 recovery_point: int, log_start_offset: int):
        self.directory = directory
        self.config = config
        self.clock = clock
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self._unflushed_records = 0
        self._unsynced = False  # bytes written or cut since the last fsync of the segments
        self._last_flush = clock.monotonic()
        self.cleaner_checkpoint = read_cleaner_checkpoint(directory)
        # Set by open() when it found the log end below the log start offset and restarted the log
        # empty there, its leader-epoch checkpoint and producer-state snapshot emptied, as Kafka does.
        self.restarted_at_log_start = False

    # ------------------------------------------------------------------------------- opening
    @classmethod
    def open(cls, directory: str, config: Config, clock: Clock, clean_shutdown: bool = True) -> "Log":
        """Load (and after an unclean shutdown, recover) the log in ``directory``, creating it if new."""
        loaded = load_log(directory, config["index.interval.bytes"], clock.time_ms(), clean_shutdown)
        opened = cls(directory, config, clock, loaded.segments, loaded.recovery_point, loaded.log_start_offset)
        if loaded.restarted_at_log_start:
            opened.set_cleaner_checkpoint(CleanerCheckpoint(loaded.log_start_offset))
        opened.restarted_at_log_start = loaded.restarted_at_log_start
        return opened

    # ------------------------------------------------------------------------------- state
    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ------------------------------------------------------------------------------- writing
    def append(self, data, headers: list[BatchHeader], leader_epoch: int = -1) -> AppendInfo:
        """Append validated batches, assigning offsets from the log end; returns what was written."""
        now = self.clock.time_ms()
        total = sum(h.size for h in headers)
        count = sum(h.last_offset_delta + 1 for h in headers)
        first = self.log_end_offset
        log_append_time = None
        if self.config["message.timestamp.type"] == "LogAppendTime":
            log_append_time = now
        incoming_ts = now if log_append_time is not None else max(h.max_timestamp for h in headers)
        if should_roll(self.active, self.config, total, first + count - 1, now, incoming_ts):
            self.roll(now)
        if log_append_time is not None:
            data = stamp_log_append_time(data, headers, now)
        parts = with_offsets(data, headers, first, leader_epoch)
        self.active.append(parts, headers, first, log_append_time)
        self._unsynced = True
        self._unflushed_records += sum(h.record_count for h in headers)
        self._maybe_flush_after_append()
        return AppendInfo(first, first + count - 1, -1 if log_append_time is None else now,
                          sum(h.record_count for h in headers))

    def append_as_follower(self, data, headers: list[BatchHeader]) -> AppendInfo:
        """Append batches copied from the leader, offsets and epochs as they are.

        Offsets must only grow, from the log end on. They may skip: a compacted leader log has
        gaps, as in Kafka. A batch below the log end means the follower has diverged and must
        truncate first."""
        first = headers[0].base_offset
        if first < self.log_end_offset:
            raise CorruptRecordError(f"replicated batch starts at {first}; the log ends at {self.log_end_offset}")
        expected = first
        for h in headers:
            if h.base_offset < expected:
                raise CorruptRecordError(f"replicated batch at {h.base_offset}; expected offset {expected} or later")
            expected = h.base_offset + h.last_offset_delta + 1
        now = self.clock.time_ms()
        total = sum(h.size for h in headers)
        if should_roll(self.active, self.config, total, expected - 1, now, max(h.max_timestamp for h in headers)):
            self.roll(now, first)
        self.active.append([data], headers, None, None)
        self._unsynced = True
        count = sum(h.record_count for h in headers)
        self._unflushed_records += count
        self._maybe_flush_after_append()
        return AppendInfo(first, expected - 1, -1, count)

    def roll(self, now: int | None = None, expected_next_offset: int | None = None) -> LogSegment:
        """Seal and fsync the active segment and start a new one at the log end, or at
        ``expected_next_offset`` (the first offset about to be appended) when that is later, as
        Kafka's ``UnifiedLog.maybeRoll``/``LocalLog.roll``: a follower copying a compacted leader
        may get a batch billions of offsets past its log end, and a segment based at the log end
        could not index it (relative offsets are 32-bit)."""
        old = self.active
        old.seal()
        old.flush(fsync=True)
        base = max(self.log_end_offset, -1 if expected_next_offset is None else expected_next_offset)
        segment = LogSegment(self.directory, base, self.config["index.interval.bytes"],
                             self.clock.time_ms() if now is None else now)
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        self._set_recovery_point(old.next_offset)
        return segment

    def _maybe_flush_after_append(self) -> None:
        if self._unflushed_records >= self.config["flush.messages"]:
            self.flush()
        else:
            self.maybe_flush_on_time()

    def maybe_flush_on_time(self) -> None:
        """Fsync if ``flush.ms`` passed since the last flush (also called by the broker's scheduler)."""
        if self._unflushed_records and (self.clock.monotonic() - self._last_flush) * 1000 >= self.config["flush.ms"]:
            self.flush()

    def flush(self) -> None:
        """Fsync every segment past the recovery point and advance it to the log end.

        A log with nothing written or cut since its last fsync only writes index entries still
        in memory: a broker closing thousands of idle partitions would otherwise spend an fsync on
        each for nothing."""
        for segment in self.segments[self._segment_index(self.recovery_point):]:
            segment.flush(fsync=True, data=self._unsynced or self.recovery_point < self.log_end_offset)
        self._unsynced = False
        self._unflushed_records = 0
        self._last_flush = self.clock.monotonic()
        self._set_recovery_point(self.log_end_offset)

    def _set_recovery_point(self, offset: int) -> None:
        if offset != self.recovery_point:
            self.recovery_point = offset
            write_int(os.path.join(self.directory, RECOVERY_POINT_FILE), offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after ``offset`` (a follower cutting a divergent tail).

        As Kafka's ``UnifiedLog.truncateTo``, the log start offset never stays above the new end
        (``min(offset, log start)``, lowered and persisted before anything is cut, so a crash
        in between only keeps records a later truncation removes), and an offset below the first
        segment empties the log and restarts it there (``truncateFullyAndStartAt``): otherwise the
        records the leader holds from ``offset`` on would be copied to offsets nobody may read,
        or not copied at all. A producer-state snapshot past the new end gives way to the newest
        older one (``broker.storage.producer_snapshots``)."""
        if offset >= self.log_end_offset:
            return
        cleaned_to = self.cleaner_checkpoint.first_dirty_offset
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._truncate_segments(offset)
        restore_snapshot(self.directory, os.path.join(self.directory, SNAPSHOT_FILE), self.log_end_offset,
                         cleaned_to, self.log_start_offset)

    def _truncate_segments(self, offset: int) -> None:
        self._lower_log_start_offset(offset)
        self._unsynced = True
        while len(self.segments) > 1 and self.active.base_offset >= offset:
            self.segments.pop().delete()
            self._bases.pop()
        self.active.truncate_to(offset)
        self._lower_log_start_offset(self.log_end_offset)  # an offset inside a batch cut below it
        self._set_recovery_point(min(self.recovery_point, self.log_end_offset))
        if self.cleaner_checkpoint.first_dirty_offset > self.log_end_offset:
            self.set_cleaner_checkpoint(CleanerCheckpoint(self.log_end_offset,
                                                          self.cleaner_checkpoint.delete_horizon_ms))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart empty at ``offset`` (a follower whose whole log is below
        the leader's log start offset, or that truncates below its first segment)."""
        new = LogSegment(self.directory, offset, self.config["index.interval.bytes"], self.clock.time_ms(),
                         CLEANED_SUFFIX)
        new.flush(fsync=True)
        old, self.segments = self.segments, []
        for segment in old:
            segment.delete()
        rename_cleaned(new, self.directory)
        self.segments, self._bases = [new], [offset]
        write_int(os.path.join(self.directory, LOG_START_FILE), offset)
        self.log_start_offset = offset
        self._set_recovery_point(offset)
        self.set_cleaner_checkpoint(CleanerCheckpoint(offset))
        # Producer snapshots describe records that are gone (one past ``offset`` would be loaded
        # once the log grew past it again).
        clear_history(self.directory)
        restore_snapshot(self.directory, os.path.join(self.directory, SNAPSHOT_FILE), offset, offset, offset)

    # ------------------------------------------------------------------------------- cleanup
    def advance_log_start_offset(self, offset: int) -> bool:
        """Make ``offset`` the first readable offset (persisted first); False if it is not ahead.

        Segments wholly below stay until :func:`broker.storage.retention.delete_segments` removes
        them; reads below the start are refused at once."""
        if offset <= self.log_start_offset:
            return False
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"log start offset {offset} would pass the log end {self.log_end_offset}",
                log_start_offset=self.log_start_offset, log_end_offset=self.log_end_offset)
        write_int(os.path.join(self.directory, LOG_START_FILE), offset)
        self.log_start_offset = offset
        return True

    def _lower_log_start_offset(self, offset: int) -> None:
        """Truncation only: bring the log start down to ``offset`` (persisted) if it is above."""
        if offset < self.log_start_offset:
            write_int(os.path.join(self.directory, LOG_START_FILE), offset)
            self.log_start_offset = offset

    def delete_oldest_segments(self, count: int) -> list[LogSegment]:
        """Remove the ``count`` oldest segments; the log start moves to the first one left. Removing
        them all rolls an empty segment at the log end first (a log always has one, and offsets
        go on from there). Returns the removed segments (already closed and unlinked)."""
        count = min(count, len(self.segments) - (self.active.size == 0))
        if count <= 0:
            return []
        if count == len(self.segments):
            self.roll()
        removed = self.segments[:count]
        self.advance_log_start_offset(self.segments[count].base_offset)
        del self.segments[:count]
        del self._bases[:count]
        for segment in removed:
            segment.delete()
        return removed

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty segment named ``<base>.log.cleaned``, invisible to the log until swapped in."""
        stem = os.path.join(self.directory, segment_name(base_offset))
        for ext in (".log", ".index", ".timeindex"):
            try:
                os.unlink(stem + ext + CLEANED_SUFFIX)
            except FileNotFoundError:
                pass
        return LogSegment(self.directory, base_offset, self.config["index.interval.bytes"],
                          self.clock.time_ms(), CLEANED_SUFFIX)

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap the complete, fsynced cleaned segment ``new`` in for the consecutive segments ``old``
        (none of them the active one), in the crash-safe order described above.

        ``new`` takes the last-modified time of the newest segment it replaces, as Kafka's
        ``Cleaner.cleanSegments``: it is the age of a segment whose records carry no timestamp
        (``LogSegment.largestTimestamp``), and a clean must not restart its ``retention.ms`` or
        ``min.compaction.lag.ms``."""
        index = next(i for i, s in enumerate(self.segments) if s is old[0])
        if self.segments[index:index + len(old)] != old or index + len(old) >= len(self.segments):
            raise ValueError("segments to replace must be consecutive and not include the active one")
        newest = old[-1]
        modified = (os.fstat(newest.fd) if newest.fd >= 0 else os.stat(newest.log_path)).st_mtime_ns
        os.utime(new.log_path, ns=(modified, modified))
        commit_swap(new, old, self.directory)
        self.segments[index:index + len(old)] = [new]
        self._bases[index:index + len(old)] = [new.base_offset]

    def set_cleaner_checkpoint(self, checkpoint: CleanerCheckpoint) -> None:
        write_cleaner_checkpoint(self.directory, checkpoint)
        self.cleaner_checkpoint = checkpoint

    def set_config(self, config: Config) -> None:
        self.config = config

    # ------------------------------------------------------------------------------- reading
    def check_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the log [{self.log_start_offset}, {self.log_end_offset}]",
                log_start_offset=self.log_start_offset, log_end_offset=self.log_end_offset)

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> memoryview | None:
        """Whole batches from the one holding ``offset``, none at or past ``max_offset`` (e.g. the HW).
        ``min_one_batch``: return the first batch even when larger than ``max_bytes`` (KIP-74); without
        it such a batch gives None, and no later batch is returned in its place."""
        self.check_offset(offset)
        limit = self.log_end_offset if max_offset is None else max_offset
        if offset >= limit:
            return None
        for segment in self.segments[self._segment_index(offset):]:
            if segment.base_offset >= limit:
                break
            data = segment.read(offset, max_bytes, limit, min_one_batch)
            if data is not None:
                return data if len(data) else None
        return None

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start whose timestamp is
        >= ``timestamp``, or None (``broker.storage.timestamp_lookup``)."""
        start = self.log_start_offset
        return timestamp_lookup.offset_for_timestamp(self.segments[self._segment_index(start):], timestamp, start)

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the log's largest timestamp (MAX_TIMESTAMP)."""
        return timestamp_lookup.max_timestamp(self.segments)

    def batches(self, from_offset: int = 0):
        """``(header, load)`` of each batch holding offsets at or after ``from_offset``, oldest first;
        ``load()`` reads that batch's bytes. How producer state is rebuilt without reading bodies."""
        from broker.storage.segment import BatchPosition
        for segment in self.segments[self._segment_index(from_offset):]:
            found = segment.find(max(from_offset, segment.base_offset))
            if found is None:
                continue
            for position, header in segment._scan_headers(found.position):
                yield header, (lambda s=segment, at=BatchPosition(position, header): s.read_batch(at))

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    # ------------------------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Flush and close: the next open needs no recovery scan."""
        self.active.seal()
        self.flush()
        for segment in self.segments:
            segment.close()

    def close_without_flush(self) -> None:
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        for segment in self.segments:
            segment.close()
        shutil.rmtree(self.directory, ignore_errors=True)
