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
                        if inspect.isclass(obj) and issubclass(obj, RiverlogError) and obj is not RiverlogError),
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
    "InvalidRecordError": 87, "ThrottlingQuotaExceededError": 89,
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
    assert errors.KafkaException is RiverlogError and errors.KafkaError is RiverlogError
    for cls in ERROR_CLASSES:
        with pytest.raises(errors.KafkaException):
            raise cls("x")
