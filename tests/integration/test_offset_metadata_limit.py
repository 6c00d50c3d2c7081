"""``offset.metadata.max.bytes`` as Kafka's ``OffsetMetadataManager``: an offset whose metadata
is longer is refused for its partition (``OFFSET_METADATA_TOO_LARGE``) and not written; the
request's other partitions are committed, and the coordinator keeps serving the group."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, Consumer, KafkaError, KafkaException, NewTopic, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_too_long_metadata_is_refused_for_its_partition_only(shared_broker, topic_name):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name})
    try:
        ok, big = TopicPartition(topic_name, 0, 5, "x" * 4096), TopicPartition(topic_name, 1, 7, "y" * 4097)
        with pytest.raises(KafkaException) as refused:
            c.commit(offsets=[ok, big], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.OFFSET_METADATA_TOO_LARGE
        committed = {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic_name, 0),
                                                                   TopicPartition(topic_name, 1)], timeout=30)}
        assert committed[0] == 5 and committed[1] < 0
        c.commit(offsets=[TopicPartition(topic_name, 1, 7, "small")], asynchronous=False)
        assert c.committed([TopicPartition(topic_name, 1)], timeout=30)[0].offset == 7
    finally:
        c.close()
