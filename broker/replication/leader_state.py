"""What a partition leader tracks about its followers: their log end offsets, whether they keep up,
the in-sync replica set (ISR) and the high watermark (HW).

Kafka's rules, kept here:

- A follower that fetches at offset X holds every offset below X, so X is its log end offset (LEO).
- *Caught up*: a follower's ``last_caught_up_ms`` becomes the time of this fetch when it fetched at
  or past the leader's LEO of now, or the time of its previous fetch when it fetched at or past the
  leader's LEO as of that previous fetch. A follower whose LEO equals the leader's is never lagging.
- The HW is the smallest LEO over the *maximal* ISR (the committed ISR plus a replica being added,
  see below) and over every out-of-ISR follower that is caught up (fetched this epoch and caught up
  within ``replica.lag.time.max.ms``) and eligible (its broker is unfenced, not shutting down, and
  the registration it fetches from is the current one): without that a follower catching up under
  steady appends stays below a HW that follows the leader's log end and never rejoins (Kafka's
  ``Partition.maybeIncrementLeaderHW``, ``shouldWaitForReplicaToJoinIsr``). It never decreases, and it does not move while the committed ISR is smaller than
  ``min.insync.replicas`` capped at the replication factor (KAFKA-15583: a record held by too few
  replicas is not shown to consumers, whatever its acks). The leader is always in the ISR.
- Shrink: an ISR follower lags when it is not at the leader's LEO and has not been caught up for
  ``replica.lag.time.max.ms``. Expand: an out-of-ISR follower may join once its LEO is at least the
  HW *and* at least the start offset of the current leader epoch (so it holds everything a previous
  leader might have exposed), and is eligible (Kafka's ``canAddReplicaToIsr``): the controller
  would refuse a fenced or shutting-down broker anyway.
- ISR changes go through the controller (AlterPartition): :meth:`LeaderState.propose_isr` marks one
  change in flight and :meth:`LeaderState.set_isr` applies what the controller committed. While an
  expansion is in flight the HW already waits for the joining replica, so the controller can never
  commit an ISR member that lacks data below the HW (Kafka's "maximal ISR"). No new change is
  proposed while one is in flight.
- Fetches carry the follower's broker epoch (its registration); a fetch from an older registration
  than one already seen is stale and rejected (KIP-903), and the proposal reports the epoch each
  member was seen with so the controller refuses a replica that restarted since.
- acks=all completes when the HW reaches the batch's end; ``min.insync.replicas`` is checked before
  the append (against the committed ISR) and again on completion (against the maximal ISR).
- A fetch also carries the follower's log start offset. The *low watermark* (Kafka's
  ``Partition.lowWatermarkIfLeader``) is the smallest log start over the leader and every follower
  on an alive broker, ISR or not, unknown (-1) until it fetched this epoch: DeleteRecords is
  answered only once it reached the offset, so no replica that could lead later still serves
  deleted records.

Threading: not thread-safe; the partition holds its lock around every call. Time is passed in
(a call without it uses the latest time seen). Since a follower stops counting as caught up only
as time passes, :meth:`LeaderState.update_high_watermark` re-evaluates the HW periodically.

    state = LeaderState(1, replicas=[1, 2, 3], isr=[1, 2, 3], leader_epoch=4,
                        log_end_offset=100, high_watermark=90, now_ms=0)
    state.on_leader_append(110)
    state.on_follower_fetch(2, 110, now_ms=5, broker_epoch=7)
    state.on_follower_fetch(3, 110, now_ms=6, broker_epoch=9)   # -> True: the HW is now 110
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

from broker.errors import (NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                           NotLeaderOrFollowerError, OffsetOutOfRangeError)

UNKNOWN_OFFSET = -1
UNKNOWN_BROKER_EPOCH = -1


class FollowerSnapshot(NamedTuple):
    log_end_offset: int         # -1 until the follower fetched in this leader epoch
    last_caught_up_ms: int
    last_fetch_ms: int
    last_fetch_leader_leo: int  # the leader's LEO when the follower last fetched
    broker_epoch: int           # the registration the last fetch came from (-1 unknown)
    log_start_offset: int = UNKNOWN_OFFSET  # as of its last fetch this epoch (-1 unknown)


@dataclass
class _Follower:
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    broker_epoch: int = UNKNOWN_BROKER_EPOCH
    log_start_offset: int = UNKNOWN_OFFSET
    caught_up_once: bool = False  # last_caught_up_ms is a real time (ISR at start, or caught up since)


def _always_eligible(broker: int, broker_epoch: int) -> bool:
    return True


class LeaderState:
    """The leader's view of one partition during one leader epoch.

    Built when the broker becomes leader: the leader epoch starts at the current log end, ISR
    followers count as caught up now (so they are not dropped before their first fetch) and every
    follower's LEO is unknown, which holds the HW still until all ISR followers have fetched.
    """

    def __init__(self, leader_id: int, replicas: list[int], isr: list[int], leader_epoch: int,
                 log_end_offset: int, high_watermark: int, now_ms: int,
                 min_insync_replicas: Callable[[], int] = lambda: 1,
                 replica_lag_time_max_ms: int = 10_000,
                 eligible: Callable[[int, int], bool] = _always_eligible):
        """``eligible(broker, broker_epoch)``: whether that follower may join the ISR now (its
        broker unfenced, not shutting down, registered with that epoch; -1: not told)."""
        _check_isr(leader_id, replicas, isr)
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.eligible = eligible
        self._now_ms = now_ms
        self.min_insync_replicas = min_insync_replicas   # the topic's, read when the HW may move
        if not 0 <= high_watermark <= log_end_offset:
            raise ValueError(f"high watermark {high_watermark} must lie in [0, log end {log_end_offset}]")
        self.leader_id = leader_id
        self.replicas = tuple(replicas)
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = log_end_offset
        self._leo = log_end_offset
        self._hw = high_watermark
        self._isr = tuple(isr)
        self._pending: tuple[int, ...] | None = None
        self._followers = {r: _Follower(last_caught_up_ms=now_ms if r in isr else 0, caught_up_once=r in isr)
                           for r in replicas if r != leader_id}
        self._update_hw()

    # ------------------------------------------------------------------------------- state
    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def isr(self) -> tuple[int, ...]:
        """The ISR the controller committed."""
        return self._isr

    @property
    def pending_isr(self) -> tuple[int, ...] | None:
        """The ISR proposed to the controller and not yet answered, if any."""
        return self._pending

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """Committed ISR plus any replica being added: the set the HW waits for."""
        if self._pending is None:
            return self._isr
        return self._isr + tuple(r for r in self._pending if r not in self._isr)

    def follower_offsets(self) -> dict[int, int]:
        """Each follower's LEO as of its last fetch (-1 before its first fetch this epoch)."""
        return {r: f.log_end_offset for r, f in self._followers.items()}

    def follower_state(self, follower_id: int) -> FollowerSnapshot:
        f = self._follower(follower_id)
        return FollowerSnapshot(f.log_end_offset, f.last_caught_up_ms, f.last_fetch_ms,
                                f.last_fetch_leader_leo, f.broker_epoch, f.log_start_offset)

    def low_watermark(self, leader_log_start: int, alive: Callable[[int], bool]) -> int:
        """The smallest log start offset over the leader (``leader_log_start``) and every follower
        whose broker is ``alive`` (Kafka's ``Partition.lowWatermarkIfLeader``, skipping brokers
        ``metadataCache.hasAliveBroker`` does not know): a follower that has not fetched this epoch
        counts as -1, since it may still hold anything. DeleteRecords waits for this to reach its
        offset (``DelayedDeleteRecords.tryComplete``)."""
        low = leader_log_start
        for r, f in self._followers.items():
            if f.log_start_offset < low and alive(r):
                low = f.log_start_offset
        return low

    # ------------------------------------------------------------------------------- events
    def on_leader_append(self, log_end_offset: int, now_ms: int | None = None) -> bool:
        """The leader's log grew to ``log_end_offset``; True when the HW moved."""
        if log_end_offset < self._leo:
            raise ValueError(f"a leader's log never shrinks: log end {log_end_offset} < {self._leo}")
        self._leo = log_end_offset
        return self._update_hw(now_ms)

    def update_high_watermark(self, now_ms: int) -> bool:
        """Re-evaluate the HW as of ``now_ms`` (an out-of-ISR follower that stopped fetching no
        longer holds it once ``replica.lag.time.max.ms`` passed); True when it moved."""
        return self._update_hw(now_ms)

    def on_follower_fetch(self, follower_id: int, fetch_offset: int, now_ms: int,
                          broker_epoch: int = UNKNOWN_BROKER_EPOCH,
                          log_start_offset: int = UNKNOWN_OFFSET) -> bool:
        """A follower fetched at ``fetch_offset`` (so holds everything below) and its log starts at
        ``log_start_offset`` (-1: not told); True when the HW moved.

        Raises NotLeaderOrFollowerError for a broker that is no follower of this partition or a
        fetch from an older registration of the follower than one already seen, and
        OffsetOutOfRangeError for an offset past the leader's log end.
        """
        f = self._follower(follower_id)
        if fetch_offset > self._leo or fetch_offset < 0:
            raise OffsetOutOfRangeError(
                f"follower {follower_id} fetched at {fetch_offset}, outside the leader's log "
                f"[0, {self._leo}]", log_end_offset=self._leo)
        if broker_epoch != UNKNOWN_BROKER_EPOCH and f.broker_epoch > broker_epoch:
            raise NotLeaderOrFollowerError(
                f"stale fetch from broker {follower_id}: broker epoch {broker_epoch} is older than "
                f"{f.broker_epoch}; the broker restarted since")
        if fetch_offset >= self._leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, now_ms)
            f.caught_up_once = True
        elif fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
            # a previous fetch this epoch makes that a real time (before it: "never", as Kafka's 0)
            f.caught_up_once = f.caught_up_once or f.last_fetch_leader_leo != UNKNOWN_OFFSET
        f.log_end_offset = fetch_offset
        f.log_start_offset = log_start_offset  # Kafka's Replica.updateFetchStateOrThrow: as reported
        f.last_fetch_leader_leo = self._leo
        f.last_fetch_ms = now_ms
        if broker_epoch != UNKNOWN_BROKER_EPOCH:
            f.broker_epoch = broker_epoch
        return self._update_hw(now_ms)

    # ------------------------------------------------------------------------------- ISR
    def shrink_candidates(self, now_ms: int, replica_lag_time_max_ms: int) -> list[int]:
        """ISR followers that lag by more than ``replica.lag.time.max.ms`` (none while a change is
        in flight)."""
        if self._pending is not None:
            return []
        return [r for r in self._isr if r != self.leader_id
                and self._followers[r].log_end_offset != self._leo
                and now_ms - self._followers[r].last_caught_up_ms > replica_lag_time_max_ms]

    def expand_candidate(self, follower_id: int) -> bool:
        """True when the out-of-ISR ``follower_id`` may join: LEO >= HW and >= this epoch's start,
        and it is eligible."""
        f = self._follower(follower_id)
        return (self._pending is None and follower_id not in self._isr
                and f.log_end_offset >= self._hw
                and f.log_end_offset >= self.leader_epoch_start_offset
                and self.eligible(follower_id, f.broker_epoch))

    def propose_isr(self, isr: list[int]) -> list[tuple[int, int]]:
        """Mark an ISR change as sent to the controller; returns ``(broker, broker epoch)`` per member.

        Until :meth:`set_isr` or :meth:`abort_isr_change`, the HW also waits for joining replicas.
        """
        if self._pending is not None:
            raise ValueError(f"an ISR change to {list(self._pending)} is already in flight")
        _check_isr(self.leader_id, self.replicas, isr)
        self._pending = tuple(isr)
        return [(r, UNKNOWN_BROKER_EPOCH if r == self.leader_id else self._followers[r].broker_epoch)
                for r in isr]

    def abort_isr_change(self, now_ms: int | None = None) -> bool:
        """The controller refused the change in flight; True when the HW moved (it no longer waits
        for a replica that was joining)."""
        self._pending = None
        return self._update_hw(now_ms)

    def set_isr(self, isr: list[int], now_ms: int | None = None) -> bool:
        """Apply the ISR the controller committed (ends any change in flight); True when the HW moved."""
        _check_isr(self.leader_id, self.replicas, isr)
        self._isr = tuple(isr)
        self._pending = None
        return self._update_hw(now_ms)

    # ------------------------------------------------------------------------------- acks
    def check_min_isr(self, min_insync_replicas: int) -> None:
        """Before an acks=all append: raise NotEnoughReplicasError when the ISR is too small."""
        if len(self._isr) < min_insync_replicas:
            raise NotEnoughReplicasError(
                f"the in-sync replicas {list(self._isr)} are fewer than min.insync.replicas="
                f"{min_insync_replicas}; acks=all writes are refused until followers catch up",
                isr=list(self._isr), min_insync_replicas=min_insync_replicas)

    def acks_all_done(self, required_offset: int, min_insync_replicas: int) -> bool:
        """Whether an acks=all batch is replicated: ``required_offset`` is its last offset + 1.

        True once the HW reached it; raises NotEnoughReplicasAfterAppendError if by then the ISR
        is smaller than ``min.insync.replicas`` (the batch is stored but not safely, as Kafka).
        """
        if self._hw < required_offset:
            return False
        if len(self.maximal_isr) < min_insync_replicas:
            raise NotEnoughReplicasAfterAppendError(
                f"the batch ending at {required_offset - 1} is written but the in-sync replicas "
                f"{list(self.maximal_isr)} are fewer than min.insync.replicas={min_insync_replicas}",
                isr=list(self.maximal_isr), min_insync_replicas=min_insync_replicas)
        return True

    # ------------------------------------------------------------------------------- internals
    def _follower(self, follower_id: int) -> _Follower:
        try:
            return self._followers[follower_id]
        except KeyError:
            raise NotLeaderOrFollowerError(
                f"broker {follower_id} is not a follower of this partition (replicas "
                f"{list(self.replicas)}, leader {self.leader_id})") from None

    @property
    def effective_min_isr(self) -> int:
        """``min.insync.replicas`` capped at the replication factor (Kafka's effectiveMinIsr)."""
        return min(self.min_insync_replicas(), len(self.replicas))

    def _joining_soon(self, follower_id: int, f: _Follower) -> bool:
        """An out-of-ISR follower the HW waits for: caught up (Kafka's ``isCaughtUp``, counting
        only a follower that fetched this epoch) and eligible to join."""
        return (f.log_end_offset != UNKNOWN_OFFSET and f.caught_up_once
                and (f.log_end_offset == self._leo
                     or self._now_ms - f.last_caught_up_ms <= self.replica_lag_time_max_ms)
                and self.eligible(follower_id, f.broker_epoch))

    def _update_hw(self, now_ms: int | None = None) -> bool:
        if now_ms is not None:
            self._now_ms = max(self._now_ms, now_ms)
        if len(self._isr) < self.effective_min_isr:
            return False   # KAFKA-15583: under min ISR nothing more becomes visible (acks=1 included)
        candidate = self._leo
        maximal = self.maximal_isr
        for r, f in self._followers.items():
            if f.log_end_offset < candidate and (r in maximal or self._joining_soon(r, f)):
                candidate = f.log_end_offset
        if candidate > self._hw:
            self._hw = candidate
            return True
        return False


def _check_isr(leader_id: int, replicas, isr) -> None:
    if len(set(replicas)) != len(replicas) or len(set(isr)) != len(isr):
        raise ValueError(f"replicas {list(replicas)} and ISR {list(isr)} must not repeat a broker")
    if leader_id not in replicas or leader_id not in isr:
        raise ValueError(f"leader {leader_id} must be a replica and in the ISR {list(isr)}")
    if not set(isr) <= set(replicas):
        raise ValueError(f"ISR {list(isr)} holds brokers that are not replicas {list(replicas)}")
