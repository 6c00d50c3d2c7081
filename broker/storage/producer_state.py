"""Idempotent producers' state in one partition: which batches each producer id wrote last.

A producer with ``enable.idempotence`` numbers its batches per partition (``base_sequence`` in
the batch header, counting records from 0) under a producer id and epoch. The leader checks each
batch against this state before appending: a batch it already holds (one of the last
``IDEMPOTENCE_WINDOW`` of that producer) is a resend and is answered with the offsets it got
the first time; a batch that skips sequence numbers is refused (``OutOfOrderSequence``), as is one
from an older epoch of the producer (``InvalidProducerEpoch``). Followers apply the same batches
without checks, so a new leader knows every producer its predecessor did.

A producer that has written nothing here for ``producer.id.expiration.ms`` and has no open
transaction is forgotten (:meth:`ProducerStateManager.expire`), as in Kafka: otherwise every
producer id ever seen (the exactly-once Spark sink uses new ones all the time) would stay in memory
and in every snapshot. A *transactional* batch of a producer unknown here is accepted whatever its
sequence number, as Kafka's ``ProducerAppendInfo.checkSequence`` accepts any producer it holds no
state for: a transactional producer cannot renumber inside a transaction (its epoch is fixed until
the transaction ends), so refusing it would fail every transaction after a partition went idle
longer than ``producer.id.expiration.ms``; zombies are still fenced by epoch and markers. A plain
idempotent producer's batch must start at sequence 0 (else ``UnknownProducerId``): Riverlog keeps
this stricter rule there because such a producer recovers by taking a new epoch (KIP-360), and the
rule keeps its pipelined batches in order when a partition's very first batch is refused (a
later batch cannot be written ahead of it).

"Written nothing for" is measured on the leader's clock, not on the batches' own timestamps
(Kafka's ``ProducerStateManager.isProducerExpired`` uses the batch's ``maxTimestamp``, so a
producer replaying old event times is forgotten at once). A follower, or a replay after a
restart, has no leader clock for a batch: its producer is marked *unclocked* and the next
:meth:`~ProducerStateManager.expire` pass stamps it with that pass's time instead of judging it
by the batch's timestamp. Otherwise followers would forget, by its records' old timestamps, a
producer the leader still keeps, and after a failover the new leader would answer its next batch
``UnknownProducerId``: a batch in flight across the failover would then be resent under a new
epoch and written twice.

Transactions: the first offset of each producer's open transaction in this partition (the
smallest of them holds the last stable offset back), and the aborted transactions' offset ranges
(``read_committed`` fetches return the ones they overlap, so consumers skip those records). A
transaction marker (control batch) ends a producer's open transaction, but the transaction still
holds the last stable offset back until the high watermark passes its marker (Kafka's
``ProducerStateManager.unreplicatedTxns``, dropped by ``onHighWatermarkUpdated``): until every
in-sync replica holds the marker, a new leader may not have it, and the transaction's records
would then be pending again (and possibly aborted) after read_committed consumers had read them.

Each producer also keeps the coordinator epoch of the last transaction marker written for it
(Kafka's ``ProducerStateEntry.coordinatorEpoch``): the leader epoch of the ``__transaction_state``
partition whose leader sent the marker. A marker with a lower coordinator epoch comes from a
deposed coordinator, which may still be retrying markers of a transaction its successor already
finished; the leader refuses it (``TransactionCoordinatorFenced``, Kafka's
``ProducerAppendInfo.checkCoordinatorEpoch``), or it would end the producer's *next* transaction
early and expose its records to ``read_committed`` readers before the producer decided. Followers
and a replay take the marker's epoch as it is, so every replica and a restarted broker know it.

The state is written to ``producer-state.json`` beside the log (at clean shutdown and when a
segment rolls) with the offset it is valid up to; opening a log loads it and replays the batch
headers after that offset, so a restart does not forget producers. The last snapshots it replaced
are kept for a log cut below it (``broker.storage.producer_snapshots``). Unlike Kafka's snapshot it
also keeps the completed transactions not yet below the high watermark: a restarted broker's high
watermark starts at the log start, not at a checkpoint, so a transaction completed before the
restart stays unstable until the high watermark is known to pass its marker again.

Plain and synchronous; the partition's lock covers every call.
"""
from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field

from broker.errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError,
                           TransactionCoordinatorFencedError, UnknownProducerIdError)
from broker.records.batch import IDEMPOTENCE_WINDOW, BatchHeader, increment_sequence
from broker.storage.checkpoint import write_atomically
from broker.storage.producer_snapshots import clear_history, keep_history

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
    batches: deque = field(default_factory=lambda: deque(maxlen=IDEMPOTENCE_WINDOW))
    txn_first_offset: int = -1  # first offset of its open transaction here, -1 when none
    txn_start_ms: int = -1
    last_timestamp: int = -1  # of its last write, on the leader's clock (see ``clocked``)
    clocked: bool = True  # False: last written without the leader's clock (replicated or replayed)
    coordinator_epoch: int = -1  # of the last transaction marker written for it, -1 when none

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction whose marker is written here but not yet below the high watermark."""
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


def _check_transaction_state(pid: int, entry: "ProducerEntry", header: BatchHeader) -> None:
    """A producer with a transaction open here writes only transactional batches until its marker
    (Kafka's ``ProducerAppendInfo.appendDataBatch``: INVALID_TXN_STATE): a plain batch in the middle
    of a transaction would be neither part of it nor ordered after it."""
    if entry.txn_first_offset >= 0 and not header.is_transactional:
        raise InvalidTxnStateError(
            f"producer {pid} sent a non-transactional batch while its transaction (from offset "
            f"{entry.txn_first_offset}) is open in this partition; end the transaction first")


def _sequences(header: BatchHeader) -> tuple[int, int]:
    return header.base_sequence, increment_sequence(header.base_sequence, header.last_offset_delta)


class ProducerStateManager:
    def __init__(self, directory: str | None = None):
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        self.aborted: list[AbortedTxn] = []  # in marker order
        self.unreplicated: list[CompletedTxn] = []  # in marker order; see the module's docstring
        self._on_disk: bytes | None = None  # the snapshot file's content, when this object wrote or read it

    # ------------------------------------------------------------------------------ checks
    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a batch the leader is about to append; the earlier append when it is a resend."""
        pid = header.producer_id
        if pid < 0:
            return None
        first, last = _sequences(header)
        entry = self.producers.get(pid)
        if entry is None:  # new here, expired, or removed by retention
            if first != 0 and not header.is_transactional:
                raise UnknownProducerIdError(
                    f"producer {pid} is unknown to this partition and sent sequence {first}: its state "
                    "expired (producer.id.expiration.ms) or its records were removed by retention")
            return None
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {pid} wrote with epoch {header.producer_epoch}; epoch {entry.epoch} has "
                "taken over (a newer producer instance fenced this one)")
        if header.producer_epoch > entry.epoch:
            if first != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {header.producer_epoch} must start at sequence 0, got {first}")
            _check_transaction_state(pid, entry, header)
            return None
        for cached in entry.batches:
            if cached.first_sequence == first and cached.last_sequence == last:
                return cached
        expected = increment_sequence(entry.last_sequence, 1)  # after MAX_SEQUENCE comes 0
        if first != expected:
            raise OutOfOrderSequenceError(
                f"producer {pid} sent sequence {first} to a partition that expects {expected}")
        _check_transaction_state(pid, entry, header)
        return None

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int,
                     partition: str) -> None:
        """Validate a transaction marker the leader is about to append (Kafka's
        ``ProducerAppendInfo.appendEndTxnMarker``: ``checkProducerEpoch``, then
        ``checkCoordinatorEpoch``)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id} epoch {producer_epoch}; epoch {entry.epoch} took over")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producerId {producer_id} at offset {offset} in partition "
                f"{partition}: {coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)")

    # ------------------------------------------------------------------------------ updates
    def update(self, header: BatchHeader, first_offset: int, last_offset: int, now_ms: int | None = None) -> None:
        """Record an appended batch (leader or follower). ``now_ms``: the leader's clock, for when a
        transaction opened (a follower or a replay uses the batch's own timestamp)."""
        pid = header.producer_id
        if pid < 0:
            return
        entry = self._entry(pid, header.producer_epoch)
        first, last = _sequences(header)
        entry.batches.append(BatchMetadata(first, last, first_offset, last_offset, header.max_timestamp))
        entry.last_timestamp = header.max_timestamp if now_ms is None else now_ms
        entry.clocked = now_ms is not None
        if header.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
            entry.txn_start_ms = header.max_timestamp if now_ms is None else now_ms

    def _entry(self, pid: int, epoch: int) -> ProducerEntry:
        entry = self.producers.get(pid)
        if entry is None or epoch > entry.epoch:
            kept = ((entry.txn_first_offset, entry.txn_start_ms, entry.coordinator_epoch) if entry is not None
                    else (-1, -1, -1))
            entry = self.producers[pid] = ProducerEntry(epoch)
            entry.txn_first_offset, entry.txn_start_ms, entry.coordinator_epoch = kept
        return entry

    def end_transaction(self, header: BatchHeader, marker_offset: int, commit: bool,
                        coordinator_epoch: int | None = None) -> None:
        """A transaction marker of ``header.producer_id`` at ``marker_offset``, written by the
        coordinator of ``coordinator_epoch`` (None: not known, the producer's stays). The
        transaction stays unstable until :meth:`on_high_watermark_updated` passes the marker
        (Kafka's ``completeTxn``)."""
        entry = self._entry(header.producer_id, header.producer_epoch)
        if coordinator_epoch is not None:
            entry.coordinator_epoch = coordinator_epoch
        if entry.txn_first_offset >= 0:
            self.unreplicated.append(CompletedTxn(header.producer_id, entry.txn_first_offset, marker_offset))
            if not commit:
                self.aborted.append(AbortedTxn(header.producer_id, entry.txn_first_offset, marker_offset))
        entry.txn_first_offset, entry.txn_start_ms = -1, -1
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)

    def expire(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for ``expiration_ms`` with no open transaction; their ids. An
        unclocked producer (written by replication or replay) is stamped ``now_ms`` instead: its
        batches' own timestamps say nothing about when the leader last heard from it."""
        for e in self.producers.values():
            if not e.clocked:
                e.last_timestamp, e.clocked = now_ms, True
        gone = [pid for pid, e in self.producers.items()
                if e.txn_first_offset < 0 and 0 <= e.last_timestamp <= now_ms - expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return gone

    def replay(self, batches) -> None:
        """Rebuild from ``(header, load)`` pairs, oldest first (after a snapshot, or after
        truncation); ``load()`` gives a control batch's bytes, to tell commit from abort and to read
        the coordinator epoch."""
        from broker.records.control import COMMIT, read_marker
        for header, load in batches:
            if header.is_control:
                if header.producer_id >= 0:
                    kind, coordinator_epoch = read_marker(load())
                    self.end_transaction(header, header.base_offset, kind == COMMIT, coordinator_epoch)
            else:
                self.update(header, header.base_offset, header.last_offset)

    # ------------------------------------------------------------------------------ transactions
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open or whose marker is not yet below
        the high watermark (the last stable offset), or None (Kafka's ``firstUnstableOffset``)."""
        unstable = [e.txn_first_offset for e in self.producers.values() if e.txn_first_offset >= 0]
        unstable.extend(t.first_offset for t in self.unreplicated)
        return min(unstable) if unstable else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below ``high_watermark`` are stable now (Kafka's
        ``onHighWatermarkUpdated``/``removeUnreplicatedTransactions``)."""
        if self.unreplicated and self.unreplicated[0].last_offset < high_watermark:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]

    def open_transactions(self) -> list[tuple[int, int, int, int]]:
        """(producer id, epoch, first offset, start ms) of every open transaction, oldest first."""
        return sorted(((pid, e.epoch, e.txn_first_offset, e.txn_start_ms) for pid, e in self.producers.items()
                       if e.txn_first_offset >= 0), key=lambda t: t[2])

    def active(self) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last write ms, open transaction's first offset or -1)
        of every producer remembered here, by id."""
        return [(pid, e.epoch, e.last_sequence, e.last_timestamp, e.txn_first_offset)
                for pid, e in sorted(self.producers.items())]

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [start, end)."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < end]

    def truncate(self, log_start: int) -> None:
        """Forget aborted ranges wholly below the log start."""
        self.aborted = [a for a in self.aborted if a.last_offset >= log_start]

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and aborted range: the log restarted empty at ``offset`` (Kafka's
        ``ProducerStateManager.truncateFullyAndStartAt``). The snapshot says so at once, so a
        restart does not bring back producers of records that are gone."""
        self.producers, self.aborted, self.unreplicated = {}, [], []
        if self.directory is not None:
            clear_history(self.directory)
        self.snapshot(offset)

    # ------------------------------------------------------------------------------ snapshots
    def snapshot(self, offset: int) -> None:
        """Persist the state as valid for every batch below ``offset``."""
        if self.directory is None:
            return
        doc = {"offset": offset, "producers": {
            str(pid): {"epoch": e.epoch, "txn": [e.txn_first_offset, e.txn_start_ms], "last": e.last_timestamp,
                       "clocked": e.clocked, "coordinator_epoch": e.coordinator_epoch,
                       "batches": [[b.first_sequence, b.last_sequence, b.first_offset, b.last_offset, b.timestamp]
                                   for b in e.batches]}
            for pid, e in self.producers.items()},
            "aborted": [[a.producer_id, a.first_offset, a.last_offset] for a in self.aborted],
            "unreplicated": [[t.producer_id, t.first_offset, t.last_offset] for t in self.unreplicated]}
        data = json.dumps(doc).encode()
        path = os.path.join(self.directory, SNAPSHOT_FILE)
        if data == self._on_disk and os.path.exists(path):
            return  # e.g. an idle partition at shutdown: the file already says this
        keep_history(self.directory, path, offset)
        write_atomically(path, data)
        self._on_disk = data

    def load(self) -> int:
        """Load the snapshot; returns the offset it is valid up to (0 when there is none)."""
        self.producers, self.aborted, self.unreplicated, self._on_disk = {}, [], [], None
        path = None if self.directory is None else os.path.join(self.directory, SNAPSHOT_FILE)
        if path is None or not os.path.exists(path):
            return 0
        try:
            with open(path, "rb") as f:
                raw = f.read()
            doc = json.loads(raw)
        except (OSError, ValueError):
            return 0  # unreadable: rebuilt from the log
        self._on_disk = raw
        for pid, e in doc["producers"].items():
            entry = self.producers[int(pid)] = ProducerEntry(e["epoch"])
            entry.batches.extend(BatchMetadata(*b) for b in e["batches"])
            entry.txn_first_offset, entry.txn_start_ms = e.get("txn", [-1, -1])
            entry.last_timestamp = e.get("last", entry.batches[-1].timestamp if entry.batches else -1)
            entry.clocked = e.get("clocked", True)
            entry.coordinator_epoch = e.get("coordinator_epoch", -1)
        self.aborted = [AbortedTxn(*a) for a in doc.get("aborted", [])]
        self.unreplicated = [CompletedTxn(*t) for t in doc.get("unreplicated", [])]
        return doc["offset"]
