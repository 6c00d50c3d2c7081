"""A seeded, single-threaded simulation of an idempotent producer's partition order under retries,
lost answers and broker restarts: the real :class:`~broker.client.send_policy.SendPolicy` and
:class:`~broker.client.transactions.TransactionManager` against a model broker whose partitions
judge batches with the real :class:`~broker.storage.producer_state.ProducerStateManager` (Kafka's
sequence rules and the ``IDEMPOTENCE_WINDOW``).

One ordered stream carries requests to the broker and answers back, as a ProduceStream does. Each
step picks one event at random (the seed decides): the application produces a burst of batches; the
sender sends what the policy allows; the broker handles the next request; the client reads the next
answer; the stream breaks (answers lost: the broker may have appended what it never answered);
the broker restarts (the stream breaks and, while it starts, it refuses a few requests of each
partition with ``NotLeaderOrFollower``); a partition's leadership blips (one batch refused alone on
a steady stream); time passes. Then faults stop and everything must be delivered.

Invariants, after every step: each partition's log holds every record at most once and in produce
order, and every answered batch sits in the log at the offsets the answer gave. At the end: each
partition's log holds every record produced to it, exactly once, in order.

``SimConfig.producer_window`` is the producer's limit of unanswered batches per partition; above the
broker's window it reproduces the bug fixed earlier (a resend of the oldest batch after lost answers
is refused as out of order forever), which the end check catches.
"""
from __future__ import annotations

import collections
import random
from dataclasses import dataclass, field, fields

from broker.client.producer_batch import ProducerBatch
from broker.client.send_policy import SendLimits, SendPolicy
from broker.client.transactions import TransactionManager
from broker.clock import ManualClock
from broker.errors import NetworkError, NotLeaderOrFollowerError, RiverlogError
from broker.records.batch import IDEMPOTENCE_WINDOW
from broker.storage.producer_state import ProducerStateManager
from tests.simulation.seeds import SimulationFailure

NODE = 0
PRODUCER_ID = 4000


@dataclass(frozen=True)
class SimConfig:
    fault_steps: int = 300
    quiet_rounds: int = 2_000                    # faults off: everything is delivered within these
    partitions: int = 2
    producer_window: int = IDEMPOTENCE_WINDOW    # above the broker's IDEMPOTENCE_WINDOW: the old bug
    max_request_choices: tuple[int, ...] = (100, 1_000, 10_000)  # per seed; batches are 100 bytes
    trace_events: int = 120                      # sends show (epoch, base sequence, records, attempts)
    # A leadership blip refuses a partition's batch alone on a steady stream. When it hits a
    # partition's very first batch, the next one, pipelined, is refused UnknownProducerId and the
    # producer takes a new epoch (KIP-360) while other partitions still hold batches of the old one
    # (seeds 481 and 963 lost such a batch before those partitions drained the old epoch first).
    leader_blips: bool = True


@dataclass
class Stats:
    """Counts of the events that make a run mean something; a suite of seeds must see each."""
    batches: int = 0
    requests: int = 0
    resends_recognised: int = 0       # the broker answered a resend from its window
    answers_lost: int = 0             # requests the broker handled whose answer never arrived
    restarts: int = 0
    refused_while_starting: int = 0
    epoch_bumps: int = 0              # new epochs taken after a partition forgot the producer
    old_epoch_sends: int = 0          # batches numbered under an earlier epoch, sent after a bump

    def add(self, other: "Stats") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class _Records:
    """What a ProducerBatch needs of its records here: how many, and which (ids in produce order)."""
    ids: list[int]

    @property
    def num_rows(self) -> int:
        return len(self.ids)


@dataclass
class _Header:
    """The batch header fields ProducerStateManager reads."""
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int
    max_timestamp: int = 0
    is_transactional: bool = False


@dataclass
class ModelPartition:
    log: list[int] = field(default_factory=list)
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    refuse_next: int = 0   # requests still refused while the broker starts, or a leadership blip

    def append(self, batch: ProducerBatch, stats: Stats) -> tuple[RiverlogError | None, int]:
        """Kafka's rules: (error, base offset). A resend in the window gets its first offsets."""
        if self.refuse_next:
            self.refuse_next -= 1
            stats.refused_while_starting += 1
            return NotLeaderOrFollowerError("the partition's leader is starting"), -1
        header = _Header(PRODUCER_ID, batch.producer_epoch, batch.base_sequence, batch.count - 1)
        try:
            cached = self.producers.check(header)
        except RiverlogError as e:
            return e, -1
        if cached is not None:
            stats.resends_recognised += 1
            return None, cached.first_offset
        first = len(self.log)
        self.log.extend(batch.records.ids)
        self.producers.update(header, first, len(self.log) - 1, 0)
        return None, first


class Simulation:
    def __init__(self, seed: int, config: SimConfig = SimConfig()):
        self.seed, self.config = seed, config
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.stats = Stats()
        self.manager = TransactionManager()
        self.manager.new_epoch(PRODUCER_ID, 0)
        self.policy = SendPolicy(SendLimits(
            idempotent=True, backoff=0.01, delivery_timeout=1e9, max_in_flight=self.rng.choice((1, 2, 5)),
            max_request=self.rng.choice(config.max_request_choices), window=config.producer_window),
            self.clock, self.manager)
        self.keys = [("t", p) for p in range(config.partitions)]
        self.partitions = {key: ModelPartition() for key in self.keys}
        self.produced: dict = {key: [] for key in self.keys}
        self.next_id = 0
        self.to_broker: collections.deque = collections.deque()  # requests sent, not handled
        self.to_client: collections.deque = collections.deque()  # answers not read yet
        self.stream_dead = False
        self.step_no = 0
        self.trace: collections.deque = collections.deque(maxlen=config.trace_events)
        # Per-seed fault rates, so runs differ in character.
        self.rates = {"break": self.rng.choice((0.0, 0.01, 0.05)), "restart": self.rng.choice((0.0, 0.01, 0.03)),
                      "blip": self.rng.choice((0.0, 0.01, 0.03)) if config.leader_blips else 0.0, "slow_answers": self.rng.random() < 0.5}

    # ------------------------------------------------------------------------------ events
    def produce(self) -> None:
        for _ in range(self.rng.randint(1, 8)):
            key = self.rng.choice(self.keys)
            ids = list(range(self.next_id, self.next_id + self.rng.randint(1, 3)))
            self.next_id += len(ids)
            self.produced[key] += ids
            self.policy.enqueue(ProducerBatch(key[0], key[1], b"", _Records(ids), None,
                                              self.clock.monotonic(), size=100))
            self.stats.batches += 1

    def send(self) -> None:
        """What Sender._send does, without threads: plan, take, dispatch on the one stream."""
        now = self.clock.monotonic()
        if self.manager.needs_producer_id() and self.policy.queued():
            if not self.policy.epoch_bump_due():
                return  # as the sender: nothing goes until the new epoch is due and taken
            # InitProducerId with the current id and epoch: the broker answers with the next epoch.
            self.manager.new_epoch(PRODUCER_ID, self.manager.producer_epoch + 1)
            self.stats.epoch_bumps += 1
            self.note("new epoch", self.manager.producer_epoch)
        plan = self.policy.plan(now, lambda key: NODE)
        for node, keys in plan.by_node.items():
            while keys and not self.policy.node_blocked(node, self.stream_dead):
                batches, keys = self.policy.take(keys, now)
                if not batches:
                    break
                self.policy.dispatched(node, batches)
                if self.stream_dead:  # every earlier request was reported: open a new stream
                    self.stream_dead = False
                    self.policy.stream_replaced(node, now)
                self.to_broker.append(batches)
                self.stats.requests += 1
                self.stats.old_epoch_sends += sum(b.producer_epoch < self.manager.producer_epoch
                                                  for _, taken in batches for b in taken)
                self.note("send", [(k[1], [(b.producer_epoch, b.base_sequence, b.count, b.attempts) for b in t])
                                   for k, t in batches])

    def broker_handles(self) -> None:
        batches = self.to_broker.popleft()
        results = [(key, taken, *self._append_all(key, taken)) for key, taken in batches]
        self.to_client.append((batches, results))
        self.note("broker", [(k[1], type(e).__name__ if e else offset) for k, _, e, offset in results])

    def _append_all(self, key, taken) -> tuple[RiverlogError | None, int]:
        """A request's batches for one partition, all or nothing, as the broker validates them."""
        partition = self.partitions[key]
        first = None
        for batch in taken:
            error, offset = partition.append(batch, self.stats)
            if error is not None:
                return error, -1
            first = offset if first is None else first
        return None, first

    def client_reads(self) -> None:
        batches, results = self.to_client.popleft()
        self.policy.answered(NODE, [batches])
        for key, taken, error, offset in results:
            if error is None:
                self.check_answer(key, taken, offset)
                self.policy.delivered(key)
            else:
                self.judge(key, taken, error)
        self.note("answer", [(k[1], type(e).__name__ if e else o) for k, _, e, o in results])

    def judge(self, key, taken, error) -> None:
        given_up, error = self.policy.failed(key, taken, error, self.clock.monotonic())
        if given_up:
            self.fail(f"gave up on {len(given_up)} batch(es) of partition {key[1]}: {error!r}")

    def break_stream(self) -> None:
        """Every unanswered request fails at once, in order (the reader's report)."""
        requests = [b for b, _ in self.to_client] + list(self.to_broker)
        self.stats.answers_lost += len(self.to_client)
        self.to_client.clear()
        self.to_broker.clear()
        self.stream_dead = True
        if requests:
            self.policy.answered(NODE, requests)
            for batches in requests:
                for key, taken in batches:
                    self.judge(key, taken, NetworkError("the produce stream broke"))
        self.note("break", len(requests))

    def restart(self) -> None:
        self.break_stream()
        self.stats.restarts += 1
        for partition in self.partitions.values():
            partition.refuse_next = self.rng.randint(0, 3)
        self.note("restart")

    def blip(self) -> None:
        key = self.rng.choice(self.keys)
        self.partitions[key].refuse_next = max(self.partitions[key].refuse_next, 1)
        self.note("blip", key[1])

    # ------------------------------------------------------------------------------ checks
    def check_answer(self, key, taken, offset) -> None:
        ids = [i for b in taken for i in b.records.ids]
        found = self.partitions[key].log[offset:offset + len(ids)]
        if found != ids:
            self.fail(f"partition {key[1]}: answered offset {offset} for {ids}, the log holds {found} there")

    def check(self) -> None:
        for key, partition in self.partitions.items():
            log = partition.log
            if any(a >= b for a, b in zip(log, log[1:])):
                self.fail(f"partition {key[1]}: log out of produce order or duplicated: {log[-40:]}")

    def fail(self, message: str) -> None:
        lines = [f"{step} " + " ".join(map(str, what)) for step, what in self.trace]
        raise SimulationFailure(self.seed, self.step_no, message, lines)

    def note(self, *what) -> None:
        self.trace.append((self.step_no, what))

    # ------------------------------------------------------------------------------ the run
    def step(self, faults: bool) -> None:
        self.step_no += 1
        r, rates = self.rng.random(), self.rates
        if faults and r < rates["break"]:
            self.break_stream()
        elif faults and r < rates["break"] + rates["restart"]:
            self.restart()
        elif faults and r < rates["break"] + rates["restart"] + rates["blip"]:
            self.blip()
        elif faults and r < 0.25:
            self.produce()
        elif r < 0.5:
            self.send()
        elif r < 0.75 and self.to_broker:
            self.broker_handles()
        elif self.to_client and (not faults or not rates["slow_answers"] or self.rng.random() < 0.3):
            self.client_reads()
        else:
            self.clock.advance(self.rng.randint(1, 50))
        self.check()

    def quiet_round(self) -> None:
        """Without faults: send what may go, let the broker answer it all, read it all, let time pass."""
        self.step_no += 1
        self.send()
        while self.to_broker:
            self.broker_handles()
        while self.to_client:
            self.client_reads()
        self.clock.advance(20)
        self.check()

    def idle(self) -> bool:
        return not self.policy.busy() and not self.to_broker and not self.to_client

    def run(self) -> Stats:
        for _ in range(self.config.fault_steps):
            self.step(faults=True)
        for _ in range(self.config.quiet_rounds):
            if self.idle():
                break
            self.quiet_round()
        if not self.idle():
            self.fail(f"not delivered {self.config.quiet_rounds} rounds after the faults stopped: "
                      f"{sum(len(p.queue) for p in self.policy.partitions.values())} batch(es) queued")
        for key, partition in self.partitions.items():
            if partition.log != self.produced[key]:
                self.fail(f"partition {key[1]}: the log differs from what was produced")
        return self.stats


def run_seed(seed: int, config: SimConfig = SimConfig()) -> Stats:
    return Simulation(seed, config).run()
