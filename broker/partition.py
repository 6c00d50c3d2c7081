"""A partition as this broker hosts it: its log, its role (leader or follower) and its high watermark.

The log knows offsets and bytes; the partition adds replication. As **leader** it assigns offsets,
tracks every follower's log end offset (:class:`LeaderState`), advances the high watermark as the
ISR catches up, and completes ``acks=all`` produces once the high watermark passes their batch.
As **follower** it appends the leader's batches unchanged and adopts the leader's high watermark.
Consumers only ever read below the high watermark, which a partition opened after a restart takes
from its broker's checkpoint (see ``ReplicaManager``), cut to the recovered log end and raised to the
log start: the ISR had confirmed it, and nothing past it. Each leader epoch's first offset goes to the
leader-epoch cache, so a replica that returns after a failure can find where its log diverged.

Every append and high-watermark move bumps the broker-wide :class:`AppendNotifier` so long-polling
fetches and waiting produces wake.

Leadership is an explicit state machine (:class:`Leadership`, :data:`LEADERSHIP`): a partition opens
as a follower, moves between follower and leader as the metadata says, and ends closed (broker
shutdown, or the partition removed from this broker). Every change is checked under the lock, so a
closed partition whose log is gone can never be made leader again by a late metadata update.

This module holds the partition's state, its transactions' and retention's upkeep and its closing;
the rest is split by concept into mixins:

- ``partition_leadership.py``: the role state machine, ``make_leader``/``make_follower``, the
  leader's ISR changes and high watermark;
- ``partition_produce.py``: the leader's produce validation and appends, transaction markers,
  ``acks=all`` waits;
- ``partition_follower.py``: ``append_as_follower`` and truncation;
- ``partition_reads.py``: consumers' and followers' reads, stable offsets, ListOffsets answers.

Threading: every method takes ``self.lock``; reads copy what they need under it. ``hw_changed``
(a condition on the same lock) wakes ``acks=all`` produces.
"""
from __future__ import annotations

import threading
from typing import Callable

from broker.clock import Clock
from broker.errors import PolicyViolationError
from broker.partition_follower import PartitionFollower
from broker.partition_leadership import CLOSED, FOLLOWER, LEADER, LEADERSHIP, Leadership, PartitionLeadership
from broker.partition_produce import NO_TIMESTAMP, PartitionProduce
from broker.partition_reads import PartitionReads, ReadResult
from broker.replication.leader_state import LeaderState
from broker.storage import cleaner, cleaner_plan, retention
from broker.storage.leader_epoch_cache import LeaderEpochCache
from broker.storage.producer_state import ProducerStateManager
from broker.storage.log import Log

__all__ = ["AppendNotifier", "CLOSED", "FOLLOWER", "LEADER", "LEADERSHIP", "Leadership", "NO_TIMESTAMP",
           "Partition", "ReadResult"]


class AppendNotifier:
    """A counter that fetch requests wait on: "has anything been appended since I looked?"."""

    def __init__(self):
        self._cond = threading.Condition()
        self.sequence = 0
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next_id = 0

    def bump(self) -> None:
        with self._cond:
            self.sequence += 1
            self._cond.notify_all()
            callbacks, self._callbacks = self._callbacks, {}
        for callback in callbacks.values():
            callback()

    def wait_past(self, sequence: int, timeout: float) -> None:
        with self._cond:
            if self.sequence == sequence:
                self._cond.wait(timeout)

    def call_when_past(self, sequence: int, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once the counter has moved past ``sequence`` (at once if it has):
        how an event loop waits here without a thread. Returns a function that cancels the call."""
        with self._cond:
            if self.sequence == sequence:
                key = self._next_id
                self._next_id += 1
                self._callbacks[key] = callback
                return lambda: self._cancel(key)
        callback()
        return lambda: None

    def _cancel(self, key: int) -> None:
        with self._cond:
            self._callbacks.pop(key, None)


def restored_high_watermark(checkpointed: int | None, log_start: int, log_end: int) -> int:
    """A partition's high watermark when it opens: the checkpointed one within ``[log_start,
    log_end]``, else the log start (nothing is shown before the ISR confirms it again)."""
    if checkpointed is None:
        return log_start
    return max(log_start, min(checkpointed, log_end))


class Partition(PartitionLeadership, PartitionProduce, PartitionFollower, PartitionReads):
    def __init__(self, topic: str, index: int, topic_id: str, log: Log, notifier: AppendNotifier,
                 node_id: int = 0, clock: Clock | None = None, high_watermark: int | None = None):
        """``high_watermark``: the one checkpointed before a restart (None: none known). It is
        taken within the log as recovered (Kafka's ``UnifiedLog.updateHighWatermark``): never past
        the log end, since a crash may have lost the tail the ISR held, nor below the log start."""
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.notifier = notifier
        self.node_id = node_id
        self.clock = clock or Clock()
        self.lock = threading.RLock()
        self.hw_changed = threading.Condition(self.lock)
        self.epochs = LeaderEpochCache.load(log.directory)
        self.epochs.truncate_from_end(log.log_end_offset)
        # A crash between moving the log start and trimming the cache leaves epochs below it
        # (Kafka's LogLoader.load trims both ends).
        self.epochs.truncate_from_start(log.log_start_offset)
        self.role: Leadership = FOLLOWER  # changed only by _move_to
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.leader_state: LeaderState | None = None
        self.on_isr_candidate = None  # called (outside the lock) when a follower may join the ISR
        # Set by the replica manager from the broker's config and metadata: how long a follower may
        # lag, and whether a follower's broker may join the ISR (broker id, broker epoch) -> bool.
        self.replica_lag_time_max_ms = 10_000
        self.replica_eligible: Callable[[int, int], bool] = lambda broker, broker_epoch: True
        self.high_watermark = restored_high_watermark(high_watermark, log.log_start_offset, log.log_end_offset)
        self.producers = ProducerStateManager(log.directory)
        self._load_producers()
        self.producers.on_high_watermark_updated(self.high_watermark)

    def _load_producers(self, upto: int | None = None) -> None:
        """Producer state from its snapshot plus the batches after it (all of them when the
        snapshot is missing or runs past ``upto``, the log end)."""
        end = self.log.log_end_offset if upto is None else upto
        start = self.producers.load()
        if start > end:  # the snapshot knows of batches that are gone: rebuild all from the log
            self.producers.producers, self.producers.aborted, self.producers.unreplicated = {}, [], []
            start = 0
        self.producers.replay(self.log.batches(max(start, self.log.log_start_offset)))

    # ------------------------------------------------------------------------------ transactions
    def open_transactions(self) -> list[tuple[int, int, int, int]]:
        with self.lock:
            return self.producers.open_transactions()

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        with self.lock:
            return self.producers.active()

    def set_config(self, config) -> None:
        with self.lock:
            self.log.set_config(config)

    # ------------------------------------------------------------------------------ retention, compaction
    def delete_records(self, offset: int) -> int:
        """DeleteRecords, as leader: records below ``offset`` (-1: the high watermark) become
        unreadable and whole segments below go; returns the new log start offset, of this replica
        only: the request is done once :meth:`low_watermark` reached it. Refused, as in
        Kafka, when ``cleanup.policy`` lacks ``delete``: a compacted topic's readers rebuild state
        from the whole log, and cutting its head would drop keys silently."""
        with self.lock:
            self._check_leader()
            if "delete" not in self.log.config["cleanup.policy"]:
                raise PolicyViolationError(
                    f"records of partition {self.topic}-{self.index} cannot be deleted: the topic's "
                    f"cleanup.policy is '{self.log.config['cleanup.policy']}'; add 'delete' "
                    "to it (e.g. compact,delete) to allow DeleteRecords")
            before = self.log.log_start_offset
            start = retention.delete_records_before(
                self.log, self.high_watermark if offset == -1 else offset, self.high_watermark)
            if start > before:
                self.epochs.truncate_from_start(start)
        self.notifier.bump()  # long-polling consumers below the new start get OffsetOutOfRange now
        return start

    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """As leader: the smallest log start over this replica and every follower on a broker that
        is ``alive`` (registered and unfenced), see :meth:`LeaderState.low_watermark`. A DeleteRecords
        is acknowledged only once this reached its offset (Kafka's ``DelayedDeleteRecords``): until
        then a follower that could take over still holds the records, and a failover would serve
        them again."""
        with self.lock:
            self._check_leader()
            return self.leader_state.low_watermark(self.log.log_start_offset, alive)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        with self.lock:
            return self.producers.expire(now_ms, expiration_ms)

    def apply_retention(self, now_ms: int) -> retention.RetentionResult:
        """Retention of a hosted log; nothing once closed: the retention thread may still hold a
        partition that was shut down or removed meanwhile (its segments closed, its directory gone)."""
        with self.lock:
            if self.role == CLOSED:
                return retention.RetentionResult(0, 0, (), self.log.log_start_offset)
            result = retention.apply_retention(self.log, now_ms, self.high_watermark)
            if result.segments:
                self.epochs.truncate_from_start(self.log.log_start_offset)
            return result

    def clean(self, now_ms: int, aborted=lambda: False) -> cleaner.CleanResult | None:
        """Compact the log: plan and swap under the lock, rewrite segments outside it. Nothing at
        or past the last stable offset is cleaned; aborted transactions' records are removed, and
        afterwards the partition stops listing them (persisted in the producer-state snapshot).
        A closed partition (shut down, or removed while the cleaner held it) is not cleaned."""
        with self.lock:
            if self.role == CLOSED:
                return None
            # the producers still known keep their last sequence through the clean (Kafka's RETAIN_EMPTY)
            producers = {pid: e.batches[-1].last_offset for pid, e in self.producers.producers.items() if e.batches}
            plan = cleaner_plan.plan_cleaning(self.log, self.high_watermark, now_ms, self._last_stable_offset(),
                                              list(self.producers.aborted), producers)
        if plan is None:
            return None
        cleaned = cleaner.build_cleaned(self.log, plan, now_ms, aborted)
        with self.lock:
            swapped = cleaner.swap_cleaned(self.log, cleaned)
            if swapped:
                self._forget_cleaned_aborts(plan.end_offset)
        return cleaner.CleanResult(swapped, cleaned.stats)

    def _forget_cleaned_aborts(self, end_offset: int) -> None:
        """Aborted transactions ending below a clean's end have no records left: stop listing them,
        and persist that before it counts (a later clean removes their markers only once they are
        unlisted, so no listed range ever outlives its marker, even across a crash)."""
        previous = self.producers.aborted
        kept = cleaner.aborted_after_clean(previous, end_offset)
        if len(kept) == len(previous):
            return
        self.producers.aborted = kept
        try:
            self.snapshot_producers()
        except BaseException:
            self.producers.aborted = previous
            raise

    def snapshot_producers(self) -> None:
        """Snapshot the producer state at the log end, made durable first (as Kafka snapshots at a
        roll, behind the fsynced segment): a snapshot past what a crash leaves is discarded on
        restart and the state rebuilt from the log start, over segments the cleaner or retention
        may have rewritten since, which can forget a producer or its last sequence."""
        self.log.flush()
        self.producers.snapshot(self.log.log_end_offset)

    def maybe_flush(self) -> None:
        with self.lock:
            if self.role != CLOSED:
                self.log.maybe_flush_on_time()

    def close(self) -> None:
        """Broker shutdown: snapshot the producer state and close the log. Closing twice is a no-op."""
        with self.lock:
            if self.role == CLOSED:
                return
            self._move_to(CLOSED)
            self.hw_changed.notify_all()  # waiting acks=all produces fail: we no longer lead
            self.producers.truncate(self.log.log_start_offset)
            self.producers.snapshot(self.log.log_end_offset)
            self.log.close()

    def close_for_removal(self) -> None:
        """The partition left this broker and its directory is about to go: close without flushing."""
        with self.lock:
            if self.role == CLOSED:
                return
            self._move_to(CLOSED)
            self.hw_changed.notify_all()
            self.log.close_without_flush()
