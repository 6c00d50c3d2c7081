"""``group.consumer.max.size``, as Kafka's ``throwIfConsumerGroupIsFull``: a consumer group that has
that many members refuses a new one with ``GROUP_MAX_SIZE_REACHED`` (fatal to that consumer, as
librdkafka treats it), while its members go on; a member that leaves makes room."""
from __future__ import annotations

import pytest

from broker.client import Consumer
from broker.errors import GroupMaxSizeReachedError, KafkaError
from broker.group.group import ConsumerGroup
from tests.conftest import wait_until
from tests.integration.test_groups import GROUP_CONFIG, Member, make_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_a_full_group_refuses_a_new_member_and_keeps_its_own():
    g = ConsumerGroup("g")
    joined = [g.heartbeat("", 0, topics=["t"], assignor_name="range", partitions={"t": 2}, now_ms=0,
                          max_size=2, session_timeout_ms=45_000).member_id for _ in range(2)]
    with pytest.raises(GroupMaxSizeReachedError, match=r"^The consumer group has reached its maximum capacity of 2 "
                                                       r"members\.$"):
        g.heartbeat("", 0, topics=["t"], assignor_name="range", partitions={"t": 2}, now_ms=0, max_size=2)
    g.heartbeat(joined[0], g.members[joined[0]].epoch, partitions={"t": 2}, now_ms=1, max_size=2)  # members go on
    g.heartbeat(joined[1], -1, partitions={"t": 2}, now_ms=2, max_size=2)                           # one leaves
    g.heartbeat("", 0, topics=["t"], assignor_name="range", partitions={"t": 2}, now_ms=3, max_size=2)
    assert len(g.members) == 2


def test_a_third_consumer_of_a_group_of_two_fails_and_the_two_keep_reading(broker_factory, topic_name):
    broker = broker_factory({**GROUP_CONFIG, "group.consumer.max.size": 2})
    make_topic(broker.bootstrap, topic_name, partitions=2, records=10)
    errors = []
    a, b = Member(broker.bootstrap, "full", topic_name), Member(broker.bootstrap, "full", topic_name)
    third = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "full", "session.timeout.ms": 2000,
                      "heartbeat.interval.ms": 200, "error_cb": errors.append})
    try:
        wait_until(lambda: len(a.records) + len(b.records) == 10, 30, 0.05, "both members reading")
        third.subscribe([topic_name])
        with pytest.raises(GroupMaxSizeReachedError, match="maximum capacity of 2 members"):
            wait_until(lambda: third.poll(0.1) and False, 30, 0, "the refusal")
        third.poll(0.1)                                        # serves error_cb
        assert [e.code() for e in errors] == [KafkaError.GROUP_MAX_SIZE_REACHED]
        assert a.alive and b.alive and third.assignment() == []
    finally:
        third.close(), a.close(), b.close()
