"""KIP-320: whether a partition's position must be validated, and what the leader's answer means.

After an unclean election the new leader's log can be shorter than the consumer's position, or
hold other records at the same offsets once it is written past it. Fetching on from the position
would then skip the new leader's records between where the logs diverge and the position. So the
consumer keeps the leader epoch of its position (the epoch of the batch of the last record handed
out, or the one an offset came with: from ListOffsets, assign() or seek()) and, before fetching again after the partition's leader
epoch moved, asks the leader with OffsetsForLeaderEpoch where that epoch ends there.

The answer's meaning is librdkafka's (``rd_kafka_toppar_handle_OffsetForLeaderEpoch``):

- the epoch ends at or past the position: the position is valid, fetching goes on;
- it ends before the position (log truncation): fetch from that end offset, where the new leader's
  records begin, without an event; with ``auto.offset.reset=error`` an ``_AUTO_OFFSET_RESET``
  event at ``OFFSET_INVALID`` saying "Partition log truncation detected" instead, and the
  partition stops until ``seek()``;
- the leader knows no epoch at or below the position's: ``auto.offset.reset`` decides (with
  ``error``, the same event at the position);
- an error (fenced, not the leader...): metadata is refreshed and the validation asked again.

A position without an epoch (an offset given without one, an ``OFFSET_TAIL(n)`` start) is not
validated, as librdkafka skips it. A partition awaiting validation is not fetched, and what was prefetched for it is dropped (as
Kafka's consumer returns no buffered records of a partition awaiting validation): it is fetched
again from the position once valid. Pure: no threads, no requests; :class:`FetchValidation` applies
the decisions to the fetch state, the fetcher sends the requests.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import NamedTuple

from broker.client.fetch_phase import FetchPhase, PartitionState
from broker.client.message import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID
from broker.client.start_offsets import EARLIEST
from broker.errors import KafkaError, RiverlogError, UnsupportedVersionError

log = logging.getLogger(__name__)

TP = tuple[str, int]

#: librdkafka's text for ``_LOG_TRUNCATION``, which its ``_AUTO_OFFSET_RESET`` event ends with.
LOG_TRUNCATION = "Local: Partition log truncation detected"


class Verdict(enum.Enum):
    VALID = "valid"          # fetch on from the position
    TRUNCATED = "truncated"  # fetch from ``offset`` (the end of the position's epoch on the leader)
    RESET = "reset"          # no epoch at or below the position's: auto.offset.reset decides
    STOP = "stop"            # auto.offset.reset=error: report ``error`` at ``offset`` and stop


class Decision(NamedTuple):
    verdict: Verdict
    offset: int = -1         # TRUNCATED: where to fetch from; STOP: the event's offset
    leader_epoch: int = -1   # TRUNCATED: the epoch of that offset
    error: KafkaError | None = None


def needs_validation(position: int, position_epoch: int, known_epoch: int, leader_epoch: int) -> bool:
    """Whether a partition whose leader epoch moved from ``known_epoch`` to ``leader_epoch`` (as
    metadata tells) must validate its position first: only a position with an epoch, only when
    the epoch grew (an older epoch in metadata is stale, as librdkafka ignores it)."""
    return position >= 0 and position_epoch >= 0 and leader_epoch >= 0 and leader_epoch > known_epoch


def decide(position: int, position_epoch: int, end_epoch: int, end_offset: int, reset_is_error: bool,
           where: str) -> Decision:
    """What the leader's OffsetsForLeaderEpoch answer (``end_epoch``, ``end_offset``) for the
    position's epoch means; ``reset_is_error`` is ``auto.offset.reset=error``; ``where`` names the
    partition in messages."""
    pos = f"{where} offset {position} (leader epoch {position_epoch})"
    if end_offset < 0 or end_epoch < 0:
        if not reset_is_error:
            return Decision(Verdict.RESET)
        return Decision(Verdict.STOP, position, error=KafkaError(KafkaError._AUTO_OFFSET_RESET, (
            f"No epoch found less or equal to {pos}: broker end offset is {end_offset} (offset leader epoch "
            f"{end_epoch}). Reset using configured policy.: {LOG_TRUNCATION}")))
    if end_offset < position:
        if not reset_is_error:
            return Decision(Verdict.TRUNCATED, end_offset, end_epoch)
        return Decision(Verdict.STOP, OFFSET_INVALID, error=KafkaError(KafkaError._AUTO_OFFSET_RESET, (
            f"Partition log truncation detected at {pos}: broker end offset is {end_offset} (offset leader "
            f"epoch {end_epoch}). Reset to INVALID.: {LOG_TRUNCATION}")))
    return Decision(Verdict.VALID)


class FetchValidation:
    """The validation steps of :class:`broker.client.fetch_state.FetchState` (a mixin over its
    partitions, generations, reset policy and events, as ``FetchResets``). Called under the
    consumer's lock."""

    def note_leader_epochs(self, epochs: dict[TP, int]) -> None:
        """The partitions' leader epochs as the metadata now has them (every assigned partition's,
        also while the buffer is full: its queued records are dropped): a partition whose epoch grew
        validates its position before it is fetched again (librdkafka's
        ``rd_kafka_toppar_leader_update``); the first epoch seen after an assignment counts as grown,
        so an offset assigned with its epoch is validated too; an epoch that went down is not
        validated (librdkafka ignores it as outdated). An epoch that grows while a validation is in
        flight asks again: the answer of the older leader is dropped (a new generation)."""
        for key, leader_epoch in epochs.items():
            state = self.partitions.get(key)
            if state is None or leader_epoch < 0:
                continue
            if state.phase is FetchPhase.FETCHING and needs_validation(state.position, state.epoch,
                                                                       state.leader_epoch, leader_epoch):
                self.await_validation(key, state)
            elif state.phase is FetchPhase.VALIDATING and leader_epoch > state.leader_epoch:
                # An answer asked of the older epoch's leader no longer counts (Kafka's
                # maybeCompleteValidation skips it): that leader may have lost the records since.
                state.generation = next(self._generations)
                state.validate_at = 0.0
            # Adopted even when lower (stale metadata, or a topic made again): a fetch naming it is
            # at worst fenced and asked again, never stuck naming an epoch no leader will reach.
            state.leader_epoch = leader_epoch

    def await_validation(self, key: TP, state: PartitionState) -> None:
        """Stop fetching the partition until its position is validated; drop what was prefetched
        (a fetch in flight for it is dropped too: a new generation)."""
        if state.phase is not FetchPhase.FETCHING or state.position < 0 or state.epoch < 0:
            return
        state.generation = next(self._generations)
        self.buffer.drop(key)
        state.fetch_offset = state.position
        state.validate_at = 0.0
        state.move(FetchPhase.VALIDATING)

    def to_validate(self, node: int, leader_of: Callable[[str, int], int]) -> list[tuple[TP, int, int, int]]:
        """The partitions broker ``node`` leads that await validation now: [(partition, generation,
        the position's epoch, the partition's current leader epoch)]."""
        now = self.clock.monotonic()
        return [(key, s.generation, s.epoch, s.leader_epoch) for key, s in self.partitions.items()
                if s.phase is FetchPhase.VALIDATING and not s.paused and now >= s.validate_at
                and leader_of(*key) == node]

    def leader_epoch_of(self, key: TP) -> int:
        """The leader epoch a fetch of the partition names (its leader fences other epochs), -1 unknown."""
        state = self.partitions.get(key)
        return -1 if state is None else state.leader_epoch

    def on_validated(self, key: TP, generation: int, end_epoch: int, end_offset: int) -> bool:
        """The leader answered where the position's epoch ends. True when an event was queued."""
        state = self.partitions.get(key)
        if state is None or state.generation != generation or state.phase is not FetchPhase.VALIDATING:
            return False
        d = decide(state.position, state.epoch, end_epoch, end_offset, self.reset is None, f"{key[0]} [{key[1]}]")
        if d.verdict is Verdict.VALID:
            state.move(FetchPhase.FETCHING)
        elif d.verdict is Verdict.TRUNCATED:
            log.warning("%s [%d]: log truncation detected at offset %d (leader epoch %d): the leader's epoch %d "
                        "ends at %d; fetching from there", key[0], key[1], state.position, state.epoch,
                        end_epoch, end_offset)
            state.fetch_offset = state.position = d.offset
            state.epoch = d.leader_epoch
            state.eof_offset = OFFSET_INVALID
            state.move(FetchPhase.FETCHING)
        elif d.verdict is Verdict.RESET:
            log.warning("%s [%d]: the leader knows no epoch at or below %d (offset %d): auto.offset.reset",
                        key[0], key[1], state.epoch, state.position)
            state.fetch_offset = state.position = OFFSET_BEGINNING if self.reset == EARLIEST else OFFSET_END
            state.epoch = -1
            state.move(FetchPhase.AWAITING_RESET)
        else:  # STOP: reported once; seek() restarts it (resume() validates again)
            state.generation = next(self._generations)  # another broker's answer to the same question is dropped
            self._stop(key)
            self.error_event(key, d.error, d.offset)
            return True
        return False

    def on_validation_failed(self, key: TP, generation: int, error: RiverlogError) -> None:
        """The validation request failed: asked again after ``retry.backoff.ms`` (the caller refreshes
        metadata), as librdkafka retries even a permanent error; a broker without the call skips it."""
        state = self.partitions.get(key)
        if state is None or state.generation != generation or state.phase is not FetchPhase.VALIDATING:
            return
        if isinstance(error, UnsupportedVersionError):
            state.move(FetchPhase.FETCHING)
            return
        log.debug("%s [%d]: offset validation failed, asked again: %r", key[0], key[1], error)
        state.validate_at = self.clock.monotonic() + self.retry_backoff_s
