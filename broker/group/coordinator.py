"""The groups of one ``__consumer_offsets`` partition, and the records that persist them.

Pure and synchronous. The broker that leads partition *n* of ``__consumer_offsets`` coordinates
every group whose id hashes to *n* (:func:`partition_for`). Each operation changes the in-memory
groups and returns the records to append; the server appends them (acks=all) before it answers,
and replays them (:meth:`GroupShard.load`) when it takes over the partition, so groups, members,
assignments and offsets survive restarts and follow partition leadership.

The records' layout, and how a group's state is written as records and read back, is
:mod:`broker.group.group_records`. A transaction's commit marker turns its pending offsets into offsets.

Zombie fencing: a TxnOffsetCommit or marker raises the producer's known epoch, and a TxnOffsetCommit
with an older epoch is refused with ``ProducerFenced`` — so a fenced instance whose offsets arrive
after its transaction was aborted cannot slip them into its successor's commit (same producer id).
Once a producer's transaction in the group ended, its entry is kept for
:data:`PRODUCER_FENCE_RETENTION_MS` and then forgotten (a tombstone): the Spark sink and Streams use
a new transactional.id per batch, and the entries would otherwise grow without bound. After that,
the transaction coordinator's check of every TxnOffsetCommit (KIP-890) refuses a zombie.

Write order: every offset value carries ``position``, a counter of this partition's offset writes
(restored on load as one past the highest), standing for the record offset Kafka keeps in
``OffsetAndMetadata.recordOffset``: a commit marker applies a pending offset only if it was written
after the committed one (``replayEndTransactionMarker``), so a transaction never moves an offset
committed after its TxnOffsetCommit back.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import replace

from broker.errors import (GroupIdNotFoundError, GroupSubscribedToTopicError, IllegalGenerationError,
                           InvalidGroupIdError, NonEmptyGroupError, ProducerFencedError, RiverlogError,
                           StaleMemberEpochError, TransactionCoordinatorFencedError)
from broker.group import offset_expiry
from broker.group.assignors import TP
from broker.group.group import Committed, ConsumerGroup, HeartbeatResult
from broker.group.group_records import Record, group_key_prefix, replay, state_records
from broker.records.compacted import latest_values

OFFSETS_TOPIC = "__consumer_offsets"

PRODUCER_FENCE_RETENTION_MS = 900_000
"""How long a group keeps a producer's epoch after its transaction there ended: Kafka's default
``transaction.max.timeout.ms``, beyond which the transaction coordinator has aborted (and fenced)
any transaction a late TxnOffsetCommit could still belong to."""


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition (hence the coordinator) of a group."""
    return zlib.crc32(group_id.encode()) % partitions


class GroupShard:
    """Every group of one ``__consumer_offsets`` partition."""

    def __init__(self, partition: int):
        self.partition = partition
        self.groups: dict[str, ConsumerGroup] = {}
        self._written: dict[bytes, bytes] = {}  # the latest value of every live key, as in the log
        self._position = 0  # the next offset write's position (see the module's docstring)

    # ------------------------------------------------------------------------------ replay
    def load(self, records: Iterable[Record], now_ms: int) -> None:
        """Rebuild from the partition's records, oldest first. Members get a fresh session."""
        latest = latest_values(records)
        self.groups, self._written = {}, dict(latest)
        self._position = max(self._position, replay(latest, self._group, now_ms))

    def _group(self, group_id: str, create: bool = True) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise GroupIdNotFoundError(f"group '{group_id}' does not exist")
            if not group_id:
                raise InvalidGroupIdError("group.id must not be empty")
            group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    # ------------------------------------------------------------------------------ records
    def _changes(self, group: ConsumerGroup, removed: bool = False) -> list[Record]:
        """Records that bring the log from what it holds for ``group`` to its state now."""
        prefix = group_key_prefix(group.group_id)
        now = {} if removed else state_records(group)
        before = {k: v for k, v in self._written.items() if k.startswith(prefix + b",")}
        records: list[Record] = [(k, v) for k, v in sorted(now.items()) if before.get(k) != v]
        records += [(k, None) for k in sorted(before) if k not in now]
        for k, v in records:
            if v is None:
                self._written.pop(k, None)
            else:
                self._written[k] = v
        if removed or not (group.members or group.offsets or group.group_epoch or group.pending
                           or group.producer_epochs):
            self.groups.pop(group.group_id, None)
        return records

    # ------------------------------------------------------------------------------ operations
    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, *, partitions: Mapping[str, int],
                  now_ms: int, **fields) -> tuple[HeartbeatResult, list[Record]]:
        """A heartbeat's answer and records; a refused one raises (see :meth:`heartbeat_outcome`)."""
        outcome, records = self.heartbeat_outcome(group_id, member_id, member_epoch, partitions=partitions,
                                                  now_ms=now_ms, **fields)
        if isinstance(outcome, RiverlogError):
            raise outcome
        return outcome, records

    def heartbeat_outcome(self, group_id: str, member_id: str, member_epoch: int, *,
                          partitions: Mapping[str, int], now_ms: int,
                          **fields) -> tuple[HeartbeatResult | RiverlogError, list[Record]]:
        """The answer, or the error that refused the heartbeat, with the records to write either
        way: a refusal may still change the group (a replaced static member's id, once it speaks,
        is remembered as fenced), and a record left unwritten would be missing from the group a
        coordinator that takes over replays."""
        group = self._group(group_id)
        try:
            outcome: HeartbeatResult | RiverlogError = group.heartbeat(
                member_id, member_epoch, partitions=partitions, now_ms=now_ms, **fields)
        except RiverlogError as error:
            outcome = error
        except Exception:
            self._changes(group)  # not a refusal: nothing to answer; an empty new group is not kept
            raise
        return outcome, self._changes(group)

    def expire(self, partitions: Mapping[str, int], now_ms: int) -> list[Record]:
        records: list[Record] = []
        for group in list(self.groups.values()):
            assignment_epoch = group.assignment_epoch
            # expiring members, or catching up on a leave: both recompute the target
            expired = group.expire(partitions, now_ms) or group.assignment_epoch != assignment_epoch
            if self._forget_ended_producers(group, now_ms) or expired:
                records += self._changes(group)
        return records

    @staticmethod
    def _forget_ended_producers(group: ConsumerGroup, now_ms: int) -> bool:
        """Stamp producers whose transaction ended since the last tick; forget those whose
        transaction ended more than :data:`PRODUCER_FENCE_RETENTION_MS` ago and that opened none
        since (Kafka drops a producer from ``openTransactionsByGroup`` at its marker)."""
        changed = False
        for producer, ended in list(group.producer_ended.items()):
            if ended < 0:
                group.producer_ended[producer] = now_ms
            elif now_ms - ended > PRODUCER_FENCE_RETENTION_MS:
                del group.producer_ended[producer]
                group.producer_epochs.pop(producer, None)
                group.coordinator_epochs.pop(producer, None)
            else:
                continue
            changed = True
        return changed

    def _validated(self, group_id: str, check) -> ConsumerGroup:
        """The group (created if new) once ``check(group)`` passed; a group created only for a
        refused request is not kept (Kafka creates a simple group only for an accepted commit)."""
        new = group_id not in self.groups
        group = self._group(group_id)
        try:
            check(group)
        except RiverlogError:
            if new:
                self.groups.pop(group_id, None)
            raise
        return group

    def _positioned(self, offsets: Mapping[TP, Committed]) -> dict[TP, Committed]:
        """``offsets`` stamped with the next write position (see the module's docstring)."""
        position, self._position = self._position, self._position + 1
        return {tp: replace(c, position=position) for tp, c in offsets.items()}

    def commit(self, group_id: str, member_id: str, member_epoch: int,
               offsets: Mapping[TP, Committed]) -> list[Record]:
        """OffsetCommit. As Kafka's ``validateOffsetCommit``: an unknown group is created (a simple
        group) only for a member epoch < 0, and is ``GroupIdNotFound`` otherwise."""
        if group_id and group_id not in self.groups and member_epoch >= 0:
            raise GroupIdNotFoundError(
                f"group '{group_id}' does not exist, so no member of it has epoch {member_epoch}: "
                "join the group again, or commit with member epoch -1 (no member id) from outside a group")
        group = self._validated(group_id, lambda g: g.check_commit(member_id, member_epoch))
        group.commit(self._positioned(offsets))
        return self._changes(group)

    def commit_in_transaction(self, group_id: str, member_id: str, member_epoch: int, producer_id: int,
                              producer_epoch: int, offsets: Mapping[TP, Committed]) -> list[Record]:
        """Offsets that take effect only if the producer's transaction commits (TxnOffsetCommit).
        As Kafka's ``validateTransactionalOffsetCommit``: an unknown group is created (a simple
        group) only for a member epoch < 0, and is ``IllegalGeneration`` otherwise; a stale member
        epoch is ``IllegalGeneration`` too, not the retriable ``StaleMemberEpoch`` of a plain
        commit: the member's partitions may have moved, so the producer must abort the transaction
        rather than commit it again."""
        if group_id and group_id not in self.groups and member_epoch >= 0:
            raise IllegalGenerationError(
                f"group '{group_id}' does not exist, so no member of it has epoch {member_epoch}: the "
                "consumer's group metadata is not this group's; abort the transaction")
        group = self._validated(group_id, lambda g: self._check_transactional(g, member_id, member_epoch))
        if not offsets:  # every offset refused (its metadata too large): nothing to write, as Kafka
            return self._changes(group)
        known = group.producer_epochs.get(producer_id, -1)
        if producer_epoch < known:
            raise ProducerFencedError(
                f"producer {producer_id} epoch {producer_epoch} was fenced by epoch {known} in group "
                f"'{group_id}': a newer instance of this transactional.id has taken over; close this producer")
        if producer_epoch > known:
            group.pending.pop(producer_id, None)  # an older epoch's offsets: its transaction was aborted
            group.producer_epochs[producer_id] = producer_epoch
        group.producer_ended.pop(producer_id, None)
        group.pending.setdefault(producer_id, {}).update(self._positioned(offsets))
        return self._changes(group)

    @staticmethod
    def _check_transactional(group: ConsumerGroup, member_id: str, member_epoch: int) -> None:
        try:
            group.check_commit(member_id, member_epoch)
        except StaleMemberEpochError:
            raise IllegalGenerationError(
                f"member {member_id} of group '{group.group_id}' sent offsets to a transaction with epoch "
                f"{member_epoch}, not its current one: its partitions may belong to another member now; "
                "abort the transaction and process them again from the committed offsets") from None

    def end_transaction(self, group_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        coordinator_epoch: int = -1) -> list[Record]:
        """The transaction marker for a group: its pending offsets become offsets, or go. A marker
        of a newer epoch (the coordinator fencing the producer) also fences older offset commits.
        As Kafka's ``replayEndTransactionMarker``, a pending offset replaces the committed one only
        if it was written after it: a plain commit (or another transaction's commit) made while
        this transaction was open wins. A marker from an older transaction coordinator than the
        producer's last one here is refused (``TransactionCoordinatorFenced``, as the
        ``__consumer_offsets`` partition's ``ProducerAppendInfo.checkCoordinatorEpoch`` refuses it in
        Kafka): it would end the producer's next transaction, committing offsets it has not decided."""
        group = self.groups.get(group_id)
        if group is None:
            return []
        current = group.coordinator_epochs.get(producer_id, -1)
        if coordinator_epoch < current:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producerId {producer_id} in group '{group_id}': "
                f"{coordinator_epoch} (zombie), {current} (current)")
        if coordinator_epoch >= 0:
            group.coordinator_epochs[producer_id] = coordinator_epoch
        known = group.producer_epochs.get(producer_id, -1)
        pending = group.pending.pop(producer_id, None)
        group.producer_epochs[producer_id] = max(known, producer_epoch)
        ended = producer_id in group.producer_ended
        group.producer_ended.setdefault(producer_id, -1)
        if commit and pending and producer_epoch == known:
            for tp, c in pending.items():
                existing = group.offsets.get(tp)
                # <=: equal only for two records written before positions existed (the old rule)
                if existing is None or existing.position <= c.position:
                    group.offsets[tp] = c
        if pending is None and producer_epoch <= known and ended:
            return []
        return self._changes(group)

    def committed(self, group_id: str, partitions: Iterable[TP] | None) -> dict[TP, Committed]:
        group = self.groups.get(group_id)
        if group is None:
            return {}
        if partitions is None:
            return dict(group.offsets)
        return {tp: group.offsets[tp] for tp in partitions if tp in group.offsets}

    def unstable(self, group_id: str, partitions: Iterable[TP] | None) -> set[TP]:
        """The partitions an OffsetFetch with ``require_stable`` answers ``UNSTABLE_OFFSET_COMMIT``
        (KIP-447): those with offsets pending in an open transaction, among ``partitions``, or, for
        all partitions (None), among those with a committed offset (Kafka's ``fetchOffsets`` and
        ``fetchAllOffsets``)."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        wanted = group.offsets if partitions is None else partitions
        return {tp for tp in wanted if group.has_pending(tp)}

    def describe(self, group_id: str) -> ConsumerGroup:
        return self._group(group_id, create=False)

    def expire_offsets(self, now_ms: int, retention_ms: int) -> list[Record]:
        """``offsets.retention.minutes``: tombstones for the offsets that expired, and for every
        group left with nothing, also one that never had offsets (Kafka's ``cleanupGroupMetadata``;
        see :mod:`broker.group.offset_expiry`)."""
        records: list[Record] = []
        for group in list(self.groups.values()):
            expired = offset_expiry.expired_offsets(group, now_ms, retention_ms)
            for tp in expired:
                del group.offsets[tp]
            gone = offset_expiry.deletable(group)
            if expired or gone:
                records += self._changes(group, removed=gone)
        return records

    def delete_group(self, group_id: str) -> list[Record]:
        group = self._group(group_id, create=False)
        if group.members:
            raise NonEmptyGroupError(f"group '{group_id}' has {len(group.members)} member(s); "
                                     "stop them (or wait for their sessions to expire) first")
        return self._changes(group, removed=True)

    def delete_topics(self, topics: set[str]) -> list[Record]:
        """Kafka's ``onPartitionsDeleted``: a deleted topic's offsets (committed and pending in a
        transaction) go from every group, so a topic created again under the name is read from
        its start, not from offsets of the old one."""
        records: list[Record] = []
        for group in list(self.groups.values()):
            gone = [tp for tp in group.offsets if tp[0] in topics]
            for tp in gone:
                del group.offsets[tp]
            pending = group.drop_pending({tp for offsets in group.pending.values() for tp in offsets
                                          if tp[0] in topics})
            if gone or pending:
                records += self._changes(group)
        return records

    def delete_offsets(self, group_id: str, partitions: Iterable[TP]
                       ) -> tuple[dict[TP, GroupSubscribedToTopicError], list[Record]]:
        """Kafka's ``OffsetMetadataManager.deleteOffsets``: the partitions of a topic the group
        subscribes to fail with ``GROUP_SUBSCRIBED_TO_TOPIC`` and keep their offsets; the offsets
        of the other partitions are deleted, and so are their offsets pending in any open
        transaction (the replay of Kafka's tombstone removes them), so that a commit marker cannot
        bring a deleted offset back. Returns (the failed partitions' errors, records); an
        unknown group raises ``GroupIdNotFoundError`` (an empty group id ``InvalidGroupIdError``,
        as Kafka's ``GroupCoordinatorService.deleteOffsets``) and changes nothing."""
        if not group_id:
            raise InvalidGroupIdError("group.id must not be empty")
        group = self._group(group_id, create=False)
        subscribed = group.subscribed_topics()
        errors: dict[TP, GroupSubscribedToTopicError] = {}
        for tp in partitions:
            if tp[0] in subscribed:
                errors[tp] = GroupSubscribedToTopicError(
                    f"group '{group_id}' is subscribed to topic '{tp[0]}'; its offsets stay while a member "
                    "consumes it")
            else:
                group.offsets.pop(tp, None)
                group.drop_pending([tp])
        return errors, self._changes(group)
