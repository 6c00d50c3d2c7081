"""A client that meets an error of the "invalid metadata" category refreshes its metadata and retries."""
from __future__ import annotations

import logging

import pytest

from broker.client import AdminClient, NewTopic, Producer
from broker.errors import InvalidMetadataError
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FAST = {"replica.lag.time.max.ms": 1500, "broker.session.timeout.ms": 1500, "broker.heartbeat.interval.ms": 200}


def _partition(bootstrap: str, topic: str):
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        info = admin.list_topics(topic).topics[topic]
    return None if info.error is not None or not info.partitions else info.partitions[0]


def test_a_producer_whose_leader_moved_refreshes_metadata_and_delivers(cluster_factory, topic_name, caplog):
    cluster = cluster_factory(2, FAST)
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic_name, 1, 2)])[topic_name].result(30)
    wait_until(lambda: (p := _partition(cluster.bootstrap, topic_name)) is not None and p.leader >= 0
               and len(p.isr) == 2, 30, 0.05, "a leader and both replicas in sync")
    old_leader = _partition(cluster.bootstrap, topic_name).leader
    caplog.set_level(logging.DEBUG, logger="broker.client.producer")
    delivered = []
    with Producer({"bootstrap.servers": cluster.bootstrap, "on_delivery":
                   lambda err, msg: delivered.append(err)}) as producer:
        producer.produce(topic_name, value=b"before")
        assert producer.flush(30) == 0  # the producer now holds metadata naming the old leader
        assert cluster.nodes[old_leader].stop() == 0  # controlled shutdown: leadership moves first
        for i in range(20):
            producer.produce(topic_name, value=b"after %d" % i)
        assert producer.flush(60) == 0
    assert delivered == [None] * 21
    failures = [r.args[2] for r in caplog.records if r.getMessage().startswith("produce to ")]
    assert failures, "the producer never met the moved leader"
    assert all(isinstance(e, InvalidMetadataError) for e in failures), failures
    assert _partition(cluster.bootstrap, topic_name).leader not in (old_leader, -1)
