"""One consumer group as its coordinator holds it: members, the target assignment, committed offsets.

Pure and synchronous (time comes in as ``now_ms``), in the style of Kafka's new consumer protocol
(KIP-848): members heartbeat with their subscription and the partitions they own; the coordinator
computes the target assignment with the group's assignor and reconciles each member towards it.

Epochs. The **group epoch** moves whenever membership, a subscription or a subscribed topic's
partition count changes; the **assignment epoch** is the group epoch the target was computed for;
a **member epoch** is the assignment epoch a member has fully reconciled to.

Reconciliation never lets two members own a partition at once: a partition is handed to its new
owner only after its previous owner reported (in a heartbeat) that it let it go. With an eager
assignor every member first gives up everything; with ``cooperative-sticky`` only the partitions
that move are revoked, and the others are consumed throughout.

Static members (``group.instance.id``) that leave with epoch -2, or that restart and join again
under the same instance id, keep their partitions for a session timeout: no rebalance happens.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.errors import (FencedInstanceIdError, FencedMemberEpochError, GroupMaxSizeReachedError,
                           InvalidRequestError, StaleMemberEpochError, UnknownMemberIdError,
                           UnsupportedAssignorError)
from broker.group.assignors import COOPERATIVE, TP, assignor, elect, strategies

JOIN, LEAVE, LEAVE_STATIC = 0, -1, -2
FENCED_MEMBERS_KEPT = 1000  # replaced static members' ids remembered per group

EMPTY, ASSIGNING, RECONCILING, STABLE = "Empty", "Assigning", "Reconciling", "Stable"


@dataclass
class Member:
    member_id: str
    instance_id: str
    client_id: str
    topics: list[str]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_heartbeat_ms: int
    epoch: int = 0
    previous_epoch: int = -1
    assigned: set[TP] = field(default_factory=set)  # what the member has been told it may own
    owned: set[TP] = field(default_factory=set)     # what it last reported owning
    eager_cleared: int = -1                         # assignment epoch it gave everything up for
    revoking_since_ms: int | None = None
    revoking: set[TP] = field(default_factory=set)  # what it was asked to give up at revoking_since_ms
    left_ms: int | None = None                      # a static member that left for now
    assignors: list[str] = field(default_factory=lambda: ["range"])  # its strategy list, preferred first
    client_host: str = ""                           # Kafka's: its connection's address at its join

    @property
    def active(self) -> bool:
        return self.left_ms is None


@dataclass
class Committed:
    """One committed (or, in a transaction, pending) offset. ``position`` orders the writes of
    offsets of one ``__consumer_offsets`` partition, as the record offset does in Kafka's
    ``OffsetAndMetadata.recordOffset``: a transaction's commit marker applies its pending offset
    only if it was written after the committed one (``GroupShard.end_transaction``). -1 for
    records written before positions existed."""
    offset: int
    metadata: str = ""
    leader_epoch: int = -1
    commit_timestamp: int = -1
    position: int = field(default=-1, compare=False)


@dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    assignment: set[TP]
    reconciling: bool


class ConsumerGroup:
    def __init__(self, group_id: str):
        self.group_id = group_id
        self.assignor = ""
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target: dict[str, set[TP]] = {}
        self.topic_sizes: dict[str, int] = {}
        self.members: dict[str, Member] = {}
        self.offsets: dict[TP, Committed] = {}
        self.pending: dict[int, dict[TP, Committed]] = {}  # offsets of open transactions, by producer id
        # The newest epoch seen per transactional producer (its offset commits and markers): an
        # older epoch is a fenced zombie, whose offsets must never join a newer epoch's commit.
        self.producer_epochs: dict[int, int] = {}
        # Producers whose last transaction in this group ended (by a marker): when it ended (-1
        # until the coordinator's next tick stamps it). Their fence is kept for
        # ``coordinator.PRODUCER_FENCE_RETENTION_MS``, then forgotten (``GroupShard.expire``).
        self.producer_ended: dict[int, int] = {}
        # The coordinator epoch of each producer's last transaction marker here (the
        # ``__transaction_state`` partition's leader epoch): an older one comes from a deposed
        # transaction coordinator (Kafka's ``ProducerStateEntry.coordinatorEpoch``).
        self.coordinator_epochs: dict[int, int] = {}
        # Replaced static members, newest last, so a commit from one (which names no instance id)
        # is told FENCED_INSTANCE_ID; the oldest are forgotten past FENCED_MEMBERS_KEPT (they are
        # then UNKNOWN_MEMBER_ID, Kafka's answer to any member id it does not know).
        self.fenced_members: dict[str, None] = {}

    # ------------------------------------------------------------------------------ state
    @property
    def active_members(self) -> list[Member]:
        return [m for m in self.members.values() if m.active]

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(m.epoch < self.assignment_epoch for m in self.members.values()):
            return RECONCILING
        return STABLE

    @property
    def cooperative(self) -> bool:
        return self.assignor in COOPERATIVE

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}

    # ------------------------------------------------------------------------------ heartbeat
    def heartbeat(self, member_id: str, member_epoch: int, *, instance_id: str = "", client_id: str = "",
                  client_host: str = "", topics: list[str] | None = None, assignor_name: str = "",
                  session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000, owned: set[TP] | None = None,
                  partitions: Mapping[str, int], now_ms: int, max_size: int | None = None) -> HeartbeatResult:
        """One member heartbeat: join (epoch 0), leave (-1, or -2 for a static member), or report.
        ``max_size`` (``group.consumer.max.size``): a member the group does not have is refused
        once it has that many, as Kafka's ``throwIfConsumerGroupIsFull``, unless it names the
        ``group.instance.id`` of a member the group has (KAFKA-20601): a restarted static member
        takes its own place, and a replaced one is told ``FENCED_INSTANCE_ID``."""
        if member_epoch < LEAVE_STATIC or (member_epoch > JOIN and not member_id):
            # Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (a leave naming no member is a no-op here)
            raise InvalidRequestError("MemberEpoch is invalid." if member_epoch < LEAVE_STATIC
                                      else "MemberId can't be empty.")
        if member_epoch in (LEAVE, LEAVE_STATIC):
            return self._leave(member_id, member_epoch, now_ms)
        if (max_size is not None and len(self.members) >= max_size and member_id not in self.members
                and not (instance_id and any(m.instance_id == instance_id for m in self.members.values()))):
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {max_size} members.")
        start_epoch = self.group_epoch
        if member_epoch == JOIN and (member_id not in self.members or self._static_rejoin(member_id, instance_id)):
            if member_id in self.fenced_members:
                raise FencedInstanceIdError(
                    f"member {member_id} was replaced by a newer member with its group.instance.id")
            member = self._join(member_id, instance_id, client_id, list(topics or []), assignor_name,
                                session_timeout_ms, rebalance_timeout_ms, now_ms, client_host)
        else:
            self._check_instance(member_id, instance_id)
            member = self._member(member_id)
            self._check_epoch(member, member_epoch, owned)
            if topics is not None and sorted(topics) != sorted(member.topics):
                member.topics = sorted(topics)
                self.group_epoch += 1
        member.last_heartbeat_ms = now_ms
        member.left_ms = None
        if owned is not None and member_epoch == member.epoch:
            member.owned = set(owned)
        elif owned is not None:
            # The previous epoch (its answer may have been lost), or an overtaken older request
            # while the member reads what the current epoch gave it: only a heartbeat at the
            # current epoch lets partitions go.
            member.owned |= set(owned) | member.assigned
        # one bump per heartbeat, as Kafka's consumerGroupHeartbeat: a member that joins and the
        # subscribed topics' sizes it brings move the group epoch once, not twice
        self.refresh(partitions, bumped=self.group_epoch != start_epoch)
        self._reconcile(member, now_ms)
        return HeartbeatResult(member.member_id, member.epoch, set(member.assigned),
                               member.epoch < self.assignment_epoch)

    def _static_rejoin(self, member_id: str, instance_id: str) -> bool:
        """A join naming a static member the group has, under its own ``group.instance.id``, that
        left for now (-2) or has moved past epoch 0 (it was fenced, or the answer to its join was
        lost): it comes back under the member id it keeps for its lifetime (KIP-1082) and replaces
        itself, as a restarted instance replaces its predecessor (Kafka's
        ``getOrMaybeSubscribeStaticConsumerGroupMember``). A member still at epoch 0 is in the
        middle of its first reconciliation, and its join is a plain heartbeat."""
        member = self.members.get(member_id)
        return (member is not None and bool(instance_id) and member.instance_id == instance_id
                and (not member.active or member.epoch != JOIN))

    def _check_epoch(self, member: Member, member_epoch: int, owned: set[TP] | None) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: a heartbeat carries the member's
        epoch, or its previous one (the response that moved it on was lost) only if what it owns
        is part of its current assignment; a static member that left for now is at epoch -2
        there, so a late heartbeat of the incarnation that left is fenced too. Anything else is
        ``FencedMemberEpochError``: the member gives up its partitions and joins again."""
        if not member.active:
            raise FencedMemberEpochError(
                f"static member {member.member_id} of group '{self.group_id}' left the group for now "
                f"(epoch -2), not at epoch {member_epoch}: join again")
        if member_epoch == member.epoch:
            return
        if member_epoch == member.previous_epoch and owned is not None and owned <= member.assigned:
            return
        claims = "" if member_epoch != member.previous_epoch else (
            ", without saying what it owns" if owned is None else
            f", owning {sorted(owned - member.assigned)} it is no longer assigned")
        raise FencedMemberEpochError(
            f"member {member.member_id} of group '{self.group_id}' is at epoch {member.epoch}, "
            f"not {member_epoch}{claims}: its partitions were reassigned; rejoin")

    def _check_instance(self, member_id: str, instance_id: str) -> None:
        """A request naming a ``group.instance.id`` that now belongs to another member id comes from
        a replaced instance: ``FENCED_INSTANCE_ID``, as Kafka's ``ClassicGroup.isStaticMemberFenced``
        and ``GroupMetadataManager.throwIfInstanceIdIsFenced`` decide from the instance id alone:
        a coordinator that took the group's partition over after the replacement never recorded
        the old member id, and answering it ``UNKNOWN_MEMBER_ID`` sent the old instance back to
        join, taking the instance id (and its partitions) from its live successor."""
        if not instance_id:
            return
        current = next((m for m in self.members.values() if m.instance_id == instance_id), None)
        if current is not None and current.member_id != member_id:
            self._fence(member_id)
            raise FencedInstanceIdError(
                f"member {member_id} was replaced by a newer member with its group.instance.id "
                f"'{instance_id}' (member {current.member_id})")

    def _fence(self, member_id: str) -> None:
        self.fenced_members[member_id] = None
        while len(self.fenced_members) > FENCED_MEMBERS_KEPT:
            del self.fenced_members[next(iter(self.fenced_members))]

    def _member(self, member_id: str) -> Member:
        member = self.members.get(member_id)
        if member is None:
            if member_id in self.fenced_members:
                raise FencedInstanceIdError(
                    f"member {member_id} was replaced by a newer member with its group.instance.id")
            raise UnknownMemberIdError(f"group '{self.group_id}' has no member {member_id}: rejoin")
        return member

    def _join(self, member_id: str, instance_id: str, client_id: str, topics: list[str], assignor_name: str,
              session_timeout_ms: int, rebalance_timeout_ms: int, now_ms: int, client_host: str = "") -> Member:
        """A new member under ``member_id``, the id its consumer generated (KIP-1082), or under
        one made here for a join naming none (a client that leaves it to the coordinator)."""
        preferences = strategies(assignor_name)
        previous = next((m for m in self.members.values() if instance_id and m.instance_id == instance_id), None)
        others = [m.assignors for m in self.members.values() if m is not previous]
        if elect(others + [preferences]) is None:
            # Kafka's classic protocol: INCONSISTENT_GROUP_PROTOCOL (Riverlog's closest typed error)
            supported = sorted(set(others[0]).intersection(*others[1:]))
            raise UnsupportedAssignorError(
                f"group '{self.group_id}' has no partition.assignment.strategy in common with this member: "
                f"it asked for {','.join(preferences)}; every member of the group supports "
                f"{', '.join(supported) or 'nothing in common'} (inconsistent group protocol)")
        member_id = member_id or uuid.uuid4().hex
        before = self.assignor
        if previous is not None:
            # A static member coming back: it takes over its predecessor's partitions, no rebalance.
            del self.members[previous.member_id]
            if previous.member_id != member_id:
                self._fence(previous.member_id)
            # Its own member id: the same process (KIP-1082), maybe an overtaken join; it still reads.
            owned = set(previous.owned) if previous.member_id == member_id else set()
            member = Member(member_id, instance_id, client_id, sorted(topics), session_timeout_ms,
                            rebalance_timeout_ms, now_ms, previous.epoch, previous.previous_epoch,
                            set(previous.assigned), owned, previous.eager_cleared, assignors=preferences,
                            client_host=client_host)
            if previous.member_id in self.target:
                self.target[member_id] = self.target.pop(previous.member_id)
            moved = sorted(topics) != previous.topics
        else:
            member = Member(member_id, instance_id, client_id, sorted(topics), session_timeout_ms,
                            rebalance_timeout_ms, now_ms, assignors=preferences, client_host=client_host)
            moved = True
        self.members[member_id] = member
        self._elect()
        if moved or self.assignor != before:
            self.group_epoch += 1
        return member

    def _elect(self) -> None:
        """Choose the group's assignor from its members' lists (``assignors.elect``)."""
        self.assignor = elect([m.assignors for m in self.members.values()], self.assignor) or self.assignor

    def _leave(self, member_id: str, member_epoch: int, now_ms: int) -> HeartbeatResult:
        member = self.members.get(member_id)
        if member is not None:
            if member_epoch == LEAVE_STATIC and member.instance_id:
                # Kafka's consumerGroupStaticMemberGroupLeave: what it was revoking is released (it
                # consumes nothing now) and only its session counts, not its rebalance timeout.
                member.left_ms = now_ms
                member.owned = set()
                member.revoking_since_ms = None
            else:
                self._remove(member)
        return HeartbeatResult(member_id, member_epoch, set(), False)

    def _remove(self, member: Member) -> None:
        del self.members[member.member_id]
        self.target.pop(member.member_id, None)
        self.group_epoch += 1
        self._elect()

    # ------------------------------------------------------------------------------ assignment
    def refresh(self, partitions: Mapping[str, int], bumped: bool = False) -> None:
        """Recompute the target when the group epoch moved or a subscribed topic changed size
        (which moves the epoch, unless the caller's change ``bumped`` it already)."""
        sizes = {t: partitions[t] for t in sorted(self.subscribed_topics()) if t in partitions}
        if sizes != self.topic_sizes:
            self.topic_sizes = sizes
            if self.members and not bumped:
                self.group_epoch += 1
        if self.group_epoch > self.assignment_epoch:
            _, assign = assignor(self.assignor or "range")
            subscriptions = {m.member_id: m.topics for m in self.members.values()}
            instance_ids = {m.member_id: m.instance_id for m in self.members.values() if m.instance_id}
            self.target = assign(subscriptions, self.topic_sizes, self.target, instance_ids=instance_ids)
            self.assignment_epoch = self.group_epoch

    def _held_by_others(self, member: Member) -> set[TP]:
        return {tp for m in self.members.values() if m is not member for tp in (m.assigned | m.owned)}

    def _reconcile(self, member: Member, now_ms: int) -> None:
        if member.epoch >= self.assignment_epoch:
            return
        target = self.target.get(member.member_id, set())
        if not self.cooperative and member.eager_cleared < self.assignment_epoch:
            if member.assigned or member.owned:  # eager: give everything up first
                member.assigned = set()
                self._revoking(member, now_ms)
                return
            member.eager_cleared = self.assignment_epoch
        keep = member.assigned & target
        if member.owned - target or member.assigned - target:
            member.assigned = keep  # revoke first; new partitions come once these are let go
            self._revoking(member, now_ms)
            if member.owned - target:
                return
        member.revoking_since_ms = None
        member.assigned = keep | (target - keep - self._held_by_others(member))
        if member.assigned == target:
            member.previous_epoch, member.epoch = member.epoch, self.assignment_epoch

    @staticmethod
    def _revoking(member: Member, now_ms: int) -> None:
        """Time the revocation (the rebalance timeout), afresh at each one handed out as Kafka
        schedules it: a member that let go of all it was asked to is timed anew for what a newer
        assignment takes from it, so one keeping up with a changing group is not taken as stuck."""
        pending = member.owned - member.assigned
        if member.revoking_since_ms is None or not member.revoking & pending:
            member.revoking_since_ms, member.revoking = now_ms, pending

    # ------------------------------------------------------------------------------ time
    def expire(self, partitions: Mapping[str, int], now_ms: int) -> list[str]:
        """Remove members whose session ran out, or that did not give partitions up within their
        rebalance timeout; returns their ids."""
        gone = []
        for m in list(self.members.values()):
            since = m.left_ms if m.left_ms is not None else m.last_heartbeat_ms
            slow = m.revoking_since_ms is not None and now_ms - m.revoking_since_ms > m.rebalance_timeout_ms
            if now_ms - since > m.session_timeout_ms or slow:
                self._remove(m)
                gone.append(m.member_id)
        if gone or self.group_epoch > self.assignment_epoch:
            self.refresh(partitions)
        return gone

    # ------------------------------------------------------------------------------ offsets
    def check_commit(self, member_id: str, member_epoch: int) -> None:
        """May this caller commit (OffsetCommit and TxnOffsetCommit alike)? As Kafka's
        ``ConsumerGroup.validateOffsetCommit``: a negative member epoch (an ``assign()`` consumer,
        the admin tools, a member id or not) only while the group has no members at all, a static
        member away for now included (Kafka counts it: it comes back to its partitions and their
        offsets); otherwise a member with exactly its current epoch (with an older one it may
        commit positions of partitions already handed to another member), which for a static
        member away for now is -2, as Kafka records it at its leave (so a late commit of the
        incarnation that left is ``StaleMemberEpochError``, as OffsetFetch answers it). Anyone else
        is ``UnknownMemberIdError``."""
        if member_epoch < 0 and not self.members:
            return
        if not member_id:
            away = sum(1 for m in self.members.values() if not m.active)
            what = f"{len(self.members)} member(s)" + (f", {away} of them static and away for now" if away else "")
            raise UnknownMemberIdError(
                f"group '{self.group_id}' has {what}: a commit from outside the group (no member id, as "
                "from assign() or the admin tools) is accepted only while it has none; stop its consumers "
                "(and wait for away static members' sessions to expire) first")
        member = self._member(member_id)
        expected = member.epoch if member.active else LEAVE_STATIC
        if member_epoch != expected:
            away = "" if member.active else " (a static member that left the group for now)"
            raise StaleMemberEpochError(
                f"member {member_id}{away} of group '{self.group_id}' committed with epoch {member_epoch}; "
                f"its epoch is {expected}: commit again with the current epoch")

    def has_pending(self, tp: TP) -> bool:
        """Kafka's ``hasPendingTransactionalOffsets``: an open transaction holds an offset of ``tp``."""
        return any(tp in offsets for offsets in self.pending.values())

    def drop_pending(self, tps) -> bool:
        """Remove the offsets of ``tps`` from every open transaction (Kafka's replay of an offset
        tombstone); returns whether any went."""
        dropped = False
        for producer, offsets in list(self.pending.items()):
            for tp in tps:
                dropped |= offsets.pop(tp, None) is not None
            if not offsets:
                del self.pending[producer]
        return dropped

    def commit(self, offsets: Mapping[TP, Committed]) -> None:
        self.offsets.update(offsets)
