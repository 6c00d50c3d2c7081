"""A single-threaded model of one partition's replicas under clean and unclean elections, driving the
consumer's real :class:`~broker.client.fetch_state.FetchState` (with its KIP-320
``FetchValidation``) through the steps the fetcher takes. The leader answers OffsetsForLeaderEpoch
with the real :class:`~broker.storage.leader_epoch_cache.LeaderEpochCache`, as ``Partition`` does.

Replicas hold batches ``(epoch, value, base, end)`` per offset. The leader appends batches in its
epoch; followers copy the leader's batches after truncating to where their logs agree (the
follower truncation rule's result). Elections are clean (to a replica holding the leader's whole
log) or unclean (to one lacking a tail, which is then written past the old end). The consumer sees
metadata only when it refreshes (it may be stale); fetches name its leader epoch and are fenced
by a leader of another; answers may arrive late (after seeks, elections, restarts). The fetch
buffer holds a few records only, so a round often finds it full: the leader epoch is noted then
too (``Fetcher._fetchable``), and the records of the old leader queued must not reach the
application. Retention moves the log start: a fetch below it is out of range, and
``auto.offset.reset`` applies, after the records queued before it when there are some.

Invariants (``Model.check_*``), librdkafka's and Kafka's guarantees:

- a record handed out at offset ``o`` is the record at ``o`` of the log of the newest leader
  epoch the consumer has learned of (as that leader's log was while it led): after learning of a
  new epoch, no divergent record of an old leader is delivered;
- handed-out offsets follow the position: each is the position before it (no skip), and the
  position goes back only by a truncation move, an ``auto.offset.reset`` or the application;
- a truncation move lands at or before the first offset where what the consumer was handed out
  differs from the new leader's log (no gap);
- a reset's position has the epoch ListOffsets answered, also when the reset waited for records
  queued before it (one to the log start an OffsetOutOfRange answer carried has none);
- with ``auto.offset.reset=error`` each truncation found gives exactly one event and the partition
  stops (nothing handed out, nothing fetched) until ``seek()``;
- once elections stop, the consumer catches up and everything it handed out from its last start
  point on equals the leader's log.

Exempt, as in Kafka and librdkafka: a leader that never had the position's epoch answers the end
of an older one, and the consumer cannot tell where before its position the logs diverge (the
check restarts from the position); and, once ``auto.offset.reset=earliest`` moved the position to
the log start an OffsetOutOfRange answer carried (of no epoch, so not validated, as librdkafka
skips such a position), a late answer of a replaced leader may be handed out until the position
is validated or sought (the check restarts past it). Each broker has one round (validations,
then fetches) in flight.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from broker.client.fetch_phase import FetchPhase
from broker.client.fetch_state import FetchState
from broker.client.message import OFFSET_BEGINNING, OFFSET_STORED, TopicPartition
from broker.client.start_offsets import EARLIEST
from broker.clock import ManualClock
from broker.errors import (FencedLeaderEpochError, NotLeaderOrFollowerError, OffsetOutOfRangeError,
                           UnknownLeaderEpochError)
from broker.records.arrow_body import record_batch
from broker.records.reader import DecodedBatch
from broker.storage.leader_epoch_cache import LeaderEpochCache

KEY = ("t", 0)
REPLICAS = 3
QUEUE_LIMIT_BYTES = 48  # a few records: a slow application often leaves the fetch buffer full
OPS = ("write", "replicate", "elect_clean", "elect_unclean", "refresh", "round", "answer", "poll",
       "commit", "restart", "seek_back", "seek_delivered", "stale_refresh", "pause_resume", "retention")


class ModelFailure(AssertionError):
    pass


class Replica:
    def __init__(self):
        self.log: list[tuple[int, int, int, int]] = []  # per offset: (epoch, value, batch base, batch end)
        self.cache = LeaderEpochCache()

    def append_batch(self, batch: list[tuple[int, int, int, int]]) -> None:
        self.cache.assign(batch[0][0], len(self.log))
        self.log.extend(batch)

    def truncate(self, end: int) -> None:
        del self.log[end:]
        self.cache.truncate_from_end(end)


@dataclass
class Stats:
    truncations: int = 0
    valid: int = 0
    stops: int = 0
    fenced: int = 0
    delivered: int = 0
    unclean: int = 0
    epoch_unknown: int = 0
    deferred_resets: int = 0  # an OffsetOutOfRange reset waits for the records queued before it
    full_buffer_leader_changes: int = 0  # a newer epoch seen while records of the old one fill the buffer


class Model:
    def __init__(self, reset, trace: list[str] | None = None):
        self.reset = reset
        self.trace = trace if trace is not None else []
        self.replicas = [Replica() for _ in range(REPLICAS)]
        self.leader = 0
        self.epoch = 0
        self.replicas[0].cache.assign(0, 0)
        self.epoch_logs: dict[int, list] = {}   # an ended epoch's leader log as it was when it ended
        self.metadata = (0, 0)                  # what the consumer's last refresh saw: (leader, epoch)
        self.leaders = [0]                      # by epoch
        self.log_start = 0                      # retention deleted the records below (fetches: OffsetOutOfRange)
        self.listed: tuple[int, int] | None = None  # the last ListOffsets answer applied: (offset, epoch)
        self.reset_applied = False              # an answer just applied was an offset reset
        self.values = iter(range(1, 1 << 30))
        self.committed: tuple[int, int] | None = None
        self.pending: dict[int, list] = {}      # per broker, the answers of its round in flight, in order
        self.stats = Stats()
        self._start_consumer(TopicPartition(KEY[0], KEY[1], OFFSET_BEGINNING))

    # ------------------------------------------------------------------------------ the cluster
    def leader_log(self) -> list:
        return self.replicas[self.leader].log

    def log_of_epoch(self, epoch: int) -> list:
        return self.leader_log() if epoch == self.epoch else self.epoch_logs.get(epoch, [])

    def write(self, n: int) -> None:
        base = len(self.leader_log())
        batch = [(self.epoch, next(self.values), base, base + n) for _ in range(n)]
        self.replicas[self.leader].append_batch(batch)
        self.trace.append(f"write {base}..{base + n} epoch {self.epoch}")

    def replicate(self, r: int, batches: int) -> None:
        if r == self.leader:
            return
        follower, leader = self.replicas[r], self.leader_log()
        common = 0
        while common < min(len(follower.log), len(leader)) and follower.log[common] == leader[common]:
            common += 1
        follower.truncate(common)
        for _ in range(batches):
            if len(follower.log) >= len(leader):
                break
            first = leader[len(follower.log)]
            follower.append_batch(leader[first[2]:first[3]])
        self.trace.append(f"replica {r} copies up to {len(follower.log)}")

    def elect(self, r: int, clean: bool) -> bool:
        if r == self.leader:
            if not clean:
                return False
        elif clean != (self.replicas[r].log == self.leader_log()):
            return False
        self.epoch_logs[self.epoch] = list(self.leader_log())
        self.epoch += 1
        self.leader = r
        self.leaders.append(r)
        self.replicas[r].cache.assign(self.epoch, len(self.replicas[r].log))
        self.log_start = min(self.log_start, len(self.replicas[r].log))
        self.stats.unclean += not clean
        self.trace.append(f"{'clean' if clean else 'UNCLEAN'} election: replica {r} leads epoch {self.epoch} "
                          f"with end {len(self.replicas[r].log)}")
        return True

    # ------------------------------------------------------------------------------ the consumer
    def _start_consumer(self, tp: TopicPartition) -> None:
        self.state = FetchState(self.reset, False, 0.1, QUEUE_LIMIT_BYTES, ManualClock())
        self.state.assign([tp])
        self.known_epoch = -1        # the newest leader epoch this consumer instance was told
        self.handed: dict[int, int] = {}  # offset -> value last handed out
        self.handed_epochs: dict[int, int] = {}  # offset -> its leader epoch, as the message gave it
        self.start = tp.offset if tp.offset >= 0 else None  # where the application last put it
        self.listed = None
        self.epochless = False  # since a reset to a log start of no epoch, until validated or sought
        self.stopped_by_event = False

    def restart(self) -> None:
        tp = TopicPartition(KEY[0], KEY[1], OFFSET_STORED if self.committed is not None else OFFSET_BEGINNING)
        self.trace.append(f"restart from committed {self.committed}")
        self.pending.clear()  # the old instance's answers die with it
        self._start_consumer(tp)

    def commit(self) -> None:
        out = self.state.to_commit()
        if out:
            self.committed = (out[0].offset, -1 if out[0].leader_epoch is None else out[0].leader_epoch)
            self.trace.append(f"commit {self.committed}")

    def seek(self, offset: int, epoch: int) -> None:
        self.trace.append(f"seek {offset} epoch {epoch}")
        self.state.seek(KEY, offset, epoch)
        self.epochless = False
        self.stopped_by_event = False
        self.start = offset
        self.handed = {o: v for o, v in self.handed.items() if o < offset}

    def stale_refresh(self, back: int) -> None:
        """Metadata from a broker that has not heard of the latest elections yet."""
        epoch = max(0, self.epoch - back)
        self.metadata = (self.leaders[epoch], epoch)
        self.trace.append(f"stale metadata: leader {self.metadata[0]} epoch {epoch}")

    def refresh(self) -> None:
        self.metadata = (self.leader, self.epoch)
        self.trace.append(f"metadata refreshed: leader {self.leader} epoch {self.epoch}")

    def round(self) -> None:
        """One round of the fetcher's broker thread for the metadata leader (``Fetcher._fetchable``)."""
        node, epoch = self.metadata
        s = self.state
        s.clock.advance(200)  # past retry.backoff.ms: a failed validation is asked again
        if node in self.pending:
            return  # the broker's thread waits for its answers: one round in flight per broker
        if epoch > self.known_epoch:
            self.known_epoch = epoch
        part = s.partitions[KEY]
        self.trace.append(f"round: node {node} epoch {epoch}; position {part.position} epoch {part.epoch} "
                          f"{part.phase.name} leader epoch {part.leader_epoch} full {s.buffer.full()}")
        queued = any(chunk.remaining for chunk in s.buffer.chunks)
        if s.buffer.full() and queued and epoch > part.leader_epoch >= 0 <= part.epoch:
            self.stats.full_buffer_leader_changes += 1
        s.note_leader_epochs({KEY: epoch})  # every assigned partition's, also while the buffer is full
        if not s.wanted():
            return
        answers = self.pending[node] = []
        parts, resets = s.to_fetch(node, lambda t, p: node)
        for key, generation, current_epoch, current in s.to_validate(node, lambda t, p: node):
            answers.append(("validate", node, generation, current_epoch, current, self._validation(
                node, current_epoch, current)))
        for key, generation, offset in resets:
            if offset == OFFSET_STORED:
                if self.committed is not None:
                    if s.reset_resolved(key, generation, self.committed[0], self.committed[1], validate=True):
                        parts.append((key, self.committed[0], generation))
                    continue
            target = s.reset_target(key, offset)
            if target is None or node != self.leader:
                continue
            log, cache = self.leader_log(), self.replicas[self.leader].cache
            if target == EARLIEST or offset == OFFSET_BEGINNING:
                start = self.log_start  # as Partition.epoch_of: the earliest entry covers an empty log
                at = cache.epoch_for_offset(start)
            else:
                start, at = len(log), self.epoch
            self.trace.append(f"ListOffsets {offset} -> {start} epoch {at}")
            self.listed, self.epochless = (start, -1 if at is None else at), False
            if s.reset_resolved(key, generation, start, -1 if at is None else at):
                parts.append((key, start, generation))
        for key, offset, generation in parts:
            answers.append(("fetch", node, generation, offset, s.leader_epoch_of(key),
                            self._fetch(node, offset, s.leader_epoch_of(key))))
        if not answers:
            del self.pending[node]

    def _validation(self, node: int, epoch: int, current: int):
        if node != self.leader:
            return NotLeaderOrFollowerError("not the leader")
        if current >= 0 and current != self.epoch:
            return (FencedLeaderEpochError if current < self.epoch else UnknownLeaderEpochError)("fenced")
        return self.replicas[node].cache.end_offset_for(epoch, len(self.leader_log()))

    def _fetch(self, node: int, offset: int, current: int):
        if node != self.leader:
            return NotLeaderOrFollowerError("not the leader")
        if current >= 0 and current != self.epoch:
            return (FencedLeaderEpochError if current < self.epoch else UnknownLeaderEpochError)("fenced")
        log = self.leader_log()
        if offset > len(log) or offset < self.log_start:
            error = OffsetOutOfRangeError("out of range")
            error.log_start = self.log_start  # what the answer carries
            return error
        batches, o = [], offset
        while o < len(log) and len(batches) < 2:
            epoch, _, base, end = log[o]
            batches.append((o, [log[i][1] for i in range(o, end)], end, epoch))
            o = end
        return batches, len(log)

    def answer(self, pick: int) -> None:
        """Apply one answer sent earlier (answers of different requests may arrive in any order)."""
        if not self.pending:
            return
        node = sorted(self.pending)[pick % len(self.pending)]
        for answer in self.pending.pop(node):
            self._apply(*answer)

    def _apply(self, kind: str, node: int, generation: int, a: int, b: int, result) -> None:
        s = self.state
        if kind == "validate":
            before = (s.partitions[KEY].position, s.partitions[KEY].epoch, s.partitions[KEY].phase)
            if isinstance(result, Exception):
                s.on_validation_failed(KEY, generation, result)
                return
            end_epoch, end_offset = result
            events = len(s.events)
            s.on_validated(KEY, generation, end_epoch, end_offset)
            self.trace.append(f"validation of epoch {a} (from {before}): ({end_epoch}, {end_offset}) -> "
                              f"{s.partitions[KEY].phase.name} at {s.partitions[KEY].position}")
            self.check_validation(before, end_epoch, len(s.events) > events, b)
            return
        offset, current = a, b
        if isinstance(result, Exception):
            self.stats.fenced += isinstance(result, (FencedLeaderEpochError, UnknownLeaderEpochError))
            if isinstance(result, OffsetOutOfRangeError):
                self.trace.append(f"OffsetOutOfRange at {offset} (log start {result.log_start})")
                self.reset_applied, self.listed = True, None  # a new reset: ListOffsets answers it
                part = s.partitions[KEY]
                # earliest: the log start the answer carried, of no epoch: not validated, as librdkafka
                self.epochless |= self.reset == EARLIEST and (generation, offset) == (part.generation,
                                                                                      part.fetch_offset)
                self.stats.deferred_resets += (generation == part.generation and offset == part.fetch_offset
                                               and s._queued(KEY, part) is not None)
            s.on_error(KEY, generation, result, getattr(result, "log_start", 0), 0, offset)
            return
        batches, hw = result
        following = batches[-1][2] if batches else None
        if not s.on_fetched(KEY, generation, hw, 0, following, offset):
            return
        decoded = [DecodedBatch(o, record_batch([None] * len(vals), [str(v).encode() for v in vals],
                                                [0] * len(vals)), False, end) for o, vals, end, _ in batches]
        s.on_decoded(KEY, generation, offset, decoded, None, following, hw, {end: e for _, _, end, e in batches})

    def poll(self, n: int) -> None:
        s = self.state
        for _ in range(n):
            if s.events:
                event = s.events.popleft()
                self.trace.append(f"event at {event.offset()}: {event.error()}")
                continue
            chunk = s.head()
            if chunk is None:
                return
            part = s.partitions[KEY]
            position = part.position
            if part.paused and self.stopped_by_event:
                raise ModelFailure(f"a record handed out from a paused partition at {position}")
            msg = s.take_one(chunk)
            if msg.error() is not None:
                continue
            self.check_delivery(position, msg.offset(), int(msg.value()))
            if part.position > msg.offset() + 1:  # a reset that waited for the records queued before it
                self.check_deferred_reset(part.position, part.epoch)
            self.handed[msg.offset()] = int(msg.value())
            self.handed_epochs[msg.offset()] = -1 if msg.leader_epoch() is None else msg.leader_epoch()
            self.stats.delivered += 1

    # ------------------------------------------------------------------------------ invariants
    def check_delivery(self, position: int, offset: int, value: int) -> None:
        if position >= 0 and offset != position:
            raise ModelFailure(f"handed out offset {offset} with the position at {position}")
        if self.known_epoch >= 0:
            log = self.log_of_epoch(self.known_epoch)
            if (offset >= len(log) or log[offset][1] != value) and self.epochless:
                self.start = offset + 1  # exempt: a position of no epoch is not validated (documented)
            elif offset >= len(log) or log[offset][1] != value:
                raise ModelFailure(f"handed out offset {offset} value {value}, not in the log of epoch "
                                   f"{self.known_epoch} it knows of ({log[offset][1] if offset < len(log) else None})")

    def check_deferred_reset(self, position: int, epoch: int) -> None:
        """Past the records it waited for, a reset's position is where it moves the consumer from,
        in the epoch ListOffsets answered (so it is validated as one taken at once); a reset to the
        log start an OffsetOutOfRange answer carried has no epoch."""
        self.trace.append(f"deferred reset: position {position} epoch {epoch}")
        if self.listed is not None and self.listed[0] == position and epoch != self.listed[1]:
            raise ModelFailure(f"a reset to {position} deferred behind queued records lost its epoch "
                               f"{self.listed[1]} (has {epoch})")
        self.start = position

    def check_validation(self, before, end_epoch: int, event: bool, asked_under: int) -> None:
        self.epochless = False
        position, epoch, _ = before
        part = self.state.partitions[KEY]
        if event:
            self.stats.stops += 1
            if self.stopped_by_event:
                raise ModelFailure("a second truncation event before seek()")
            self.stopped_by_event = True
            if not part.paused:
                raise ModelFailure("a partition still fetching after its truncation event")
            return
        if part.phase is FetchPhase.AWAITING_RESET:  # no epoch at or below: not reachable against a
            self.start = None                        # leader that assigns its epoch when elected
            return
        if 0 <= end_epoch < epoch and part.phase is FetchPhase.FETCHING:
            # The leader never had the position's epoch (its records were truncated away on every
            # replica): where the logs diverge before the position is unknown to the consumer, and
            # the end of the older epoch answered is taken as it is, as librdkafka and Kafka do.
            self.stats.epoch_unknown += 1
            self.start = part.position
            self.handed = {o: v for o, v in self.handed.items() if o < part.position}
            return
        if part.position == position:
            self.stats.valid += 1
            return
        self.stats.truncations += 1
        if part.position > position:
            raise ModelFailure(f"validation moved the position forward from {position} to {part.position}")
        log = self.log_of_epoch(asked_under)  # the leader that answered, as it was then (or since)
        diverged = next((o for o in sorted(self.handed) if o >= len(log) or log[o][1] != self.handed[o]), position)
        if part.position > diverged:
            raise ModelFailure(f"truncation moved to {part.position}, past {diverged} where the logs diverge")
        self.start = part.position if self.start is None else min(self.start, part.position)
        self.handed = {o: v for o, v in self.handed.items() if o < part.position}

    def check_caught_up(self) -> None:
        part = self.state.partitions[KEY]
        log = self.leader_log()
        if self.stopped_by_event or part.paused:
            return
        if part.position != len(log):
            raise ModelFailure(f"caught up at {part.position} ({part.phase.name}), the leader's log ends at {len(log)}")
        start = 0 if self.start is None else self.start
        for o in range(start, len(log)):
            if self.handed.get(o) != log[o][1]:
                raise ModelFailure(f"offset {o} handed out as {self.handed.get(o)}, the leader holds {log[o][1]}")


def _position(m: Model) -> int:
    return m.state.partitions[KEY].position


def observe(m: Model, name: str, before: int, instance) -> None:
    """How the position moved in one step: back only by a truncation, a reset or the application;
    forward without a record only from no offset to a start offset."""
    after = _position(m)
    reset, m.reset_applied = m.reset_applied, False
    if instance is not m.state or after == before:
        return
    if after >= 0 > before:
        m.start = after
        m.handed = {o: v for o, v in m.handed.items() if o < after}
    elif after > before >= 0 and name == "answer" and reset:  # OffsetOutOfRange: auto.offset.reset
        m.start = after
        m.handed = {o: v for o, v in m.handed.items() if o < after}
    elif 0 <= after < before:
        if name not in ("answer", "seek_back", "seek_delivered"):
            raise ModelFailure(f"{name} moved the position back from {before} to {after}")
        m.start = after if m.start is None else min(m.start, after)
        m.handed = {o: v for o, v in m.handed.items() if o < after}
    elif after > before >= 0 and name != "poll":
        raise ModelFailure(f"{name} moved the position from {before} to {after} without handing out records")


def run(ops: list[tuple[int, int]], reset, trace: list[str] | None = None) -> Model:
    m = Model(reset, trace)
    for op, arg in ops:
        name = OPS[op % len(OPS)]
        before, instance = _position(m), m.state
        _step(m, name, arg)
        observe(m, name, before, instance)
    # quiet: no more elections; the consumer learns the metadata and catches up
    m.refresh()
    if m.state.partitions[KEY].paused and not m.stopped_by_event:
        m.state.set_paused([KEY], False)
    m.trace.append("-- quiet --")
    for _ in range(100):
        for name, arg in (("round", 0), ("answer", 0), ("answer", 0), ("poll", 50)):
            before, instance = _position(m), m.state
            _step(m, name, arg)
            observe(m, name, before, instance)
    m.check_caught_up()
    return m


def _step(m: Model, name: str, arg: int) -> None:
    """One step of a history (``OPS``); ``arg`` picks its replica, count or answer."""
    if name == "write":
        m.write(1 + arg % 3)
    elif name == "replicate":
        m.replicate(arg % REPLICAS, 1 + arg // REPLICAS)
    elif name == "elect_clean":
        m.elect(arg % REPLICAS, True)
    elif name == "elect_unclean":
        if m.elect(arg % REPLICAS, False) and arg % 2:
            m.write(1 + arg % 3)
    elif name == "refresh":
        m.refresh()
    elif name == "round":
        m.round()
    elif name == "answer":
        m.answer(arg)
    elif name == "poll":
        m.poll(1 + arg // 3)  # a slow application: the buffer is often full
    elif name == "commit":
        m.commit()
    elif name == "restart":
        m.restart()
    elif name == "seek_back" and m.handed:
        o = sorted(m.handed)[arg % len(m.handed)]
        m.seek(o, m.handed_epochs[o])
    elif name == "retention":
        m.log_start = min(m.log_start + 1 + arg, len(m.leader_log()))
        m.trace.append(f"retention: log start {m.log_start}")
    elif name == "stale_refresh":
        m.stale_refresh(1 + arg % 3)
    elif name == "pause_resume":
        m.state.set_paused([KEY], not m.state.partitions[KEY].paused)
        m.stopped_by_event = m.stopped_by_event and m.state.partitions[KEY].paused  # resume() asks again
        m.trace.append(f"paused: {m.state.partitions[KEY].paused}")
    elif name == "seek_delivered":
        part = m.state.partitions[KEY]
        if m.stopped_by_event and part.position >= 0:  # ask again, or start over
            m.seek(part.position, part.epoch) if arg % 2 else m.seek(0, -1)


#: how often each step is drawn: the consumer works more often than leadership moves
WEIGHTS = (3, 2, 1, 1, 2, 3, 3, 3, 1, 0.5, 0.5, 1, 0.5, 0.5, 0.5)
#: the steps, each as often as its weight says (for hypothesis' ``sampled_from``)
OP_POOL = tuple(i for i, w in enumerate(WEIGHTS) for _ in range(int(2 * w)))


def random_ops(seed: int, n: int = 60) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(op, rng.randrange(8)) for op in rng.choices(range(len(OPS)), WEIGHTS, k=n)]


__all__ = ["Model", "ModelFailure", "OPS", "OP_POOL", "Stats", "run", "random_ops"]
