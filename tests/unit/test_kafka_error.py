"""confluent-kafka's KafkaError value object and KafkaException, over Riverlog's typed errors."""
from __future__ import annotations

import pickle

import pytest

from broker import errors
from broker.client import KafkaError, KafkaException


def test_constants_are_librdkafkas_codes():
    assert KafkaError._PARTITION_EOF == -191 and KafkaError._MSG_TIMED_OUT == -192
    assert KafkaError._TIMED_OUT == -185 and KafkaError._QUEUE_FULL == -184
    assert KafkaError.OFFSET_OUT_OF_RANGE == 1 and KafkaError.UNKNOWN_TOPIC_OR_PART == 3
    assert KafkaError.NOT_LEADER_OR_FOLLOWER == KafkaError.NOT_LEADER_FOR_PARTITION == 6
    assert KafkaError.PRODUCER_FENCED == 90 and KafkaError.NO_ERROR == 0


def test_value_object_methods_and_equality():
    err = KafkaError(KafkaError._PARTITION_EOF)
    assert err.code() == -191 and err.name() == "_PARTITION_EOF"
    assert err == KafkaError._PARTITION_EOF and err == KafkaError(-191) and err != KafkaError.NO_ERROR
    assert hash(err) == hash(KafkaError(-191))
    assert not err.retriable() and not err.fatal() and not err.txn_requires_abort()
    assert "_PARTITION_EOF" in str(err) and err.str()
    flagged = KafkaError(KafkaError.INVALID_CONFIG, "bad acks", fatal=True, retriable=True, txn_requires_abort=True)
    assert flagged.fatal() and flagged.retriable() and flagged.txn_requires_abort() and flagged.str() == "bad acks"
    assert pickle.loads(pickle.dumps(flagged)) == flagged


def test_typed_errors_carry_it_in_args0():
    e = errors.PartitionEOF("end of orders[0]")
    assert isinstance(e, KafkaException) and e.args[0].code() == KafkaError._PARTITION_EOF
    assert e.code == 1006 and str(e) == "end of orders[0]"  # Riverlog's wire code and message stay
    assert e.args[0].exception() is e
    fenced = errors.ProducerFencedError("another instance")
    assert fenced.args[0].fatal() and not fenced.args[0].retriable()
    assert errors.NotEnoughReplicasError("x").args[0].retriable()
    assert errors.TransactionAbortableError("x").args[0].txn_requires_abort()
    assert pickle.loads(pickle.dumps(e)).args[0] == KafkaError._PARTITION_EOF


def test_kafka_exception_of_a_kafka_error_raises_the_typed_error():
    with pytest.raises(errors.CorruptRecordError) as caught:
        raise KafkaException(errors.CorruptRecordError("bad crc", offset=7).args[0])
    assert caught.value.details == {"offset": 7} and caught.value.args[0].code() == KafkaError.INVALID_MSG
    with pytest.raises(errors.KafkaTimeoutError):
        raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT))
    local = KafkaException(KafkaError(KafkaError._CONFLICT, "already assigned"))
    assert local.args[0].code() == KafkaError._CONFLICT and str(local) == "already assigned"


def test_a_code_only_error_builds_its_typed_error():
    assert isinstance(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS).exception(), errors.TopicAlreadyExistsError)
    assert isinstance(KafkaError(KafkaError._QUEUE_FULL).exception(), BufferError)
