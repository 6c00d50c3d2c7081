"""Reads from a partition: consumers' fetches below the high watermark (or, for
``read_committed``, the last stable offset), followers' fetches up to the log end (which also
report how far each follower got), and the offsets ListOffsets answers with. Mixed into
:class:`~broker.partition.Partition`.

A consumer never sees, nor is told to seek to, a record it may not read yet: its reads and
ListOffsets answers stop at the high watermark, or for ``read_committed`` at the last stable offset.
"""
from __future__ import annotations

from typing import NamedTuple

from broker.errors import NotLeaderOrFollowerError, OffsetNotAvailableError
from broker.partition_leadership import LEADER


class ReadResult(NamedTuple):
    records: bytes | memoryview
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    aborted: tuple = ()  # AbortedTxn ranges overlapping a read_committed read


class PartitionReads:
    """Needs the lock, the log, the replicas and ISR, the producer state, the leader state, the
    notifier, the clock, ``on_isr_candidate`` and ``_check_leader``/``_advance_hw`` (from Partition)."""

    def read_size_hint(self, offset: int) -> int:
        """About how many bytes a read from ``offset`` up to the high watermark returns, from the
        active segment's mean batch bytes per offset; a large number below the active segment. A
        hint read without the lock, for where to run a read."""
        active = self.log.active
        hw, base = self.high_watermark, active.base_offset
        if offset >= hw:
            return 0
        if offset < base:
            return 1 << 62
        return -(-(hw - offset) * active.size // max(1, active.next_offset - base))

    # ------------------------------------------------------------------------------ leader: follower fetch
    def read_for_follower(self, follower_id: int, offset: int, max_bytes: int, leader_epoch: int,
                          broker_epoch: int = -1, min_one_batch: bool = True,
                          log_start_offset: int = -1) -> ReadResult:
        """A follower's fetch: everything up to the log end; its offset tells us what it holds and
        ``log_start_offset`` where its log starts (-1: not told), which DeleteRecords waits for.
        ``min_one_batch`` as in :meth:`read`."""
        moved = False
        with self.lock:
            self._check_leader(leader_epoch)
            if follower_id not in self.replicas:
                raise NotLeaderOrFollowerError(f"broker {follower_id} is not a replica of {self.topic}-{self.index}")
            self.log.check_offset(offset)
            state = self.leader_state
            start_before = state.follower_state(follower_id).log_start_offset
            if state.on_follower_fetch(follower_id, offset, self.clock.time_ms(), broker_epoch, log_start_offset):
                moved = self._advance_hw()
            # A larger log start may complete a waiting DeleteRecords: wake it too (Kafka's
            # tryCompleteDelayedRequests after a follower's fetch).
            moved = moved or state.follower_state(follower_id).log_start_offset > start_before
            joining = follower_id not in self.isr and self.leader_state.expand_candidate(follower_id)
            data = self.log.read(offset, max_bytes, min_one_batch=min_one_batch)
            result = ReadResult(b"" if data is None else data, self.high_watermark,
                                self.log.log_start_offset, self.log.log_end_offset)
        if moved:
            self.notifier.bump()
        if joining and self.on_isr_candidate is not None:
            self.on_isr_candidate(self)
        return result

    # ------------------------------------------------------------------------------ reads
    def read(self, offset: int, max_bytes: int, *, up_to_high_watermark: bool = True,
             leader_epoch: int = -1, read_committed: bool = False, min_one_batch: bool = True) -> ReadResult:
        """Batches from ``offset``: below the high watermark, or for ``read_committed`` below the
        last stable offset and with the aborted transactions the returned range overlaps.
        ``min_one_batch``: the first batch even when larger than ``max_bytes`` (KIP-74); a fetch
        passes False once it holds another partition's records, so ``fetch.max.bytes`` stays a
        bound (Kafka's ``ReplicaManager.readFromLog`` ``minOneMessage``)."""
        with self.lock:
            self._check_leader(leader_epoch)
            stable = self._last_stable_offset()
            limit = (stable if read_committed else self.high_watermark) if up_to_high_watermark else None
            data = self.log.read(offset, max_bytes, limit, min_one_batch)
            aborted = ()
            if read_committed and data is not None:
                aborted = tuple(self.producers.aborted_between(offset, stable))
            return ReadResult(b"" if data is None else data, self.high_watermark,
                              self.log.log_start_offset, self.log.log_end_offset, stable, aborted)

    def stable_offsets(self) -> tuple[int, int]:
        """(last stable offset, high watermark)."""
        with self.lock:
            return self._last_stable_offset(), self.high_watermark

    def _last_stable_offset(self) -> int:
        """The first offset of the oldest transaction that is open or whose marker is not yet below
        the high watermark (Kafka's ``firstUnstableOffset``), but never below the log start (an open
        transaction's first records may have been deleted) nor past the high watermark."""
        first_open = self.producers.first_unstable_offset()
        if first_open is None:
            return self.high_watermark
        return min(max(first_open, self.log.log_start_offset), self.high_watermark)

    # ------------------------------------------------------------------------------ offsets
    def offsets(self) -> tuple[int, int, int]:
        """(log start offset, high watermark, log end offset)."""
        with self.lock:
            return self.log.log_start_offset, self.high_watermark, self.log.log_end_offset

    def leader_offsets(self, leader_epoch: int = -1) -> tuple[int, int, int]:
        """:meth:`offsets` as the leader of ``leader_epoch`` (-1: any), checked in the same step:
        what a fetch answers for a partition it has no bytes left for."""
        with self.lock:
            self._check_leader(leader_epoch)
            return self.log.log_start_offset, self.high_watermark, self.log.log_end_offset

    def earliest_offset(self) -> tuple[int, int]:
        """ListOffsets EARLIEST, as leader: (log start offset, the epoch that wrote it or -1), read
        under one lock with the leadership check, so a leadership lost meanwhile is not answered
        with this replica's follower state."""
        with self.lock:
            self._check_leader()
            start = self.log.log_start_offset
            epoch = self.epochs.epoch_for_offset(start)
            return start, -1 if epoch is None else epoch

    def latest_offset(self, read_committed: bool = False) -> tuple[int, int]:
        """ListOffsets LATEST, as leader: (high watermark, or the last stable offset for
        ``read_committed``; the current leader epoch), in one step with the leadership check and
        :meth:`check_offsets_available`: a follower's high watermark may be below what this replica
        answered as leader, and a consumer resetting to "latest" would read records again."""
        with self.lock:
            self._check_leader()
            self._check_offsets_available()
            return (self._last_stable_offset() if read_committed else self.high_watermark), self.leader_epoch

    def check_offsets_available(self) -> None:
        """A leader whose high watermark is still below its epoch's start offset refuses ListOffsets
        (Kafka's fetchOffsetForTimestamp): the HW it would answer may be lower than the one its
        predecessor showed, and a consumer resetting to "latest" would read records again."""
        with self.lock:
            self._check_offsets_available()

    def _check_offsets_available(self) -> None:
        state = self.leader_state
        if self.role == LEADER and state is not None \
                and state.leader_epoch_start_offset > state.high_watermark:
            raise OffsetNotAvailableError(
                f"{self.topic}-{self.index}: the high watermark ({state.high_watermark}) is behind the start "
                f"offset of leader epoch {self.leader_epoch} ({state.leader_epoch_start_offset}); retry")

    def epoch_of(self, offset: int) -> int:
        """The leader epoch that wrote ``offset`` (ListOffsets answers it with the offset, as
        Kafka's batch ``partitionLeaderEpoch``), -1 when no epoch entry covers it."""
        with self.lock:
            epoch = self.epochs.epoch_for_offset(offset)
            return -1 if epoch is None else epoch

    def offset_for_timestamp(self, timestamp: int, read_committed: bool = False) -> tuple[int, int] | None:
        """ListOffsets by time: (offset, timestamp) of the first record at or after ``timestamp``,
        or None when there is none below the last fetchable offset (see :meth:`_fetchable`); as
        leader (checked in the same step)."""
        with self.lock:
            self._check_leader()
            return self._fetchable(self.log.offset_for_timestamp(timestamp), read_committed)

    def max_timestamp(self, read_committed: bool = False) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP: (offset, timestamp) of the first record holding the largest
        timestamp, or None when it is not below the last fetchable offset; as leader."""
        with self.lock:
            self._check_leader()
            return self._fetchable(self.log.max_timestamp(), read_committed)

    def _fetchable(self, found: tuple[int, int] | None, read_committed: bool) -> tuple[int, int] | None:
        """As Kafka: an answer at or past what a consumer could fetch (the last stable offset for
        read_committed, else the high watermark) is no answer, so a consumer never seeks to a
        record it may not read yet. When there is no answer and the high watermark still lags the
        leader epoch's start, it is OffsetNotAvailableError (retriable), not -1 (Kafka's
        ``ReplicaManager.fetchOffset`` throwing ``maybeOffsetsError``): the record may be there and
        become readable once the new leader's high watermark catches up."""
        limit = self._last_stable_offset() if read_committed else self.high_watermark
        if found is not None and found[0] < limit:
            return found
        self._check_offsets_available()
        return None
