"""confluent-kafka's importable names, from the modules confluent-kafka has them in."""
from __future__ import annotations

import pickle

import pytest

pytestmark = pytest.mark.unit

TOP_LEVEL = ["Producer", "Consumer", "KafkaError", "KafkaException", "Message", "TopicPartition", "Node",
             "ConsumerGroupTopicPartitions", "ConsumerGroupState", "ConsumerGroupType", "TopicCollection",
             "TopicPartitionInfo", "IsolationLevel", "ElectionType", "SerializingProducer", "DeserializingConsumer",
             "OFFSET_BEGINNING", "OFFSET_END", "OFFSET_STORED", "OFFSET_INVALID", "TIMESTAMP_CREATE_TIME",
             "TIMESTAMP_LOG_APPEND_TIME", "TIMESTAMP_NOT_AVAILABLE", "Uuid", "ThrottleEvent", "libversion", "version",
             "murmur2", "consistent", "fnv1a", "IllegalStateException", "ConcurrentModificationException"]
ADMIN = ["AdminClient", "NewTopic", "NewPartitions", "ConfigSource", "ConfigEntry", "ConfigResource", "ResourceType",
         "AlterConfigOpType", "BrokerMetadata", "ClusterMetadata", "TopicMetadata", "PartitionMetadata",
         "ConsumerGroupListing",
         "ListConsumerGroupsResult", "ConsumerGroupDescription", "MemberAssignment", "MemberDescription",
         "OffsetSpec", "ListOffsetsResultInfo", "DeletedRecords", "TopicDescription", "DescribeClusterResult",
         "TopicPartition", "Node", "IsolationLevel", "ConsumerGroupState", "GroupMember", "GroupMetadata",
         "KafkaError", "KafkaException", "OFFSET_INVALID", "CONFIG_SOURCE_UNKNOWN_CONFIG",
         "CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG", "CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG",
         "CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG", "CONFIG_SOURCE_STATIC_BROKER_CONFIG",
         "CONFIG_SOURCE_DEFAULT_CONFIG", "CONFIG_SOURCE_GROUP_CONFIG", "RESOURCE_UNKNOWN", "RESOURCE_ANY",
         "RESOURCE_TOPIC", "RESOURCE_GROUP", "RESOURCE_BROKER", "RESOURCE_TRANSACTIONAL_ID"]
# Not provided until security lands, or at all (share groups); README.md says so.
NOT_PROVIDED = {"broker.client": ["ShareConsumer", "DeserializingShareConsumer", "AcknowledgeType", "Messages"],
                "broker.client.admin": ["AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType",
                                        "ResourcePatternType", "ScramMechanism", "ScramCredentialInfo",
                                        "UserScramCredentialAlteration", "UserScramCredentialDeletion",
                                        "UserScramCredentialUpsertion", "UserScramCredentialsDescription"]}
ERROR = ["KafkaError", "KafkaException", "Message", "ConsumeError", "ProduceError", "KeyDeserializationError",
         "ValueDeserializationError", "KeySerializationError", "ValueSerializationError"]
SERIALIZATION = ["Serializer", "Deserializer", "StringSerializer", "StringDeserializer", "IntegerSerializer",
                 "IntegerDeserializer", "DoubleSerializer", "DoubleDeserializer", "SerializationContext",
                 "MessageField", "SerializationError", "KafkaException"]


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


def test_names_not_provided_are_absent_and_the_readme_says_so():
    import os
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    for module, names in NOT_PROVIDED.items():
        mod = __import__(module, fromlist=names)
        for name in names:
            assert not hasattr(mod, name), f"{module}.{name} exists: take it off the README's not-provided list"
            assert f"`{name}`" in readme, f"README.md does not say {name} is not provided"


def test_admin_constants_are_librdkafkas_values():
    from broker.client import admin
    assert [admin.CONFIG_SOURCE_UNKNOWN_CONFIG, admin.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG,
            admin.CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG, admin.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
            admin.CONFIG_SOURCE_STATIC_BROKER_CONFIG, admin.CONFIG_SOURCE_DEFAULT_CONFIG,
            admin.CONFIG_SOURCE_GROUP_CONFIG] == [0, 1, 2, 3, 4, 5, 8]
    assert [admin.RESOURCE_UNKNOWN, admin.RESOURCE_ANY, admin.RESOURCE_TOPIC, admin.RESOURCE_GROUP,
            admin.RESOURCE_BROKER, admin.RESOURCE_TRANSACTIONAL_ID] == [0, 1, 2, 3, 4, 5]
    assert admin.ConfigSource(admin.CONFIG_SOURCE_GROUP_CONFIG) is admin.ConfigSource.GROUP_CONFIG
    from broker.client import ConsumerGroupState
    assert ConsumerGroupState.UNKOWN is ConsumerGroupState.UNKNOWN  # confluent's misspelt alias


def test_uuid_has_confluents_shape():
    from broker.client import Uuid
    u = Uuid(1, -2)
    assert (u.get_most_significant_bits(), u.get_least_significant_bits()) == (1, -2)
    assert str(u) == repr(u) == "AAAAAAAAAAH//////////g" and hash(u) == hash(1 ^ -2)
    assert u != Uuid(1, -2) and u == u  # no equality of its own, as confluent's C type
    with pytest.raises(OverflowError):
        Uuid(1 << 63, 0)


def test_partitioner_functions_pick_librdkafkas_partitions():
    import zlib

    from broker.client import consistent, fnv1a, murmur2
    # Kafka's murmur2 test vector: "21" hashes to -973932308; the partition uses its positive bits.
    assert murmur2(b"21", 1000) == (-973932308 & 0x7FFFFFFF) % 1000
    assert consistent(b"user-1", 7) == zlib.crc32(b"user-1") % 7
    assert fnv1a(b"", 5) == 0x7EE3623B % 5   # librdkafka's rd_fnv1a("") (Sarama's abs of the int32)
    with pytest.raises(ValueError):
        murmur2(b"k", 0)
    with pytest.raises(TypeError):
        murmur2("k", 3)


def test_version_and_libversion():
    import broker.client as client
    assert isinstance(client.version(), str) and client.__version__ == client.version()
    text, number = client.libversion()
    assert text == client.version() and number & 0xFF == 0xFF


def test_throttle_event_reads_as_confluents():
    from broker.client import ThrottleEvent
    assert str(ThrottleEvent("b1", 1, 0.25)) == "b1/1 throttled for 250 ms"
