"""A replica rebuilt from an empty disk copies its leader's cleaned log; once it leads again, an
idempotent producer whose last batch the cleaner emptied goes on without an error (Kafka keeps a
producer's last sequence through compaction: ``RETAIN_EMPTY``, ``overrideLastOffset``)."""
from __future__ import annotations

import os
import shutil

import pytest

from broker.client import AdminClient, Producer, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, Acked, create
from tests.integration.test_retention_compaction import QUICK, cleaned_up_to_the_active_segment

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def last_sequences(bootstrap: str, topic: str) -> dict:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        tp = TopicPartition(topic, 0)
        found = admin.describe_producers([tp])[tp].result(10)
    return {p.producer_id: p.last_sequence for p in found.active_producers}


def test_a_rebuilt_replica_knows_a_producer_whose_last_batch_was_compacted(cluster_factory, topic_name):
    cluster = cluster_factory(3, {**FAST, **QUICK})
    create(cluster, topic_name, partitions=1, rf=2, cleanup_policy="compact", segment_bytes=100,
           min_cleanable_dirty_ratio=0.0, min_insync_replicas=1)
    replicas = cluster.partition(topic_name, 0).replicas
    preferred, other = cluster.nodes[replicas[0]], cluster.nodes[replicas[1]]
    acked = Acked()
    idempotent = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                           "on_delivery": acked})
    try:
        for key in (b"k0", b"k1", b"k2"):
            idempotent.produce(topic_name, value=b"first", key=key, partition=0)
        assert idempotent.flush(30) == 0
        before = last_sequences(cluster.bootstrap, topic_name)
        assert list(before.values()) == [2]
        with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1", "linger.ms": 0}) as plain:
            for i, key in enumerate((b"k0", b"k1", b"k2", b"filler-1", b"filler-2")):
                plain.produce(topic_name, value=b"later %d" % i, key=key, partition=0)
                assert plain.flush(30) == 0                  # one batch, so one segment, each
        for node in (preferred, other):                     # both replicas cleaned the batch away
            wait_until(lambda n=node: cleaned_up_to_the_active_segment(n.data_dir, topic_name), 60, 0.1,
                       f"node {node.node_id} to clean")
        preferred.kill9()
        wait_until(lambda: cluster.partition(topic_name, 0).leader == other.node_id, 30, 0.1, "failover")
        shutil.rmtree(os.path.join(preferred.data_dir, f"{topic_name}-0"))      # its disk is lost
        preferred.start()
        wait_until(lambda: cluster.partition(topic_name, 0).leader == preferred.node_id, 90, 0.2,
                   "the rebuilt replica to catch up and lead again")
        assert last_sequences(cluster.bootstrap, topic_name) == before
        idempotent.produce(topic_name, value=b"again", key=b"k3", partition=0)
        assert idempotent.flush(30) == 0
        assert not acked.errors, acked.errors
        assert last_sequences(cluster.bootstrap, topic_name) == {pid: 3 for pid in before}
    finally:
        idempotent.close()
