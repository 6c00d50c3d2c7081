"""A consumer that knows no topic yet answers for a partition as librdkafka does for one it has no
handle for: ``_UNKNOWN_PARTITION`` (position() in ``TopicPartition.error``, store_offsets() raised),
and store_offsets() with enable.auto.offset.store=true is confluent-kafka's ``_INVALID_ARG``."""
from __future__ import annotations

import pytest

from broker.client import Consumer, KafkaError, KafkaException, TopicPartition
from broker.client.message import OFFSET_INVALID


@pytest.fixture
def consumer():
    c = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "enable.auto.offset.store": False})
    yield c
    c.close()


def test_position_of_an_unknown_partition_is_invalid_with_its_error(consumer):
    [tp] = consumer.position([TopicPartition("nope", 3, 42)])
    assert (tp.topic, tp.partition, tp.offset) == ("nope", 3, OFFSET_INVALID)
    assert tp.error.code() == KafkaError._UNKNOWN_PARTITION


def test_store_offsets_of_an_unknown_partition_fails_unknown_partition(consumer):
    with pytest.raises(KafkaException) as info:
        consumer.store_offsets(offsets=[TopicPartition("nope", 0, 5)])
    assert info.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    consumer.store_offsets(offsets=[])  # nothing given, nothing refused


def test_store_offsets_with_auto_store_is_confluents_invalid_arg():
    c = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    try:
        with pytest.raises(KafkaException) as info:
            c.store_offsets(offsets=[TopicPartition("t", 0, 5)])
        error = info.value.args[0]
        assert (error.code(), error.str()) == (
            KafkaError._INVALID_ARG, "StoreOffsets failed: Local: Invalid argument or configuration")
    finally:
        c.close()


def test_offsets_for_times_of_no_partition_is_invalid_arg(consumer):
    with pytest.raises(KafkaException) as info:
        consumer.offsets_for_times([])
    assert info.value.args[0].code() == KafkaError._INVALID_ARG


@pytest.mark.parametrize("topics", [[], [""], ["orders", "orders"], ["^orders-("]])
def test_subscribe_refuses_what_librdkafka_refuses_with_invalid_arg(consumer, topics):
    """rd_kafka_subscribe: an empty list, an empty name, a duplicate or a bad pattern."""
    with pytest.raises(KafkaException) as info:
        consumer.subscribe(topics)
    error = info.value.args[0]
    assert (error.code(), error.str()) == (
        KafkaError._INVALID_ARG, "Failed to set subscription: Local: Invalid argument or configuration")
    assert consumer.memberid() is None and consumer.assignment() == []
