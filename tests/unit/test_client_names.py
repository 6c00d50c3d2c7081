"""confluent-kafka's importable names, from the modules confluent-kafka has them in."""
from __future__ import annotations

import pickle

import pytest

pytestmark = pytest.mark.unit

TOP_LEVEL = ["Producer", "Consumer", "KafkaError", "KafkaException", "Message", "TopicPartition", "Node",
             "ConsumerGroupTopicPartitions", "ConsumerGroupState", "ConsumerGroupType", "TopicCollection",
             "TopicPartitionInfo", "IsolationLevel", "ElectionType", "SerializingProducer", "DeserializingConsumer",
             "OFFSET_BEGINNING", "OFFSET_END", "OFFSET_STORED", "OFFSET_INVALID", "TIMESTAMP_CREATE_TIME",
             "TIMESTAMP_LOG_APPEND_TIME", "TIMESTAMP_NOT_AVAILABLE"]
ADMIN = ["AdminClient", "NewTopic", "NewPartitions", "ConfigSource", "ConfigEntry", "ConfigResource", "ResourceType",
         "AlterConfigOpType", "BrokerMetadata", "ClusterMetadata", "TopicMetadata", "PartitionMetadata",
         "ConsumerGroupListing",
         "ListConsumerGroupsResult", "ConsumerGroupDescription", "MemberAssignment", "MemberDescription",
         "OffsetSpec", "ListOffsetsResultInfo", "DeletedRecords", "TopicDescription", "DescribeClusterResult",
         "TopicPartition", "Node", "IsolationLevel", "ConsumerGroupState", "GroupMember", "GroupMetadata"]
ERROR = ["KafkaError", "KafkaException", "ConsumeError", "ProduceError", "KeyDeserializationError",
         "ValueDeserializationError", "KeySerializationError", "ValueSerializationError"]
SERIALIZATION = ["Serializer", "Deserializer", "StringSerializer", "StringDeserializer", "IntegerSerializer",
                 "IntegerDeserializer", "DoubleSerializer", "DoubleDeserializer", "SerializationContext",
                 "MessageField", "SerializationError"]


@pytest.mark.parametrize("module, names", [("broker.client", TOP_LEVEL), ("broker.client.admin", ADMIN),
                                           ("broker.client.error", ERROR),
                                           ("broker.client.serialization", SERIALIZATION)])
def test_confluent_names_import(module, names):
    mod = __import__(module, fromlist=names)
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"


def test_group_state_is_confluents_enum_and_equal_to_the_brokers_name():
    from broker.client import ConsumerGroupState
    from broker.client.admin import ConsumerGroupListing
    listing = ConsumerGroupListing("g", False, "Stable")
    assert listing.state is ConsumerGroupState.STABLE and listing.state == "Stable" and str(listing.state) == "Stable"
    assert ConsumerGroupListing("g", False, "Reconciling").state is ConsumerGroupState.COMPLETING_REBALANCING
    assert ConsumerGroupState.of("nonsense") is ConsumerGroupState.UNKNOWN
    assert ConsumerGroupState.STABLE in {ConsumerGroupState.STABLE} and ConsumerGroupState.STABLE.value == 3


def test_config_source_is_an_enum_equal_to_its_name():
    from broker.client.admin import ConfigEntry, ConfigSource
    entry = ConfigEntry("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG")
    assert entry.source is ConfigSource.DYNAMIC_TOPIC_CONFIG and entry.source == "DYNAMIC_TOPIC_CONFIG"
    assert ConfigEntry("x", None).source is ConfigSource.UNKNOWN_CONFIG


def test_topic_collection_takes_names_only():
    from broker.client import TopicCollection
    assert TopicCollection(["a", "b"]).topic_names == ["a", "b"]
    with pytest.raises(TypeError):
        TopicCollection("orders")


def test_client_errors_carry_the_kafka_error_the_cause_and_the_message():
    from broker.client import KafkaError, KafkaException
    from broker.client.error import ConsumeError, KeyDeserializationError, ValueSerializationError
    from broker.client.serialization import SerializationError
    cause = ValueError("not an int")
    e = KeyDeserializationError(exception=cause, kafka_message="msg")
    assert isinstance(e, ConsumeError) and isinstance(e, SerializationError) and isinstance(e, KafkaException)
    assert e.code == KafkaError._KEY_DESERIALIZATION and e.args[0] == KafkaError._KEY_DESERIALIZATION
    assert e.exception is cause and e.kafka_message == "msg" and e.name == "_KEY_DESERIALIZATION"
    assert ValueSerializationError(exception=cause).code == KafkaError._VALUE_SERIALIZATION
    eof = ConsumeError(KafkaError(KafkaError._PARTITION_EOF))
    assert type(eof) is ConsumeError and eof.code == KafkaError._PARTITION_EOF
    assert pickle.loads(pickle.dumps(e)).code == KafkaError._KEY_DESERIALIZATION
