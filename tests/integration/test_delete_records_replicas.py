"""DeleteRecords on a replicated partition, in real broker processes: the answer waits until every
alive replica's log start reached the offset (Kafka's ``ReplicaManager.deleteRecords`` and
``DelayedDeleteRecords``, completing on ``Partition.lowWatermarkIfLeader``), so an acknowledged
deletion survives a failover; an alive follower that does not catch up in time makes the partition
answer REQUEST_TIMED_OUT."""
from __future__ import annotations

import pytest

from broker.client import OFFSET_BEGINNING, TopicPartition
from broker.errors import RequestTimedOutError
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, create
from tests.integration.test_retention_compaction import consume_from, produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _new_leader(cluster, topic: str, old: int):
    def moved():
        try:
            leader = cluster.partition(topic, 0).leader
        except Exception:  # noqa: BLE001 - metadata still settling after the kill
            return None
        return leader if leader not in (-1, old) else None
    return wait_until(moved, 30, 0.1, f"a leader other than {old}")


def _hundred_records_with_a_follower(cluster, topic: str) -> tuple[TopicPartition, int]:
    """An RF=3 partition of 100 records, and one of its followers (to pause)."""
    create(cluster, topic, rf=3)
    produce(cluster.bootstrap, topic, [(None, b"r%d" % i, 0) for i in range(100)], acks="all")
    leader = cluster.partition(topic, 0).leader
    return TopicPartition(topic, 0), next(n for n in cluster.nodes if n != leader)


def test_a_failover_right_after_delete_records_does_not_bring_the_records_back(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, rf=3)
    produce(cluster.bootstrap, topic_name, [(None, b"r%d" % i, 0) for i in range(100)], acks="all")
    tp = TopicPartition(topic_name, 0)
    leader = cluster.partition(topic_name, 0).leader
    with cluster.admin() as admin:
        assert admin.delete_records({tp: 60})[tp].result(30).low_watermark == 60
    cluster.nodes[leader].kill9()  # at once: only what the answer promised may be relied on
    _new_leader(cluster, topic_name, leader)
    read = consume_from(cluster.bootstrap, topic_name, OFFSET_BEGINNING, 100)
    assert [m.offset() for m in read] == list(range(60, 100))


def test_delete_records_times_out_while_an_alive_follower_has_not_caught_up(cluster_factory, topic_name):
    # A long session: the paused follower stays registered and unfenced (alive) throughout.
    cluster = cluster_factory(3, {**FAST, "broker.session.timeout.ms": 60_000, "replica.lag.time.max.ms": 60_000})
    tp, paused = _hundred_records_with_a_follower(cluster, topic_name)
    cluster.nodes[paused].pause()
    try:
        with cluster.admin() as admin:
            # the broker's own answer after operation_timeout, not asked again; request_timeout bounds
            # the whole call (the leader's lookup included), so it leaves room for both
            with pytest.raises(RequestTimedOutError):
                admin.delete_records({tp: 60}, request_timeout=15, operation_timeout=1)[tp].result(30)
    finally:
        cluster.nodes[paused].resume()
    with cluster.admin() as admin:  # retried once the follower fetches again: answered, as Kafka
        assert admin.delete_records({tp: 60}, request_timeout=20)[tp].result(30).low_watermark == 60


def test_a_fenced_follower_does_not_hold_delete_records_back(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    tp, paused = _hundred_records_with_a_follower(cluster, topic_name)
    cluster.nodes[paused].pause()
    try:
        wait_until(lambda: any(n.id == paused and n.fenced
                               for n in cluster.describe(include_fenced_brokers=True).nodes),
                   30, 0.1, f"broker {paused} to be fenced")
        with cluster.admin() as admin:  # Kafka's lowWatermarkIfLeader skips brokers not alive
            assert admin.delete_records({tp: 60}, request_timeout=20)[tp].result(30).low_watermark == 60
    finally:
        cluster.nodes[paused].resume()
