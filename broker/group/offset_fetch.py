"""OffsetFetch: who may read a group's committed offsets, and what they are told.

Pure, as Kafka's ``OffsetMetadataManager.fetchOffsets`` / ``fetchAllOffsets`` with
``ConsumerGroup.validateOffsetFetch`` (OffsetFetch v9, KIP-848). A consumer reading the offsets of
its own group names itself (member id and epoch), so a member the group no longer has, or one whose
epoch moved on, does not act on offsets read for an assignment it lost:

- no member id and a negative (or no) epoch: a reader from outside the group (the admin tools, an
  ``assign()`` consumer, a member that has not joined yet) is always answered;
- a member id the group does not have (or an empty one with an epoch >= 0): ``UNKNOWN_MEMBER_ID``;
- a member's other epoch than its current one (a static member away for now is at epoch -2):
  ``STALE_MEMBER_EPOCH`` (the consumer asks again with the epoch its next heartbeat brings);
- a group that does not exist: no offsets and no error, whoever asks (Kafka answers each
  partition asked for with no offset, and "all offsets" with none).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.errors import StaleMemberEpochError, UnknownMemberIdError
from broker.group.assignors import TP
from broker.group.group import LEAVE_STATIC, Committed, ConsumerGroup

NO_MEMBER_EPOCH = -1
"""The epoch of a request that names no member (OffsetFetch's default in Kafka)."""


@dataclass
class FetchedOffsets:
    """What an accepted OffsetFetch answers: committed offsets, and (``require_stable``) the
    partitions whose offsets an open transaction holds (``UNSTABLE_OFFSET_COMMIT``, no offset)."""
    offsets: dict[TP, Committed] = field(default_factory=dict)
    unstable: set[TP] = field(default_factory=set)


def check_fetch(group: ConsumerGroup, member_id: str, member_epoch: int) -> None:
    """Kafka's ``ConsumerGroup.validateOffsetFetch`` (see the module's docstring); raises
    ``UnknownMemberIdError`` or ``StaleMemberEpochError``."""
    if not member_id and member_epoch < 0:
        return
    member = group.members.get(member_id)
    if member is None:
        # a replaced static member's id too: Kafka's members.get() does not know it either
        raise UnknownMemberIdError(
            f"Member {member_id or '(none)'} is not a member of group '{group.group_id}': "
            "it left or was removed; join the group again, or read without a member id and epoch")
    expected = member.epoch if member.active else LEAVE_STATIC
    if member_epoch != expected:
        raise StaleMemberEpochError(
            f"The received member epoch {member_epoch} does not match the expected member epoch "
            f"{expected} of member {member_id} in group '{group.group_id}': read again with the "
            "epoch of the member's next heartbeat")


def fetch_offsets(shard, group_id: str, member_id: str, member_epoch: int,
                  partitions: Iterable[TP] | None, require_stable: bool) -> FetchedOffsets:
    """The offsets an OffsetFetch answers from ``shard`` (a :class:`~broker.group.coordinator.GroupShard`),
    for ``partitions`` or all (None), once the caller was checked (:func:`check_fetch`)."""
    group = shard.groups.get(group_id)
    if group is None:
        return FetchedOffsets()
    check_fetch(group, member_id, member_epoch)
    wanted = None if partitions is None else list(partitions)
    return FetchedOffsets(shard.committed(group_id, wanted),
                          shard.unstable(group_id, wanted) if require_stable else set())
