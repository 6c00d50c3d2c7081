"""ListOffsets answers the leader epoch with each offset, as Kafka's (and confluent-kafka's
``ListOffsetsResultInfo.leader_epoch``): the epoch that wrote the offset found by time or for the
earliest offset, the leader's current epoch for the latest; None when no epoch covers it."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, OffsetSpec, Producer, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, create

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _produce(bootstrap: str, topic: str, values: list[bytes], timestamp: int) -> None:
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 1_000_000}) as p:
        for v in values:
            p.produce(topic, value=v, partition=0, timestamp=timestamp)
        assert p.flush(60) == 0


def test_each_offset_comes_with_the_epoch_that_wrote_it(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    tp = TopicPartition(topic_name, 0)

    def ask(spec):
        with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
            return admin.list_offsets({tp: spec})[tp].result(30)

    _produce(cluster.bootstrap, topic_name, [b"a0", b"a1"], 1_000)
    first = ask(OffsetSpec.latest())
    assert first.offset == 2 and first.leader_epoch is not None
    leader = cluster.partition(topic_name, 0).leader
    cluster.nodes[leader].kill9()
    wait_until(lambda: cluster.partition(topic_name, 0).leader not in (leader, -1), 60, 0.1, "a new leader")
    _produce(cluster.bootstrap, topic_name, [b"b0"], 2_000)

    later = ask(OffsetSpec.latest())
    assert later.offset == 3 and later.leader_epoch > first.leader_epoch
    earliest = ask(OffsetSpec.earliest())
    assert (earliest.offset, earliest.leader_epoch) == (0, first.leader_epoch)
    by_time = ask(OffsetSpec.for_timestamp(1_500))
    assert (by_time.offset, by_time.timestamp, by_time.leader_epoch) == (2, 2_000, later.leader_epoch)
    by_old_time = ask(OffsetSpec.for_timestamp(0))
    assert (by_old_time.offset, by_old_time.leader_epoch) == (0, first.leader_epoch)
    newest = ask(OffsetSpec.max_timestamp())
    assert (newest.offset, newest.leader_epoch) == (2, later.leader_epoch)
    assert ask(OffsetSpec.for_timestamp(9_000)).leader_epoch is None     # nothing found: no epoch
