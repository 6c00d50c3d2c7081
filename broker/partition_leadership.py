"""Partition leadership: this broker's role for one partition (:class:`Leadership`,
:data:`LEADERSHIP`), how metadata moves it between follower and leader, and what only the leader
does with its replicas: adopting the high watermark its :class:`LeaderState` computes, proposing
ISR changes, and answering OffsetsForLeaderEpoch. Mixed into :class:`~broker.partition.Partition`.

Kept apart from the produce and read paths because every one of those checks leadership first
(:meth:`PartitionLeadership._check_leader`) but none changes it.
"""
from __future__ import annotations

from broker.errors import FencedLeaderEpochError, NotLeaderOrFollowerError, UnknownLeaderEpochError
from broker.replication.leader_state import LeaderState
from broker.state_machine import StrEnum, Transitions


class Leadership(StrEnum):
    """This broker's role for one partition. A ``StrEnum`` whose values are the names the role
    always had, so ``partition.role == "leader"`` keeps meaning what it did."""

    FOLLOWER = "follower"  # appends the leader's batches (also before the first metadata: not serving)
    LEADER = "leader"      # assigns offsets, tracks the ISR, answers clients
    CLOSED = "closed"      # log closed (shutdown or removal): serves nothing, never reopens


LEADER, FOLLOWER, CLOSED = Leadership.LEADER, Leadership.FOLLOWER, Leadership.CLOSED

#: Staying leader is a new ISR or partition epoch; staying follower a new leader or epoch. A
#: closed partition is final: hosting the partition again opens a new ``Partition`` on a new log.
LEADERSHIP: Transitions[Leadership] = Transitions("partition leadership", {
    FOLLOWER: {FOLLOWER, LEADER, CLOSED},
    LEADER: {LEADER, FOLLOWER, CLOSED},
    CLOSED: set(),
})


class PartitionLeadership:
    """Needs the lock, ``hw_changed``, the log, the epoch cache, the producer state, the notifier
    and the clock (from Partition)."""

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
                                                lambda: self.log.config["min.insync.replicas"],
                                                self.replica_lag_time_max_ms,
                                                lambda broker, epoch: self.replica_eligible(broker, epoch))
            else:
                self.leader_state.set_isr(list(isr), self.clock.time_ms())
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

    # ------------------------------------------------------------------------------ leader: ISR and high watermark
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
            # A follower that stopped fetching stops holding the HW once it is no longer caught up.
            moved = state.update_high_watermark(now_ms) and self._advance_hw()
            lagging = set(state.shrink_candidates(now_ms, lag_ms))
            isr = [r for r in self.replicas if (r in self.isr and r not in lagging)
                   or (r not in self.isr and r != self.node_id and state.expand_candidate(r))]
            proposal = None
            if sorted(isr) != sorted(self.isr) and state.pending_isr is None:
                proposal = isr, self.leader_epoch, self.partition_epoch, state.propose_isr(isr)
        if moved:
            self.notifier.bump()
        return proposal

    def abort_isr_change(self) -> None:
        moved = False
        with self.lock:
            if self.leader_state is not None:
                self.leader_state.abort_isr_change(self.clock.time_ms())
                moved = self._advance_hw()
        if moved:
            self.notifier.bump()

    # ------------------------------------------------------------------------------ leader checks
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

    def end_offset_for_epoch(self, epoch: int, current_leader_epoch: int = -1) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch, answered by the leader: (the largest epoch <= ``epoch``,
        the offset after its last record), (-1, -1) when unknown; a ``current_leader_epoch`` other
        than this leader's is fenced (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), in the same
        step, so the answer is never of an epoch the asker did not expect."""
        with self.lock:
            self._check_leader(current_leader_epoch)
            return self.epochs.end_offset_for(epoch, self.log.log_end_offset)
