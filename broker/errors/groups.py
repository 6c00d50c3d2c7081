"""Consumer groups' errors: coordinators, members, generations and epochs (Kafka's codes)."""
from __future__ import annotations

from broker.errors import ApplicationRecoverableError, RetriableError, RiverlogError, S


class OffsetMetadataTooLargeError(RiverlogError):
    """A committed offset's metadata is longer than the broker's ``offset.metadata.max.bytes``."""
    code, grpc_status = 12, S.INVALID_ARGUMENT


class CoordinatorLoadInProgressError(RetriableError):
    """The coordinator is still replaying __consumer_offsets after taking over the group."""
    code, grpc_status = 14, S.UNAVAILABLE


class CoordinatorNotAvailableError(RetriableError):
    """The group's __consumer_offsets partition has no leader yet."""
    code, grpc_status = 15, S.UNAVAILABLE


class NotCoordinatorError(RetriableError):
    """This broker is not the group's coordinator: find it again."""
    code, grpc_status = 16, S.FAILED_PRECONDITION


class IllegalGenerationError(RiverlogError):
    """A member's generation (epoch) is not the group's current one: a TxnOffsetCommit from before
    a rebalance (Kafka answers a stale member epoch in a transaction so). The transaction must abort."""
    code, grpc_status = 22, S.FAILED_PRECONDITION


class InvalidGroupIdError(RiverlogError):
    code, grpc_status = 24, S.INVALID_ARGUMENT


class UnknownMemberIdError(ApplicationRecoverableError):
    """The coordinator does not know this member (expired or left): rejoin."""
    code, grpc_status = 25, S.FAILED_PRECONDITION


class InvalidSessionTimeoutError(RiverlogError):
    code, grpc_status = 26, S.INVALID_ARGUMENT


class NonEmptyGroupError(RiverlogError):
    """The group has active members; stop them first."""
    code, grpc_status = 68, S.FAILED_PRECONDITION


class GroupIdNotFoundError(RiverlogError):
    code, grpc_status = 69, S.NOT_FOUND


class FencedInstanceIdError(ApplicationRecoverableError):
    """A newer member took over this group.instance.id."""
    code, grpc_status = 82, S.FAILED_PRECONDITION


class GroupMaxSizeReachedError(RiverlogError):
    """The consumer group has ``group.consumer.max.size`` members: a new one is refused (fatal to it)."""
    code, grpc_status = 81, S.RESOURCE_EXHAUSTED


class GroupSubscribedToTopicError(RiverlogError):
    """Offsets of a topic the group consumes cannot be deleted."""
    code, grpc_status = 86, S.FAILED_PRECONDITION


class FencedMemberEpochError(RiverlogError):
    """The member's epoch is stale: it lost its partitions and must rejoin."""
    code, grpc_status = 110, S.FAILED_PRECONDITION


class UnsupportedAssignorError(RiverlogError):
    ("partition.assignment.strategy names an unknown assignor, or one the group's other members do not "
     'use.')
    code, grpc_status = 112, S.INVALID_ARGUMENT


class StaleMemberEpochError(RetriableError):
    """An offset commit carried an old member epoch; retry with the current one."""
    code, grpc_status = 113, S.FAILED_PRECONDITION
