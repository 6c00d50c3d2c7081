"""The reference model of :mod:`tests.simulation.txn_sim`: what a transaction coordinator answers
and keeps, written from Kafka's rules (``TransactionCoordinator.scala``: ``handleInitProducerId``,
``prepareInitProducerIdTransit``, ``handleAddPartitionsToTransaction``, ``endTransaction``,
``abortTimedOutTransactions``; ``TransactionMetadata.scala``: ``prepareIncrementProducerEpoch``,
``prepareFenceProducerEpoch``, ``prepareProducerIdRotation``; ``TransactionStateManager``'s
expiry) with the differences ``docs/transactions.md`` documents: ``EndTxn`` of an ``Empty``
transaction succeeds; ``InitProducerId`` over an open transaction answers, once the abort is
complete, the epoch the abort used; ``EndTxn`` answers once the markers are written; a KIP-360 bump
is refused (``PRODUCER_FENCED``) unless it carries the current pair, or the pair the last bump
replaced while the new epoch has opened no transaction (a retry: the same answer, no change; Kafka
would also abort a transaction open then); the epoch a fence takes beyond the last
(``MAX_EPOCH + 1``) only ends the open transaction, then a new producer id follows.

A model's errors are the classes the coordinator must raise; a new producer id is ``"new"`` until
the simulation learns the one the coordinator took (it must be one never used before).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields

from broker.errors import (ConcurrentTransactionsError, CoordinatorNotAvailableError, InvalidProducerIdMappingError,
                           InvalidTxnStateError, InvalidTxnTimeoutError, ProducerFencedError,
                           TransactionalIdNotFoundError)
from broker.transaction.coordinator import MAX_EPOCH

IDS = ("a", "b", "c")
NODES = 3
PARTITIONS = [("t", i) for i in range(4)]  # t-i is led by node i % NODES
GROUPS = ("g0", "g1")                       # coordinated by node 2
GROUP_NODE = 2
MAX_TIMEOUT, EXPIRATION, CLEANUP = 60_000, 200_000, 10_000
CONFIG = {"transaction.max.timeout.ms": MAX_TIMEOUT, "transactional.id.expiration.ms": EXPIRATION,
          "transaction.remove.expired.transaction.cleanup.interval.ms": CLEANUP, "offsets.commit.timeout.ms": 1_000}


@dataclass
class Stats:
    """Events a suite of histories must reach, or passing means little."""
    inits: int = 0
    aborted_on_init: int = 0          # a new instance found a transaction open
    kip360_bumps: int = 0
    kip360_retries: int = 0           # the pair a bump replaced asked again: same answer
    late_retries_fenced: int = 0      # ... asked after the bumped epoch opened a transaction: fenced
    stale_bumps_waited: int = 0       # a stale epoch's bump while markers were pending: CONCURRENT first
    group_readded: int = 0            # AddOffsetsToTxn of a group already in the transaction: no write
    zombies_fenced: int = 0
    commits: int = 0
    retried_ends: int = 0             # EndTxn of a completed transaction, same outcome: success
    opposite_ends: int = 0            # ... other outcome: INVALID_TXN_STATE
    concurrent: int = 0               # CONCURRENT_TRANSACTIONS while markers were pending
    partial_markers: int = 0          # a marker attempt that left some partitions without one
    timeouts: int = 0                 # coordinator aborts after transaction.timeout.ms
    expired: int = 0                  # transactional ids forgotten
    rotations: int = 0                # epochs exhausted: a new producer id
    failovers: int = 0
    failed_writes: int = 0
    deposed_markers: int = 0          # markers a deposed coordinator still wrote (same decision)
    deposed_fenced: int = 0           # ... until a partition refused its coordinator epoch
    verified: int = 0                 # TxnOffsetCommit verifications that let offsets in
    no_producer_ids: int = 0          # a new producer id was due and the controller gave none

    def add(self, other: "Stats") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class M:
    """The model's state of one transactional id (Kafka's TransactionMetadata, as Riverlog keeps it)."""
    pid: int
    epoch: int
    timeout: int
    state: str = "Empty"
    parts: frozenset = frozenset()     # registered in the open/deciding transaction
    groups: frozenset = frozenset()
    pending_parts: frozenset = frozenset()   # still without a marker (prepared only)
    pending_groups: frozenset = frozenset()
    start: int = -1
    updated: int = -1
    last: tuple = (-1, -1)
    serial: int = -1                   # the model's name of the open/last transaction
    spent_last: tuple = (-1, -1)       # a bump's replaced pair, once its epoch opened a transaction (stats)

    def view(self) -> tuple:
        prepared = self.state.startswith("Prepare")
        return (self.pid, self.epoch, self.timeout, self.state,
                self.pending_parts if prepared else self.parts, self.pending_groups if prepared else self.groups,
                self.start, self.updated, self.last)


class ReferenceModel:
    """The model's operations, mixed into the simulation: they use its ``model`` (id -> :class:`M`),
    ``env`` (which nodes are down or lossy, which partitions refuse markers), ``stats`` and the
    registry of decisions (``kinds``, ``decided_at``, ``members``) that judges every marker."""

    next_expiry = 0

    def _attempt(self, m: M) -> bool:
        """One marker round of a prepared transaction (as the runtime's, per node): True if complete."""
        env, ok = self.env, True
        done_parts, done_groups = set(), set()
        for tp in m.pending_parts:
            node = tp[1] % NODES
            if node in env.down or tp in env.refusing or node in env.lossy:
                ok = False
            else:
                done_parts.add(tp)
        if m.pending_groups:
            if GROUP_NODE in env.down or GROUP_NODE in env.lossy:
                ok = False
            else:
                done_groups = set(m.pending_groups)
        m.pending_parts -= done_parts
        m.pending_groups -= done_groups
        if not ok and (done_parts or done_groups):
            self.stats.partial_markers += 1
        return ok

    def _decide(self, m: M, commit: bool, now: int) -> None:
        m.state = "PrepareCommit" if commit else "PrepareAbort"
        m.pending_parts, m.pending_groups = m.parts, m.groups
        m.updated = now
        self.kinds[m.serial] = commit
        self.decided_at[(m.pid, m.epoch)] = m.serial
        self.members[m.serial] = (m.parts, m.groups)

    def _complete(self, m: M, now: int) -> None:
        m.state = "CompleteCommit" if m.state == "PrepareCommit" else "CompleteAbort"
        m.parts = m.groups = m.pending_parts = m.pending_groups = frozenset()
        m.updated = now

    def _finish(self, m: M, now: int):
        if not self._attempt(m):
            raise ConcurrentTransactionsError
        self._complete(m, now)

    def _new_producer_id(self) -> str:
        if self.env.pids_down:
            raise CoordinatorNotAvailableError   # the controller could not hand out a block of ids
        return "new"

    def _rotate(self, m: M) -> None:
        m.pid, m.epoch, m.state = self._new_producer_id(), 0, "Empty"
        m.parts = m.groups = frozenset()
        m.start = -1
        self.stats.rotations += 1

    def _identified(self, txn_id, pid, epoch) -> M:
        m = self.model.get(txn_id)
        if m is None or m.pid != pid:
            raise InvalidProducerIdMappingError
        if epoch != m.epoch:
            raise ProducerFencedError
        return m

    def model_init(self, txn_id: str, timeout: int, expected, now: int):
        if not 0 < timeout <= MAX_TIMEOUT:
            raise InvalidTxnTimeoutError
        m = self.model.get(txn_id)
        if m is None:
            self.model[txn_id] = m = M(self._new_producer_id(), 0, timeout, updated=now)
            return m
        if expected is not None and expected != (m.pid, m.epoch):
            retry = m.last != (-1, -1) and expected == m.last
            if m.state.startswith("Prepare") and (retry or expected[0] == m.pid):
                self.stats.stale_bumps_waited += not retry
                raise ConcurrentTransactionsError   # Kafka looks at the state before the epoch
            if retry:
                self.stats.kip360_retries += 1
                if m.epoch > MAX_EPOCH:
                    self._rotate(m)
                    m.updated = now
                return m
            self.stats.late_retries_fenced += expected == m.spent_last
            raise ProducerFencedError
        if m.state.startswith("Prepare"):
            raise ConcurrentTransactionsError
        replaced = (m.pid, m.epoch)
        if m.state == "Ongoing":
            self.stats.aborted_on_init += 1
            m.epoch += 1
            m.last, m.timeout = replaced if expected is not None else (-1, -1), timeout
            self._decide(m, False, now)
            self._finish(m, now)
            if m.epoch > MAX_EPOCH:
                return self.model_init(txn_id, timeout, expected, now)
            return m
        if m.epoch >= MAX_EPOCH:
            self._rotate(m)     # no change if no new producer id can be had
        else:
            m.epoch += 1
            m.state, m.parts, m.groups, m.start = "Empty", frozenset(), frozenset(), -1
        m.last, m.timeout = replaced if expected is not None else (-1, -1), timeout
        m.updated = now
        return m

    def _begin(self, m: M, now: int) -> bool:
        was_open = m.state == "Ongoing"
        if not was_open:
            m.state, m.parts, m.groups, m.start = "Ongoing", frozenset(), frozenset(), now
            m.serial = next(self.serials)
            if m.last != (-1, -1):   # the bumped epoch is in use: a retry of the bump is fenced from now on
                m.spent_last, m.last = m.last, (-1, -1)
        return was_open

    def model_add(self, txn_id, pid, epoch, parts, now):
        m = self._identified(txn_id, pid, epoch)
        if m.state.startswith("Prepare"):
            raise ConcurrentTransactionsError
        was_open = self._begin(m, now)
        if was_open and set(parts) <= m.parts:
            return
        m.parts |= frozenset(parts)
        m.updated = now

    def model_add_group(self, txn_id, pid, epoch, group, now):
        m = self._identified(txn_id, pid, epoch)
        if m.state.startswith("Prepare"):
            raise ConcurrentTransactionsError
        if self._begin(m, now) and group in m.groups:
            self.stats.group_readded += 1
            return   # already in the open transaction: nothing written (as AddPartitionsToTxn)
        m.groups |= {group}
        m.updated = now

    def model_end(self, txn_id, pid, epoch, commit, now):
        m = self._identified(txn_id, pid, epoch)
        finished = "CompleteCommit" if commit else "CompleteAbort"
        if m.state in (finished, "Empty"):
            if m.state == finished:
                self.stats.retried_ends += 1
            return
        if m.state == ("PrepareCommit" if commit else "PrepareAbort"):
            raise ConcurrentTransactionsError
        if m.state != "Ongoing":
            self.stats.opposite_ends += 1
            raise InvalidTxnStateError
        self._decide(m, commit, now)
        if commit:
            self.stats.commits += 1
        if not m.parts and not m.groups:
            self._complete(m, now)
            return
        self._finish(m, now)

    def model_verify(self, txn_id, pid, epoch, group):
        m = self._identified(txn_id, pid, epoch)
        if m.state.startswith("Prepare"):
            raise ConcurrentTransactionsError
        if m.state != "Ongoing" or group not in m.groups:
            raise InvalidTxnStateError

    def model_admin_abort(self, txn_id, now):
        m = self.model.get(txn_id)
        if m is None:
            raise TransactionalIdNotFoundError
        if m.state != "PrepareAbort":
            if m.state != "Ongoing":
                raise InvalidTxnStateError
            m.epoch += 1
            m.last = (-1, -1)
            self._decide(m, False, now)
        self._finish(m, now)
        return m

    def model_tick(self, now):
        for txn_id, m in list(self.model.items()):
            if m.state == "Ongoing" and m.start >= 0 and now - m.start > m.timeout:
                self.stats.timeouts += 1
                m.epoch += 1
                m.last = (-1, -1)
                self._decide(m, False, now)
        for m in self.model.values():
            if m.state.startswith("Prepare"):
                with contextlib.suppress(ConcurrentTransactionsError):
                    self._finish(m, now)
        if now >= self.next_expiry:
            self.next_expiry = now + CLEANUP
            for txn_id, m in list(self.model.items()):
                if m.state in ("Empty", "CompleteCommit", "CompleteAbort") and now - m.updated >= EXPIRATION:
                    del self.model[txn_id]
                    self.stats.expired += 1
