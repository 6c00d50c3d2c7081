"""confluent-kafka-python's own unit tests (tests/test_message.py, test_topic_partition.py,
test_error.py, test_kafka_error.py, test_partitioners.py, test_Producer.py's config cases) and
librdkafka's CONFIGURATION.md and partitioner test vectors, run against Riverlog's client objects:
what a program (or its unit tests) that builds Messages, TopicPartitions and configurations sees."""
from __future__ import annotations

import pickle
import zlib

import pytest

from broker.client import (KafkaError, KafkaException, Message, TopicPartition, consistent, fnv1a, murmur2)
from broker.client.config import CONSUMER_CONFIG, PRODUCER_CONFIG, client_config
from broker.client.error import ConsumeError, ProduceError
from broker.errors import InvalidConfigError, PartitionEOF

pytestmark = pytest.mark.unit

EMPTY_REDUCE = (None, -1, -1001, None, None, None, None, (0, 0), -1.0, -1, -1)


# ---------------------------------------------------------------- Message (tests/test_message.py)
def test_message_takes_confluents_positional_order():
    headers, error = [], object()
    msg = Message("t", 1, 2, "k", "v", headers, error, (0, 4), 5.67, 3)
    assert (msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()) == ("t", 1, 2, "k", "v")
    assert msg.headers() is headers and msg.error() is error and len(msg) == 1
    assert (msg.timestamp(), msg.latency(), msg.leader_epoch()) == ((0, 4), 5.67, 3)
    kw = Message(topic="t", partition=1, offset=2, key="k", value="v", headers=headers, error=error,
                 timestamp=(0, 4), latency=5.67, leader_epoch=3)
    assert (kw.partition(), kw.offset(), kw.timestamp(), kw.latency(), kw.leader_epoch()) == (1, 2, (0, 4), 5.67, 3)
    with pytest.raises(TypeError, match="timestamp must be a tuple"):
        Message("t", 0, 0, None, None, None, None, 1234)


@pytest.mark.parametrize("make", [
    Message,
    lambda: Message(None, -2, -2, None, None, None, None, None, -2.0, -2),
])
def test_an_empty_message_has_nones_where_confluents_has_them(make):
    msg = make()
    assert (len(msg), msg.topic(), msg.value(), msg.key(), msg.headers(), msg.error()) == (0, None, None, None, None,
                                                                                          None)
    assert (msg.partition(), msg.offset(), msg.leader_epoch(), msg.latency()) == (None, None, None, None)
    assert msg.timestamp() == (0, 0) and msg.delivery_count() is None and str(msg) and repr(msg)
    assert msg.__reduce__() == (Message, EMPTY_REDUCE)


def test_setters_keep_what_they_are_given_and_a_typed_error_becomes_a_kafka_error():
    msg, error = Message(), object()
    msg.set_topic("t")
    msg.set_value("v")
    msg.set_error(error)
    assert (msg.topic(), msg.value(), len(msg)) == ("t", "v", 1) and msg.error() is error
    msg.set_error(PartitionEOF("end"))
    assert isinstance(msg.error(), KafkaError) and msg.error().code() == KafkaError._PARTITION_EOF
    with pytest.raises(TypeError):
        len(Message(value=1))


def test_messages_compare_by_value_and_are_neither_ordered_nor_hashable():
    args0 = "t", 1, 2, "k", "v", [], None, (0, 4), 5.67, 3
    msg0, msg01 = Message(*args0), Message(*args0)
    msg1 = Message("t", 1, 2, "z", "v", [], None, (0, 4), 5.67, 3)
    assert msg0 == msg01 and not msg0 != msg01 and msg0 != msg1 and msg0 != 1 and msg0 != object()
    assert Message(*args0[:8], 9.0, 3) == msg0   # latency is not compared
    for other in (msg0, None, object()):
        with pytest.raises(TypeError):
            msg0 < other  # noqa: B015 - the comparison is what is tested
    with pytest.raises(TypeError):
        hash(msg0)


def test_a_message_pickles_through_confluents_constructor_arguments():
    args = "t", 1, 2, "k", "v", [], None, (0, 4), 5.67, 3, 5
    msg = Message(*args)
    assert msg.__reduce__() == (Message, args) and msg.delivery_count() == 5
    restored = pickle.loads(pickle.dumps(msg))
    assert restored == msg and restored is not msg and restored.latency() == 5.67
    with pytest.raises(OverflowError):
        Message("t", 0, 0, None, None, None, None, (0, 0), -1.0, -1, 32768)


def test_a_consumed_record_without_a_timestamp_reads_as_librdkafkas():
    record = Message._record("t", 0, 7, b"k", b"v", None, -1, 1)
    assert record.timestamp() == (0, -1) and (record.partition(), record.offset()) == (0, 7)
    failed = Message._record("t", -1, -1, None, b"v", None, 5, 1, PartitionEOF("x"))
    assert (failed.partition(), failed.offset(), failed.timestamp()) == (None, -1, (1, 5))
    event = Message._record("t", 3, -1001, None, None, None, None, 0, PartitionEOF("x"))
    assert (event.partition(), event.offset(), event.timestamp()) == (3, None, (0, -1))


def test_a_message_subclass_builds_and_pickles():
    class Message2(Message):
        def __init__(self, *args):
            super().__init__(*args)
            self.dummy = 1

    msg = Message2()
    assert type(msg) is Message2 and msg.dummy == 1 and pickle.loads(pickle.dumps(msg)) == msg


# ---------------------------------------------------------------- TopicPartition, errors: guards
def test_topic_partition_sorts_compares_hashes_and_subclasses_as_confluents():   # guard (already matched)
    tps = sorted([TopicPartition("topicA", 5), TopicPartition("topic3", 0), TopicPartition("topicA", 5),
                  TopicPartition("topic1", 3)])
    assert tps == [TopicPartition("topic1", 3), TopicPartition("topic3", 0), TopicPartition("topicA", 5),
                   TopicPartition("topicA", 5)]
    assert TopicPartition("aa", 19002) > TopicPartition("aa", 0) and TopicPartition("ulv", 2) < TopicPartition("xy", 0)
    assert hash(TopicPartition("test", 99)) != hash(TopicPartition("somethingelse", 12))

    class SubTopicPartition(TopicPartition):
        def __init__(self, topic_part_str):
            topic, part = topic_part_str.split(":")
            super().__init__(topic=topic, partition=int(part))

    assert (SubTopicPartition("topic2:920").topic, SubTopicPartition("topic2:920").partition) == ("topic2", 920)


def test_client_errors_and_kafka_error_flags_as_confluents_tests():   # guard (already matched)
    ce = ConsumeError(KafkaError(KafkaError.INVALID_CONFIG), exception=ValueError())
    assert (ce.code, ce.name) == (KafkaError.INVALID_CONFIG, "INVALID_CONFIG") and isinstance(ce.exception, ValueError)
    pe = ProduceError(KafkaError(KafkaError._KEY_SERIALIZATION, "Unable to serialize key"))
    assert (pe.code, pe.name, pe.args[0].str()) == (KafkaError._KEY_SERIALIZATION, "_KEY_SERIALIZATION",
                                                    "Unable to serialize key")

    class MyExc(KafkaException):
        def a_method(self):
            return "yes"

    assert MyExc().a_method() == "yes" and isinstance(MyExc(), KafkaException)


# librdkafka's rd_kafka_err2str (src/rdkafka.c's rd_kafka_err_descs), as confluent-kafka's KafkaError.str()
# gives it for an error made from its code alone; the ducktape transaction test matches on "Local: Erroneous state".
@pytest.mark.parametrize("code, text", [
    (KafkaError._PARTITION_EOF, "Broker: No more messages"), (KafkaError._TIMED_OUT, "Local: Timed out"),
    (KafkaError._STATE, "Local: Erroneous state"), (KafkaError._MSG_TIMED_OUT, "Local: Message timed out"),
    (KafkaError._ALL_BROKERS_DOWN, "Local: All broker connections are down"),
    (KafkaError.UNKNOWN_TOPIC_OR_PART, "Broker: Unknown topic or partition"),
    (KafkaError.NOT_LEADER_FOR_PARTITION, "Broker: Not leader for partition"),
    (KafkaError.NO_ERROR, "Success"), (KafkaError.UNKNOWN, "Unknown broker error"),
    (KafkaError.PRODUCER_FENCED, "Broker: There is a newer producer with the same transactionalId which fences "
                                 "the current one")])
def test_a_code_alone_reads_as_librdkafkas_description(code, text):
    err = KafkaError(code)
    assert err.str() == text and str(err).endswith(f'str="{text}"}}')
    assert KafkaError(code, "Mayday!").str() == "Mayday!"


@pytest.mark.parametrize("flags, expected", [({"fatal": True}, (True, False, False)),
                                             ({"retriable": True}, (False, True, False)),
                                             ({"txn_requires_abort": True}, (False, False, True))])
def test_a_kafka_exception_keeps_the_flags_of_its_kafka_error(flags, expected):
    with pytest.raises(KafkaException) as exc:
        raise KafkaException(KafkaError(KafkaError.MEMBER_ID_REQUIRED, **flags))
    err = exc.value.args[0]
    assert isinstance(err, KafkaError) and (err.fatal(), err.retriable(), err.txn_requires_abort()) == expected


# ---------------------------------------------------------------- partitioners (librdkafka's vectors)
_UNALIGNED = b"PreAmbleWillBeRemoved,ThePrePartThatIs"
# src/rdmurmur2.c unittest_murmur2: Java's murmur2 of each key, as a signed 32-bit int.
MURMUR2_VECTORS = {b"kafka": 0xD067CF64, b"giberish123456789": 0x8F552B0C, b"1234": 0x9FC97B14, b"234": 0xE7C009CA,
                   b"34": 0x873930DA, b"4": 0x5A4B5CA1, _UNALIGNED: 0x78424F1C, _UNALIGNED[1:]: 0x4A62B377,
                   _UNALIGNED[2:]: 0xE0E4E09E, _UNALIGNED[3:]: 0x62B8B43F, b"": 0x106E08D9}


@pytest.mark.parametrize("key, hashed", sorted(MURMUR2_VECTORS.items()))
def test_murmur2_partitions_librdkafkas_test_vectors(key, hashed):   # guard (already matched)
    for count in (1, 7, 1000, 2**31 - 1):
        assert murmur2(key, count) == (hashed & 0x7FFFFFFF) % count


def test_partitioner_functions_check_their_arguments_as_confluents():   # guard (already matched)
    assert [murmur2(b"kafka", 10)] * 2 == [(0xD067CF64 & 0x7FFFFFFF) % 10] * 2   # deterministic
    assert [consistent(b"test_key", 10)] * 2 == [zlib.crc32(b"test_key") % 10] * 2
    assert [fnv1a(b"kafka", 10)] * 2 == [0x0D33C4E1 % 10] * 2   # src/rdfnv1a.c's vector
    with pytest.raises(ValueError, match="partition_count must be > 0"):
        murmur2(b"key", 0)
    for args in ((b"key", "10"), ("string_key", 10)):
        with pytest.raises(TypeError):
            murmur2(*args)


# ---------------------------------------------------------------- configuration (CONFIGURATION.md)
@pytest.mark.parametrize("config", [None, ["bootstrap.servers"], "bootstrap.servers=a:1"])
def test_no_configuration_dict_is_confluents_type_error(config):
    with pytest.raises(TypeError, match="expected configuration dict"):
        client_config(PRODUCER_CONFIG, config, {})
    assert client_config(PRODUCER_CONFIG, None, {"linger.ms": 3})["linger.ms"] == 3   # keywords alone do


def test_an_unknown_property_is_librdkafkas_invalid_arg():
    with pytest.raises(KafkaException, match='No such configuration property: "should.fail"') as caught:
        client_config(PRODUCER_CONFIG, {"should.fail": False}, {})
    assert isinstance(caught.value, InvalidConfigError)
    assert caught.value.args[0].code() == KafkaError._INVALID_ARG


def test_an_invalid_value_is_librdkafkas_invalid_arg():
    with pytest.raises(KafkaException, match='Invalid value for configuration property "partitioner": murmur') \
            as caught:
        client_config(PRODUCER_CONFIG, {"partitioner": "murmur"}, {})
    assert caught.value.args[0].code() == KafkaError._INVALID_ARG
    for name in ("murmur2", "murmur2_random", "consistent", "consistent_random", "fnv1a", "fnv1a_random", "random"):
        assert client_config(PRODUCER_CONFIG, {"partitioner": name}, {})["partitioner"] == name


@pytest.mark.parametrize("name", ["error_cb", "stats_cb"])
def test_a_generic_callback_that_is_not_callable_is_a_type_error(name):
    with pytest.raises(TypeError, match=f"expected {name} property as a callable function"):
        client_config(CONSUMER_CONFIG, {name: "not callable"}, {})


@pytest.mark.parametrize("kind, name", [(PRODUCER_CONFIG, "on_delivery"), (CONSUMER_CONFIG, "on_commit")])
def test_a_client_callback_that_is_not_callable_is_invalid_arg(kind, name):
    with pytest.raises(KafkaException, match=f"{name} requires a callable object") as caught:
        client_config(kind, {name: 42}, {})
    assert caught.value.args[0].code() == KafkaError._INVALID_ARG


def test_default_topic_config_is_merged_over_the_top_level_keys():
    cfg = client_config(PRODUCER_CONFIG, {"message.timeout.ms": 600000,
                                          "default.topic.config": {"message.timeout.ms": 1000, "acks": "1"}}, {})
    assert cfg["delivery.timeout.ms"] == 1000 and cfg["acks"] == "1"
    consumer = client_config(CONSUMER_CONFIG, {"default.topic.config": {"auto.offset.reset": "smallest"}}, {})
    assert consumer["auto.offset.reset"] == "smallest"


def test_more_librdkafka_names_are_accepted():
    cfg = client_config(PRODUCER_CONFIG, {"log.thread.name": True, "socket.connection.setup.timeout.ms": 1000,
                                          "topic.metadata.refresh.sparse": True, "enable.random.seed": True,
                                          "metadata.broker.list": "h:1"}, {})
    assert cfg["bootstrap.servers"] == "h:1" and "log.thread.name" not in cfg
    assert client_config(CONSUMER_CONFIG, {"auto.commit.enable": False}, {})["enable.auto.commit"] is False
