"""The producer's transaction manager: its lifecycle as an explicit state machine, and the identity
every idempotent batch carries (producer id, epoch, per-partition sequence numbers).

Pure and synchronous: no gRPC, no threads of its own, no clock (one lock, because the application's
thread and the sender thread both ask it). The requests that move it live elsewhere: the
coordinator calls in :mod:`broker.client.txn_requests`, the sender's InitProducerId for an
idempotent producer without ``transactional.id``. Kafka's Java client keeps the same things in its
``TransactionManager``, idempotent-only producers included; so does this one.

States (:data:`TRANSITIONS` is the table; every change goes through it and an illegal one raises
:class:`~broker.state_machine.IllegalStateTransition`)::

    UNINITIALIZED --init--> READY --begin--> IN_TRANSACTION --commit--> COMMITTING --> READY
                                                  |  \\--abort--> ABORTING --> READY
                                                  v                 ^
                                           ABORTABLE_ERROR --abort--/
    any --fenced--> FATAL_ERROR (final)

- **abortable**: a record of the transaction was not delivered (timed out, refused), or its
  offsets were refused (``send_offsets_to_transaction`` after a rebalance: ``IllegalGeneration``,
  ``UnknownMemberId``). The transaction can only be aborted: ``commit``, ``send_offsets`` and
  ``begin`` raise the error that put it there, reported with confluent-kafka's
  ``txn_requires_abort()`` true (:func:`~broker.errors.requiring_abort`), and ``produce`` refuses
  records (``_STATE``, as librdkafka); queued records of it fail at once (:meth:`doomed`). If a failed
  batch had been sent, its partition's sequence numbers have a gap, so after the abort the producer
  asks the coordinator for its next epoch with its current producer id and epoch (KIP-360). The
  producer never picks an epoch itself.
- **fatal**: the producer was fenced (``ProducerFenced``, or a partition's ``InvalidProducerEpoch``:
  a newer instance with this transactional.id called ``init_transactions``, or the coordinator
  aborted the transaction and bumped the epoch). Every later call raises the same
  :class:`ProducerFencedError`, reported as librdkafka's ``_FENCED`` with ``fatal()`` true; the
  producer can only be closed. Only its successor may write. ``init_transactions`` refused for
  good (``InvalidTxnTimeout``: transaction.timeout.ms above the broker's maximum) is fatal too.

Sequence numbers are kept per partition with the producer id and epoch they were numbered under
(Kafka's ``TxnPartitionEntry``): a new epoch does not renumber anything by itself. A partition
numbered under an earlier identity is *stale* and starts from 0 at its next new batch; one whose
numbering *broke* (forgotten, refused, a sent batch given up) waits for a new epoch and then has
every batch it holds numbered again (:mod:`broker.client.send_policy` decides when).

A COMMITTING or ABORTING whose EndTxn went unanswered returns to the state it came from, so the
application may call commit or abort again, as before the attempt. Until it does (and while a
commit whose flush timed out is unfinished), :attr:`unfinished` names that call: the transaction
takes no more records, and the other calls are ``_CONFLICT``.

    m = TransactionManager("billing-app-1")
    m.new_epoch(7, 0); m.move(TxnState.READY)
    m.move(TxnState.IN_TRANSACTION)
    m.next_sequence(("orders", 0), 10)      # (7, 0, 0): the first batch's producer id, epoch, sequence
"""
from __future__ import annotations

import enum
import threading
from dataclasses import dataclass

from broker.errors import (InvalidProducerEpochError, ProducerFencedError, RiverlogError, StateError,
                           TransactionAbortableError, requiring_abort)
from broker.errors.kafka_error import KafkaError
from broker.records.batch import increment_sequence
from broker.state_machine import Transitions


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


S = TxnState
TRANSITIONS = Transitions("transactional producer", {
    S.UNINITIALIZED: {S.READY, S.FATAL_ERROR},
    S.READY: {S.READY, S.IN_TRANSACTION, S.FATAL_ERROR},
    S.IN_TRANSACTION: {S.COMMITTING, S.ABORTING, S.ABORTABLE_ERROR, S.FATAL_ERROR},
    S.COMMITTING: {S.READY, S.IN_TRANSACTION, S.FATAL_ERROR},
    S.ABORTING: {S.READY, S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.FATAL_ERROR},
    S.ABORTABLE_ERROR: {S.ABORTING, S.FATAL_ERROR},
    S.FATAL_ERROR: set(),
})
# Errors that mean another instance (or the coordinator) took this producer's epoch over.
FENCING = (ProducerFencedError, InvalidProducerEpochError)


class TransactionManager:
    """One producer's transaction state and idempotent identity (``transactional_id`` None: an
    idempotent producer without transactions, which only uses the identity part)."""

    def __init__(self, transactional_id: str | None = None):
        self.transactional_id = transactional_id
        self.state = TxnState.UNINITIALIZED
        self.lock = threading.RLock()
        self.producer_id = -1
        self.producer_epoch = 0
        self._sequences: dict[tuple[str, int], _Sequences] = {}
        self.partitions: set[tuple[str, int]] = set()  # registered with the coordinator (AddPartitionsToTxn)
        # Anything (partitions, a group's offsets) was sent to the coordinator in this transaction
        # (Kafka's transactionStarted): if not, ending it needs no EndTxn.
        self.started = False
        self.error: RiverlogError | None = None  # why the transaction can only abort (the first failure)
        # The end call (commit_transaction / abort_transaction) that failed after its EndTxn may have
        # reached the coordinator; only the same call may resume (librdkafka's txn_curr_api).
        self.unfinished: str | None = None
        self.fatal_error: RiverlogError | None = None  # why the producer can only be closed

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    # ------------------------------------------------------------------------------ state
    def move(self, target: TxnState) -> None:
        """Change state through the table; a fenced producer raises its fatal error instead."""
        with self.lock:
            if self.state is TxnState.FATAL_ERROR:
                raise self.fatal_error
            self.state = TRANSITIONS.move(self.state, target)

    def require(self, *states: TxnState) -> None:
        """Refuse an application call the current state does not allow, saying what it needs: a
        fatal producer raises its fatal error, an abortable transaction the error that made it so
        (``txn_requires_abort()``), any other state :class:`StateError` (librdkafka's ``_STATE``)."""
        if self.state is TxnState.FATAL_ERROR:
            raise self.fatal_error
        if self.state not in states:
            if self.state is TxnState.ABORTABLE_ERROR:
                raise self.abort_reason()
            raise StateError(f"transactional producer is {self.state.value}; this needs it to be "
                             f"{' or '.join(s.value for s in states)}")

    def abort_reason(self) -> RiverlogError:
        """The error that made the transaction abortable, as every refused call reports it."""
        return requiring_abort(self.error or TransactionAbortableError(
            f"transactional.id '{self.transactional_id}': the transaction can only be aborted"))

    @property
    def in_transaction(self) -> bool:
        """Open and accepting records: not once commit or abort has begun (librdkafka's ``txn_may_enq``)."""
        return self.state is TxnState.IN_TRANSACTION and self.unfinished is None

    def check_can_produce(self) -> None:
        """Records join a transaction only inside it, and not once it can only abort (librdkafka's
        ``rd_kafka_txn_may_enq_msg``: ``_STATE``)."""
        state = self.state
        if state is TxnState.FATAL_ERROR:
            raise self.fatal_error
        if state is TxnState.ABORTABLE_ERROR:
            raise StateError(f"the transaction can only be aborted ({self.error}): call abort_transaction(), "
                             "then begin_transaction() and produce again")
        if state is not TxnState.IN_TRANSACTION:
            raise StateError("a transactional producer produces only inside begin_transaction()")
        if self.unfinished is not None:
            raise StateError(f"{self.unfinished}() has begun and must be called again to finish; the "
                             "transaction takes no more records")

    def begin(self) -> None:
        with self.lock:
            self.require(TxnState.READY)
            self.partitions, self.error, self.started = set(), None, False
            self.move(TxnState.IN_TRANSACTION)

    def doomed(self) -> RiverlogError | None:
        """Why queued records must fail rather than be sent (asked by the sender thread)."""
        state = self.state
        if state is TxnState.FATAL_ERROR:
            return self.fatal_error
        if state in (TxnState.ABORTABLE_ERROR, TxnState.ABORTING):
            return self.error
        return None

    def failed(self, error: RiverlogError) -> ProducerFencedError | None:
        """A record was not delivered: fatal if fenced, else the transaction can only abort.
        Returns the fatal error when fenced."""
        if not self.transactional:
            return None
        if isinstance(error, FENCING):
            return self.fenced(error)
        self.abortable(error)
        return None

    def abortable(self, error: RiverlogError) -> RiverlogError:
        """The open transaction cannot commit because of ``error`` (kept if it is the first):
        returns the error to raise, with ``txn_requires_abort()``."""
        with self.lock:
            if self.state is TxnState.IN_TRANSACTION:
                self.error = error
                self.move(TxnState.ABORTABLE_ERROR)
            if self.state is TxnState.FATAL_ERROR:
                return self.fatal_error
            return requiring_abort(self.error or error)

    def fatal(self, error: RiverlogError) -> RiverlogError:
        """Enter the final state for a reason other than fencing (``init_transactions`` refused for
        good): every later call raises ``error``, reported ``fatal()``."""
        with self.lock:
            if self.fatal_error is None:
                self.fatal_error = error.reported_as(fatal=True)
                self.state = TRANSITIONS.move(self.state, TxnState.FATAL_ERROR)
            return self.fatal_error

    def fenced(self, cause: RiverlogError) -> ProducerFencedError:
        """Enter the final state: this producer's epoch belongs to another instance now."""
        with self.lock:
            if self.fatal_error is None:
                self.fatal_error = ProducerFencedError(
                    f"transactional.id '{self.transactional_id}': this producer (producer id {self.producer_id}, "
                    f"epoch {self.producer_epoch}) is fenced: a newer instance with the same transactional.id "
                    "called init_transactions(), or the coordinator aborted its transaction "
                    f"(transaction.timeout.ms, or an operator). It can only be closed: close() it and let the "
                    f"newer instance carry on (or create a new Producer and call init_transactions()). "
                    f"Cause: {cause.message if isinstance(cause, RiverlogError) else cause}"
                ).reported_as(kafka_code=KafkaError._FENCED)  # librdkafka's fatal error for fencing
                self.state = TRANSITIONS.move(self.state, TxnState.FATAL_ERROR)
            return self.fatal_error

    # ------------------------------------------------------------------------------ identity
    def new_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """The one place that moves the producer to a new epoch: one the broker handed out in an
        InitProducerId answer. A partition moves to it at its next batch once nothing numbered under
        its old identity is left (:meth:`stale`); a partition whose numbering broke (:meth:`renumber`)
        starts from 0 under it with every batch it holds."""
        with self.lock:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch

    @property
    def epoch_bump_needed(self) -> bool:
        """A partition's sequence numbers under the current epoch have a gap or were forgotten."""
        return bool(self.awaiting_epoch())

    def needs_producer_id(self) -> bool:
        """Nothing may be sent before the broker gave an id, or (a partition's numbering broke) a new epoch."""
        return self.producer_id < 0 or self.epoch_bump_needed

    def awaiting_epoch(self) -> list[tuple[str, int]]:
        """The partitions that wait for a new epoch: their numbering under the current one broke."""
        with self.lock:
            current = (self.producer_id, self.producer_epoch)
            return [key for key, s in self._sequences.items() if s.broken and s.identity == current]

    def waits_for_epoch(self, key: tuple[str, int]) -> bool:
        """The partition's numbering under the current epoch broke: it waits for a new epoch."""
        s = self._sequences.get(key)
        return s is not None and s.broken and s.identity == (self.producer_id, self.producer_epoch)

    def stale(self, key: tuple[str, int]) -> bool:
        """The partition's batches were numbered under an earlier producer id or epoch."""
        s = self._sequences.get(key)
        return s is not None and s.identity != (self.producer_id, self.producer_epoch)

    def must_start_over(self, key: tuple[str, int]) -> bool:
        """Stale and broken: every batch it holds is numbered again from 0 under the current epoch."""
        s = self._sequences.get(key)
        return s is not None and s.broken and s.identity != (self.producer_id, self.producer_epoch)

    def start_at_beginning(self, key: tuple[str, int]) -> None:
        """Number the partition from 0 under the current producer id and epoch (Kafka's
        ``startSequencesAtBeginning``): the caller numbers its held batches again."""
        with self.lock:
            self._sequences[key] = _Sequences((self.producer_id, self.producer_epoch))

    def next_sequence(self, key: tuple[str, int], count: int) -> tuple[int, int, int]:
        """(producer id, epoch, base sequence) for the next ``count`` records of partition ``key``;
        a partition numbered under an earlier epoch starts at 0 (the caller sent everything it held
        under the old one first)."""
        with self.lock:
            s = self._sequences.get(key)
            if s is None or s.identity != (self.producer_id, self.producer_epoch):
                s = self._sequences[key] = _Sequences((self.producer_id, self.producer_epoch))
            seq, s.next = s.next, increment_sequence(s.next, count)  # wraps to 0 as Kafka's
            return self.producer_id, self.producer_epoch, seq

    def gave_up(self, key: tuple[str, int], base_sequence: int | None, producer_epoch: int) -> None:
        """A batch will never be written. If it was sent, later sequence numbers of its partition
        would wait for it forever: the partition starts over under a new epoch (at once without
        transactions, after the abort with them; at once if the producer already moved on)."""
        if base_sequence is not None:
            self.renumber(key, {producer_epoch})

    def forgotten(self, key: tuple[str, int], epochs) -> None:
        """A partition forgot this producer (UnknownProducerId, idle past producer.id.expiration.ms):
        a new epoch from the broker numbers from 0 again, which any partition accepts (KIP-360)."""
        self.renumber(key, epochs)

    def renumber(self, key: tuple[str, int], epochs) -> None:
        """The partition's numbering (if under one of ``epochs``) cannot go on: its batches are
        numbered again from 0 under the next epoch, or the current one if it is stale already."""
        with self.lock:
            s = self._sequences.get(key)
            if s is not None and s.identity[1] in epochs:
                s.broken = True


@dataclass
class _Sequences:
    """One partition's numbering (Kafka's ``TxnPartitionEntry``): the producer id and epoch its
    batches carry, the next sequence, and whether it broke (refused, forgotten, a sent batch given up)."""
    identity: tuple[int, int]
    next: int = 0
    broken: bool = False
