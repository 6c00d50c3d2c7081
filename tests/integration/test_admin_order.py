"""An AdminClient's calls reach the brokers in the order they were made (futures are still
returned at once, as with confluent-kafka)."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, NewTopic, OffsetSpec, Producer, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_list_offsets_made_after_delete_records_sees_the_new_low_watermark(shared_broker, topic_name):
    rounds = 100
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
        with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
            for i in range(rounds + 1):
                p.produce(topic_name, value=b"%d" % i, partition=0)
            assert p.flush(30) == 0
        tp = TopicPartition(topic_name, 0)
        seen = []
        for i in range(1, rounds + 1):
            [deleted] = admin.delete_records({tp: i}).values()
            earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp]   # made before either is answered
            seen.append((deleted.result(30).low_watermark, earliest.result(30).offset))
    assert seen == [(i, i) for i in range(1, rounds + 1)]
