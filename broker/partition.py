"""A partition as this broker hosts it: its log, its role (leader or follower) and its high watermark.

The log knows offsets and bytes; the partition adds replication. As **leader** it assigns offsets,
tracks every follower's log end offset (:class:`LeaderState`), advances the high watermark as the
ISR catches up, and completes ``acks=all`` produces once the high watermark passes their batch.
As **follower** it appends the leader's batches unchanged and adopts the leader's high watermark.
Consumers only ever read below the high watermark. Each leader epoch's first offset goes to the
leader-epoch cache, so a replica that returns after a failure can find where its log diverged.

Every append and high-watermark move bumps the broker-wide :class:`AppendNotifier` so long-polling
fetches and waiting produces wake.

Leadership is an explicit state machine (:class:`Leadership`, :data:`LEADERSHIP`): a partition opens
as a follower, moves between follower and leader as the metadata says, and ends closed (broker
shutdown, or the partition removed from this broker). Every change is checked under the lock, so a
closed partition whose log is gone can never be made leader again by a late metadata update.

Threading: every method takes ``self.lock``; reads copy what they need under it. ``hw_changed``
(a condition on the same lock) wakes ``acks=all`` produces.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, NamedTuple

from broker.clock import Clock
from broker.config import LONG_MAX
from broker.errors import (FencedLeaderEpochError, InvalidProducerEpochError, InvalidRecordError,
                           InvalidTimestampError, MessageTooLargeError, NotEnoughReplicasAfterAppendError,
                           NotEnoughReplicasError, NotLeaderOrFollowerError, OffsetNotAvailableError,
                           OutOfOrderSequenceError, PolicyViolationError, RequestTimedOutError,
                           UnknownLeaderEpochError)
from broker.records.batch import HEADER_SIZE, increment_sequence, iter_headers, validate_batches
from broker.records.control import marker_batch
from broker.replication.leader_state import LeaderState
from broker.state_machine import StrEnum, Transitions
from broker.storage import cleaner, retention
from broker.storage.leader_epoch_cache import LeaderEpochCache
from broker.storage.producer_state import ProducerStateManager
from broker.storage.log import AppendInfo, Log


class Leadership(StrEnum):
    """This broker's role for one partition. A ``StrEnum`` whose values are the names the role
    always had, so ``partition.role == "leader"`` keeps meaning what it did."""

    FOLLOWER = "follower"  # appends the leader's batches (also before the first metadata: not serving)
    LEADER = "leader"      # assigns offsets, tracks the ISR, answers clients
    CLOSED = "closed"      # log closed (shutdown or removal): serves nothing, never reopens


LEADER, FOLLOWER, CLOSED = Leadership.LEADER, Leadership.FOLLOWER, Leadership.CLOSED

NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
_ROLL_MARGIN_MS = 60_000  # append_is_quick: a time-based roll this close is left to a pool thread
_RELATIVE_OFFSETS_QUICK = 2**31 - 2**20  # ... and so is a roll for relative offsets running out

#: Staying leader is a new ISR or partition epoch; staying follower a new leader or epoch. A
#: closed partition is final: hosting the partition again opens a new ``Partition`` on a new log.
LEADERSHIP: Transitions[Leadership] = Transitions("partition leadership", {
    FOLLOWER: {FOLLOWER, LEADER, CLOSED},
    LEADER: {LEADER, FOLLOWER, CLOSED},
    CLOSED: set(),
})


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


class ReadResult(NamedTuple):
    records: bytes | memoryview
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    aborted: tuple = ()  # AbortedTxn ranges overlapping a read_committed read


class Partition:
    def __init__(self, topic: str, index: int, topic_id: str, log: Log, notifier: AppendNotifier,
                 node_id: int = 0, clock: Clock | None = None):
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
        self.role: Leadership = FOLLOWER  # changed only by _move_to
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.leader_state: LeaderState | None = None
        self.on_isr_candidate = None  # called (outside the lock) when a follower may join the ISR
        self.high_watermark = min(self._checkpointed_hw(), log.log_end_offset)
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

    def _checkpointed_hw(self) -> int:
        return self.log.log_start_offset

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    def _move_to(self, role: Leadership) -> None:
        """Every change of role, checked against :data:`LEADERSHIP`; called with the lock held."""
        self.role = LEADERSHIP.move(self.role, role)

    # ------------------------------------------------------------------------------ roles
    def make_leader(self, leader_epoch: int, partition_epoch: int, replicas: list[int], isr: list[int]) -> None:
        with self.lock:
            LEADERSHIP.move(self.role, LEADER)  # checked before anything changes
            leo = self.log.log_end_offset
            if self.role != LEADER or leader_epoch != self.leader_epoch:
                self.epochs.assign(leader_epoch, leo)
                self.leader_state = LeaderState(self.node_id, list(replicas), list(isr), leader_epoch,
                                                leo, self.high_watermark, self.clock.time_ms(),
                                                lambda: self.log.config["min.insync.replicas"])
            else:
                self.leader_state.set_isr(list(isr))
            self._move_to(LEADER)
            self.leader_id, self.leader_epoch = self.node_id, leader_epoch
            self.partition_epoch, self.replicas, self.isr = partition_epoch, list(replicas), list(isr)
            self._advance_hw()

    def make_follower(self, leader_id: int, leader_epoch: int, partition_epoch: int, replicas: list[int],
                      isr: list[int]) -> bool:
        """Returns True when the leader or epoch changed (the fetcher must re-check for divergence)."""
        with self.lock:
            changed = self.role != FOLLOWER or leader_epoch != self.leader_epoch or leader_id != self.leader_id
            self._move_to(FOLLOWER)
            self.leader_id, self.leader_epoch = leader_id, leader_epoch
            self.partition_epoch, self.replicas, self.isr = partition_epoch, list(replicas), list(isr)
            self.leader_state = None
            self.hw_changed.notify_all()  # waiting acks=all produces fail: we no longer lead
            return changed

    # ------------------------------------------------------------------------------ leader: produce
    def append_records(self, data, acks: int = 1, min_insync_replicas: int | None = None) -> AppendInfo:
        """Validate a produce payload, then append it as leader (offsets assigned here)."""
        headers = validate_batches(data, max_batch_bytes=self.log.config["max.message.bytes"])
        if any(h.is_control for h in headers):
            raise InvalidRecordError("control batches (transaction markers) are written by the transaction "
                                     "coordinator, not produced")
        if any(h.delete_horizon_ms is not None for h in headers):   # only the cleaner sets it
            raise InvalidRecordError("a produced batch may not set the delete-horizon attribute (bit 6): the log "
                                     "cleaner sets it when it first keeps a tombstone")
        if "compact" in self.log.config["cleanup.policy"]:
            self._check_keys(data, headers)
        self._check_timestamps(headers)
        if self.log.config["compression.type"] != "producer":
            from broker.records.arrow_body import recompress
            data, headers = recompress(data, headers, self.log.config["compression.type"])
            limit = self.log.config["max.message.bytes"]
            for h in headers:   # the stored batch is what fetchers sized to max.message.bytes read
                if h.size > limit:
                    raise MessageTooLargeError(
                        f"batch of {h.size} bytes once recompressed with compression.type="
                        f"{self.log.config['compression.type']} exceeds max.message.bytes={limit}",
                        batch_bytes=h.size, max_message_bytes=limit)
        with self.lock:
            self._check_leader()
            if acks == -1:
                required = self.log.config["min.insync.replicas"] if min_insync_replicas is None else min_insync_replicas
                required = min(required, len(self.replicas))   # Kafka's effectiveMinIsr
                if len(self.isr) < required:
                    raise NotEnoughReplicasError(
                        f"{self.topic}-{self.index} has {len(self.isr)} in-sync replica(s) {self.isr}; "
                        f"acks=all needs min.insync.replicas={required}")
            resent = self._check_producers(headers)
            if resent is not None:
                return AppendInfo(resent.first_offset, resent.last_offset, -1,
                                  resent.last_offset - resent.first_offset + 1)
            active = self.log.active.base_offset
            info = self.log.append(data, headers, self.leader_epoch)
            offset = info.first_offset
            now = self.clock.time_ms()
            for h in headers:
                self.producers.update(h, offset, offset + h.last_offset_delta, now)
                offset += h.last_offset_delta + 1
            if self.log.active.base_offset != active:
                self.producers.snapshot(self.log.log_end_offset)
            self.leader_state.on_leader_append(self.log.log_end_offset)
            self._advance_hw()
        self.notifier.bump()
        return info

    def append_is_quick(self, incoming: int) -> bool:
        """Whether appending ``incoming`` bytes here is a copy into the page cache: no fsync due
        (``flush.messages``/``flush.ms`` unset), no segment roll near (its fsync of the old segment
        can take long), no recompression. A hint read without the lock, for where to run an append."""
        config = self.log.config
        if (config["flush.messages"] < LONG_MAX or config["flush.ms"] < LONG_MAX
                or config["compression.type"] != "producer"):
            return False
        active = self.log.active
        now = self.clock.time_ms()
        return (active.size + incoming < config["segment.bytes"]
                and active.time_waited_for_roll(now, now) < config["segment.ms"] - _ROLL_MARGIN_MS
                and active.next_offset - active.base_offset < _RELATIVE_OFFSETS_QUICK)

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

    def _check_timestamps(self, headers) -> None:
        """With CreateTime, refuse a batch whose timestamps are further in the past or future than
        ``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` allow (Kafka:
        InvalidTimestamp), checked on the header's base (first) and max timestamps. A timestamp of
        -1 is RecordBatch.NO_TIMESTAMP, which Kafka's ``LogValidator.validateTimestamp`` skips."""
        config = self.log.config
        if config["message.timestamp.type"] != "CreateTime":
            return
        before, after = config["message.timestamp.before.max.ms"], config["message.timestamp.after.max.ms"]
        if before >= 2**63 - 1 and after >= 2**63 - 1:
            return
        now = self.clock.time_ms()
        for h in headers:
            if h.base_timestamp != NO_TIMESTAMP and now - h.base_timestamp > before:
                raise InvalidTimestampError(
                    f"{self.topic}-{self.index}: timestamp {h.base_timestamp} is more than "
                    f"message.timestamp.before.max.ms={before} before the broker's time {now}")
            if h.max_timestamp - now > after:
                raise InvalidTimestampError(
                    f"{self.topic}-{self.index}: timestamp {h.max_timestamp} is more than "
                    f"message.timestamp.after.max.ms={after} after the broker's time {now}")

    def _check_producers(self, headers):
        """Sequence checks of idempotent batches; the earlier append when the request resends one."""
        following: dict[int, int] = {}
        for i, h in enumerate(headers):
            if h.producer_id < 0:
                continue
            if h.producer_id in following:
                if h.base_sequence != increment_sequence(following[h.producer_id], 1):
                    raise OutOfOrderSequenceError(
                        f"producer {h.producer_id} sent sequence {h.base_sequence} after "
                        f"{following[h.producer_id]} in one request")
            else:
                resent = self.producers.check(h)
                if resent is not None:
                    if len(headers) > 1:
                        raise OutOfOrderSequenceError(
                            f"producer {h.producer_id} resent sequence {h.base_sequence} together with "
                            "other batches; a resent batch must come alone")
                    return resent
            following[h.producer_id] = h.last_sequence
        return None

    def _check_keys(self, data, headers) -> None:
        """A compacted topic keeps the latest record per key, so a record without one is refused
        (Kafka: InvalidRecord). Costs a decode of each body: zero-copy unless compressed."""
        from broker.records.arrow_body import decode_body
        view, pos = memoryview(data), 0
        for h in headers:
            missing = decode_body(view[pos + HEADER_SIZE: pos + h.size]).column(0).null_count
            if missing:
                raise InvalidRecordError(
                    f"{self.topic} is compacted (cleanup.policy={self.log.config['cleanup.policy']}): every record "
                    f"needs a key, but {missing} record(s) of the batch at byte {pos} have none")
            pos += h.size

    def wait_for_replication(self, info: AppendInfo, timeout: float) -> None:
        """Block an acks=all produce until every ISR member holds its batch (the HW passed it)."""
        deadline = time.monotonic() + timeout
        epoch = self.leader_epoch
        with self.lock:
            while not self.is_replicated(info, epoch):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self.replication_timeout(info)
                self.hw_changed.wait(min(remaining, 0.5))

    def is_replicated(self, info: AppendInfo, leader_epoch: int) -> bool:
        """Whether every ISR member holds an acks=all batch appended in ``leader_epoch``; raises
        once it never will be here (leadership moved) or the ISR shrank below min.insync.replicas."""
        with self.lock:
            if self.high_watermark <= info.last_offset:
                if self.role != LEADER or self.leader_epoch != leader_epoch:
                    raise NotLeaderOrFollowerError(
                        f"{self.topic}-{self.index}: leadership moved before the batch was replicated")
                return False
            required = min(self.log.config["min.insync.replicas"], len(self.replicas))
            if len(self.isr) < required:
                raise NotEnoughReplicasAfterAppendError(
                    f"{self.topic}-{self.index}: written, but the ISR shrank to {self.isr} "
                    f"(min.insync.replicas={required})")
            return True

    def replication_timeout(self, info: AppendInfo) -> RequestTimedOutError:
        return RequestTimedOutError(
            f"{self.topic}-{self.index}: in-sync replicas {self.isr} did not all reach offset "
            f"{info.last_offset} within request.timeout.ms")

    # ------------------------------------------------------------------------------ leader: follower fetch
    def read_for_follower(self, follower_id: int, offset: int, max_bytes: int, leader_epoch: int,
                          broker_epoch: int = -1, min_one_batch: bool = True) -> ReadResult:
        """A follower's fetch: everything up to the log end; its offset tells us what it holds.
        ``min_one_batch`` as in :meth:`read`."""
        moved = False
        with self.lock:
            self._check_leader(leader_epoch)
            if follower_id not in self.replicas:
                raise NotLeaderOrFollowerError(f"broker {follower_id} is not a replica of {self.topic}-{self.index}")
            self.log.check_offset(offset)
            if self.leader_state.on_follower_fetch(follower_id, offset, self.clock.time_ms(), broker_epoch):
                moved = self._advance_hw()
            joining = follower_id not in self.isr and self.leader_state.expand_candidate(follower_id)
            data = self.log.read(offset, max_bytes, min_one_batch=min_one_batch)
            result = ReadResult(b"" if data is None else data, self.high_watermark,
                                self.log.log_start_offset, self.log.log_end_offset)
        if moved:
            self.notifier.bump()
        if joining and self.on_isr_candidate is not None:
            self.on_isr_candidate(self)
        return result

    def _advance_hw(self) -> bool:
        """Adopt the leader state's high watermark (appends, follower fetches, an ISR change);
        transactions whose marker it passed become stable."""
        hw = self.leader_state.high_watermark
        if hw > self.high_watermark:
            self.high_watermark = hw
            self.producers.on_high_watermark_updated(hw)
            self.hw_changed.notify_all()
            return True
        return False

    def propose_isr_change(self, now_ms: int, lag_ms: int):
        """The ISR this leader should ask the controller for (lagging followers out, caught-up ones
        in), marked in flight: (isr, leader epoch, partition epoch, [(member, broker epoch)]), or None.
        The broker epochs let the controller refuse a member that restarted since it fetched (KIP-903)."""
        with self.lock:
            if self.role != LEADER:
                return None
            state = self.leader_state
            lagging = set(state.shrink_candidates(now_ms, lag_ms))
            isr = [r for r in self.replicas if (r in self.isr and r not in lagging)
                   or (r not in self.isr and r != self.node_id and state.expand_candidate(r))]
            if sorted(isr) == sorted(self.isr) or state.pending_isr is not None:
                return None
            member_epochs = state.propose_isr(isr)
            return isr, self.leader_epoch, self.partition_epoch, member_epochs

    def abort_isr_change(self) -> None:
        moved = False
        with self.lock:
            if self.leader_state is not None:
                self.leader_state.abort_isr_change()
                moved = self._advance_hw()
        if moved:
            self.notifier.bump()

    def check_leader(self, leader_epoch: int = -1) -> None:
        with self.lock:
            self._check_leader(leader_epoch)

    def _check_leader(self, leader_epoch: int = -1) -> None:
        if self.role != LEADER:
            raise NotLeaderOrFollowerError(
                f"broker {self.node_id} is not the leader of {self.topic}-{self.index} "
                f"(leader: {self.leader_id}); refresh metadata")
        if leader_epoch >= 0 and leader_epoch != self.leader_epoch:
            kind = FencedLeaderEpochError if leader_epoch < self.leader_epoch else UnknownLeaderEpochError
            raise kind(f"{self.topic}-{self.index}: leader epoch is {self.leader_epoch}, request had {leader_epoch}")

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch, answered by the leader."""
        with self.lock:
            self._check_leader()
            return self.epochs.end_offset_for(epoch, self.log.log_end_offset)

    # ------------------------------------------------------------------------------ follower
    def append_as_follower(self, data, leader_hw: int, leader_log_start: int) -> int:
        """Append the leader's batches as they are; returns the new log end offset."""
        with self.lock:
            if self.role != FOLLOWER:
                raise NotLeaderOrFollowerError(f"{self.topic}-{self.index} is not following")
            if len(data):
                headers = validate_batches(data, max_batch_bytes=1 << 31)
                for h in headers:
                    self.epochs.assign(h.partition_leader_epoch, h.base_offset)
                active = self.log.active.base_offset
                self.log.append_as_follower(data, headers)
                view = memoryview(data)
                self.producers.replay((h, lambda at=at, h=h: bytes(view[at:at + h.size]))
                                      for at, h in iter_headers(view))
                if self.log.active.base_offset != active:
                    self.producers.snapshot(self.log.log_end_offset)
            hw = min(leader_hw, self.log.log_end_offset)
            if hw > self.high_watermark:
                self.high_watermark = hw
                self.producers.on_high_watermark_updated(hw)
            start = min(leader_log_start, self.high_watermark)
            if start > self.log.log_start_offset:
                retention.delete_records_before(self.log, start, self.high_watermark)
                self.epochs.truncate_from_start(start)
            leo = self.log.log_end_offset
        return leo  # no bump: nothing waits on a follower's appends (reads and acks=all are the leader's)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The leader's log starts past everything this follower holds: restart empty there."""
        with self.lock:
            if self.role != FOLLOWER or offset <= self.log.log_end_offset:
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

    def truncate_to(self, offset: int) -> None:
        with self.lock:
            if offset < self.log.log_end_offset:
                self.log.truncate_to(offset)
                self._load_producers(upto=offset)
            # Always, even when no record goes: the cache may name epochs the leader never had.
            self.epochs.truncate_from_end(min(offset, self.log.log_end_offset))
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
            self.producers.on_high_watermark_updated(self.high_watermark)

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

    # ------------------------------------------------------------------------------ transactions
    def write_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> AppendInfo:
        """As leader, end a producer's transaction here with a commit or abort marker."""
        data = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, self.clock.time_ms())
        headers = validate_batches(data, max_batch_bytes=1 << 20)
        with self.lock:
            self._check_leader()
            entry = self.producers.producers.get(producer_id)
            if entry is not None and producer_epoch < entry.epoch:
                raise InvalidProducerEpochError(
                    f"marker for producer {producer_id} epoch {producer_epoch}; epoch {entry.epoch} took over")
            info = self.log.append(data, headers, self.leader_epoch)
            self.producers.end_transaction(headers[0], info.first_offset, commit)
            self.leader_state.on_leader_append(self.log.log_end_offset)
            self._advance_hw()
        self.notifier.bump()
        return info

    def open_transactions(self) -> list[tuple[int, int, int, int]]:
        with self.lock:
            return self.producers.open_transactions()

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        with self.lock:
            return self.producers.active()

    def offsets(self) -> tuple[int, int, int]:
        """(log start offset, high watermark, log end offset)."""
        with self.lock:
            return self.log.log_start_offset, self.high_watermark, self.log.log_end_offset

    def check_offsets_available(self) -> None:
        """A leader whose high watermark is still below its epoch's start offset refuses ListOffsets
        (Kafka's fetchOffsetForTimestamp): the HW it would answer may be lower than the one its
        predecessor showed, and a consumer resetting to "latest" would read records again."""
        with self.lock:
            state = self.leader_state
            if self.role == LEADER and state is not None \
                    and state.leader_epoch_start_offset > state.high_watermark:
                raise OffsetNotAvailableError(
                    f"{self.topic}-{self.index}: the high watermark ({state.high_watermark}) is behind the start "
                    f"offset of leader epoch {self.leader_epoch} ({state.leader_epoch_start_offset}); retry")

    def offset_for_timestamp(self, timestamp: int, read_committed: bool = False) -> tuple[int, int] | None:
        """ListOffsets by time: (offset, timestamp) of the first record at or after ``timestamp``,
        or None when there is none below the last fetchable offset (see :meth:`_fetchable`)."""
        with self.lock:
            return self._fetchable(self.log.offset_for_timestamp(timestamp), read_committed)

    def max_timestamp(self, read_committed: bool = False) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP: (offset, timestamp) of the first record holding the largest
        timestamp, or None when it is not below the last fetchable offset."""
        with self.lock:
            return self._fetchable(self.log.max_timestamp(), read_committed)

    def _fetchable(self, found: tuple[int, int] | None, read_committed: bool) -> tuple[int, int] | None:
        """As Kafka: an answer at or past what a consumer could fetch (the last stable offset for
        read_committed, else the high watermark) is no answer, so a consumer never seeks to a
        record it may not read yet."""
        limit = self._last_stable_offset() if read_committed else self.high_watermark
        return found if found is not None and found[0] < limit else None

    def set_config(self, config) -> None:
        with self.lock:
            self.log.set_config(config)

    # ------------------------------------------------------------------------------ retention, compaction
    def delete_records(self, offset: int) -> int:
        """DeleteRecords, as leader: records below ``offset`` (-1: the high watermark) become
        unreadable and whole segments below go; returns the new log start offset. Refused, as in
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

    def expire_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        with self.lock:
            return self.producers.expire(now_ms, expiration_ms)

    def apply_retention(self, now_ms: int) -> retention.RetentionResult:
        with self.lock:
            result = retention.apply_retention(self.log, now_ms, self.high_watermark)
            if result.segments:
                self.epochs.truncate_from_start(self.log.log_start_offset)
            return result

    def clean(self, now_ms: int, aborted=lambda: False) -> cleaner.CleanResult | None:
        """Compact the log: plan and swap under the lock, rewrite segments outside it. Nothing at
        or past the last stable offset is cleaned; aborted transactions' records are removed, and
        afterwards the partition stops listing them (persisted in the producer-state snapshot)."""
        with self.lock:
            plan = cleaner.plan_cleaning(self.log, self.high_watermark, now_ms, self._last_stable_offset(),
                                         list(self.producers.aborted))
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
            self.producers.snapshot(self.log.log_end_offset)
        except BaseException:
            self.producers.aborted = previous
            raise

    def maybe_flush(self) -> None:
        with self.lock:
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
