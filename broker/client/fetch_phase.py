"""One assigned partition's fetch lifecycle: its phase, position and flags, as an explicit state
machine (``FETCH_PHASES``), as Kafka's ``SubscriptionState`` has its fetch states:

    AWAITING_RESET --ListOffsets answered / seek(offset)--> FETCHING
    FETCHING --a batch it cannot decode--> HALTED
    FETCHING --its leader epoch grew / FENCED_LEADER_EPOCH--> VALIDATING (KIP-320, a position with an epoch)
    VALIDATING --valid / log truncated--> FETCHING;  --no epoch known, auto.offset.reset--> FETCHING or AWAITING_RESET
    FETCHING --OffsetOutOfRange, auto.offset.reset=earliest--> FETCHING (a new generation)
    FETCHING --OffsetOutOfRange, auto.offset.reset=latest--> AWAITING_RESET (a new generation)
    any --seek(offset)--> FETCHING;  any --seek(a logical offset)--> AWAITING_RESET

Pausing is a flag beside the phase, not a phase, because ``resume()`` must return a partition to
wherever it was (a halted partition stays halted) and Kafka keeps it apart the same way. Kept apart
from ``broker.client.fetch_state``, which moves these states, so the table is read in one place.
"""
from __future__ import annotations

import enum

from broker.client.fetch_buffer import Chunk
from broker.client.message import TopicPartition
from broker.state_machine import Transitions


class FetchPhase(enum.Enum):
    AWAITING_RESET = "AwaitingReset"  # no offset yet: ListOffsets (or auto.offset.reset) decides
    FETCHING = "Fetching"             # has a fetch offset and is fetched from its leader
    HALTED = "Halted"                 # stopped at a batch it cannot decode, until seek()/assign()
    VALIDATING = "AwaitingValidation"  # not fetched until the leader says where the position's epoch ends


FETCH_PHASES = Transitions("partition fetch", {
    FetchPhase.AWAITING_RESET: {FetchPhase.AWAITING_RESET, FetchPhase.FETCHING},
    FetchPhase.FETCHING: {FetchPhase.FETCHING, FetchPhase.AWAITING_RESET, FetchPhase.HALTED, FetchPhase.VALIDATING},
    FetchPhase.HALTED: {FetchPhase.FETCHING, FetchPhase.AWAITING_RESET},
    FetchPhase.VALIDATING: {FetchPhase.VALIDATING, FetchPhase.FETCHING, FetchPhase.AWAITING_RESET},
})


class PartitionState:
    """One assigned partition. ``fetch_offset`` runs ahead of ``position`` by what is prefetched."""
    __slots__ = ("fetch_offset", "position", "generation", "phase", "paused", "high_watermark",
                 "log_start_offset", "eof_offset", "stopped", "aside", "stored", "served", "epoch",
                 "leader_epoch", "validate_at")

    def __init__(self, offset: int, generation: int = 0, epoch: int = -1):
        self.fetch_offset = offset
        self.position = offset
        self.epoch = epoch if offset >= 0 else -1  # the position's leader epoch (KIP-320), -1 unknown
        self.leader_epoch = -1  # the partition's leader epoch in the metadata last seen
        self.validate_at = 0.0  # a failed validation is asked again from this (monotonic) time on
        self.generation = generation
        self.phase = FetchPhase.FETCHING if offset >= 0 else FetchPhase.AWAITING_RESET
        self.paused = False
        self.high_watermark = -1
        self.log_start_offset = -1
        self.eof_offset = -1  # the end offset _PARTITION_EOF was last reported at (librdkafka's eof_offset)
        self.stopped = False  # paused by the consumer after an error event: seek() restarts it too
        self.aside: list[Chunk] = []  # a halted partition's records, kept out of poll() while paused
        self.stored: TopicPartition | None = None  # store_offsets(): what an argument-less commit commits
        self.served = 0  # when a fetch last returned records for it (FetchState._served): fetch order

    def move(self, phase: FetchPhase) -> None:
        self.phase = FETCH_PHASES.move(self.phase, phase)

    @property
    def halted(self) -> bool:
        return self.phase is FetchPhase.HALTED
