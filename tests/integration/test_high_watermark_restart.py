"""A broker's high watermark across a restart: checkpointed (``replication-offset-checkpoint``) and
restored, so consumers see what the ISR had confirmed at once instead of waiting for the ISR to
confirm it again, and never what it had not confirmed."""
from __future__ import annotations

import os
import time

import pytest

from broker.client import Consumer, NewTopic, Producer, TopicPartition
from broker.storage.offset_checkpoint import REPLICATION_OFFSET_CHECKPOINT_FILE, read_offset_checkpoint
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, _leaders_known

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _read(bootstrap: str, topic: str, isolation: str, want: int) -> dict:
    """{offset: value} from offset 0: until ``want`` records came (20 s at most), then whatever
    else one more poll of half a second brings."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: dict = {}
    deadline = time.monotonic() + 20
    try:
        while len(out) < want and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                assert m.error() is None, m.error()
                out[m.offset()] = m.value()
        for m in consumer.consume(1000, 0.5):
            out[m.offset()] = m.value()
    finally:
        consumer.close()
    return out


def test_a_restarted_leader_under_min_insync_shows_what_its_isr_confirmed_and_nothing_more(
        cluster_factory, topic_name):
    """Node 1 leads, node 2 follows, min.insync.replicas=2. Node 2 stops, so the high watermark
    stays where the ISR left it (KAFKA-15583) and acks=1 records written after it stay hidden.
    Node 1 restarts: it starts from its checkpointed high watermark. Before, it started at its log
    start, and with the ISR under min.insync.replicas nothing could ever move it: consumers read
    nothing until node 2 came back."""
    cluster = cluster_factory(3, FAST)
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic_name, 1, replica_assignment=[[1, 2]],
                                      config={"min.insync.replicas": "2"})])[topic_name].result(30)
    wait_until(lambda: all(_leaders_known(cluster, topic_name, n) for n in cluster.nodes.values()), 30, 0.05,
               "leaders known to every broker")
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"}) as p:
        for i in range(30):
            p.produce(topic_name, value=b"v%d" % i, partition=0)
        assert p.flush(30) == 0
    assert cluster.nodes[2].stop() == 0
    wait_until(lambda: cluster.partition(topic_name, 0).isr == [1], 30, 0.1, "node 2 out of the ISR")
    unconfirmed = []
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1",
                   "on_delivery": lambda err, msg: unconfirmed.append(err)}) as p:
        for i in range(5):
            p.produce(topic_name, value=b"only on node 1: %d" % i, partition=0)
        assert p.flush(30) == 0
    assert unconfirmed == [None] * 5   # written to node 1's log; the high watermark stays at 30

    assert cluster.nodes[1].stop() == 0
    hws = read_offset_checkpoint(os.path.join(cluster.nodes[1].data_dir, REPLICATION_OFFSET_CHECKPOINT_FILE))
    assert hws[(topic_name, 0)] == 30
    cluster.nodes[1].start()
    wait_until(lambda: cluster.partition(topic_name, 0).leader == 1, 30, 0.1, "node 1 leading again")

    for isolation in ("read_uncommitted", "read_committed"):
        seen = _read(cluster.bootstrap, topic_name, isolation, 30)
        assert seen == {i: b"v%d" % i for i in range(30)}, isolation
