"""``max.poll.interval.ms`` counts the time between the application's calls, not the time it is
blocked inside ``poll()``: a consumer waiting in ``poll()`` on a quiet topic is polling. As
librdkafka's ``rd_kafka_app_poll_start`` stops the check while the application is blocked in it
(and Kafka's consumer resets its poll timer inside ``poll()``), a long ``poll(timeout)`` must
neither make the member leave its group nor return ``_MAX_POLL_EXCEEDED``."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, Consumer, NewTopic
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_poll_longer_than_max_poll_interval_on_a_quiet_topic_keeps_the_member_in(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    assigned, lost = [], []
    with Consumer({"bootstrap.servers": servers, "group.id": f"{topic_name}-g", "max.poll.interval.ms": 500,
                   "heartbeat.interval.ms": 100}) as consumer:
        consumer.subscribe([topic_name], on_assign=lambda c, ps: assigned.extend(ps),
                           on_lost=lambda c, ps: lost.extend(ps))
        wait_until(lambda: consumer.poll(0.05) is None and assigned, 30, 0, "the assignment")
        member = consumer.consumer_group_metadata()
        message = consumer.poll(1.5)   # three max.poll.interval.ms inside one call
        assert message is None or message.error() is None, message.error()
        assert lost == [] and consumer.consumer_group_metadata().member_epoch == member.member_epoch
