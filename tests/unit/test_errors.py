"""The typed error hierarchy: unique wire codes, retriable flags, pickling, Python base classes."""
from __future__ import annotations

import inspect
import pickle

import grpc
import pytest

from broker import errors
from broker.errors import RiverlogError, error_for_code

pytestmark = pytest.mark.unit

ERROR_CLASSES = sorted((obj for obj in vars(errors).values()
                        if inspect.isclass(obj) and issubclass(obj, RiverlogError) and obj is not RiverlogError
                        and obj not in errors.CATEGORIES),  # categories are caught, never sent: no code
                       key=lambda cls: cls.code)

# Kafka's protocol error codes for the errors that have one.
KAFKA_CODES = {
    "UnknownServerError": -1, "OffsetOutOfRangeError": 1, "CorruptRecordError": 2,
    "UnknownTopicOrPartitionError": 3, "LeaderNotAvailableError": 5, "NotLeaderOrFollowerError": 6,
    "RequestTimedOutError": 7, "BrokerNotAvailableError": 8, "MessageTooLargeError": 10,
    "NetworkError": 13, "InvalidTopicError": 17, "RecordListTooLargeError": 18,
    "NotEnoughReplicasError": 19, "NotEnoughReplicasAfterAppendError": 20, "InvalidRequiredAcksError": 21,
    "InvalidTimestampError": 32, "UnsupportedVersionError": 35, "TopicAlreadyExistsError": 36,
    "InvalidPartitionsError": 37, "InvalidReplicationFactorError": 38, "InvalidConfigError": 40,
    "InvalidRequestError": 42, "PolicyViolationError": 44, "KafkaStorageError": 56,
    "InvalidRecordError": 87, "ThrottlingQuotaExceededError": 89, "TopicDeletionDisabledError": 73,
}


def test_every_error_class_is_found():
    assert len(ERROR_CLASSES) >= 30
    assert {cls.__name__ for cls in ERROR_CLASSES} >= set(KAFKA_CODES) | {"QueueFullError", "PartitionEOF"}


def test_codes_are_unique():
    codes = [cls.code for cls in ERROR_CLASSES]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_code_maps_back_to_its_class(cls):
    assert error_for_code(cls.code) is cls
    assert grpc.StatusCode[cls.grpc_status] in grpc.StatusCode
    assert isinstance(cls.retriable, bool)
    assert cls.name and cls.name == cls.name.upper()


@pytest.mark.parametrize("name, code", sorted(KAFKA_CODES.items()))
def test_codes_match_kafka(name, code):
    assert getattr(errors, name).code == code


def test_unknown_code_maps_to_the_base_class():
    assert error_for_code(123_456) is RiverlogError


def test_registering_a_code_twice_is_refused():
    with pytest.raises(TypeError):
        type("Duplicate", (RiverlogError,), {"code": errors.CorruptRecordError.code})
    assert error_for_code(errors.CorruptRecordError.code) is errors.CorruptRecordError


@pytest.mark.parametrize("name", ["UnknownTopicOrPartitionError", "NotLeaderOrFollowerError",
                                  "LeaderNotAvailableError", "RequestTimedOutError", "NetworkError",
                                  "NotEnoughReplicasError", "KafkaStorageError", "KafkaTimeoutError",
                                  "QueueFullError", "ThrottlingQuotaExceededError"])
def test_retriable_errors(name):
    assert getattr(errors, name).retriable is True


@pytest.mark.parametrize("name", ["TopicAlreadyExistsError", "InvalidTopicError", "InvalidConfigError",
                                  "MessageTooLargeError", "OffsetOutOfRangeError", "InvalidRecordError",
                                  "UnsupportedVersionError", "ClientClosedError", "UnknownServerError"])
def test_non_retriable_errors(name):
    assert getattr(errors, name).retriable is False


def test_kafka_style_names():
    assert errors.UnknownTopicOrPartitionError.name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert errors.OffsetOutOfRangeError.name == "OFFSET_OUT_OF_RANGE"
    assert errors.TopicAlreadyExistsError.name == "TOPIC_ALREADY_EXISTS"
    assert errors.QueueFullError.name == "QUEUE_FULL"


def test_grpc_statuses():
    assert errors.UnknownTopicOrPartitionError.grpc_status == grpc.StatusCode.NOT_FOUND.name
    assert errors.OffsetOutOfRangeError.grpc_status == grpc.StatusCode.OUT_OF_RANGE.name
    assert errors.CorruptRecordError.grpc_status == grpc.StatusCode.DATA_LOSS.name


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_pickle_round_trip_keeps_class_message_and_details(cls):
    error = cls("something broke", partition=3, topic="orders")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == "something broke" and copy.message == "something broke"
    assert copy.details == {"partition": 3, "topic": "orders"}


def test_message_defaults_to_the_name():
    error = errors.TopicAlreadyExistsError()
    assert str(error) == "TOPIC_ALREADY_EXISTS" == error.message
    assert pickle.loads(pickle.dumps(error)).message == "TOPIC_ALREADY_EXISTS"
    assert repr(error) == "TopicAlreadyExistsError('TOPIC_ALREADY_EXISTS')"


def test_details_are_kept():
    error = errors.OffsetOutOfRangeError("out", log_start_offset=5, log_end_offset=9)
    assert error.details == {"log_start_offset": 5, "log_end_offset": 9}


def test_queue_full_is_a_buffer_error():
    error = errors.QueueFullError("buffer.memory exhausted")
    assert isinstance(error, BufferError) and isinstance(error, RiverlogError)
    with pytest.raises(BufferError):
        raise error
    assert isinstance(pickle.loads(pickle.dumps(error)), BufferError)


def test_every_error_is_an_exception_caught_by_the_confluent_names():
    assert errors.KafkaException is RiverlogError
    for cls in ERROR_CLASSES:
        with pytest.raises(errors.KafkaException) as caught:
            raise cls("x")
        # confluent-kafka's shape: args[0] is the KafkaError value object, code() its Kafka code.
        assert isinstance(caught.value.args[0], errors.KafkaError)
        assert caught.value.args[0].code() == cls.kafka_code and caught.value.args[0].exception() is caught.value


# ----------------------------------------------------------------------------------- categories
def _classes(*names):
    return {getattr(errors, n) for n in names}


def _members(category):
    return {cls for cls in ERROR_CLASSES if issubclass(cls, category)}


# Riverlog's errors whose Kafka exception extends org.apache.kafka.common.errors.InvalidMetadataException
# (Kafka's clients module: UnknownTopicOrPartition-, LeaderNotAvailable-, NotLeaderOrFollower- (via
# NotLeaderForPartition-), Network-, KafkaStorage-, PreferredLeaderNotAvailable-, FencedLeaderEpoch-,
# EligibleLeadersNotAvailable- and ElectionNotNeededException). Kafka's others of that kind (ReplicaNotAvailable, UnknownTopicId, ...) have no
# Riverlog counterpart.
KAFKA_INVALID_METADATA = _classes(
    "UnknownTopicOrPartitionError", "LeaderNotAvailableError", "NotLeaderOrFollowerError", "NetworkError",
    "KafkaStorageError", "PreferredLeaderNotAvailableError", "FencedLeaderEpochError", "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError")
# ... and whose Kafka exception extends RetriableException directly.
KAFKA_RETRIABLE_ONLY = _classes(
    "RequestTimedOutError", "KafkaTimeoutError",  # both are Kafka's TimeoutException
    "QueueFullError",  # Kafka's BufferExhaustedException extends TimeoutException
    "NotEnoughReplicasError", "NotEnoughReplicasAfterAppendError", "NotControllerError", "UnknownLeaderEpochError",
    "ThrottlingQuotaExceededError", "ConcurrentTransactionsError", "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError", "NotCoordinatorError", "CorruptRecordError", "OffsetNotAvailableError")
# Where Riverlog's retriable flag (unchanged, and acted on by its clients) differs from Kafka's class.
RIVERLOG_ALSO_RETRIABLE = _classes(
    "BrokerNotAvailableError",  # a broker that is restarting; Kafka's is a plain ApiException
    "OutOfOrderSequenceError",  # the producer resends the missing batches in order
    "StaleMemberEpochError",    # the commit before a revocation is sent again with the member's current epoch
    "ConflictError")            # librdkafka's local _CONFLICT: call the unfinished commit again
RIVERLOG_NOT_RETRIABLE = _classes(
    "CorruptRecordError",       # the consumer stops at a corrupt batch and reports it (see architecture.md)
    "ElectionNotNeededError")   # an elect-leaders result, not a condition to retry
# org.apache.kafka.common.errors.ApplicationRecoverableException's subclasses (Kafka 4.1, KIP-1050), less
# IllegalGenerationException: Riverlog's KIP-848-only groups return it only to a TxnOffsetCommit, where
# it makes the transaction abortable (librdkafka's reading), not the application's to recover.
KAFKA_APPLICATION_RECOVERABLE = _classes(
    "ProducerFencedError", "InvalidProducerEpochError", "InvalidProducerIdMappingError", "FencedInstanceIdError",
    "UnknownMemberIdError")


def test_the_invalid_metadata_category_is_kafkas_list():
    assert _members(errors.InvalidMetadataError) == KAFKA_INVALID_METADATA - RIVERLOG_NOT_RETRIABLE


def test_the_retriable_category_is_kafkas_list_with_riverlogs_known_differences():
    kafka = KAFKA_INVALID_METADATA | KAFKA_RETRIABLE_ONLY
    assert _members(errors.RetriableError) == (kafka | RIVERLOG_ALSO_RETRIABLE) - RIVERLOG_NOT_RETRIABLE
    assert errors.InvalidMetadataError.__mro__[1] is errors.RetriableError


def test_the_transaction_abortable_category_is_kafkas_one_class():
    # Kafka's TransactionAbortableException (error 120, KIP-890) has no subclasses.
    assert _members(errors.TransactionAbortableError) == {errors.TransactionAbortableError}
    assert errors.TransactionAbortableError.code == 120
    assert errors.TransactionAbortableError.name == "TRANSACTION_ABORTABLE"
    assert not errors.TransactionAbortableError.retriable


def test_the_application_recoverable_category_is_kafkas_list():
    assert _members(errors.ApplicationRecoverableError) == KAFKA_APPLICATION_RECOVERABLE


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_the_retriable_flag_is_the_category(cls):
    assert cls.retriable is issubclass(cls, errors.RetriableError)
    assert cls("x").retriable is cls.retriable


@pytest.mark.parametrize("category", errors.CATEGORIES, ids=lambda c: c.__name__)
def test_categories_are_caught_never_raised(category):
    assert issubclass(category, RiverlogError) and "code" not in vars(category)
    with pytest.raises(TypeError, match="category"):
        category("x")


def test_a_retriable_flag_that_contradicts_the_category_is_refused():
    with pytest.raises(TypeError, match="RetriableError"):
        type("NotReallyRetriable", (errors.RetriableError,), {"retriable": False})
    with pytest.raises(TypeError, match="RetriableError"):
        type("SecretlyRetriable", (RiverlogError,), {"retriable": True})


def test_a_category_catches_its_members():
    with pytest.raises(errors.InvalidMetadataError):
        raise errors.NotLeaderOrFollowerError("moved")
    with pytest.raises(errors.RetriableError):
        raise errors.NotLeaderOrFollowerError("moved")
    with pytest.raises(errors.ApplicationRecoverableError):
        raise errors.ProducerFencedError("fenced")


# ----------------------------------------------------------------------------------- pickling, everywhere
def _all_error_classes() -> list[type]:
    """Every RiverlogError subclass defined in the shipped packages (registered or not)."""
    import importlib
    import pkgutil

    roots = ("broker", "spark_sink", "spark_source", "streams", "connect")
    for package in map(importlib.import_module, roots):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.rsplit(".", 1)[-1] not in ("__main__", "demo"):
                importlib.import_module(info.name)
    found, todo = set(), [RiverlogError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found and sub.__module__.split(".")[0] in roots:
                found.add(sub)
                todo.append(sub)
    # A category (``_category = True`` on the class itself) is caught, never raised.
    return sorted((c for c in found if c not in errors.CATEGORIES and not c.__dict__.get("_category")),
                  key=lambda c: (c.__module__, c.__name__))


ALL_ERROR_CLASSES = _all_error_classes()


def test_subclasses_outside_the_registry_are_found():
    names = {c.__name__ for c in ALL_ERROR_CLASSES}
    assert {"TransactionLostError", "SinkReusedError", "DataLossError"} <= names
    assert set(ERROR_CLASSES) <= set(ALL_ERROR_CLASSES)


@pytest.mark.parametrize("cls", ALL_ERROR_CLASSES, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_error_class_anywhere_pickles_as_itself(cls):
    error = cls("something broke", partition=3, topic="orders")
    error.extra = "kept"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == "something broke" == copy.message
    assert copy.details == {"partition": 3, "topic": "orders"}
    assert copy.extra == "kept"
    assert copy.code == cls.code and copy.retriable is cls.retriable


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_error_for_code_rebuilds_each_class(cls):
    rebuilt = error_for_code(cls.code)("from the wire", topic="orders")
    assert type(rebuilt) is cls and rebuilt.message == "from the wire" and rebuilt.details == {"topic": "orders"}


def test_a_pickle_written_by_code_still_loads():
    assert type(errors._rebuild(errors.NotLeaderOrFollowerError.code, "moved", {})) is errors.NotLeaderOrFollowerError


def test_the_error_code_key_is_one_constant():
    from broker.client import cluster
    from broker.server import rpc
    assert rpc.ERROR_CODE_KEY is errors.ERROR_CODE_KEY and cluster.ERROR_CODE_KEY is errors.ERROR_CODE_KEY
    assert errors.ERROR_CODE_KEY == "riverlog-error-code"
