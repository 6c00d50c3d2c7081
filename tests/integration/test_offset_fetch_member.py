"""OffsetFetch v9 (KIP-848) over the wire, on a real broker: a subscribed consumer reads its group's
offsets under its member id and epoch, the admin tools under none, and the coordinator refuses
another epoch (``STALE_MEMBER_EPOCH``) or an unknown member (``UNKNOWN_MEMBER_ID``) group-wide."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.client.admin import ConsumerGroupTopicPartitions
from broker.client.coordinator import CoordinatorClient
from broker.errors import KafkaError
from broker.proto import riverlog_pb2 as pb
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_member_reads_under_its_epoch_and_the_coordinator_refuses_others(shared_broker, topic_name):
    servers, group = shared_broker.bootstrap, f"{topic_name}-g"
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
        producer = Producer({"bootstrap.servers": servers})
        producer.produce(topic_name, value=b"v", partition=0)
        producer.flush(30)
        consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        try:
            consumer.subscribe([topic_name])
            message = wait_until(lambda: consumer.poll(0.2), 30, 0, "the record")
            consumer.commit(message, asynchronous=False)
            meta = consumer.consumer_group_metadata()
            assert meta.member_id and meta.member_epoch > 0
            assert consumer.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 1

            coordinator = CoordinatorClient(consumer.cluster, group)

            def fetch(**member):
                response = coordinator.call("OffsetFetch", pb.OffsetFetchRequest(group_id=group, **member), 10)
                return response.error_code, [(o.partition, o.offset) for o in response.offsets]

            assert fetch(member_id=meta.member_id, member_epoch=meta.member_epoch) == (0, [(0, 1)])
            assert fetch(member_id=meta.member_id, member_epoch=meta.member_epoch + 1) == (
                KafkaError.STALE_MEMBER_EPOCH, [])
            assert fetch(member_id="gone", member_epoch=meta.member_epoch) == (KafkaError.UNKNOWN_MEMBER_ID, [])
            found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
            assert [(tp.partition, tp.offset) for tp in found.topic_partitions] == [(0, 1)]
        finally:
            consumer.close()
