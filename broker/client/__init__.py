"""Riverlog's Python client, shaped like confluent-kafka (Producer, Consumer, AdminClient).

This package and :mod:`broker.client.exactly_once` are the client's public modules; the others are
its inside (the layer map in docs/architecture.md keeps other packages out of them).
"""
from broker.client.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, DeletedRecords,
                                 ListOffsetsResultInfo, NewPartitions, NewTopic, OffsetSpec, ResourceType)
from broker.client.config import PRODUCER_CONFIG
from broker.client.consumer import BATCH_SCHEMA, Consumer, ConsumerGroupMetadata
from broker.client.exactly_once import ExactlyOnce
from broker.client.group_admin import (ConsumerGroupDescription, ConsumerGroupListing, ConsumerGroupTopicPartitions,
                                       ListConsumerGroupsResult, MemberAssignment, MemberDescription)
from broker.client.message import (OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED,
                                   TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,
                                   TIMESTAMP_NOT_AVAILABLE, Message, TopicPartition)
from broker.client.producer import Producer
from broker.client.txn_admin import (ActiveProducer, OpenTransaction, PartitionProducers, TransactionDescription,
                                     TransactionHandle, TransactionListing)
from broker.errors import KafkaError, KafkaException, RiverlogError

__all__ = [
    "AdminClient", "AlterConfigOpType", "BATCH_SCHEMA", "ConfigEntry", "ConfigResource", "Consumer",
    "ConsumerGroupDescription", "ConsumerGroupListing", "ConsumerGroupMetadata", "ConsumerGroupTopicPartitions",
    "DeletedRecords", "ListConsumerGroupsResult", "MemberAssignment", "MemberDescription",
    "KafkaError", "KafkaException", "ListOffsetsResultInfo", "Message", "NewPartitions", "NewTopic", "OFFSET_BEGINNING",
    "OFFSET_END", "OFFSET_INVALID", "OFFSET_STORED", "OffsetSpec", "Producer", "ResourceType",
    "RiverlogError", "TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "TIMESTAMP_NOT_AVAILABLE",
    "TopicPartition", "ActiveProducer", "OpenTransaction", "PartitionProducers", "TransactionDescription", "TransactionListing",
    "ExactlyOnce", "PRODUCER_CONFIG", "TransactionHandle",
]
