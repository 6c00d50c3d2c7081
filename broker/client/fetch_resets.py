"""Where a partition without a usable offset starts: ``auto.offset.reset`` for one assigned without
an offset (or whose committed offset is missing), the answer of ListOffsets, and a fetch that found
its offset out of range. Part of :class:`broker.client.fetch_state.FetchState` (a mixin over its
partitions, generations and error events), kept apart because it is one rule set: librdkafka's
``rd_kafka_offset_reset`` and Kafka's ``SubscriptionState`` reset strategy.

Pure and not thread-safe, as the fetch state: called under the consumer's lock.
"""
from __future__ import annotations

from broker.client.fetch_phase import FetchPhase, PartitionState
from broker.client.message import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED
from broker.client.start_offsets import EARLIEST, list_offsets_timestamp
from broker.errors import KafkaError, OffsetOutOfRangeError, RiverlogError

TP = tuple[str, int]


class FetchResets:
    """Offset resets of the fetch state (``self.reset``: EARLIEST, LATEST, or None for ``error``)."""

    def reset_target(self, key: TP, offset: int, generation: int | None = None) -> int | None:
        """The ListOffsets timestamp that gives a partition its first offset, or None when
        ``auto.offset.reset=error`` forbids guessing (reported once, then the partition pauses) or
        the partition moved on since ``generation`` was listed (sought meanwhile: nothing to do)."""
        if generation is not None:
            state = self._current(key, generation)
            if state is None or state.phase is not FetchPhase.AWAITING_RESET:
                return None
        if offset in (OFFSET_STORED, OFFSET_INVALID):
            if self.reset is None:
                self._stop(key)
                self.error_event(key, _auto_offset_reset(OffsetOutOfRangeError(
                    f"{key[0]}[{key[1]}] has no position and auto.offset.reset=error; seek() to an offset "
                    "or set auto.offset.reset to earliest or latest")), OFFSET_INVALID)
                return None
            return self.reset
        return list_offsets_timestamp(offset)  # after OFFSET_TAIL(n), tail_start()

    def reset_failed(self, key: TP, generation: int, error: RiverlogError) -> bool:
        """ListOffsets refused a partition's start offset for good: report it as that partition's
        error event and stop it until seek()/resume(); the other partitions fetch on."""
        state = self._current(key, generation)
        if state is None or state.phase is not FetchPhase.AWAITING_RESET:
            return False
        self._stop(key)
        self.error_event(key, error, OFFSET_INVALID)
        return True

    def reset_resolved(self, key: TP, generation: int, offset: int, leader_epoch: int = -1,
                       validate: bool = False) -> bool:
        """ListOffsets (or the group's committed offset) answered: whether to fetch from ``offset``
        now (False: the partition moved meanwhile, or awaits validation). ``leader_epoch`` is the
        answer's (the position's epoch, as librdkafka takes it), -1 unknown; ``validate``: a
        committed offset with its epoch is validated before it is fetched (KIP-320, as Kafka's
        consumer validates a committed position)."""
        state = self.partitions.get(key)
        if state is None or state.generation != generation or state.phase is not FetchPhase.AWAITING_RESET:
            return False
        state.fetch_offset = offset
        state.move(FetchPhase.FETCHING)
        queued = self._queued(key, state)
        _reset_position(state, queued, offset, leader_epoch)
        if validate and queued is None and offset >= 0 and leader_epoch >= 0:
            state.validate_at = 0.0
            state.move(FetchPhase.VALIDATING)
            return False
        return True

    def out_of_range(self, key: TP, state: PartitionState, error: OffsetOutOfRangeError,
                     log_start_offset: int) -> None:
        """A fetch of the partition's fetch offset was out of range.

        ``auto.offset.reset=latest`` asks ListOffsets LATEST again (the partition awaits a reset),
        as librdkafka's ``rd_kafka_offset_reset`` sets the logical END and Kafka's
        ``FetchCollector`` requests an offset reset: the latest offset a consumer may read is the
        high watermark, or under read_committed the last stable offset, never the log end the error
        carries (records past it may be uncommitted, or not yet replicated; jumping there would skip
        a transaction that later commits). ``earliest`` starts at the log start the error carries:
        nothing below it can be read, whatever the isolation level. With ``error`` the
        ``_AUTO_OFFSET_RESET`` event comes after the records fetched before it, as librdkafka
        queues it behind them, and the partition stops until seek() or resume().

        Records fetched before the failing offset and still queued are delivered first, then the
        partition goes on at the reset: librdkafka's reset does not bump the fetch version, and
        Kafka's consumer fetches again only once its buffered records were returned."""
        if state.halted:
            return
        if self.reset is None:
            self._stop(key)
            self._report_in_place(key, state, _auto_offset_reset(error), state.fetch_offset)
            return
        queued = self._queued(key, state)
        if queued is None:
            state.generation = next(self._generations)
        if self.reset == EARLIEST and log_start_offset >= 0:
            state.fetch_offset = log_start_offset
            state.move(FetchPhase.FETCHING)
        else:
            state.fetch_offset = OFFSET_BEGINNING if self.reset == EARLIEST else OFFSET_END
            state.move(FetchPhase.AWAITING_RESET)
        _reset_position(state, queued, state.fetch_offset)


def _reset_position(state: PartitionState, queued, offset: int, leader_epoch: int = -1) -> None:
    """A reset moves the position at once or, while records fetched before it are still queued,
    once they are taken (past them, never back over them). Either way the position's leader epoch
    becomes the reset's (``leader_epoch``, -1 unknown), so a reset position is validated as one
    taken at once is: the epoch of a record before the reset says nothing of where the position
    now is, and validating that could send the consumer back (KIP-320)."""
    if queued is None:
        state.position = offset
        state.epoch = leader_epoch if offset >= 0 else -1
    elif offset >= 0:
        if offset >= max(queued.end_offset, queued.base_offset + queued.records.num_rows):
            queued.end_offset, queued.end_epoch = offset, leader_epoch
            queued.jumped = leader_epoch < 0
        else:  # a reset below the records queued: the position stays past them, of no known epoch
            queued.jumped = True


def _auto_offset_reset(error: OffsetOutOfRangeError) -> KafkaError:
    """As librdkafka reports a position ``auto.offset.reset=error`` forbids guessing: ``_AUTO_OFFSET_RESET``
    (``exception()`` is still the OffsetOutOfRangeError)."""
    return KafkaError._of(error, KafkaError._AUTO_OFFSET_RESET)
