"""The cluster the replication simulation drives: the controller, the brokers and their messages.

Each broker keeps an in-memory log and runs the pure replication pieces
(:class:`~broker.replication.leader_state.LeaderState`, :mod:`broker.replication.follower`,
:class:`~broker.storage.leader_epoch_cache.LeaderEpochCache`) as a partition would; the
controller runs :mod:`broker.replication.election`. Everything they do to the world goes through
the simulation (``sim``): sending, time, randomness, exposing a high watermark, failing.
See ``replication_sim.py`` for the model and the invariants.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, NamedTuple

from broker.errors import (NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                           NotLeaderOrFollowerError, OffsetOutOfRangeError)
from broker.replication.election import elect_leader, isr_after_broker_loss
from broker.replication.follower import follower_high_watermark, truncation_step
from broker.replication.leader_state import LeaderState
from broker.storage.leader_epoch_cache import LeaderEpochCache

if TYPE_CHECKING:
    from tests.simulation.replication_sim import Simulation

NO_LEADER = -1
CONTROLLER = 0


class PartitionRecord(NamedTuple):
    """What the controller commits for the partition (KRaft's PartitionRecord/PartitionChangeRecord)."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


# Messages. `dst` is a broker id or CONTROLLER.
class FetchReq(NamedTuple):
    src: int
    dst: int
    req_id: int
    leader_epoch: int
    offset: int
    broker_epoch: int


class FetchResp(NamedTuple):
    src: int
    dst: int
    req_id: int
    leader_epoch: int
    offset: int
    entries: tuple
    hw: int
    error: str | None


class EpochReq(NamedTuple):
    src: int
    dst: int
    req_id: int
    leader_epoch: int
    epoch: int


class EpochResp(NamedTuple):
    src: int
    dst: int
    req_id: int
    leader_epoch: int
    answer: tuple[int, int]
    error: str | None


class AlterReq(NamedTuple):
    src: int
    dst: int
    proposal_id: int
    leader_epoch: int
    partition_epoch: int
    members: tuple[tuple[int, int], ...]


class AlterReject(NamedTuple):
    src: int
    dst: int
    proposal_id: int
    incarnation: int


class Meta(NamedTuple):
    src: int
    dst: int
    record: PartitionRecord
    incarnation: int


class PendingProduce(NamedTuple):
    required_offset: int
    entries: tuple[tuple[int, tuple[int, int]], ...]  # (offset, (epoch, record id))
    deadline_ms: int


# ----------------------------------------------------------------------------------- controller
class Controller:
    def __init__(self, sim: "Simulation"):
        self.sim = sim
        replicas = sim.config.replicas
        self.record = PartitionRecord(replicas[0], 0, tuple(replicas), 0)
        self.live: dict[int, int] = {r: 0 for r in replicas}  # broker -> broker epoch
        self.damaged: set[int] = set()

    def _commit(self, leader: int, leader_epoch: int, isr) -> None:
        old = self.record
        self.record = PartitionRecord(leader, leader_epoch, tuple(isr), old.partition_epoch + 1)
        if leader != old.leader or leader_epoch != old.leader_epoch:
            self.sim.stats.elections += leader != NO_LEADER
        self.damaged -= set(isr)
        self.sim.event("controller commits %s", self.record)
        self.sim.publish()

    def _elect(self, isr) -> int:
        leader = elect_leader(self.sim.config.replicas, isr, self.live)
        return NO_LEADER if leader is None else leader

    def broker_fenced(self, broker: int) -> None:
        self.live.pop(broker, None)
        rec = self.record
        isr = isr_after_broker_loss(rec.isr, broker)
        if rec.leader == broker:
            self._commit(self._elect(isr), rec.leader_epoch + 1, isr)
        elif tuple(isr) != rec.isr:
            self._commit(rec.leader, rec.leader_epoch, isr)

    def broker_registered(self, broker: int, broker_epoch: int) -> None:
        self.live[broker] = broker_epoch
        rec = self.record
        if rec.leader == NO_LEADER:
            leader = self._elect(rec.isr)
            if leader != NO_LEADER:
                self._commit(leader, rec.leader_epoch + 1, rec.isr)

    def move_leader(self, rng: random.Random) -> None:
        rec = self.record
        others = [r for r in rec.isr if r in self.live and r != rec.leader]
        if rec.leader != NO_LEADER and others:
            self._commit(rng.choice(others), rec.leader_epoch + 1, rec.isr)

    def on_alter(self, req: AlterReq) -> None:
        rec = self.record
        ok = (req.src == rec.leader and req.leader_epoch == rec.leader_epoch
              and req.partition_epoch == rec.partition_epoch)
        for broker, broker_epoch in req.members:
            if not ok or broker == req.src or broker in rec.isr:
                continue
            if broker not in self.live:
                ok = False
            elif self.sim.config.check_broker_epochs and broker_epoch != self.live[broker]:
                ok = False
        isr = tuple(b for b, _ in req.members)
        if ok and isr != rec.isr:
            self.sim.stats.isr_expands += len(isr) > len(rec.isr)
            self.sim.stats.isr_shrinks += len(isr) < len(rec.isr)
            self._commit(rec.leader, rec.leader_epoch, isr)
        else:
            self.sim.stats.alter_rejected += 1
            self.sim.send_control(AlterReject(CONTROLLER, req.src, req.proposal_id,
                                              self.sim.brokers[req.src].incarnation))


# ----------------------------------------------------------------------------------- brokers
class Broker:
    def __init__(self, sim: "Simulation", broker_id: int):
        self.sim = sim
        self.id = broker_id
        self.alive = True
        self.incarnation = 0          # the broker epoch: bumped on every restart
        self.log: list[tuple[int, int]] = []
        self.flushed = 0
        self.epochs = LeaderEpochCache()
        self.hw = 0
        self.hw_checkpoint = 0
        self.verified = 0             # log[:verified] is known to equal committed[:verified]
        self._reset_volatile()

    def _reset_volatile(self) -> None:
        self.known: PartitionRecord | None = None
        self.leader: LeaderState | None = None
        self.produces: list[PendingProduce] = []
        self.proposal: int | None = None
        self.following = False
        self.truncating = False
        self.outstanding: tuple[int, int] | None = None  # (request id, sent at)
        self.retry_at = 0

    def __repr__(self) -> str:
        role = "L" if self.leader else ("F" if self.following else "-")
        return (f"b{self.id}{'' if self.alive else '(dead)'}{role} leo={len(self.log)} hw={self.hw} "
                f"epochs={[tuple(e) for e in self.epochs.entries()]}")

    # ------------------------------------------------------------------------- storage
    def _truncate(self, offset: int) -> None:
        if offset < self.hw:
            self.sim.fail(f"broker {self.id} truncates to {offset}, below its HW {self.hw}")
        if offset < len(self.log):
            self.sim.stats.truncated_records += len(self.log) - offset
            del self.log[offset:]
        # Always, as Kafka: an epoch this broker assigned at its log end while leading, without
        # writing, must go even when no record does.
        self.epochs.truncate_from_end(offset)
        self.flushed = min(self.flushed, len(self.log))
        self.verified = min(self.verified, len(self.log))
        self.hw = min(self.hw, len(self.log))

    def _append(self, epoch: int, record_id: int) -> None:
        self.epochs.assign(epoch, len(self.log))
        self.log.append((epoch, record_id))

    # ------------------------------------------------------------------------- lifecycle
    def crash(self, power_loss: bool) -> None:
        sim = self.sim
        self.alive = False
        if power_loss:
            keep = sim.rng.randint(self.flushed, len(self.log))
            sim.stats.records_lost_to_power += len(self.log) - keep
            del self.log[keep:]
            self.flushed = keep
            self.verified = min(self.verified, keep)
            sim.controller.damaged.add(self.id)
        self._reset_volatile()
        sim.controller.broker_fenced(self.id)

    def restart(self) -> None:
        self.alive = True
        self.incarnation += 1
        self.epochs.truncate_from_end(len(self.log))
        self.hw = min(self.hw_checkpoint, len(self.log))
        self.sim.controller.broker_registered(self.id, self.incarnation)
        self.sim.send_control(Meta(CONTROLLER, self.id, self.sim.controller.record, self.incarnation))

    # ------------------------------------------------------------------------- metadata
    def on_meta(self, rec: PartitionRecord) -> None:
        if self.known is not None and rec.partition_epoch <= self.known.partition_epoch:
            return
        old, self.known = self.known, rec
        if rec.leader == self.id:
            if self.leader is not None and self.leader.leader_epoch == rec.leader_epoch:
                self.leader.set_isr(list(rec.isr))
                self.proposal = None
                self.sim.expose(self)
            else:
                self._become_leader(rec)
        elif self.leader is not None or old is None or old.leader_epoch != rec.leader_epoch:
            self._become_follower(rec)

    def _become_leader(self, rec: PartitionRecord) -> None:
        self._fail_produces()
        self.epochs.assign(rec.leader_epoch, len(self.log))
        self.leader = LeaderState(self.id, list(self.sim.config.replicas), list(rec.isr),
                                  rec.leader_epoch, len(self.log), self.hw, self.sim.now)
        self.following = self.truncating = False
        self.outstanding = self.proposal = None
        self.sim.expose(self)
        self.sim.event("b%d leads epoch %d at leo %d hw %d", self.id, rec.leader_epoch,
                       len(self.log), self.hw)
        self.sim.stats.new_leader_hw_behind += self.hw < len(self.sim.committed)

    def _become_follower(self, rec: PartitionRecord) -> None:
        self._fail_produces()
        self.leader = None
        self.proposal = self.outstanding = None
        self.following = rec.leader != NO_LEADER
        if self.sim.config.truncation == "high_watermark":
            self._truncate(self.hw)
            self.truncating = False
        else:
            self.truncating = True

    def _fail_produces(self) -> None:
        self.produces = []

    # ------------------------------------------------------------------------- leader side
    def produce(self, acks_all: bool, count: int) -> None:
        sim, ls = self.sim, self.leader
        if ls is None:
            return
        if acks_all:
            try:
                ls.check_min_isr(sim.config.min_insync_replicas)
            except NotEnoughReplicasError:
                sim.stats.rejected_min_isr += 1
                return
        entries = []
        for _ in range(count):
            entry = (ls.leader_epoch, sim.next_record_id())
            entries.append((len(self.log), entry))
            self._append(*entry)
        ls.on_leader_append(len(self.log))
        sim.expose(self)
        if acks_all:
            sim.stats.produced_all += count
            self.produces.append(PendingProduce(len(self.log), tuple(entries),
                                                sim.now + sim.config.produce_timeout_ms))
        else:
            sim.stats.produced_one += count

    def _leader_tick(self) -> None:
        sim, ls = self.sim, self.leader
        still = []
        for p in self.produces:
            try:
                done = ls.acks_all_done(p.required_offset, sim.config.min_insync_replicas)
            except NotEnoughReplicasAfterAppendError:
                sim.stats.failed_after_append += 1
                continue
            if done:
                sim.acknowledge(p.entries)
            elif sim.now <= p.deadline_ms:
                still.append(p)
        self.produces = still
        if self.proposal is not None:
            return
        lagging = ls.shrink_candidates(sim.now, sim.config.replica_lag_time_max_ms)
        if lagging:
            self._propose([r for r in ls.isr if r not in lagging])
            return
        for r in sim.config.replicas:
            if r != self.id and r not in ls.isr and ls.expand_candidate(r):
                self._propose(list(ls.isr) + [r])
                return

    def _propose(self, isr: list[int]) -> None:
        members = self.leader.propose_isr(isr)
        self.proposal = self.sim.next_request_id()
        self.sim.send_control(AlterReq(self.id, CONTROLLER, self.proposal, self.leader.leader_epoch,
                                       self.known.partition_epoch, tuple(members)))

    def on_alter_reject(self, msg: AlterReject) -> None:
        if self.leader is not None and self.proposal == msg.proposal_id:
            self.leader.abort_isr_change()
            self.proposal = None
            self.sim.expose(self)

    def _leader_error(self, leader_epoch: int) -> str | None:
        if self.leader is None or leader_epoch < self.leader.leader_epoch:
            return "FENCED_LEADER_EPOCH"
        if leader_epoch > self.leader.leader_epoch:
            return "UNKNOWN_LEADER_EPOCH"
        return None

    def on_fetch(self, req: FetchReq) -> None:
        sim = self.sim
        error = self._leader_error(req.leader_epoch)
        if error is None:
            try:
                self.leader.on_follower_fetch(req.src, req.offset, sim.now, req.broker_epoch)
                sim.expose(self)
            except NotLeaderOrFollowerError:
                sim.stats.stale_fetches += 1
                error = "STALE_BROKER_EPOCH"
            except OffsetOutOfRangeError:
                sim.fail(f"broker {req.src} fetched at {req.offset}, past leader {self.id}'s log "
                         f"end {len(self.log)} in epoch {req.leader_epoch}")
        if error is not None:
            sim.stats.fenced_requests += 1
            sim.send(FetchResp(self.id, req.src, req.req_id, req.leader_epoch, req.offset, (), -1, error))
            return
        entries = tuple(self.log[req.offset:req.offset + sim.config.max_fetch_records])
        sim.send(FetchResp(self.id, req.src, req.req_id, req.leader_epoch, req.offset, entries,
                           self.leader.high_watermark, None))

    def on_epoch_request(self, req: EpochReq) -> None:
        error = self._leader_error(req.leader_epoch)
        answer = (-1, -1) if error else self.epochs.end_offset_for(req.epoch, len(self.log))
        self.sim.send(EpochResp(self.id, req.src, req.req_id, req.leader_epoch, answer, error))

    # ------------------------------------------------------------------------- follower side
    def _follower_tick(self) -> None:
        sim = self.sim
        if self.outstanding is not None and sim.now - self.outstanding[1] < sim.config.request_timeout_ms:
            return
        if sim.now < self.retry_at:
            return
        req_id = sim.next_request_id()
        self.outstanding = (req_id, sim.now)
        leader, epoch = self.known.leader, self.known.leader_epoch
        if self.truncating:
            latest = self.epochs.latest_epoch()
            if latest is None:  # an empty log: nothing to cut
                self._truncate(min(len(self.log), self.hw))
                self.truncating = False
                self.outstanding = None
                return
            sim.send(EpochReq(self.id, leader, req_id, epoch, latest))
        else:
            sim.send(FetchReq(self.id, leader, req_id, epoch, len(self.log), self.incarnation))

    def _accepts(self, msg) -> bool:
        if (not self.following or self.outstanding is None or self.outstanding[0] != msg.req_id
                or msg.leader_epoch != self.known.leader_epoch or msg.src != self.known.leader):
            return False
        self.outstanding = None
        if msg.error is not None:
            self.retry_at = self.sim.now + 10
            return False
        return True

    def on_epoch_response(self, resp: EpochResp) -> None:
        if not self.truncating or not self._accepts(resp):
            return
        step = truncation_step(self.epochs, len(self.log), resp.answer, high_watermark=self.hw)
        if step.offset < len(self.log):
            self.sim.event("b%d truncates %d -> %d (leader answered %s)", self.id, len(self.log),
                           step.offset, resp.answer)
        self._truncate(step.offset)
        self.truncating = not step.complete
        self.sim.stats.truncation_rounds_incomplete += not step.complete

    def on_fetch_response(self, resp: FetchResp) -> None:
        if self.truncating or not self._accepts(resp) or resp.offset != len(self.log):
            return
        for epoch, record_id in resp.entries:
            self._append(epoch, record_id)
        self.hw = follower_high_watermark(resp.hw, len(self.log))

    # ------------------------------------------------------------------------- ticks
    def tick(self) -> None:
        if not self.alive or self.known is None:
            return
        if self.leader is not None:
            self._leader_tick()
        elif self.following:
            self._follower_tick()
