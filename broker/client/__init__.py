"""Riverlog's Python client, shaped like confluent-kafka (Producer, Consumer, AdminClient).

This package, :mod:`broker.client.admin`, :mod:`broker.client.error`,
:mod:`broker.client.serialization` (confluent_kafka's modules of those names) and
:mod:`broker.client.exactly_once` are the client's public modules; the others are its inside (the
layer map in docs/architecture.md keeps other packages out of them).
"""
from broker.client.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                 DeletedRecords, DescribeClusterResult, ListOffsetsResultInfo, NewPartitions, NewTopic,
                                 OffsetSpec, PartitionMetadata, ResourceType, TopicMetadata)
from broker.client.cluster import BrokerMetadata, ClusterMetadata
from broker.client.config import CONSUMER_CONFIG, PRODUCER_CONFIG
from broker.client.consumer import BATCH_SCHEMA, Consumer, ConsumerGroupMetadata
from broker.client.error import (ConcurrentModificationException, ConsumeError, IllegalStateException,
                                 KeyDeserializationError, KeySerializationError, ProduceError, SerializationError,
                                 ValueDeserializationError, ValueSerializationError)
from broker.client.exactly_once import ExactlyOnce
from broker.client.group_admin import (ConsumerGroupDescription, ConsumerGroupListing, ConsumerGroupTopicPartitions,
                                       ListConsumerGroupsResult, MemberAssignment, MemberDescription)
from broker.client.message import (OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED,
                                   TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,
                                   TIMESTAMP_NOT_AVAILABLE, Message, TopicPartition)
from broker.client.key_partitioners import consistent, fnv1a, murmur2
from broker.client.model import (AclOperation, ConsumerGroupState, ConsumerGroupType, ElectionType, IsolationLevel,
                                 Node, ThrottleEvent, TopicCollection, TopicDescription, TopicPartitionInfo, Uuid)
from broker.client.producer import Producer
from broker.client.serializing import DeserializingConsumer, SerializingProducer
from broker.client.admin_abort import AbortTransactionSpec
from broker.client.txn_admin import (ActiveProducer, OpenTransaction, PartitionProducers, TransactionDescription,
                                     TransactionHandle, TransactionListing)
from broker.client.version import libversion, version
from broker.errors import KafkaError, KafkaException, RiverlogError

__version__ = version()

__all__ = [
    "AclOperation", "AdminClient", "AlterConfigOpType", "BATCH_SCHEMA", "BrokerMetadata", "ClusterMetadata", "ConfigEntry",
    "ConfigResource",
    "ConfigSource", "ConsumeError", "Consumer", "ConsumerGroupDescription", "ConsumerGroupListing",
    "ConsumerGroupMetadata", "ConsumerGroupState", "ConsumerGroupTopicPartitions", "ConsumerGroupType",
    "DeletedRecords", "DescribeClusterResult", "DeserializingConsumer", "ElectionType", "IsolationLevel",
    "KeyDeserializationError", "KeySerializationError", "ListConsumerGroupsResult", "MemberAssignment",
    "MemberDescription", "KafkaError", "KafkaException", "ListOffsetsResultInfo", "Message", "NewPartitions",
    "NewTopic", "Node", "OFFSET_BEGINNING", "OFFSET_END", "OFFSET_INVALID", "OFFSET_STORED", "OffsetSpec",
    "PartitionMetadata", "ProduceError", "Producer", "ResourceType", "RiverlogError", "SerializationError",
    "SerializingProducer", "TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "TIMESTAMP_NOT_AVAILABLE",
    "TopicCollection", "TopicDescription", "TopicMetadata", "TopicPartition", "TopicPartitionInfo",
    "ValueDeserializationError", "ValueSerializationError",
    "AbortTransactionSpec", "ActiveProducer", "OpenTransaction", "PartitionProducers", "TransactionDescription", "TransactionListing",
    "ExactlyOnce", "CONSUMER_CONFIG", "PRODUCER_CONFIG", "TransactionHandle",
    "ConcurrentModificationException", "IllegalStateException", "ThrottleEvent", "Uuid", "consistent", "fnv1a",
    "libversion", "murmur2", "version",
]
