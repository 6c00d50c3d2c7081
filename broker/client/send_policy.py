"""Which of a producer's batches may be sent now, and what a failure means: the per-partition send
policy, apart from the thread and the streams that carry it out (:mod:`broker.client.sender`).

Pure: no threads, no gRPC; time comes from the :class:`~broker.clock.Clock` passed in, so a unit
test or the seeded simulation (``tests/simulation/test_producer_simulation.py``) drives it step by
step. The caller tells it what happened (``dispatched``, ``answered``, ``failed``,
``stream_replaced``) and asks it what to do (``plan``, ``take``, ``expire``).

Rules, each kept because a broker taught it:

- **Produce order.** A partition's batches are numbered as they are queued (``sequence``); a
  failed batch goes back at its place in that order (:meth:`_requeue`), however the failures of a
  broken stream are reported.
- **Settling.** A partition has one request unanswered at most while it is unsteady: while batches
  of it are being retried, and for ``settle_time`` (2 s) after a retriable failure of it or after
  its broker's stream was replaced. A broker that is starting (loading its logs, fenced, made
  leader again), or whose leadership moves and comes back, fails some requests of a partition and
  accepts the next ones: a later request already in flight would be written before the failed one.
  As in Kafka without idempotence one case remains: a steady partition's batch failed alone while a
  later request of it was in flight; ``max.in.flight.requests.per.connection=1`` closes it.
- **The idempotence window.** An idempotent producer keeps a partition's unanswered batches within
  the broker's ``IDEMPOTENCE_WINDOW`` (``SendLimits.window``): after a broken stream or a broker
  restart it resends them, and the broker recognises a resent batch as written only while it is
  among the last ones it remembers of the producer. With more unanswered, the oldest resend is
  refused as out of order forever. A resent batch goes alone in its request, so it is recognised.
- **Sequence numbers** come from the :class:`~broker.client.transactions.TransactionManager`,
  assigned when a batch is first sent, per partition under the producer id and epoch the partition
  is numbered by. A resend keeps its numbering, so the broker recognises it if an earlier attempt
  was written.
- **Epoch bumps** (idempotent without transactions; KIP-360, as Kafka's ``TransactionManager``).
  A partition's numbering breaks when it forgets the producer (``UnknownProducerId``), when a sent
  batch of it is given up, or when a batch of it numbered under an earlier epoch is refused
  (``OutOfOrderSequence`` or ``InvalidProducerEpoch``: the producer id is this producer's own, so a
  newer epoch there is its own, not a fence). A partition broken under the current epoch sends
  nothing more, and InitProducerId (the broker hands out the next epoch; the client never picks
  one) waits until it has nothing unanswered (:meth:`SendPolicy.epoch_bump_due`), so the answers
  have settled what it holds. After the bump every batch a broken partition holds is numbered again
  from 0 under the new epoch (Kafka's ``startSequencesAtBeginning``); every other partition is
  *stale*: it sends one request at a time, resends keeping their old numbering (its broker has
  never seen the new epoch, so it still recognises them), and once nothing of the old epoch is
  unanswered or held its next batch starts from 0 under the new epoch, which any partition accepts.
  A batch refused for a stale epoch is therefore retried, numbered again, never given up.
- **Giving up** (retries, ``delivery.timeout.ms``, a fatal error) on a batch that was sent breaks
  its partition's numbering: the later batches would wait for it forever.
- **Sequence desynchronisation** (idempotent without transactions, as librdkafka): the broker lost
  acknowledged records, and the producer fails fatally (:mod:`broker.client.sequence_errors`, which
  also reads which refusals only need the numbering started again).

Residual duplicates, as in Kafka: the broker recognises a resend only by the same producer id,
epoch and sequence, so a batch numbered again under a new epoch is appended even if an attempt
under the old one was written. That happens only to a *broken* partition's held batches whose
answer was lost: after a sent batch was given up (it may have been written, and later ones after
it), or when a partition forgot the producer after writing one whose answer was lost (its state
expired while retries went on). Kafka numbers a triggering partition's in-flight batches again in
the same way; it narrows the given-up case by waiting to see whether a later answer shows the
sequence written (``maybeResolveSequences``), which this policy does not. Stale partitions never
duplicate: their resends keep their numbering.
"""
from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.clock import Clock
from broker.client.producer_batch import ProducerBatch
from broker.client.sequence_errors import desynchronisation, desynchronised, numbering_refused
from broker.client.transactions import FENCING, TransactionManager
from broker.errors import InvalidMetadataError, KafkaStorageError, KafkaTimeoutError, NetworkError, RiverlogError
from broker.records.batch import IDEMPOTENCE_WINDOW

SETTLE_S = 2.0  # how long a partition stays unsteady: a restarting broker settles well within it
Key = tuple[str, int]


@dataclass(frozen=True)
class SendLimits:
    """The producer configs the policy rules by (seconds, not ms), read once."""
    idempotent: bool = False
    retries: int = 2_147_483_647
    backoff: float = 0.1
    delivery_timeout: float = 120.0  # seconds; math.inf: never (delivery.timeout.ms=0)
    max_request: int = 16_777_216
    max_in_flight: int = 5
    settle_time: float = SETTLE_S
    window: int = IDEMPOTENCE_WINDOW  # unanswered batches per partition; never above the broker's

    @classmethod
    def from_config(cls, cfg, idempotent: bool) -> "SendLimits":
        """``delivery.timeout.ms=0`` is librdkafka's infinite ``message.timeout.ms``: never expire."""
        return cls(idempotent, cfg["retries"], cfg["retry.backoff.ms"] / 1000.0,
                   cfg["delivery.timeout.ms"] / 1000.0 or math.inf,
                   cfg["max.request.size"], cfg["max.in.flight.requests.per.connection"])


@dataclass
class PartitionState:
    queue: collections.deque = field(default_factory=collections.deque)  # unsent, in produce order
    requests: int = 0       # unanswered requests carrying this partition
    unanswered: int = 0     # unanswered batches of it (the idempotence window counts these)
    retrying: bool = False  # a retried batch of it is queued or unanswered
    unsteady_until: float = 0.0
    in_flight: set = field(default_factory=set)  # produce-order ``sequence`` of its unanswered batches


@dataclass
class Plan:
    by_node: dict[int, list[Key]]
    next_at: float           # when to look again if nothing else happens (answers also wake the sender)
    stale_metadata: bool     # a leader was unknown: refresh metadata


def _no_stamp(data, producer_id, producer_epoch, base_sequence):
    return data


class SendPolicy:
    """``stamp(data, producer_id, epoch, base_sequence) -> data`` writes the identity into a framed
    batch when it is first sent (the simulation's batches have no bytes to write)."""

    def __init__(self, limits: SendLimits, clock: Clock, manager: TransactionManager | None = None,
                 stamp: Callable = _no_stamp):
        if limits.idempotent and manager is None:
            raise ValueError("an idempotent send policy needs the transaction manager's sequence numbers")
        self.limits = limits
        self.clock = clock
        self.manager = manager if limits.idempotent else None
        self.stamp = stamp
        self.partitions: dict[Key, PartitionState] = collections.defaultdict(PartitionState)
        self.node_in_flight: dict[int, int] = collections.defaultdict(int)
        self.node_unsteady_until: dict[int, float] = {}
        self._order = itertools.count(1)

    # ------------------------------------------------------------------------------ queueing
    def enqueue(self, batch: ProducerBatch) -> None:
        batch.sequence = next(self._order)
        self.partitions[(batch.topic, batch.partition)].queue.append(batch)

    def queued(self) -> bool:
        return any(p.queue for p in self.partitions.values())

    def busy(self) -> bool:
        return self.queued() or any(self.node_in_flight.values())

    def unanswered(self, key: Key) -> int:
        return self.partitions[key].unanswered if key in self.partitions else 0

    def waiting(self) -> list[Key]:
        return [key for key, p in self.partitions.items() if p.queue]

    # ------------------------------------------------------------------------------ what may go
    def muted(self, key: Key, node: int, now: float) -> bool:
        """An unsteady partition sends nothing more until its unanswered request is answered: the
        broker could fail that request and write a later one sent meanwhile. An idempotent
        partition with a full window of unanswered batches waits too."""
        p = self.partitions[key]
        if self.limits.idempotent and (p.unanswered >= self.limits.window or self._epoch_muted(key, p)):
            return True
        return p.requests > 0 and (p.retrying or now < p.unsteady_until
                                   or now < self.node_unsteady_until.get(node, 0.0))

    def _epoch_muted(self, key: Key, p: PartitionState) -> bool:
        """A partition whose numbering broke waits for the new epoch; one numbered under an old
        epoch sends one request at a time until nothing of the old epoch is unanswered, then
        starts over (a batch of the new epoch must not overtake one of the old)."""
        m = self.manager
        return m.waits_for_epoch(key) or p.requests > 0 and m.stale(key)

    def epoch_bump_due(self) -> bool:
        """May InitProducerId go now? The producer has no id yet, or every partition waiting for a
        new epoch has nothing unanswered: the answers decide what it holds, and all it holds is
        numbered again under the new epoch (Kafka's ``maybeResolveSequences`` waits alike)."""
        m = self.manager
        if m is None:
            return False
        if m.producer_id < 0:
            return True
        waiting = m.awaiting_epoch()
        return bool(waiting) and all(self.partitions[key].requests == 0 for key in waiting if key in self.partitions)

    def node_blocked(self, node: int, stream_broken: bool) -> bool:
        """Full pipeline, or a broken stream whose failed requests are not requeued yet: sending
        later batches on a new stream first would reorder the partitions they share."""
        n = self.node_in_flight[node]
        return n >= self.limits.max_in_flight or stream_broken and n > 0

    def plan(self, now: float, leader: Callable[[Key], int], registered: set | None = None) -> Plan:
        """The partitions that may send now, by leader. ``leader`` raises RiverlogError when
        unknown; ``registered``: the partitions a transaction may write (None: not transactional)."""
        next_at, stale = math.inf, False
        by_node: dict[int, list[Key]] = collections.defaultdict(list)
        for key, p in self.partitions.items():
            if not p.queue:
                continue
            if p.queue[0].retry_at > now:
                next_at = min(next_at, p.queue[0].retry_at)
                continue
            try:
                node = leader(key)
            except RiverlogError:
                stale = True
                next_at = min(next_at, now + self.limits.backoff)
                continue
            if self.muted(key, node, now):
                continue  # its answer wakes the sender
            if registered is not None and key not in registered:
                next_at = min(next_at, now + self.limits.backoff)
                continue
            by_node[node].append(key)
        return Plan(dict(by_node), next_at, stale)

    def more_to_send(self, node: int, keys: Iterable[Key], now: float, stream_broken: bool) -> bool:
        """A request holds max.request.size: partitions of the node with batches left go on now."""
        return not self.node_blocked(node, stream_broken) and any(
            self.partitions[key].queue and not self.muted(key, node, now) for key in keys)

    def take(self, keys: list[Key], now: float) -> tuple[list[tuple[Key, list[ProducerBatch]]], list[Key]]:
        """One request's batches, per partition in ``keys`` order, within max.request.size; the
        partitions left for the next request. Idempotent batches get their sequence numbers here."""
        limits = self.limits
        batches, size, rest = [], 0, []
        for key in keys:
            p = self.partitions[key]
            queue, taken = p.queue, []
            if limits.idempotent and p.requests == 0 and self.manager.must_start_over(key):
                self._start_at_beginning(key, p)
            room = limits.window - p.unanswered if limits.idempotent else math.inf
            while queue and len(taken) < room and queue[0].retry_at <= now and (
                    not batches and not taken or size + queue[0].size <= limits.max_request):
                # An idempotent resend goes alone: the broker recognises a resent batch only so.
                if limits.idempotent and taken and (taken[-1].attempts or queue[0].attempts):
                    break
                if limits.idempotent and taken and queue[0].base_sequence is None and self.manager.stale(key):
                    break  # the old epoch's last batch goes first; the new epoch starts after its answer
                batch = queue.popleft()
                if limits.idempotent and batch.base_sequence is None:
                    pid, epoch, seq = self.manager.next_sequence(key, batch.count)
                    batch.data = self.stamp(batch.data, pid, epoch, seq)
                    batch.base_sequence, batch.producer_epoch = seq, epoch
                taken.append(batch)
                size += batch.size
            if taken:
                batches.append((key, taken))
            else:
                rest.append(key)
        return batches, rest

    # ------------------------------------------------------------------------------ what happened
    def dispatched(self, node: int, batches) -> None:
        self.node_in_flight[node] += 1
        for key, taken in batches:
            p = self.partitions[key]
            p.requests += 1
            p.unanswered += len(taken)
            p.in_flight.update(b.sequence for b in taken)

    def stream_replaced(self, node: int, now: float) -> None:
        """A replaced stream may lead to a broker that just restarted. (A first stream needs no
        settling: it follows metadata, which a broker serves only once it has caught up.)"""
        self.node_unsteady_until[node] = now + self.limits.settle_time

    def answered(self, node: int, requests: list) -> None:
        """``requests``: the batches of each request now answered or failed (before judging them)."""
        self.node_in_flight[node] -= len(requests)
        for batches in requests:
            for key, taken in batches:
                p = self.partitions[key]
                p.requests -= 1
                p.unanswered -= len(taken)
                p.in_flight.difference_update(b.sequence for b in taken)

    def delivered(self, key: Key) -> None:
        """End a partition's retrying state once no retried batch of it is left to send."""
        p = self.partitions[key]
        if p.retrying and (not p.queue or not p.queue[0].attempts):
            p.retrying = False

    def failed(self, key: Key, taken: list[ProducerBatch], error: RiverlogError,
               now: float) -> tuple[list[ProducerBatch], RiverlogError]:
        """Retry ``taken`` (returns no batches) or give up: the batches to report, with the error
        to report them with (a fenced transactional producer's fatal error)."""
        retriable = error.retriable
        m, p = self.manager, self.partitions[key]
        if m is not None and m.transactional and isinstance(error, FENCING):
            error = m.fenced(error)  # another instance has this epoch now: fatal, never retried
        elif m is not None and not m.transactional and numbering_refused(m, key, taken, error):
            retriable = True
        elif m is not None and not m.transactional and desynchronised(m, key, taken, error, p.in_flight, p.queue):
            error, retriable = m.fatal(desynchronisation(m, key, taken, error)), False
        if retriable:
            p.unsteady_until = now + self.limits.settle_time
            counts = not _stale_metadata(error)
            if any(now - b.created >= self.limits.delivery_timeout for b in taken):
                error = KafkaTimeoutError(
                    f"Local: Message timed out: {sum(b.count for b in taken)} record(s) for {key[0]}[{key[1]}] "
                    f"expired after delivery.timeout.ms={int(self.limits.delivery_timeout * 1000)} while "
                    f"retried (last error: {error.name}: {error.message})")
            elif all(b.retries < self.limits.retries or not counts for b in taken):
                for batch in taken:
                    batch.attempts += 1
                    batch.retries += counts
                    batch.retry_at = now + self.limits.backoff
                self._requeue(p.queue, taken)
                p.retrying = True
                return [], error
        for batch in taken:
            self._gave_up(batch)
        self.delivered(key)
        return taken, error

    def expire(self, now: float) -> list[tuple[ProducerBatch, RiverlogError]]:
        """Queued batches older than delivery.timeout.ms, given up (those in flight wait for their answer)."""
        out = []
        timeout = self.limits.delivery_timeout
        for p in self.partitions.values():
            while p.queue and now - p.queue[0].created >= timeout:
                batch = p.queue.popleft()
                self._gave_up(batch)
                out.append((batch, KafkaTimeoutError(
                    f"Local: Message timed out: {batch.count} record(s) for {batch.topic}[{batch.partition}] "
                    f"expired after delivery.timeout.ms={int(timeout * 1000)}")))
        return out

    def drop_queued(self, keys: Iterable[Key] | None = None) -> list[ProducerBatch]:
        """Give up every unsent batch (of ``keys``; default all): a fenced or doomed transaction, a
        partition the coordinator refused. Batches in flight are answered as usual."""
        out = []
        for key in list(self.partitions) if keys is None else keys:
            p = self.partitions[key]
            while p.queue:
                batch = p.queue.popleft()
                self._gave_up(batch)
                out.append(batch)
            p.retrying = False
        return out

    def drop_purged(self, key: Key) -> None:
        """Batches ``purge()`` already reported (in flight then) are never sent again: a failed one
        is given up instead of retried."""
        p = self.partitions.get(key)
        if p is None or not any(b.purged for b in p.queue):
            return
        for batch in [b for b in p.queue if b.purged]:
            p.queue.remove(batch)
            self._gave_up(batch)
        p.retrying = any(b.base_sequence is not None for b in p.queue) and p.retrying

    def _gave_up(self, batch: ProducerBatch) -> None:
        if self.manager is not None:
            self.manager.gave_up((batch.topic, batch.partition), batch.base_sequence, batch.producer_epoch)

    def _start_at_beginning(self, key: Key, p: PartitionState) -> None:
        """Nothing of the partition is unanswered: every batch it holds is numbered again from 0
        under the current epoch, in produce order, as it is sent."""
        self.manager.start_at_beginning(key)
        for batch in p.queue:
            batch.base_sequence = None

    @staticmethod
    def _requeue(queue: collections.deque, batches: list[ProducerBatch]) -> None:
        """Put failed batches back at their place in produce order. The queue is sorted by
        ``sequence``; batches retried earlier (older) may be at its front and unsent (newer) ones
        follow, so the failed ones are merged in, not prepended."""
        last = max(b.sequence for b in batches)
        front = list(batches)
        while queue and queue[0].sequence < last:
            front.append(queue.popleft())
        front.sort(key=lambda b: b.sequence)
        queue.extendleft(reversed(front))


def _stale_metadata(error: RiverlogError) -> bool:
    """A refusal that only says the producer's metadata was stale: the broker wrote nothing, so its
    retry does not count against ``retries`` (librdkafka's ERR_ACTION_REFRESH; a broken connection
    and a storage error still count: the request may have been written)."""
    return isinstance(error, InvalidMetadataError) and not isinstance(error, (NetworkError, KafkaStorageError))
