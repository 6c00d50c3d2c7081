"""Where each assigned partition stands: what to fetch next, what the application has been given,
and how a fetch response or error moves it. Pure: no threads, no gRPC; time comes from a ``Clock``.

    state = FetchState(reset=EARLIEST, enable_eof=False, retry_backoff_s=0.1, queue_limit_bytes=1 << 20,
                       clock=ManualClock())
    state.assign([TopicPartition("orders", 0, 42)])
    parts, resets = state.to_fetch(node=1, leader_of=lambda t, p: 1)   # [(("orders", 0), 42, 0)], []
    if state.on_fetched(("orders", 0), 0, high_watermark=50, log_start_offset=0, next_offset=50):
        state.on_decoded(("orders", 0), 0, 42, decoded, None, 50, 50)  # chunks queued for poll()
    message = state.take_one(state.head())                             # position moves to 43

A partition's fetch lifecycle, its phases and the pause flag beside them, is an explicit state
machine: ``broker.client.fetch_phase``. No record of a paused partition reaches the application:
as librdkafka's ``rd_kafka_toppar_pause_resume`` does, pausing drops what was prefetched for it (a
new generation, so a fetch in flight is dropped too) and fetching resumes from the position, the
last record taken + 1. A halted partition fetches nothing more, so its records before the bad batch
are set aside instead and queued again on resume. The consumer also pauses a partition it cannot go
on with (it does not exist; it has no position and ``auto.offset.reset=error``; ListOffsets refused
its start offset) after reporting it once, so ``resume()`` or ``seek()`` retries it.

Start offsets (``OFFSET_TAIL(n)``, ``auto.offset.reset``...) are ``broker.client.start_offsets``; how a
partition without a usable offset gets one (resets, ListOffsets answers, OffsetOutOfRange) is
``broker.client.fetch_resets``; positions, watermarks and the offsets a commit stores are
``broker.client.fetch_positions``.

Each partition has a ``generation``, moved by ``seek`` and by an offset reset: data fetched for an
older generation is dropped, never returned (so are a partition's error events not yet returned when
it is sought, paused, resumed or unassigned, as librdkafka's version barrier outdates them). Generations are drawn from one counter for the whole
state, never reused: a partition revoked and assigned again while a fetch for it is in flight gets
a new one, so that fetch's records cannot be delivered as if they belonged to the new assignment. A batch that cannot be decoded halts its partition:
the records before it are delivered, then one error event at its offset, and nothing past it is
fetched until the application ``seek()``s (as Kafka's consumer keeps failing at a corrupt record
rather than skipping it).

Not thread-safe: the consumer calls every method under its one lock.
"""
from __future__ import annotations

import collections
import itertools
import logging
from collections.abc import Callable

from broker.client.fetch_buffer import NO_RECORDS, Chunk, FetchBuffer
from broker.client.fetch_phase import FetchPhase, PartitionState
from broker.client.fetch_positions import FetchPositions
from broker.client.fetch_resets import FetchResets
from broker.client.message import (OFFSET_INVALID, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message,
                                   TopicPartition)
from broker.client.offset_validation import FetchValidation
from broker.clock import Clock
from broker.errors import (FencedLeaderEpochError, KafkaError, OffsetOutOfRangeError, PartitionEOF, RiverlogError,
                           UnknownLeaderEpochError)

log = logging.getLogger(__name__)

TP = tuple[str, int]
class FetchState(FetchPositions, FetchResets, FetchValidation):
    """Every assigned partition's state, the records fetched for them and the events to report."""

    def __init__(self, reset: int | None, enable_eof: bool, retry_backoff_s: float, queue_limit_bytes: int,
                 clock: Clock):
        self.reset = reset  # EARLIEST, LATEST, or None for auto.offset.reset=error
        self.enable_eof = enable_eof
        self.retry_backoff_s = retry_backoff_s
        self.clock = clock
        self.partitions: dict[TP, PartitionState] = {}
        self.buffer = FetchBuffer(queue_limit_bytes)
        self.events: collections.deque[Message] = collections.deque()
        self._next_refresh = 0.0
        self.room = False  # head() let chunks go since the owner last looked: wake the fetcher
        self._generations = itertools.count()
        self._served = itertools.count(1)

    # ------------------------------------------------------------------------ the application's side
    def assign(self, partitions: list[TopicPartition]) -> None:
        """Exactly these partitions from their offsets; everything queued is dropped."""
        self._drop_events(self.partitions)
        self.partitions = {}
        self.buffer.clear()
        self.add(partitions)

    def add(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:  # an offset given with its leader epoch is validated (KIP-320)
            self.partitions[(tp.topic, tp.partition)] = PartitionState(
                tp.offset, next(self._generations), -1 if tp.leader_epoch is None else tp.leader_epoch)

    def remove(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.partitions.pop((tp.topic, tp.partition), None)
            self.buffer.drop((tp.topic, tp.partition))
        self._drop_events({(tp.topic, tp.partition) for tp in partitions})

    def seek(self, key: TP, offset: int, leader_epoch: int = -1) -> None:
        """Move the position; what was fetched for the old one is dropped, a halt is lifted, and a
        partition stopped after an error event (``auto.offset.reset=error``...) fetches again. An
        offset with its ``leader_epoch`` is validated first (librdkafka's ``rd_kafka_toppar_seek``)."""
        state = self.partitions.get(key)
        if state is None:
            raise RiverlogError(f"{key[0]}[{key[1]}] is not assigned")
        state.generation = next(self._generations)
        state.fetch_offset = state.position = offset
        state.epoch = leader_epoch if offset >= 0 else -1
        state.eof_offset = OFFSET_INVALID
        if state.stopped:
            state.stopped = state.paused = False
        state.aside = []
        state.move(FetchPhase.FETCHING if offset >= 0 else FetchPhase.AWAITING_RESET)
        self.buffer.drop(key)
        self._drop_events({key})
        if offset >= 0 and leader_epoch >= 0:
            state.validate_at = 0.0
            state.move(FetchPhase.VALIDATING)

    def set_paused(self, keys, paused: bool) -> None:
        """Pause (see the module's docstring: nothing prefetched for it is returned) or resume."""
        for key in keys:
            state = self.partitions.get(key)
            if state is None or (state.paused == paused and not (paused and state.stopped)):
                continue
            state.paused = paused
            state.stopped = False
            if not paused:  # librdkafka's resume bumps the version barrier too: older events go
                if not state.halted:
                    self._drop_events({key})
                for chunk in state.aside:
                    self.buffer.append(chunk)
                state.aside = []
            elif state.halted:
                state.aside = self.buffer.take(key)
            else:
                self.buffer.drop(key)
                self._drop_events({key})
                state.generation = next(self._generations)
                if state.phase is FetchPhase.AWAITING_RESET and state.position >= 0:
                    state.move(FetchPhase.FETCHING)  # a reset deferred behind records now dropped
                if state.phase is FetchPhase.FETCHING:
                    state.fetch_offset = state.position

    def head(self) -> Chunk | None:
        """The chunk poll() reads next. Chunks of partitions no longer assigned, of older
        generations, or used up are let go on the way, and ``room`` tells the owner to wake the
        fetcher (prefetching may go on)."""
        chunks = self.buffer.chunks
        partitions = self.partitions
        while chunks:
            chunk = chunks[0]
            state = partitions.get((chunk.topic, chunk.partition))
            if state is None or state.generation != chunk.generation or (chunk.remaining == 0
                                                                         and chunk.error is None):
                self.buffer.pop_head()
                self.room = True
                continue
            return chunk
        return None

    def take_one(self, chunk: Chunk) -> Message:
        """The head chunk's next record, or its error event (the position already stands at the
        bad batch); the position moves past the record. Inlined: it runs once per record."""
        if chunk.error is not None:
            self.buffer.pop_head()
            return Message(chunk.topic, chunk.partition, chunk.base_offset, error=chunk.error)
        keys, values, stamps, headers = chunk.rows or chunk.python_rows()
        i = chunk.cursor
        chunk.cursor += 1
        offset = chunk.base_offset + i
        state = self.partitions[(chunk.topic, chunk.partition)]
        epoch = chunk.leader_epoch
        if chunk.cursor == chunk.records.num_rows:
            state.position = chunk.next_position(offset + 1)
            state.epoch = chunk.epoch_at(state.position, epoch)
        else:
            state.position, state.epoch = offset + 1, epoch
        h = headers[i] if headers is not None else None
        return Message._record(chunk.topic, chunk.partition, offset, keys[i], values[i],
                               None if h is None else [(e["key"], e["value"]) for e in h], stamps[i],
                               TIMESTAMP_LOG_APPEND_TIME if chunk.log_append_time else TIMESTAMP_CREATE_TIME,
                               leader_epoch=epoch if epoch >= 0 else None)

    def take_slice(self, chunk: Chunk, n: int):
        batch, position = self.buffer.take_slice(chunk, n)
        state = self.partitions[(chunk.topic, chunk.partition)]
        state.position, state.epoch = position, chunk.epoch_at(position, chunk.leader_epoch)
        return batch

    # ------------------------------------------------------------------------ the fetcher's side
    def wanted(self) -> list[TP]:
        """The partitions a fetch may be sent for now: nothing while the buffer is full, nothing
        paused or halted. (The fetcher looks up their leaders outside the lock: that may block.)"""
        if self.buffer.full():
            return []
        return [key for key, state in self.partitions.items() if not (state.paused or state.halted)]

    def to_fetch(self, node: int, leader_of: Callable[[str, int], int]) -> tuple[list, list]:
        """What to ask broker ``node`` for: ([(partition, fetch offset, generation)], the partitions
        it leads that first need ListOffsets as [(partition, generation, offset asked for)]).
        Nothing while the buffer is full; nothing of a paused or halted partition.

        Partitions that returned records last go last (Kafka's ``SubscriptionState.movePartitionToEnd``,
        librdkafka rotates its fetch list too): the broker lets only the first partition with records
        exceed what is left of ``fetch.max.bytes``, so one whose next batch did not fit comes first
        next time and is not starved by busier partitions ahead of it."""
        if self.buffer.full():
            return [], []
        parts, resets = [], []
        for key, state in sorted(self.partitions.items(), key=lambda item: item[1].served):
            if state.paused or state.halted or state.phase is FetchPhase.VALIDATING or leader_of(*key) != node:
                continue
            if state.phase is FetchPhase.AWAITING_RESET:
                resets.append((key, state.generation, state.fetch_offset))
            else:
                parts.append((key, state.fetch_offset, state.generation))
        return parts, resets

    def refresh_due(self) -> bool:
        """Whether to refresh metadata for a partition with no known leader: at most every backoff."""
        now = self.clock.monotonic()
        if now < self._next_refresh:
            return False
        self._next_refresh = now + self.retry_backoff_s
        return True

    def on_fetched(self, key: TP, generation: int, high_watermark: int, log_start_offset: int,
                   next_offset: int | None, fetch_offset: int | None = None) -> bool:
        """A response's data arrived (headers read, not yet decoded): move the fetch offset past
        it so the next fetch goes out while this one is decoded. False: the data is stale, of an
        older generation or (``fetch_offset``, what the request asked for) of an offset the
        partition has moved past: while its leader moves, two brokers may be asked for the same
        offsets, and only the first answer counts (Kafka's ``FetchCollector`` discards a response
        whose fetch offset is not the position; librdkafka one from a broker the partition left)."""
        state = self._current(key, generation, fetch_offset)
        if state is None or state.halted:
            return False
        state.high_watermark, state.log_start_offset = high_watermark, log_start_offset
        if next_offset is not None:
            state.fetch_offset = next_offset
            state.served = next(self._served)
        return True

    def on_decoded(self, key: TP, generation: int, offset: int, decoded: list, failure, following: int | None,
                   end_offset: int, epochs: dict[int, int] | None = None) -> bool:
        """Queue what was decoded (``broker.records.reader.decode_available``'s answer for a fetch
        from ``offset``); ``following`` is the offset after the response's last batch; ``end_offset``
        is where ``_PARTITION_EOF`` is reported (the high watermark, or under read_committed the
        last stable offset, as librdkafka), once per end offset reached, as librdkafka's
        ``eof_offset``: an end that moved on over markers or aborted records only is reported
        again. ``epochs``: each batch's partition leader epoch by the offset after it. True when there
        is something new for the application."""
        state = self._current(key, generation)
        if state is None or state.halted:
            return False
        for d in decoded:
            if d.records.num_rows:
                self.buffer.append(Chunk(key[0], key[1], generation, d.base_offset, d.records, d.log_append_time,
                                         leader_epoch=epochs.get(d.next_offset, -1) if epochs else -1))
        if failure is not None:
            self._halt(key, state, max(failure.offset, offset), failure.error)
            return True
        self._skip_past(key, state, following, epochs.get(following, -1) if epochs and following is not None else -1)
        if any(d.records.num_rows for d in decoded):  # not batches the log cleaner emptied
            return True
        if (self.enable_eof and state.eof_offset != end_offset
                and state.fetch_offset >= end_offset and state.position >= end_offset):
            state.eof_offset = end_offset
            self.events.append(Message(key[0], key[1], end_offset,
                                       error=PartitionEOF(f"reached end of {key[0]}[{key[1]}]")))
            return True
        return False

    def on_error(self, key: TP, generation: int, error: RiverlogError, log_start_offset: int,
                 log_end_offset: int, fetch_offset: int | None = None) -> bool:
        """A partition's fetch failed. True when the caller should refresh metadata (the leader
        moved, or is unknown): NotLeader and other retriable errors are retried after it;
        OffsetOutOfRange applies ``auto.offset.reset`` (``FetchResets.out_of_range``).

        An error of a stale fetch (an older generation, or ``fetch_offset`` the partition has
        moved past) is dropped, as librdkafka drops outdated fetch versions; another error is
        reported at the fetch offset, behind the partition's records fetched before it, as
        librdkafka's ``rd_kafka_consumer_err`` queues it."""
        state = self._current(key, generation, fetch_offset)
        if state is None:
            return error.retriable
        if isinstance(error, OffsetOutOfRangeError):
            self.out_of_range(key, state, error, log_start_offset)
            return False
        if isinstance(error, (FencedLeaderEpochError, UnknownLeaderEpochError)):
            self.await_validation(key, state)  # librdkafka validates once metadata brings the epoch
            return True
        if error.retriable:
            return True
        self._report_in_place(key, state, error, state.fetch_offset)
        return False

    def stop_unknown(self, key: TP, error: RiverlogError) -> bool:
        """An assigned partition that does not exist: report it once and pause it."""
        state = self.partitions.get(key)
        if state is None or state.paused:
            return False
        self._stop(key)
        self.error_event(key, error)
        return True

    def error_event(self, key: TP, error: RiverlogError | KafkaError, offset: int = -1) -> None:
        """A partition's error for the application; ``offset`` is the one it concerns (librdkafka's
        ``rd_kafka_consumer_err``: the failing offset, or ``OFFSET_INVALID`` when there was none)."""
        self.events.append(Message(key[0], key[1], offset, error=error))

    # ------------------------------------------------------------------------ internals
    def _current(self, key: TP, generation: int, fetch_offset: int | None = None) -> PartitionState | None:
        """The partition's state if ``generation`` (and ``fetch_offset``, when given) still hold."""
        state = self.partitions.get(key)
        if state is None or state.generation != generation:
            return None
        return state if fetch_offset is None or fetch_offset == state.fetch_offset else None

    def _queued(self, key: TP, state: PartitionState) -> Chunk | None:
        """The partition's last chunk if records of it are still queued for the application."""
        last = self.buffer.last_of(key, state.generation)
        return last if last is not None and last.remaining else None

    def _report_in_place(self, key: TP, state: PartitionState, error, offset: int) -> None:
        """An error event behind the partition's records still queued (an error chunk), or at once."""
        if self._queued(key, state) is not None:
            self.buffer.append(Chunk(key[0], key[1], state.generation, offset, NO_RECORDS, False, error=error))
        else:
            self.error_event(key, error, offset)

    def _drop_events(self, keys) -> None:
        """Drop the error events of ``keys`` (see the module's docstring); client-level ones stay."""
        kept = [m for m in self.events if (m._topic, m._partition) not in keys]
        self.events.clear()
        self.events.extend(kept)

    def _stop(self, key: TP) -> None:
        """Stop fetching a partition after its error event, until seek() or resume()."""
        state = self.partitions.get(key)
        if state is not None and not state.paused:
            state.paused = state.stopped = True  # what was fetched before the error is still delivered

    def _halt(self, key: TP, state: PartitionState, at: int, error: RiverlogError) -> None:
        """Stop at a batch that cannot be decoded: fetch nothing past it, let the records before
        it be taken, then report it (an error chunk, so the event keeps its place)."""
        state.move(FetchPhase.HALTED)
        state.fetch_offset = at
        self._skip_past(key, state, at)
        self.buffer.append(Chunk(key[0], key[1], state.generation, at, NO_RECORDS, False, error=error))
        log.warning("%s[%d]: %s", key[0], key[1], error)

    def _skip_past(self, key: TP, state: PartitionState, following: int | None, epoch: int = -1) -> None:
        """Offsets that hold no record for the application (transaction markers, aborted
        transactions) still move the position past them, once the records before them are taken;
        the position's epoch becomes ``epoch``, that of the last batch passed (Kafka's
        ``CompletedFetch`` takes every batch's, a control batch's too), -1 unknown."""
        if following is None:
            return
        last = self.buffer.last_of(key, state.generation)
        if last is not None and last.remaining:
            if following > last.end_offset:
                last.end_offset, last.end_epoch = following, epoch
        elif following > state.position >= 0:
            state.position, state.epoch = following, epoch

