"""The follower path: appending the leader's batches unchanged (their epochs into the
leader-epoch cache, their producers into the producer state), adopting the leader's high watermark
(within this log, lower as well, as Kafka's follower does) and log start, and truncating when the
log diverged from the leader's or starts past it. Mixed into :class:`~broker.partition.Partition`.

Nothing waits on a follower's appends (reads and ``acks=all`` are the leader's), so nothing here
bumps the notifier.
"""
from __future__ import annotations

from broker.errors import NotLeaderOrFollowerError
from broker.partition_leadership import FOLLOWER
from broker.records.batch import iter_headers, validate_batches
from broker.replication.follower import follower_high_watermark
from broker.storage import retention


class PartitionFollower:
    """Needs the lock, the log, the epoch cache, the producer state and ``_load_producers`` (from
    Partition)."""

    def append_as_follower(self, data, leader_hw: int, leader_log_start: int,
                           fetched: tuple[int, int] | None = None) -> int:
        """Append the leader's batches as they are; returns the new log end offset.

        ``fetched``: the (leader epoch, fetch offset) the fetch was sent with. A response to a fetch
        made before the leader changed or the log was truncated is dropped, as Kafka's fetcher
        drops it (``AbstractFetcherThread.processFetchResponse``): appended after the truncation
        for the new leader, an old leader's tail would stay, and the logs would differ for good.
        """
        with self.lock:
            if self.role != FOLLOWER:
                raise NotLeaderOrFollowerError(f"{self.topic}-{self.index} is not following")
            if fetched is not None and fetched != (self.leader_epoch, self.log.log_end_offset):
                return self.log.log_end_offset
            if len(data):
                headers = validate_batches(data, max_batch_bytes=1 << 31, replicated=True)  # cleaned shapes too
                for h in headers:
                    self.epochs.assign(h.partition_leader_epoch, h.base_offset)
                active = self.log.active.base_offset
                self.log.append_as_follower(data, headers)
                view = memoryview(data)
                self.producers.replay((h, lambda at=at, h=h: bytes(view[at:at + h.size]))
                                      for at, h in iter_headers(view))
                if self.log.active.base_offset != active:
                    self.snapshot_producers()
            # The leader's HW, within this log (Kafka's ``maybeUpdateHighWatermark``), lower too: one
            # restored from this replica's checkpoint may be past what the current leader confirms.
            hw = follower_high_watermark(leader_hw, self.log.log_end_offset, self.log.log_start_offset)
            if hw != self.high_watermark:
                raised, self.high_watermark = hw > self.high_watermark, hw
                if raised:
                    self.producers.on_high_watermark_updated(hw)
            start = min(leader_log_start, self.high_watermark)
            if start > self.log.log_start_offset:
                retention.delete_records_before(self.log, start, self.high_watermark)
                self.epochs.truncate_from_start(start)
            leo = self.log.log_end_offset
        return leo  # no bump: nothing waits on a follower's appends (reads and acks=all are the leader's)

    def truncate_fully_and_start_at(self, offset: int, fetched: tuple[int, int] | None = None) -> None:
        """The leader's log starts past everything this follower holds: restart empty there.
        ``fetched`` as in :meth:`append_as_follower`: an answer to an older fetch changes nothing."""
        with self.lock:
            if self.role != FOLLOWER or offset <= self.log.log_end_offset:
                return
            if fetched is not None and fetched != (self.leader_epoch, self.log.log_end_offset):
                return
            self.log.truncate_fully_and_start_at(offset)
            self.epochs.clear()
            self.producers.truncate_fully_and_start_at(offset)
            self.high_watermark = offset

    def follower_state(self) -> tuple[int, int, int]:
        """(leader epoch, latest local epoch or -1, log end offset) for divergence checks."""
        with self.lock:
            latest = self.epochs.latest_epoch()
            return self.leader_epoch, -1 if latest is None else latest, self.log.log_end_offset

    def truncate_to(self, offset: int, leader_epoch: int | None = None) -> bool:
        """Cut the log at ``offset``. With ``leader_epoch`` (the epoch the offset was worked out
        for), nothing is cut once this replica follows another epoch, or no longer follows: the
        answer came from a leader it left meanwhile (Kafka's fetcher drops OffsetsForLeaderEpoch
        answers whose epoch changed in flight). Returns whether the cut was made."""
        with self.lock:
            if leader_epoch is not None and (self.role != FOLLOWER or self.leader_epoch != leader_epoch):
                return False
            if offset < self.log.log_end_offset:
                self.log.truncate_to(offset)
                self._load_producers(upto=offset)
            # Always, even when no record goes: the cache may name epochs the leader never had.
            self.epochs.truncate_from_end(min(offset, self.log.log_end_offset))
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
            self.producers.on_high_watermark_updated(self.high_watermark)
            return True
