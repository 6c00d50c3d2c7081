"""``close()`` of a consumer with ``enable.auto.commit`` commits its last positions, for an
``assign()`` consumer too (docs/groups.md; librdkafka's ``rd_kafka_assignment_serve_removals``
commits the final offsets of every partition leaving the assignment, on close included): without it
the records read since the last periodic commit are read again by the next consumer of the group."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_close_commits_an_assigned_consumer_s_positions(shared_broker, topic_name):
    servers, group = shared_broker.bootstrap, f"{topic_name}-g"
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    with Producer({"bootstrap.servers": servers}) as producer:
        for i in range(3):
            producer.produce(topic_name, value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
    config = {"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": True,
              "auto.commit.interval.ms": 600_000}  # no periodic commit within the test: only close()'s
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    read = []
    wait_until(lambda: (m := consumer.poll(0.2)) is not None and m.error() is None and read.append(m.offset())
               or len(read) == 3, 30, 0, "three records")
    consumer.close()
    with Consumer(config) as after:
        assert after.committed([TopicPartition(topic_name, 0)], 10)[0].offset == 3


def test_unassign_and_a_new_assignment_commit_the_positions_left_behind(shared_broker, topic_name):
    """librdkafka commits (in the background, ``on_commit`` told) the positions of partitions
    leaving an ``assign()`` consumer's assignment when ``enable.auto.commit``."""
    servers, group = shared_broker.bootstrap, f"{topic_name}-g"
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    with Producer({"bootstrap.servers": servers}) as producer:
        for p in (0, 1):
            producer.produce(topic_name, value=b"v", partition=p)
        assert producer.flush(30) == 0
    outcomes = []
    config = {"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": True,
              "auto.commit.interval.ms": 600_000, "on_commit": lambda err, tps: outcomes.append(
                  (err, sorted((tp.partition, tp.offset) for tp in tps)))}
    with Consumer(config) as consumer:
        for p, leave in ((0, lambda: consumer.assign([TopicPartition(topic_name, 1, 0)])), (1, consumer.unassign)):
            if p == 0:
                consumer.assign([TopicPartition(topic_name, 0, 0)])
            wait_until(lambda: (m := consumer.poll(0.2)) is not None and m.error() is None, 30, 0, "the record")
            leave()
            wait_until(lambda: consumer.poll(0.05) is None and len(outcomes) == p + 1, 30, 0, "on_commit")
        assert outcomes == [(None, [(0, 1)]), (None, [(1, 1)])]
        committed = consumer.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], 10)
        assert [tp.offset for tp in committed] == [1, 1]
