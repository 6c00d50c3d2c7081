"""Which committed offsets a group lets go (``offsets.retention.minutes``), as Kafka's
``OffsetMetadataManager.cleanupExpiredOffsets`` for its consumer groups (KIP-848): an offset
expires once its commit is older than the retention, but only for a topic no member of the group
subscribes to (a live consumer's offsets never expire) and never while an open transaction holds
an offset of that partition. A group left with no members, no offsets and no open transaction is
then deleted. Pure: the time is passed in."""
from __future__ import annotations

from broker.group.assignors import TP
from broker.group.group import ConsumerGroup


def expired_offsets(group: ConsumerGroup, now_ms: int, retention_ms: int) -> set[TP]:
    subscribed = group.subscribed_topics()
    return {tp for tp, c in group.offsets.items()
            if tp[0] not in subscribed and now_ms - c.commit_timestamp >= retention_ms and not group.has_pending(tp)}


def deletable(group: ConsumerGroup) -> bool:
    """Nothing left of the group once its offsets expired (Kafka's ``maybeDeleteGroup``)."""
    return not (group.members or group.offsets or group.pending)
