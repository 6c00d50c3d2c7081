"""The riverlog source's driver against a 3-node cluster whose partition leader is stopped with
SIGSTOP under its offset questions: it asks again with new clients, as Spark's Kafka source does,
and gets the new leader's answer instead of failing the query."""
from __future__ import annotations

import time

import pytest

from broker.client import AdminClient, NewTopic, Producer
from tests.conftest import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(240)]

FAST = {"replica.lag.time.max.ms": 1500, "broker.session.timeout.ms": 1500, "broker.heartbeat.interval.ms": 200,
        "leader.imbalance.check.interval.seconds": 2}


def create(cluster, name: str, partitions: int = 2, **configs) -> str:
    """An RF=3 topic with min.insync.replicas=2, known to every live broker."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, partitions, 3, {"min.insync.replicas": "2", **configs})])[name].result(30)

    def known(node) -> bool:
        with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
            info = admin.list_topics(name).topics[name]
        return info.error is None and bool(info.partitions) and all(p.leader >= 0 for p in info.partitions.values())
    wait_until(lambda: all(known(n) for n in cluster.nodes.values() if n.alive), 30, 0.05, "leaders known")
    return name


def produce(bootstrap: str, topic: str, values) -> list[bytes]:
    """``values`` with acks=all; the acknowledged ones."""
    acked: list[bytes] = []
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}) as p:
        for v in values:
            p.produce(topic, value=str(v).encode(),
                      on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
        p.flush(60)
    return acked


def every_node(cluster) -> str:
    """All the cluster's addresses, dead ones too: a query keeps the bootstrap it started with."""
    return ",".join(n.bootstrap for n in cluster.nodes.values())


def test_the_drivers_offset_questions_survive_a_paused_leader(cluster_factory, topic_name):
    """A leader stopped with SIGSTOP accepts a request and never answers; another is elected. As
    Spark's ``KafkaOffsetReaderAdmin.withRetries`` resets its admin before each retry, the source
    asks again with new clients (fresh metadata) and gets the new leader's answer, instead of
    asking the stopped node on every ``fetchOffset.numRetries`` attempt and failing the query."""
    from spark_source.offset_lookup import OffsetLookup
    from spark_source.options import SourceOptions
    cluster = cluster_factory(3, FAST)
    topic = create(cluster, topic_name, 1)
    acked = produce(cluster.bootstrap, topic, range(50))
    options = SourceOptions.parse({"riverlog.bootstrap.servers": every_node(cluster), "subscribe": topic,
                                   "riverlog.request.timeout.ms": "2000"}, True)
    lookup = OffsetLookup(options)
    try:
        tps = lookup.partitions()
        assert lookup.watermarks(tps) == {(topic, 0): (0, len(acked))}
        leader = cluster.partition(topic, 0).leader
        cluster.nodes[leader].pause()
        started = time.monotonic()
        assert lookup.watermarks(tps) == {(topic, 0): (0, len(acked))}
        assert time.monotonic() - started < 20, "answered by the new leader, not after every attempt timed out"
        assert cluster.partition(topic, 0).leader != leader
    finally:
        lookup.close()
