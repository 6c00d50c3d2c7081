"""Idempotent producers' state in one partition: which batches each producer id wrote last.

A producer with ``enable.idempotence`` numbers its batches per partition (``base_sequence`` in
the batch header, counting records from 0) under a producer id and epoch. The leader checks each
batch against this state before appending: a batch it already holds (one of the last
``MAX_CACHED`` of that producer, as in Kafka) is a resend and is answered with the offsets it got
the first time; a batch that skips sequence numbers is refused (``OutOfOrderSequence``), as is one
from an older epoch of the producer (``InvalidProducerEpoch``). Followers apply the same batches
without checks, so a new leader knows every producer its predecessor did.

The state is written to ``producer-state.json`` beside the log (at clean shutdown and when a
segment rolls) with the offset it is valid up to; opening a log loads it and replays the batch
headers after that offset, so a restart does not forget producers.

Plain and synchronous; the partition's lock covers every call.
"""
from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field

from broker.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from broker.records.batch import BatchHeader
from broker.storage.checkpoint import write_atomically

MAX_CACHED = 5
SNAPSHOT_FILE = "producer-state.json"


@dataclass(frozen=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_CACHED))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


def _sequences(header: BatchHeader) -> tuple[int, int]:
    return header.base_sequence, header.base_sequence + header.last_offset_delta


class ProducerStateManager:
    def __init__(self, directory: str | None = None):
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}

    # ------------------------------------------------------------------------------ checks
    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a batch the leader is about to append; the earlier append when it is a resend."""
        pid = header.producer_id
        if pid < 0:
            return None
        first, last = _sequences(header)
        entry = self.producers.get(pid)
        if entry is None:
            if first != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} is unknown to this partition and sent sequence {first}; a new "
                    "producer starts at 0 (were its records removed by retention?)")
            return None
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {pid} wrote with epoch {header.producer_epoch}; epoch {entry.epoch} has "
                "taken over (a newer producer instance fenced this one)")
        if header.producer_epoch > entry.epoch:
            if first != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {header.producer_epoch} must start at sequence 0, got {first}")
            return None
        for cached in entry.batches:
            if cached.first_sequence == first and cached.last_sequence == last:
                return cached
        expected = entry.last_sequence + 1
        if first != expected:
            raise OutOfOrderSequenceError(
                f"producer {pid} sent sequence {first} to a partition that expects {expected}")
        return None

    # ------------------------------------------------------------------------------ updates
    def update(self, header: BatchHeader, first_offset: int, last_offset: int) -> None:
        """Record an appended batch (leader or follower)."""
        pid = header.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        if entry is None or header.producer_epoch > entry.epoch:
            entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
        first, last = _sequences(header)
        entry.batches.append(BatchMetadata(first, last, first_offset, last_offset, header.max_timestamp))

    def replay(self, headers) -> None:
        """Rebuild from batch headers, oldest first (after a snapshot, or after truncation)."""
        for header in headers:
            if not header.is_control:
                self.update(header, header.base_offset, header.last_offset)

    # ------------------------------------------------------------------------------ snapshots
    def snapshot(self, offset: int) -> None:
        """Persist the state as valid for every batch below ``offset``."""
        if self.directory is None:
            return
        doc = {"offset": offset, "producers": {
            str(pid): {"epoch": e.epoch, "batches": [[b.first_sequence, b.last_sequence, b.first_offset,
                                                      b.last_offset, b.timestamp] for b in e.batches]}
            for pid, e in self.producers.items()}}
        write_atomically(os.path.join(self.directory, SNAPSHOT_FILE), json.dumps(doc).encode())

    def load(self) -> int:
        """Load the snapshot; returns the offset it is valid up to (0 when there is none)."""
        self.producers = {}
        path = None if self.directory is None else os.path.join(self.directory, SNAPSHOT_FILE)
        if path is None or not os.path.exists(path):
            return 0
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read())
        except (OSError, ValueError):
            return 0  # unreadable: rebuilt from the log
        for pid, e in doc["producers"].items():
            entry = self.producers[int(pid)] = ProducerEntry(e["epoch"])
            entry.batches.extend(BatchMetadata(*b) for b in e["batches"])
        return doc["offset"]
