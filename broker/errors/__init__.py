"""Riverlog's one typed error hierarchy: the wire contract for errors.

Every error has a stable numeric ``code`` (Kafka's error code where Kafka has one, so a Kafka user
recognises it), a ``retriable`` flag the clients act on, and the gRPC status it travels as. The
server turns an error into a status with the code in the :data:`ERROR_CODE_KEY` trailer; the
client rebuilds the class from the code with :func:`error_for_code` and never matches message text.

Errors are grouped in categories, as Kafka's Java client groups its exceptions, so a caller
catches a category instead of a tuple of classes:

- :class:`RetriableError` (Kafka's ``RetriableException``): try the same call again after a
  backoff. ``e.retriable`` is true exactly for these.
- :class:`InvalidMetadataError` (``InvalidMetadataException``, KIP-1050's refresh-retriable): the
  client's view of leaders is stale; refresh metadata, then retry.
- :class:`TransactionAbortableError` (``TransactionAbortableException``, KIP-890/KIP-1050): the
  current transaction cannot commit but the producer is fine; abort the transaction and retry it.
- :class:`ApplicationRecoverableError` (``ApplicationRecoverableException``, KIP-1050): fatal to
  this producer or member; close it and start a new one (another instance took over).

Categories are caught, never raised: only classes with a code of their own travel on the wire.
The families beyond the broker's own live in modules of their own (:mod:`broker.errors.transactions`,
:mod:`broker.errors.groups`, :mod:`broker.errors.local` for the client's) and are imported from here.

    try:
        admin.create_topics([NewTopic("orders", 3)])["orders"].result()
    except TopicAlreadyExistsError as e:
        print(e.code, e.retriable, e)
"""
from __future__ import annotations

ERROR_CODE_KEY = "riverlog-error-code"
"""gRPC trailing-metadata key that carries an error's ``code`` (the server sets it, the client reads it)."""

_REGISTRY: dict[int, type["RiverlogError"]] = {}
_BY_KAFKA_CODE: dict[int, type["RiverlogError"]] = {}


class RiverlogError(Exception):
    """Base of every error the broker or its clients raise on purpose."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    grpc_status: str = "INTERNAL"  # a grpc.StatusCode name; the server's interceptor maps it
    kafka_code: int = -1  # the code confluent-kafka's KafkaError.code() gives (librdkafka's, <0, for local errors)
    txn_requires_abort: bool = False  # confluent's KafkaError.txn_requires_abort(): abort the transaction
    _category: bool = False  # set on category bases: caught, never raised

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._category = bool(cls.__dict__.get("_category", False))
        if "code" in cls.__dict__:
            if cls.code in _REGISTRY:
                raise TypeError(f"error code {cls.code} registered twice")
            if "name" not in cls.__dict__:
                cls.name = _kafka_name(cls.__name__)
            _REGISTRY[cls.code] = cls
            if "kafka_code" not in cls.__dict__:
                cls.kafka_code = cls.code
            _BY_KAFKA_CODE.setdefault(cls.kafka_code, cls)
        retriable_base = globals().get("RetriableError")
        if retriable_base is not None and cls.retriable != issubclass(cls, retriable_base):
            raise TypeError(f"{cls.__name__}: retriable={cls.retriable} but it "
                            f"{'is' if issubclass(cls, retriable_base) else 'is not'} a RetriableError; "
                            "derive from RetriableError (or not) instead of setting the flag")

    def __new__(cls, *args, **kwargs):
        if cls._category:
            raise TypeError(f"{cls.__name__} is a category to catch; raise one of its subclasses")
        if args and isinstance(args[0], KafkaError) and not issubclass(cls, type(args[0].exception())):
            # confluent's ``raise KafkaException(msg.error())``: raise the typed error it stands for.
            cls = type(args[0].exception())
        return super().__new__(cls, *args)

    def __init__(self, message: "str | KafkaError" = "", **details):
        kafka_code, given = None, None
        if isinstance(message, KafkaError):
            given = message
            kafka_code = message.code() if message.code() != type(self).kafka_code else None
            typed = message.exception()
            message, details = typed.message, {**typed.details, **details}
        super().__init__(message or self.name)
        self.message = message or self.name
        self.details = details
        # confluent-kafka's shape: ``e.args[0]`` is the KafkaError value object.
        self.args = (KafkaError._of(self, kafka_code),)
        if given is not None:   # KafkaException(KafkaError(code, fatal=True)) keeps the flags it was given
            made = self.args[0]
            flags = {name: getattr(given, name)() for name in ("fatal", "retriable", "txn_requires_abort")
                     if getattr(given, name)() != getattr(made, name)()}
            if flags:
                self.__dict__.update(flags)
                self.args = (KafkaError._of(self, kafka_code),)

    def __str__(self):
        return self.message

    def reported_as(self, **flags) -> "RiverlogError":
        """Override, on this instance, how confluent-kafka's KafkaError reports it (``kafka_code``,
        ``retriable``, ``fatal``, ``txn_requires_abort``), as librdkafka reports a broker error
        differently by where it arose (a fenced producer's ``_FENCED``, an abortable transaction's
        error). The class stays, so ``except`` clauses catch it as before; returns ``self``."""
        unknown = set(flags) - _REPORT_FLAGS
        if unknown:
            raise TypeError(f"reported_as() takes {sorted(_REPORT_FLAGS)}, not {sorted(unknown)}")
        self.__dict__.update(flags)
        self.args = (KafkaError._of(self),)
        return self

    def __setstate__(self, state):
        super().__setstate__(state)
        if _REPORT_FLAGS & set(state):  # reported_as() overrides: args[0] carries them again
            self.args = (KafkaError._of(self),)

    def __reduce__(self):
        # By class, not by code: a subclass without a code of its own (e.g. spark_sink's
        # TransactionLostError) must come back as itself, not as its parent.
        state = {k: v for k, v in self.__dict__.items() if k not in ("message", "details")}
        return _rebuild, (type(self), self.message, self.details), state or None

    def __repr__(self):
        return f"{type(self).__name__}({self.message!r})"


_REPORT_FLAGS = {"kafka_code", "retriable", "fatal", "txn_requires_abort"}


def requiring_abort(error: "RiverlogError") -> "RiverlogError":
    """A copy of ``error`` as the reason the open transaction can only be aborted: confluent-kafka's
    ``txn_requires_abort()`` true and ``retriable()`` false (retrying the call cannot help;
    ``abort_transaction()`` then a new transaction can), as librdkafka reports every call made
    in its ABORTABLE_ERROR state. A copy, so the error a delivery report carried is not changed."""
    cls, message, details = type(error), error.message, error.details
    copy = _rebuild(cls, message, details)
    state = {k: v for k, v in error.__dict__.items() if k not in ("message", "details")}
    copy.__dict__.update(state)
    return copy.reported_as(retriable=False, txn_requires_abort=True, fatal=False)


def _rebuild(kind, message: str, details: dict) -> RiverlogError:
    """Unpickle: ``kind`` is the class (or, in pickles written before classes were pickled, a code)."""
    cls = error_for_code(kind) if isinstance(kind, int) else kind
    error = cls.__new__(cls)
    RiverlogError.__init__(error, message, **details)
    return error


def error_for_code(code: int) -> type[RiverlogError]:
    """The error class registered for a wire code (the base class for an unknown code)."""
    return _REGISTRY.get(code, RiverlogError)


def error_for_kafka_code(code: int) -> type[RiverlogError]:
    """The error class for a confluent-kafka (librdkafka) code: a Kafka code, or a local one (< -100)."""
    return _BY_KAFKA_CODE.get(code) or _LOCAL_ALIASES.get(code) or RiverlogError


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


# ----------------------------------------------------------------------------------- categories
class RetriableError(RiverlogError):
    """Transient: the same call may succeed after a backoff (Kafka's ``RetriableException``)."""
    retriable = True
    _category = True


class InvalidMetadataError(RetriableError):
    """The client's metadata is stale (a leader moved, a broker went away): refresh it, then retry
    (Kafka's ``InvalidMetadataException``)."""
    _category = True


class ApplicationRecoverableError(RiverlogError):
    """Fatal to this producer or group member: another instance took over, so the application closes
    it and starts a new one (Kafka's ``ApplicationRecoverableException``, KIP-1050)."""
    _category = True


CATEGORIES = (RetriableError, InvalidMetadataError, ApplicationRecoverableError)
"""The abstract category bases (TransactionAbortableError is a category and also Kafka's error 120)."""


# ----------------------------------------------------------------------------------- the broker
class UnknownServerError(RiverlogError):
    """An unexpected failure on the broker."""
    code, grpc_status = -1, S.INTERNAL


class OffsetOutOfRangeError(RiverlogError):
    ('The requested offset is outside [log start, log end]; details carry both so the client can apply '
     'auto.offset.reset.')
    code, grpc_status = 1, S.OUT_OF_RANGE


class CorruptRecordError(RiverlogError):
    """A record batch failed its CRC-32C or length check."""
    code, grpc_status = 2, S.DATA_LOSS


class UnknownTopicOrPartitionError(InvalidMetadataError):
    """The topic or partition does not exist (retriable: it may be being created)."""
    code, grpc_status = 3, S.NOT_FOUND


class LeaderNotAvailableError(InvalidMetadataError):
    code, grpc_status = 5, S.UNAVAILABLE


class NotLeaderOrFollowerError(InvalidMetadataError):
    """This broker does not lead the partition; refresh metadata and retry."""
    code, grpc_status = 6, S.FAILED_PRECONDITION


class RequestTimedOutError(RetriableError):
    code, grpc_status = 7, S.DEADLINE_EXCEEDED


class BrokerNotAvailableError(RetriableError):
    code, grpc_status = 8, S.UNAVAILABLE


class MessageTooLargeError(RiverlogError):
    """A record or batch is larger than message.max.bytes / max.message.bytes."""
    code, grpc_status = 10, S.INVALID_ARGUMENT


class NetworkError(InvalidMetadataError):
    """The broker could not be reached or the connection broke."""
    code, grpc_status = 13, S.UNAVAILABLE


class InvalidTopicError(RiverlogError):
    """The topic name breaks Kafka's naming rules."""
    code, grpc_status = 17, S.INVALID_ARGUMENT


class RecordListTooLargeError(RiverlogError):
    code, grpc_status = 18, S.INVALID_ARGUMENT


class NotEnoughReplicasError(RetriableError):
    code, grpc_status = 19, S.UNAVAILABLE


class NotEnoughReplicasAfterAppendError(RetriableError):
    code, grpc_status = 20, S.UNAVAILABLE


class InvalidRequiredAcksError(RiverlogError):
    code, grpc_status = 21, S.INVALID_ARGUMENT


class InvalidTimestampError(RiverlogError):
    code, grpc_status = 32, S.INVALID_ARGUMENT


class UnsupportedVersionError(RiverlogError):
    """The broker does not know this batch magic or request form."""
    code, grpc_status = 35, S.UNIMPLEMENTED


class TopicAlreadyExistsError(RiverlogError):
    code, grpc_status = 36, S.ALREADY_EXISTS


class InvalidPartitionsError(RiverlogError):
    code, grpc_status = 37, S.INVALID_ARGUMENT


class InvalidReplicationFactorError(RiverlogError):
    code, grpc_status = 38, S.INVALID_ARGUMENT


class InvalidReplicaAssignmentError(RiverlogError):
    code, grpc_status = 39, S.INVALID_ARGUMENT


class InvalidConfigError(RiverlogError):
    """A configuration name is unknown or its value is invalid."""
    code, grpc_status = 40, S.INVALID_ARGUMENT


class NotControllerError(RetriableError):
    """This node is not the active controller; details carry leader_id when it is known."""
    code, grpc_status = 41, S.UNAVAILABLE


class InvalidRequestError(RiverlogError):
    code, grpc_status = 42, S.INVALID_ARGUMENT


class ClusterAuthorizationFailedError(RiverlogError):
    ('An inter-broker request (follower fetch, transaction markers) sent to the client listener: brokers '
     "send these to each other's inter.broker.listener.name listener.")
    code, grpc_status = 31, S.PERMISSION_DENIED


class PolicyViolationError(RiverlogError):
    code, grpc_status = 44, S.FAILED_PRECONDITION


class TopicDeletionDisabledError(RiverlogError):
    """DeleteTopics on a cluster whose brokers set ``delete.topic.enable=false`` (Kafka's
    ``TopicDeletionDisabledException``, which ``ControllerApis.deleteTopics`` raises)."""
    code, grpc_status = 73, S.FAILED_PRECONDITION


class KafkaStorageError(InvalidMetadataError):
    """The partition's log directory failed (disk error)."""
    code, grpc_status = 56, S.UNAVAILABLE


class PreferredLeaderNotAvailableError(InvalidMetadataError):
    code, grpc_status = 80, S.UNAVAILABLE


class FencedLeaderEpochError(InvalidMetadataError):
    """The request's leader epoch is older than the replica's: refresh metadata."""
    code, grpc_status = 74, S.FAILED_PRECONDITION


class UnknownLeaderEpochError(RetriableError):
    """The request's leader epoch is newer than the replica knows yet: retry shortly."""
    code, grpc_status = 75, S.FAILED_PRECONDITION


class OffsetNotAvailableError(RetriableError):
    """A new leader's high watermark has not yet reached the start of its leader epoch, so the
    offset it would answer could be below one a consumer already saw: retry shortly."""
    code, grpc_status = 78, S.UNAVAILABLE


class StaleBrokerEpochError(RiverlogError):
    """A broker spoke with an epoch from an earlier registration."""
    code, grpc_status = 77, S.FAILED_PRECONDITION


class EligibleLeadersNotAvailableError(InvalidMetadataError):
    """An unclean election found no live replica to lead the partition."""
    code, grpc_status = 83, S.UNAVAILABLE


class ElectionNotNeededError(RiverlogError):
    """The preferred replica already leads the partition (an unclean election: it has a leader)."""
    code, grpc_status = 84, S.FAILED_PRECONDITION


class InvalidRecordError(RiverlogError):
    """A batch is well-formed on the wire but its body is not a valid record body."""
    code, grpc_status = 87, S.INVALID_ARGUMENT


class ThrottlingQuotaExceededError(RetriableError):
    code, grpc_status = 89, S.RESOURCE_EXHAUSTED


# Families in modules of their own, re-exported: callers import every error from broker.errors.
from broker.errors.transactions import (  # noqa: E402, F401
    ConcurrentTransactionsError, InvalidProducerEpochError, InvalidProducerIdMappingError,
    InvalidTxnStateError, InvalidTxnTimeoutError, OutOfOrderSequenceError, ProducerFencedError, StateError,
    TransactionAbortableError, TransactionCoordinatorFencedError, TransactionalIdNotFoundError,
    UnknownProducerIdError)
from broker.errors.groups import (  # noqa: E402, F401
    CoordinatorLoadInProgressError, CoordinatorNotAvailableError, FencedInstanceIdError,
    FencedMemberEpochError, GroupIdNotFoundError, GroupMaxSizeReachedError, GroupSubscribedToTopicError, IllegalGenerationError,
    InvalidGroupIdError, InvalidSessionTimeoutError, NonEmptyGroupError, NotCoordinatorError,
    OffsetMetadataTooLargeError, StaleMemberEpochError, UnknownMemberIdError, UnsupportedAssignorError)
from broker.errors.local import (  # noqa: E402, F401
    BadMessageError, ClientClosedError, ConflictError, InFlightPurgedError, KafkaTimeoutError,
    NotSupportedError, PartitionEOF, QueueFullError, QueuePurgedError, UnknownPartitionError)

del S

# librdkafka's local codes that other typed errors stand for (KafkaException(KafkaError(code)) raises these).
_LOCAL_ALIASES: dict[int, type[RiverlogError]] = {
    -192: KafkaTimeoutError,  # _MSG_TIMED_OUT: delivery.timeout.ms passed
    -195: NetworkError,  # _TRANSPORT
    -187: NetworkError,  # _ALL_BROKERS_DOWN
    -188: UnknownTopicOrPartitionError,  # _UNKNOWN_TOPIC
    -186: InvalidConfigError,  # _INVALID_ARG
    -144: ProducerFencedError,  # _FENCED
    -165: NotSupportedError,  # _UNSUPPORTED_FEATURE
}

from broker.errors.kafka_error import KafkaError  # noqa: E402  (the value object refers back to the classes above)

KafkaException = RiverlogError
"""confluent-kafka's exception: every typed error is one, and ``e.args[0]`` is its :class:`KafkaError`;
``KafkaException(kafka_error)`` builds the typed error the KafkaError stands for."""

