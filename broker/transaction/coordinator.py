"""Transactions of one ``__transaction_state`` partition, and the records that persist them.

Pure and synchronous, like :mod:`broker.group.coordinator`. A ``transactional.id`` maps to one
producer id; each ``init_transactions`` bumps its epoch, which fences every older instance.

Only the coordinator hands out epochs. A producer that needs a new epoch without being a new
instance (it gave up on a batch it had sent, so its sequence numbers have a gap: Kafka's KIP-360)
asks with its current producer id and epoch; the coordinator bumps only if that *is* the current
pair, and otherwise answers ``ProducerFenced``: a fenced producer can never obtain the epoch of
the instance that fenced it. ``last_producer_id``/``last_epoch`` remember the pair such a bump
replaced, so a retry whose answer was lost gets the same epoch again instead of being fenced; an
``init_transactions`` by a new instance, an abort by the coordinator, or a transaction opened under
the new epoch clears them: from then on the old pair is fenced, as in Kafka, so two instances that
shared an epoch are never both handed the next one.

States (Kafka's, :class:`TransactionState`): ``Empty`` → ``Ongoing`` (partitions or a group were
added) → ``PrepareCommit`` or ``PrepareAbort`` (the decision is durable; markers are being written)
→ ``CompleteCommit`` or ``CompleteAbort`` (markers written in every partition and group). The
runtime writes the markers between the prepare and complete steps; a coordinator that takes over a
partition finishes every transaction it finds prepared, so a decision, once durable, always
reaches every partition. Every change goes through :data:`TRANSITIONS`, so a move the protocol
does not have (completing a commit that was never prepared, reopening a prepared transaction)
fails where it is made instead of being written to ``__transaction_state`` and replayed forever.

A ``transactional.id`` with no open transaction and no change for ``transactional.id.expiration.ms``
is forgotten (a tombstone): the exactly-once Spark sink names a new one per task and micro-batch,
so without expiry the coordinator's state would only grow.

Records: key ``{"type": "txn", "id": transactional_id}``, value the metadata below.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.errors import (ConcurrentTransactionsError, InvalidProducerIdMappingError,
                           InvalidTxnStateError, InvalidTxnTimeoutError, ProducerFencedError,
                           TransactionalIdNotFoundError)
from broker.records.compacted import latest_values
from broker.state_machine import StrEnum, Transitions

TXN_TOPIC = "__transaction_state"


class TransactionState(StrEnum):
    """Where one ``transactional.id``'s transaction is. The values are Kafka's state names: they are
    what ``__transaction_state`` records hold (records written before this enum existed load as
    they are), what ListTransactions/DescribeTransactions answer and what ``riverlog transactions``
    prints. A ``StrEnum``, so a state equals its name (``TransactionState.ONGOING == "Ongoing"``).

    Kafka's ``PrepareEpochFence`` is not here: a coordinator abort bumps the epoch and prepares the
    abort in one durable step, so there is no moment at which the fence is pending."""

    EMPTY = "Empty"                      # no open transaction (a new id, or a new instance's epoch)
    ONGOING = "Ongoing"                  # partitions or groups were added
    PREPARE_COMMIT = "PrepareCommit"     # commit decided and durable; markers being written
    PREPARE_ABORT = "PrepareAbort"       # abort decided and durable; markers being written
    COMPLETE_COMMIT = "CompleteCommit"   # markers written everywhere
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"                        # forgotten after transactional.id.expiration.ms (a tombstone)


EMPTY, ONGOING = TransactionState.EMPTY, TransactionState.ONGOING
PREPARE_COMMIT, PREPARE_ABORT = TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT
COMPLETE_COMMIT, COMPLETE_ABORT = TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT
DEAD = TransactionState.DEAD
PREPARED = (PREPARE_COMMIT, PREPARE_ABORT)

#: Kafka's ``TransactionState.validPreviousStates`` (transaction-coordinator module), turned round
#: into allowed next states, for the states above and as of transaction version 1 (the protocol
#: Riverlog speaks: KIP-890's version 2 also lets ``Empty``/``Complete…`` go to ``PrepareAbort``,
#: because its clients may end a transaction they are unsure of; here ending one that is not open
#: is answered without a change). ``Ongoing`` → ``Ongoing`` is adding to an open transaction.
TRANSITIONS: Transitions[TransactionState] = Transitions("transaction", {
    EMPTY: {EMPTY, ONGOING, DEAD},
    ONGOING: {ONGOING, PREPARE_COMMIT, PREPARE_ABORT},
    PREPARE_COMMIT: {COMPLETE_COMMIT},
    PREPARE_ABORT: {COMPLETE_ABORT},
    COMPLETE_COMMIT: {EMPTY, ONGOING, DEAD},
    COMPLETE_ABORT: {EMPTY, ONGOING, DEAD},
    DEAD: set(),
})
MAX_EPOCH = 32766

Record = tuple[bytes, "bytes | None"]


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = EMPTY
    partitions: set = field(default_factory=set)   # {(topic, partition)}
    groups: set = field(default_factory=set)       # consumer groups with offsets in the transaction
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = -1  # the pair a KIP-360 bump replaced (-1: none), for its retries
    last_epoch: int = -1

    def __post_init__(self):
        self.state = TransactionState(self.state)  # a record's string, or a state

    @property
    def commit(self) -> bool:
        return self.state in (PREPARE_COMMIT, COMPLETE_COMMIT)

    def move(self, target: TransactionState) -> None:
        """The only way the state changes once the metadata exists: checked against
        :data:`TRANSITIONS` (raises ``IllegalStateTransition``, a bug, never retried)."""
        self.state = TRANSITIONS.move(self.state, target)

    def to_value(self) -> bytes:
        return json.dumps({"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                           "timeout_ms": self.timeout_ms, "state": self.state.value,
                           "partitions": sorted([t, p] for t, p in self.partitions), "groups": sorted(self.groups),
                           "start_ms": self.start_ms, "last_update_ms": self.last_update_ms,
                           "last_producer_id": self.last_producer_id, "last_epoch": self.last_epoch},
                          sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_value(cls, transactional_id: str, raw: bytes) -> "TransactionMetadata":
        v = json.loads(raw)
        return cls(transactional_id, v["producer_id"], v["producer_epoch"], v["timeout_ms"], v["state"],
                   {tuple(x) for x in v["partitions"]}, set(v["groups"]), v["start_ms"], v["last_update_ms"],
                   v.get("last_producer_id", -1), v.get("last_epoch", -1))


def _key(transactional_id: str) -> bytes:
    return json.dumps({"id": transactional_id, "type": "txn"}, sort_keys=True, separators=(",", ":")).encode()


class TransactionShard:
    def __init__(self, partition: int, max_timeout_ms: int = 900_000, expiration_ms: int = 604_800_000):
        self.partition = partition
        self.max_timeout_ms = max_timeout_ms
        self.expiration_ms = expiration_ms
        self.txns: dict[str, TransactionMetadata] = {}

    def load(self, records: Iterable[Record], now_ms: int) -> None:
        self.txns = {}
        for raw_key, raw_value in latest_values(records).items():
            txn_id = json.loads(raw_key)["id"]
            self.txns[txn_id] = TransactionMetadata.from_value(txn_id, raw_value)

    def _record(self, meta: TransactionMetadata, now_ms: int) -> list[Record]:
        meta.last_update_ms = now_ms
        return [(_key(meta.transactional_id), meta.to_value())]

    # ------------------------------------------------------------------------------ checks
    def _current(self, txn_id: str, producer_id: int, epoch: int) -> TransactionMetadata:
        return current(self.txns.get(txn_id), txn_id, producer_id, epoch)

    # ------------------------------------------------------------------------------ operations
    def init_producer_id(self, txn_id: str, timeout_ms: int, now_ms: int, new_producer_id,
                         expected: tuple[int, int] | None = None) -> tuple:
        """Returns (meta, records, abort_first): ``abort_first`` when an open transaction must be
        aborted (under the new epoch) before the new instance may start.

        ``expected``: the (producer id, epoch) of a producer asking for its own next epoch
        (KIP-360); refused with ``ProducerFenced`` unless it is the current pair (or the pair the
        last such bump replaced: a retry, answered with the current epoch and no change, until that
        epoch opens a transaction). While a transaction of the producer id is being completed the
        answer is ``ConcurrentTransactions`` whatever the epoch, as Kafka's
        ``prepareInitProducerIdTransit`` looks at the state first."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise InvalidTxnTimeoutError(f"transaction.timeout.ms={timeout_ms} must be within "
                                         f"(0, {self.max_timeout_ms}] (transaction.max.timeout.ms)")
        meta = self.txns.get(txn_id)
        if meta is None:  # new, or forgotten after transactional.id.expiration.ms: start afresh (as Kafka)
            meta = self.txns[txn_id] = TransactionMetadata(txn_id, new_producer_id(), 0, timeout_ms)
            return meta, self._record(meta, now_ms), False
        if expected is not None and expected != (meta.producer_id, meta.producer_epoch):
            retry = meta.last_epoch >= 0 and expected == (meta.last_producer_id, meta.last_epoch)
            if meta.state in PREPARED and (retry or expected[0] == meta.producer_id):
                # Kafka checks the state before the epoch: wait, then the retry is judged.
                raise ConcurrentTransactionsError(
                    f"transactional.id '{txn_id}' is completing its last transaction")
            if retry and meta.state != ONGOING:  # (Ongoing: a record written before _begin forgot the pair)
                if meta.producer_epoch > MAX_EPOCH:  # fenced with the last epoch
                    self._rotate(meta, new_producer_id)
                    return meta, self._record(meta, now_ms), False
                return meta, [], False
            raise ProducerFencedError(
                f"transactional.id '{txn_id}': producer id {expected[0]} epoch {expected[1]} was fenced; "
                f"producer id {meta.producer_id} epoch {meta.producer_epoch} has taken over (a newer "
                "instance called init_transactions, the coordinator aborted a transaction, or the epoch "
                "it was bumped to has started a transaction since)")
        if meta.state in PREPARED:
            raise ConcurrentTransactionsError(f"transactional.id '{txn_id}' is completing its last transaction")
        abort_first = meta.state == ONGOING
        replaced = (meta.producer_id, meta.producer_epoch)
        if abort_first:
            # The abort's markers must carry the open transaction's producer id: the epoch goes up
            # to MAX_EPOCH + 1 (int16's largest) and the caller asks again for a new producer id
            # (Kafka's prepareFenceProducerEpoch, whose client retries after CONCURRENT_TRANSACTIONS).
            meta.producer_epoch += 1
            meta.move(PREPARE_ABORT)
        elif meta.producer_epoch >= MAX_EPOCH:
            self._rotate(meta, new_producer_id)
        else:
            meta.producer_epoch += 1
            meta.move(EMPTY)
            meta.partitions, meta.groups, meta.start_ms = set(), set(), -1
        meta.last_producer_id, meta.last_epoch = replaced if expected is not None else (-1, -1)
        meta.timeout_ms = timeout_ms
        return meta, self._record(meta, now_ms), abort_first

    @staticmethod
    def _rotate(meta: TransactionMetadata, new_producer_id) -> None:
        """The producer id's epochs are used up: a new producer id at epoch 0, no open transaction."""
        meta.producer_id, meta.producer_epoch = new_producer_id(), 0
        meta.move(EMPTY)
        meta.partitions, meta.groups, meta.start_ms = set(), set(), -1

    def add_partitions(self, txn_id: str, producer_id: int, epoch: int, partitions, now_ms: int) -> list[Record]:
        meta = self._current(txn_id, producer_id, epoch)
        was_open = meta.state == ONGOING
        self._begin(meta, now_ms)
        new = set(partitions) - meta.partitions
        if was_open and not new:
            return []
        meta.partitions |= new
        return self._record(meta, now_ms)

    def add_group(self, txn_id: str, producer_id: int, epoch: int, group_id: str, now_ms: int) -> list[Record]:
        """As :meth:`add_partitions` (Kafka's AddOffsetsToTxn adds the group's offsets partition):
        a group already in the open transaction is answered without a write."""
        meta = self._current(txn_id, producer_id, epoch)
        was_open = meta.state == ONGOING
        self._begin(meta, now_ms)
        if was_open and group_id in meta.groups:
            return []
        meta.groups.add(group_id)
        return self._record(meta, now_ms)

    @staticmethod
    def _begin(meta: TransactionMetadata, now_ms: int) -> None:
        opening = meta.state != ONGOING
        meta.move(ONGOING)
        if opening:
            meta.partitions, meta.groups, meta.start_ms = set(), set(), now_ms
            # The bumped epoch is in use: a retry of the bump is now a late copy or another instance
            # that shared the old epoch, and is fenced (Kafka: the fence of an Ongoing transaction,
            # then ``lastProducerEpoch`` no longer matches; after it completes, it is the epoch's own).
            meta.last_producer_id, meta.last_epoch = -1, -1

    def end(self, txn_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int) -> tuple:
        """Returns (meta, records, markers_needed). A retried end of the last transaction with the
        same outcome succeeds again (``ConcurrentTransactions`` while its markers are written); the
        other outcome is ``InvalidTxnState`` (Kafka's ``endTransaction``). Ending a transaction that
        registered nothing (``Empty``) succeeds without a change: a committer may end by handle a
        task's transaction that wrote nothing."""
        meta = identified(self.txns.get(txn_id), txn_id, producer_id, epoch)
        finished = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        if meta.state in (finished, EMPTY):
            return meta, [], False
        if meta.state == (PREPARE_COMMIT if commit else PREPARE_ABORT):
            raise ConcurrentTransactionsError(f"transactional.id '{txn_id}' is completing its last transaction")
        if meta.state != ONGOING:
            raise InvalidTxnStateError(f"transactional.id '{txn_id}' is {meta.state}; cannot "
                                       f"{'commit' if commit else 'abort'}")
        meta.move(PREPARE_COMMIT if commit else PREPARE_ABORT)
        if not meta.partitions and not meta.groups:
            meta.move(finished)  # no markers to write: prepared and complete in one record
            return meta, self._record(meta, now_ms), False
        return meta, self._record(meta, now_ms), True

    def marked(self, txn_id: str, partitions: Iterable, groups: Iterable) -> None:
        """Markers are in these partitions and groups of a prepared transaction: later retries go
        only to the others (Kafka's ``removePartition``). Not written to ``__transaction_state``:
        a coordinator that loads the prepared record sends every marker again."""
        meta = self.txns.get(txn_id)
        if meta is not None and meta.state in PREPARED:
            meta.partitions.difference_update(partitions)
            meta.groups.difference_update(groups)

    def complete(self, txn_id: str, now_ms: int) -> list[Record]:
        """Markers are in every partition and group: the transaction is over."""
        meta = self.txns[txn_id]
        if meta.state not in PREPARED:
            return []
        meta.move(COMPLETE_COMMIT if meta.state == PREPARE_COMMIT else COMPLETE_ABORT)
        meta.partitions, meta.groups = set(), set()
        return self._record(meta, now_ms)

    def abort(self, txn_id: str, now_ms: int) -> tuple:
        """Abort an open transaction from the coordinator's side (it timed out, or an operator asked):
        the epoch is bumped so the producer that opened it is fenced. Returns (meta, records)."""
        meta = self.txns.get(txn_id)
        if meta is None:
            raise TransactionalIdNotFoundError(f"transactional.id '{txn_id}' is unknown")
        if meta.state == PREPARE_ABORT:
            return meta, []  # already decided (an earlier call's markers are still being written)
        if meta.state != ONGOING:
            raise InvalidTxnStateError(f"transactional.id '{txn_id}' has no open transaction ({meta.state})")
        meta.producer_epoch += 1  # at most MAX_EPOCH + 1 = 32767, int16's largest: init moves to a new id
        meta.last_producer_id, meta.last_epoch = -1, -1  # no retry of an earlier bump gets past this fence
        meta.move(PREPARE_ABORT)
        return meta, self._record(meta, now_ms)

    def timed_out(self, now_ms: int) -> list[str]:
        return [m.transactional_id for m in self.txns.values()
                if m.state == ONGOING and m.start_ms >= 0 and now_ms - m.start_ms > m.timeout_ms]

    def expire(self, now_ms: int) -> list[Record]:
        """Tombstones for the idle transactional ids (no open transaction, no change for
        ``expiration_ms``), which are forgotten."""
        idle = [m.transactional_id for m in self.txns.values()
                if TRANSITIONS.can_move(m.state, DEAD) and now_ms - m.last_update_ms >= self.expiration_ms]
        for txn_id in idle:
            self.txns.pop(txn_id).move(DEAD)
        return [(_key(txn_id), None) for txn_id in idle]

    def prepared(self) -> list[TransactionMetadata]:
        return [m for m in self.txns.values() if m.state in PREPARED]


def current(meta: TransactionMetadata | None, txn_id: str, producer_id: int, epoch: int) -> TransactionMetadata:
    """``meta`` if the producer (id, epoch) is ``txn_id``'s current one and no transaction of it is
    completing; the error to answer otherwise."""
    meta = identified(meta, txn_id, producer_id, epoch)
    if meta.state in PREPARED:
        raise ConcurrentTransactionsError(f"transactional.id '{txn_id}' is completing its last transaction")
    return meta


def identified(meta: TransactionMetadata | None, txn_id: str, producer_id: int, epoch: int) -> TransactionMetadata:
    """``meta`` if the producer (id, epoch) is ``txn_id``'s current one; the error to answer otherwise,
    Kafka's (``TransactionCoordinator.handleAddPartitionsToTransaction``/``endTransaction``): an id
    the coordinator does not know (never initialised, or forgotten after
    ``transactional.id.expiration.ms``) or another producer id is ``INVALID_PRODUCER_ID_MAPPING``
    (abortable: the client aborts and takes a new producer id); any other epoch than the current
    one, older *or newer*, is ``PRODUCER_FENCED`` (fatal). A newer epoch than the coordinator's
    means its state is not the one this producer was given (it was lost or rolled back): the
    producer cannot go on under an epoch the coordinator may hand out again."""
    if meta is None:
        raise InvalidProducerIdMappingError(
            f"transactional.id '{txn_id}' has no producer id (unknown to its coordinator, or forgotten after "
            "transactional.id.expiration.ms): abort the transaction, which takes a new producer id")
    if meta.producer_id != producer_id:
        raise InvalidProducerIdMappingError(
            f"transactional.id '{txn_id}' has producer id {meta.producer_id}, not {producer_id}")
    if epoch < meta.producer_epoch:
        raise ProducerFencedError(
            f"transactional.id '{txn_id}': epoch {epoch} was fenced by epoch {meta.producer_epoch} "
            "(another producer with this transactional.id called init_transactions)")
    if epoch > meta.producer_epoch:
        raise ProducerFencedError(
            f"transactional.id '{txn_id}': epoch {epoch} is newer than the coordinator's epoch "
            f"{meta.producer_epoch}: the coordinator did not hand it out (its state was lost)")
    return meta


def verify_offsets_in_transaction(meta: TransactionMetadata | None, txn_id: str, producer_id: int, epoch: int,
                                  group_id: str) -> None:
    """KIP-890's verification, asked by a group's coordinator before it keeps a TxnOffsetCommit's
    offsets pending (Kafka's ``handleVerifyPartitionsInTransaction``): the producer must be the
    transactional id's current one, with a transaction ``Ongoing`` that the group was added to
    (AddOffsetsToTxn). Otherwise ``INVALID_TXN_STATE``: offsets sent outside the transaction, or
    after it ended, would be committed by a later transaction's marker."""
    meta = current(meta, txn_id, producer_id, epoch)
    if meta.state != ONGOING or group_id not in meta.groups:
        raise InvalidTxnStateError(
            f"transactional.id '{txn_id}' has no ongoing transaction with group '{group_id}' "
            f"(state {meta.state.value}, groups {sorted(meta.groups)}): call send_offsets_to_transaction() "
            "inside a transaction")


def next_idempotent_epoch(producer_id: int, epoch: int, new_producer_id) -> tuple[int, int]:
    """The (producer id, epoch) an idempotent producer without transactional.id moves to after it
    gave up on a batch or a partition forgot it (KIP-360): the broker decides, the client never
    bumps by itself. The next epoch of the same id, or a new id once the epoch is exhausted."""
    if producer_id < 0 or not 0 <= epoch < MAX_EPOCH:
        return new_producer_id(), 0
    return producer_id, epoch + 1
