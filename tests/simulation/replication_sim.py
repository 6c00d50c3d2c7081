"""A seeded, single-threaded simulation of ONE partition replicated on three brokers.

Built from the pure replication pieces (``LeaderState``, ``election``, ``follower``,
``LeaderEpochCache``) plus an in-memory log per broker, a lossy network and a tiny controller.

Model
-----
- **Log**: a list of ``(leader_epoch, record_id)``, one per offset. ``flushed`` is the recovery
  point: a power loss keeps a random length between it and the log end (the page cache may have
  written back part of the tail). A kill -9 loses nothing (the page cache survives). Truncation is
  durable. The leader-epoch cache and the HW checkpoint are fsynced files: they survive both, and
  a restarted broker cuts its epoch cache at its log end and clamps its HW to it.
- **Network** (fetch and OffsetsForLeaderEpoch requests and responses): random delay, drops,
  duplicates and so reordering; a broker can be isolated from the others for a while (it stays
  registered with the controller, so the leader has to shrink it out of the ISR). Followers keep
  one request outstanding and resend after a timeout; a response is used only if it answers the
  outstanding request, in the same leader epoch, at the current log end.
- **Controller** (reliable, as Raft is tested elsewhere): it alone records leader, leader epoch,
  ISR and partition epoch, atomically, and publishes every change to each live broker in order
  (with a delay, so brokers act on stale metadata: zombie leaders exist). A crashed broker is
  fenced at once: it leaves the ISR (never the last member) and a new leader is elected from the
  ISR. AlterPartition is checked against leader epoch, partition epoch and, for joining replicas,
  liveness and broker epoch (KIP-903). A controlled move hands leadership to another live ISR
  member while the old leader keeps running until it hears of it.
- **Power loss bound** (what Kafka itself tolerates): a broker may lose power only when no *other*
  replica is *damaged* (lost data by a power loss and not yet re-added to the ISR) and it is not
  the only ISR member. So there is always an ISR member holding everything ever exposed; beyond
  that Kafka loses data too (and ``bound_power_loss=False`` shows the invariants catch it).

Invariants, checked after every step (a failure raises :class:`SimulationFailure`)
------------------------------------------------------------------------------------
1. A leader's HW never decreases during its leader epoch, and never passes its log end.
2. ``committed`` is what consumers may have seen: the longest prefix any leader ever exposed
   below its HW. It only grows; every leader's log below its HW equals it.
3. Every live replica's HW is at most ``len(committed)`` (a follower never exposes an offset the
   leader has not committed) and its log below its HW equals ``committed``.
4. Every member of the controller's ISR (alive or crashed) holds all of ``committed`` at the same
   offsets: log matching below the HW, and the set any new leader comes from.
5. Every acks=all record acknowledged to a producer is in ``committed`` at its offset (so by 4 on
   the leader, below the HW, forever after).
6. A replica never truncates below its own HW (exposed data is never cut).
Then with faults off the partition must converge: all brokers alive and in the ISR, equal logs,
HW = LEO everywhere, and each broker's epoch cache agrees with its log.
"""
from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field

from tests.simulation.replication_nodes import (CONTROLLER, NO_LEADER, AlterReject, Broker, Controller,
                                                EpochReq, EpochResp, FetchReq, FetchResp, Meta)
from tests.simulation.seeds import SimulationFailure


@dataclass(frozen=True)
class SimConfig:
    """The partition and the run; times are simulated milliseconds (a step advances 1-10 ms)."""
    replicas: tuple[int, ...] = (1, 2, 3)
    min_insync_replicas: int = 2            # min.insync.replicas
    replica_lag_time_max_ms: int = 100      # replica.lag.time.max.ms
    fault_steps: int = 500
    max_converge_steps: int = 3000          # fault-free steps allowed to reach convergence
    max_fetch_records: int = 4              # records per fetch response
    request_timeout_ms: int = 60            # a follower resends an unanswered request after this
    produce_timeout_ms: int = 400           # an acks=all produce not replicated by then fails
    # Ways to break the design on purpose, proving the invariants can fail:
    truncation: str = "leader_epoch"        # "high_watermark": Kafka before KIP-101
    bound_power_loss: bool = True           # False: power loss wherever a broker runs
    check_broker_epochs: bool = True        # False: the controller skips KIP-903's check


@dataclass
class Faults:
    """Per-seed fault rates, drawn from the seed so runs differ in character."""
    drop: float
    duplicate: float
    max_delay_ms: int
    produce: float
    crash: float
    power_loss: float
    restart: float
    move_leader: float
    isolate: float
    flush: float

    @classmethod
    def draw(cls, rng: random.Random) -> "Faults":
        return cls(drop=rng.choice([0.0, 0.05, 0.15, 0.3]), duplicate=rng.choice([0.0, 0.03]),
                   max_delay_ms=rng.choice([2, 15, 40, 90]), produce=rng.uniform(0.2, 0.6),
                   crash=rng.choice([0.0, 0.005, 0.015, 0.03]),
                   power_loss=rng.choice([0.0, 0.01, 0.03]), restart=rng.choice([0.05, 0.2, 0.6]),
                   move_leader=rng.choice([0.0, 0.01, 0.03]), isolate=rng.choice([0.0, 0.01, 0.03]),
                   flush=rng.choice([0.02, 0.1, 0.4]))

    @classmethod
    def off(cls) -> "Faults":
        return cls(0.0, 0.0, 3, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.1)


@dataclass
class Stats:
    """What a run exercised; the tests require every kind of event to happen across the seeds."""
    produced_all: int = 0
    acked_all: int = 0
    produced_one: int = 0
    rejected_min_isr: int = 0
    failed_after_append: int = 0
    crashes: int = 0
    power_losses: int = 0
    records_lost_to_power: int = 0
    elections: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    alter_rejected: int = 0
    truncated_records: int = 0
    stale_fetches: int = 0
    truncation_rounds_incomplete: int = 0
    zombie_exposures: int = 0
    new_leader_hw_behind: int = 0
    fenced_requests: int = 0
    converge_steps: int = 0

    def add(self, other: "Stats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


# ----------------------------------------------------------------------------------- simulation
@dataclass
class Simulation:
    seed: int
    config: SimConfig = field(default_factory=SimConfig)

    def __post_init__(self):
        self.rng = random.Random(self.seed)
        self.faults = Faults.draw(self.rng)
        self.now = 0
        self.step = 0
        self.queue: list = []
        self._seq = 0
        self._ids = 0
        self._control_clock: dict[int, int] = {}
        self.isolated_until: dict[int, int] = {}
        self.stats = Stats()
        self.trace: deque = deque(maxlen=80)
        self.committed: list[tuple[int, int]] = []
        self.acked: list[tuple[int, tuple[int, int]]] = []
        self._new_acks: list[tuple[int, tuple[int, int]]] = []
        self._term_hw: dict[tuple[int, int], int] = {}
        self.brokers = {r: Broker(self, r) for r in self.config.replicas}
        self.controller = Controller(self)
        self.publish()

    # ------------------------------------------------------------------------- plumbing
    def event(self, fmt: str, *args) -> None:
        self.trace.append((self.now, fmt, args))

    def fail(self, message: str) -> None:
        trace = [f"t={t} " + (fmt % args) for t, fmt, args in self.trace]
        trace += [repr(b) for b in self.brokers.values()]
        trace.append(f"controller {self.controller.record} damaged={sorted(self.controller.damaged)}")
        trace.append(f"committed length {len(self.committed)}")
        raise SimulationFailure(self.seed, self.step, message, trace)

    def next_request_id(self) -> int:
        self._ids += 1
        return self._ids

    next_record_id = next_request_id

    def _enqueue(self, at: int, msg) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (at, self._seq, msg))

    def send(self, msg) -> None:
        """Data plane: delayed, dropped, duplicated, cut by isolation."""
        f = self.faults
        if (self.isolated_until.get(msg.src, -1) > self.now or self.isolated_until.get(msg.dst, -1) > self.now
                or self.rng.random() < f.drop):
            return
        self._enqueue(self.now + self.rng.randint(1, f.max_delay_ms), msg)
        if self.rng.random() < f.duplicate:
            self._enqueue(self.now + self.rng.randint(1, f.max_delay_ms), msg)

    def send_control(self, msg) -> None:
        """Control plane: delayed but reliable and in order per destination."""
        at = max(self._control_clock.get(msg.dst, 0), self.now + self.rng.randint(1, self.faults.max_delay_ms))
        self._control_clock[msg.dst] = at
        self._enqueue(at, msg)

    def publish(self) -> None:
        for b in self.brokers.values():
            if b.alive:
                self.send_control(Meta(CONTROLLER, b.id, self.controller.record, b.incarnation))

    def deliver(self) -> None:
        while self.queue and self.queue[0][0] <= self.now:
            msg = heapq.heappop(self.queue)[2]
            if msg.dst == CONTROLLER:
                self.controller.on_alter(msg)
                continue
            b = self.brokers[msg.dst]
            if not b.alive:
                continue
            kind = type(msg)
            if kind is Meta:
                if msg.incarnation == b.incarnation:
                    b.on_meta(msg.record)
            elif kind is FetchReq:
                b.on_fetch(msg)
            elif kind is FetchResp:
                b.on_fetch_response(msg)
            elif kind is EpochReq:
                b.on_epoch_request(msg)
            elif kind is EpochResp:
                b.on_epoch_response(msg)
            elif kind is AlterReject:
                if msg.incarnation == b.incarnation:
                    b.on_alter_reject(msg)

    def acknowledge(self, entries) -> None:
        self.stats.acked_all += len(entries)
        self.acked.extend(entries)
        self._new_acks.extend(entries)

    # ------------------------------------------------------------------------- faults
    def power_loss_allowed(self, broker: int) -> bool:
        if not self.config.bound_power_loss:
            return True
        ctl = self.controller
        return not (ctl.damaged - {broker}) and ctl.record.isr != (broker,)

    def _random_action(self) -> None:
        f, rng = self.faults, self.rng
        live = [b for b in self.brokers.values() if b.alive]
        dead = [b for b in self.brokers.values() if not b.alive]
        if rng.random() < f.produce:
            rec = self.controller.record
            target = self.brokers.get(rec.leader)
            if target is None or not target.alive or rng.random() < 0.1:
                target = rng.choice(live) if live else None
            if target is not None:
                target.produce(rng.random() < 0.6, rng.randint(1, 3))
        if dead and rng.random() < f.restart:
            b = rng.choice(dead)
            self.event("restart b%d", b.id)
            b.restart()
        if live and rng.random() < f.crash:
            b = rng.choice(live)
            self.stats.crashes += 1
            self.event("kill -9 b%d", b.id)
            b.crash(power_loss=False)
        elif live and rng.random() < f.power_loss:
            b = rng.choice(live)
            if self.power_loss_allowed(b.id):
                self.stats.power_losses += 1
                self.event("power loss b%d (flushed %d of %d)", b.id, b.flushed, len(b.log))
                b.crash(power_loss=True)
        if rng.random() < f.move_leader:
            self.event("controlled leader move")
            self.controller.move_leader(rng)
        if live and rng.random() < f.isolate:
            b = rng.choice(live)
            self.isolated_until[b.id] = self.now + rng.randint(20, 400)
            self.event("isolate b%d until %d", b.id, self.isolated_until[b.id])
        if live and rng.random() < f.flush:
            b = rng.choice(live)
            b.flushed = len(b.log)
            b.hw_checkpoint = b.hw

    # ------------------------------------------------------------------------- invariants
    def _verify(self, b: Broker, upto: int) -> None:
        start = b.verified
        if upto <= start:
            return
        if b.log[start:upto] != self.committed[start:upto]:
            i = next(i for i in range(start, upto) if b.log[i] != self.committed[i])
            self.fail(f"broker {b.id} holds {b.log[i]} at offset {i}, committed is {self.committed[i]}")
        b.verified = upto

    def expose(self, b: Broker) -> None:
        """Invariants 1 and 2, run whenever a leader's HW may have moved: it is exposed at once."""
        ls, committed = b.leader, self.committed
        hw = ls.high_watermark
        key = (b.id, ls.leader_epoch)
        if hw < self._term_hw.get(key, 0):
            self.fail(f"leader {b.id} epoch {ls.leader_epoch}: HW went back from "
                      f"{self._term_hw[key]} to {hw}")
        self._term_hw[key] = hw
        if hw > len(b.log) or ls.log_end_offset != len(b.log):
            self.fail(f"leader {b.id}: HW {hw} / tracked LEO {ls.log_end_offset}, log end {len(b.log)}")
        b.hw = hw
        if hw > len(committed):
            rec = self.controller.record
            self.stats.zombie_exposures += (rec.leader, rec.leader_epoch) != (b.id, ls.leader_epoch)
            self._verify(b, len(committed))
            committed.extend(b.log[len(committed):hw])
            b.verified = hw

    def check(self) -> None:
        committed = self.committed
        for b in self.brokers.values():
            if b.alive and b.leader is not None:
                self.expose(b)
        for b in self.brokers.values():
            if not b.alive:
                continue
            if b.hw > len(committed) or b.hw > len(b.log):
                self.fail(f"broker {b.id} exposes HW {b.hw}: committed {len(committed)}, log end {len(b.log)}")
            self._verify(b, b.hw)
        for r in self.controller.record.isr:
            b = self.brokers[r]
            if len(b.log) < len(committed):
                self.fail(f"ISR member {r} has log end {len(b.log)} < committed {len(committed)}")
            self._verify(b, len(committed))
        for offset, entry in self._new_acks:
            if offset >= len(committed) or committed[offset] != entry:
                self.fail(f"acks=all record {entry} at offset {offset} acknowledged but not committed")
        self._new_acks.clear()

    def converged(self) -> bool:
        rec = self.controller.record
        if rec.leader == NO_LEADER or set(rec.isr) != set(self.config.replicas):
            return False
        leader = self.brokers[rec.leader]
        ls = leader.leader
        if ls is None or ls.leader_epoch != rec.leader_epoch or set(ls.isr) != set(rec.isr):
            return False
        end = len(leader.log)
        for b in self.brokers.values():
            if not (b.alive and b.known == rec and len(b.log) == end and b.hw == end):
                return False
            if b is not leader and (b.truncating or not b.following):
                return False
        return True

    def final_checks(self) -> None:
        for b in self.brokers.values():
            if b.log != self.committed:
                self.fail(f"after convergence broker {b.id}'s log differs from the committed log")
            for offset, (epoch, _) in enumerate(b.log):
                if b.epochs.epoch_for_offset(offset) != epoch:
                    self.fail(f"broker {b.id}: epoch cache says {b.epochs.epoch_for_offset(offset)} "
                              f"for offset {offset} written in epoch {epoch}")
        for offset, entry in self.acked:
            if self.committed[offset] != entry:
                self.fail(f"acks=all record {entry} lost from offset {offset}")

    # ------------------------------------------------------------------------- running
    def _one_step(self, faults_on: bool) -> None:
        self.step += 1
        self.now += self.rng.randint(1, 10)
        self.deliver()
        if faults_on:
            self._random_action()
        for b in self.brokers.values():
            b.tick()
        self.check()

    def run(self) -> Stats:
        for _ in range(self.config.fault_steps):
            self._one_step(faults_on=True)
        self.faults = Faults.off()
        self.isolated_until.clear()
        self.event("faults off")
        for b in self.brokers.values():
            if not b.alive:
                b.restart()
        for n in range(self.config.max_converge_steps):
            self._one_step(faults_on=False)
            if self.converged():
                self.stats.converge_steps = n + 1
                self.final_checks()
                return self.stats
        self.fail(f"no convergence within {self.config.max_converge_steps} fault-free steps")
        raise AssertionError("unreachable")


def run_seed(seed: int, config: SimConfig | None = None) -> Stats:
    return Simulation(seed, config or SimConfig()).run()

