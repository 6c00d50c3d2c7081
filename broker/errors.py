"""Riverlog's one typed error hierarchy.

Every error has a stable numeric ``code`` (Kafka's error code where Kafka has one, so a Kafka user
recognises it), a ``retriable`` flag the clients act on, and the gRPC status it travels as. The
server turns an error into a status with the code in trailing metadata; the client rebuilds the
class from the code with :func:`error_for_code` and never matches message text.

    try:
        admin.create_topics([NewTopic("orders", 3)])["orders"].result()
    except TopicAlreadyExistsError as e:
        print(e.code, e.retriable, e)
"""
from __future__ import annotations

_REGISTRY: dict[int, type["RiverlogError"]] = {}


class RiverlogError(Exception):
    """Base of every error the broker or its clients raise on purpose."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    grpc_status: str = "INTERNAL"  # a grpc.StatusCode name; the server's interceptor maps it

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            if cls.code in _REGISTRY:
                raise TypeError(f"error code {cls.code} registered twice")
            _REGISTRY[cls.code] = cls

    def __init__(self, message: str = "", **details):
        super().__init__(message or self.name)
        self.message = message or self.name
        self.details = details

    def __reduce__(self):
        return (_rebuild, (self.code, self.message, self.details))

    def __repr__(self):
        return f"{type(self).__name__}({self.message!r})"


def _rebuild(code: int, message: str, details: dict) -> "RiverlogError":
    return error_for_code(code)(message, **details)


def error_for_code(code: int) -> type[RiverlogError]:
    """The error class registered for a wire code (the base class for an unknown code)."""
    return _REGISTRY.get(code, RiverlogError)


def _error(name: str, code: int, status: str, retriable: bool = False, doc: str = ""):
    cls = type(name, (RiverlogError,), {
        "code": code, "name": _kafka_name(name), "retriable": retriable,
        "grpc_status": status, "__doc__": doc, "__module__": __name__,
    })
    return cls


def _kafka_name(class_name: str) -> str:
    base = class_name[:-5] if class_name.endswith("Error") else class_name
    out = []
    for i, ch in enumerate(base):
        if ch.isupper() and i and not base[i - 1].isupper():
            out.append("_")
        out.append(ch.upper())
    return "".join(out)


class S:
    """gRPC status names, kept as strings so errors (and storage, which raises them) need no gRPC."""
    OK, CANCELLED, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS = (
        "OK", "CANCELLED", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS")
    RESOURCE_EXHAUSTED, FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL = (
        "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL")
    UNAVAILABLE, DATA_LOSS, PERMISSION_DENIED = "UNAVAILABLE", "DATA_LOSS", "PERMISSION_DENIED"


UnknownServerError = _error("UnknownServerError", -1, S.INTERNAL, doc="An unexpected failure on the broker.")
OffsetOutOfRangeError = _error(
    "OffsetOutOfRangeError", 1, S.OUT_OF_RANGE,
    doc="The requested offset is outside [log start, log end]; details carry both so the client "
        "can apply auto.offset.reset.")
CorruptRecordError = _error("CorruptRecordError", 2, S.DATA_LOSS,
                            doc="A record batch failed its CRC-32C or length check.")
UnknownTopicOrPartitionError = _error(
    "UnknownTopicOrPartitionError", 3, S.NOT_FOUND, retriable=True,
    doc="The topic or partition does not exist (retriable: it may be being created).")
LeaderNotAvailableError = _error("LeaderNotAvailableError", 5, S.UNAVAILABLE, retriable=True)
NotLeaderOrFollowerError = _error(
    "NotLeaderOrFollowerError", 6, S.FAILED_PRECONDITION, retriable=True,
    doc="This broker does not lead the partition; refresh metadata and retry.")
RequestTimedOutError = _error("RequestTimedOutError", 7, S.DEADLINE_EXCEEDED, retriable=True)
BrokerNotAvailableError = _error("BrokerNotAvailableError", 8, S.UNAVAILABLE, retriable=True)
MessageTooLargeError = _error(
    "MessageTooLargeError", 10, S.INVALID_ARGUMENT,
    doc="A record or batch is larger than message.max.bytes / max.message.bytes.")
NetworkError = _error("NetworkError", 13, S.UNAVAILABLE, retriable=True,
                      doc="The broker could not be reached or the connection broke.")
InvalidTopicError = _error("InvalidTopicError", 17, S.INVALID_ARGUMENT,
                           doc="The topic name breaks Kafka's naming rules.")
RecordListTooLargeError = _error("RecordListTooLargeError", 18, S.INVALID_ARGUMENT)
NotEnoughReplicasError = _error("NotEnoughReplicasError", 19, S.UNAVAILABLE, retriable=True)
NotEnoughReplicasAfterAppendError = _error("NotEnoughReplicasAfterAppendError", 20, S.UNAVAILABLE,
                                           retriable=True)
InvalidRequiredAcksError = _error("InvalidRequiredAcksError", 21, S.INVALID_ARGUMENT)
InvalidTimestampError = _error("InvalidTimestampError", 32, S.INVALID_ARGUMENT)
UnsupportedVersionError = _error("UnsupportedVersionError", 35, S.UNIMPLEMENTED,
                                 doc="The broker does not know this batch magic or request form.")
TopicAlreadyExistsError = _error("TopicAlreadyExistsError", 36, S.ALREADY_EXISTS)
InvalidPartitionsError = _error("InvalidPartitionsError", 37, S.INVALID_ARGUMENT)
InvalidReplicationFactorError = _error("InvalidReplicationFactorError", 38, S.INVALID_ARGUMENT)
InvalidReplicaAssignmentError = _error("InvalidReplicaAssignmentError", 39, S.INVALID_ARGUMENT)
InvalidConfigError = _error("InvalidConfigError", 40, S.INVALID_ARGUMENT,
                            doc="A configuration name is unknown or its value is invalid.")
NotControllerError = _error(
    "NotControllerError", 41, S.UNAVAILABLE, retriable=True,
    doc="This node is not the active controller; details carry leader_id when it is known.")
InvalidRequestError = _error("InvalidRequestError", 42, S.INVALID_ARGUMENT)
ClusterAuthorizationFailedError = _error(
    "ClusterAuthorizationFailedError", 31, S.PERMISSION_DENIED,
    doc="An inter-broker request (follower fetch, transaction markers) sent to the client listener: "
        "brokers send these to each other's inter.broker.listener.name listener.")
PolicyViolationError = _error("PolicyViolationError", 44, S.FAILED_PRECONDITION)
KafkaStorageError = _error("KafkaStorageError", 56, S.UNAVAILABLE, retriable=True,
                           doc="The partition's log directory failed (disk error).")
PreferredLeaderNotAvailableError = _error("PreferredLeaderNotAvailableError", 80, S.UNAVAILABLE,
                                          retriable=True)
FencedLeaderEpochError = _error(
    "FencedLeaderEpochError", 74, S.FAILED_PRECONDITION, retriable=True,
    doc="The request's leader epoch is older than the replica's: refresh metadata.")
UnknownLeaderEpochError = _error(
    "UnknownLeaderEpochError", 75, S.FAILED_PRECONDITION, retriable=True,
    doc="The request's leader epoch is newer than the replica knows yet: retry shortly.")
StaleBrokerEpochError = _error("StaleBrokerEpochError", 77, S.FAILED_PRECONDITION,
                               doc="A broker spoke with an epoch from an earlier registration.")
ElectionNotNeededError = _error("ElectionNotNeededError", 84, S.FAILED_PRECONDITION,
                                doc="The preferred replica already leads the partition.")
InvalidRecordError = _error(
    "InvalidRecordError", 87, S.INVALID_ARGUMENT,
    doc="A batch is well-formed on the wire but its body is not a valid record body.")
ThrottlingQuotaExceededError = _error("ThrottlingQuotaExceededError", 89, S.RESOURCE_EXHAUSTED,
                                      retriable=True)

# Idempotent and transactional producers.
OutOfOrderSequenceError = _error(
    "OutOfOrderSequenceError", 45, S.FAILED_PRECONDITION, retriable=True,
    doc="A producer batch skipped sequence numbers: an earlier batch is missing (the producer resends in order).")
UnknownProducerIdError = _error(
    "UnknownProducerIdError", 59, S.FAILED_PRECONDITION,
    doc="The partition no longer knows this producer (its state expired after producer.id.expiration.ms, "
        "or retention removed its records): an idempotent producer starts a new epoch from sequence 0.")
InvalidProducerEpochError = _error("InvalidProducerEpochError", 47, S.FAILED_PRECONDITION,
                                   doc="A newer instance of this producer (higher epoch) has taken over.")
InvalidTxnStateError = _error("InvalidTxnStateError", 48, S.FAILED_PRECONDITION,
                              doc="The transaction is not in a state that allows this (e.g. commit after an abort).")
InvalidProducerIdMappingError = _error("InvalidProducerIdMappingError", 49, S.FAILED_PRECONDITION,
                                       doc="The producer id does not belong to this transactional.id.")
InvalidTxnTimeoutError = _error("InvalidTxnTimeoutError", 50, S.INVALID_ARGUMENT)
ConcurrentTransactionsError = _error("ConcurrentTransactionsError", 51, S.UNAVAILABLE, retriable=True,
                                     doc="The previous transaction of this transactional.id is still completing.")
ProducerFencedError = _error("ProducerFencedError", 90, S.FAILED_PRECONDITION,
                             doc="Another producer with the same transactional.id called init_transactions().")
TransactionalIdNotFoundError = _error("TransactionalIdNotFoundError", 105, S.NOT_FOUND)
# Consumer groups.
CoordinatorLoadInProgressError = _error(
    "CoordinatorLoadInProgressError", 14, S.UNAVAILABLE, retriable=True,
    doc="The coordinator is still replaying __consumer_offsets after taking over the group.")
CoordinatorNotAvailableError = _error("CoordinatorNotAvailableError", 15, S.UNAVAILABLE, retriable=True,
                                      doc="The group's __consumer_offsets partition has no leader yet.")
NotCoordinatorError = _error("NotCoordinatorError", 16, S.FAILED_PRECONDITION, retriable=True,
                             doc="This broker is not the group's coordinator: find it again.")
InvalidGroupIdError = _error("InvalidGroupIdError", 24, S.INVALID_ARGUMENT)
UnknownMemberIdError = _error("UnknownMemberIdError", 25, S.FAILED_PRECONDITION,
                              doc="The coordinator does not know this member (expired or left): rejoin.")
InvalidSessionTimeoutError = _error("InvalidSessionTimeoutError", 26, S.INVALID_ARGUMENT)
NonEmptyGroupError = _error("NonEmptyGroupError", 68, S.FAILED_PRECONDITION,
                            doc="The group has active members; stop them first.")
GroupIdNotFoundError = _error("GroupIdNotFoundError", 69, S.NOT_FOUND)
FencedInstanceIdError = _error("FencedInstanceIdError", 82, S.FAILED_PRECONDITION,
                               doc="A newer member took over this group.instance.id.")
GroupSubscribedToTopicError = _error("GroupSubscribedToTopicError", 86, S.FAILED_PRECONDITION,
                                     doc="Offsets of a topic the group consumes cannot be deleted.")
FencedMemberEpochError = _error("FencedMemberEpochError", 110, S.FAILED_PRECONDITION,
                                doc="The member's epoch is stale: it lost its partitions and must rejoin.")
UnsupportedAssignorError = _error("UnsupportedAssignorError", 112, S.INVALID_ARGUMENT,
                                  doc="partition.assignment.strategy names an unknown assignor, or one "
                                      "the group's other members do not use.")
StaleMemberEpochError = _error("StaleMemberEpochError", 113, S.FAILED_PRECONDITION, retriable=True,
                               doc="An offset commit carried an old member epoch; retry with the current one.")

# Client-side errors (librdkafka reports these with negative codes; ours are above 1000 so they
# never collide with a Kafka code).
KafkaTimeoutError = _error("KafkaTimeoutError", 1001, S.DEADLINE_EXCEEDED, retriable=True,
                           doc="A client-side deadline (delivery.timeout.ms, a result() timeout) passed.")
UnknownPartitionError = _error("UnknownPartitionError", 1002, S.NOT_FOUND,
                               doc="An explicit partition number is beyond the topic's partitions.")


class QueueFullError(RiverlogError, BufferError):
    """buffer.memory is used up; serve delivery reports with poll() and retry (a BufferError, as
    confluent-kafka raises)."""
    code, name, retriable, grpc_status = 1003, "QUEUE_FULL", True, S.RESOURCE_EXHAUSTED


ClientClosedError = _error("ClientClosedError", 1004, S.CANCELLED, doc="The client was closed.")
NotSupportedError = _error("NotSupportedError", 1005, S.UNIMPLEMENTED,
                           doc="The call is not supported by this version of Riverlog.")
PartitionEOF = _error("PartitionEOF", 1006, S.OUT_OF_RANGE,
                      doc="Informational: the consumer reached the end of a partition "
                          "(only with enable.partition.eof).")

del S

# The name confluent-kafka users catch.
KafkaException = RiverlogError
KafkaError = RiverlogError
