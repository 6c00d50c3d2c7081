"""Idempotent producers against real broker processes: no duplicate and no loss through a leader's
kill -9, producer state kept over a restart, producer ids unique across brokers."""
from __future__ import annotations

import collections
import threading

import pytest

from broker.client import AdminClient, NewTopic, Producer
from broker.errors import InvalidConfigError
from broker.proto import riverlog_pb2 as pb
from broker.records.batch import IDEMPOTENCE_WINDOW
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, create, read_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


class Acked:
    def __init__(self):
        self.values, self.failed, self.lock = [], [], threading.Lock()

    def __call__(self, err, msg):
        with self.lock:
            (self.failed if err else self.values).append(msg.value())


def test_killing_the_leader_during_an_idempotent_stream_loses_and_duplicates_nothing(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    acked = Acked()
    stop = threading.Event()
    sent = []

    def stream():
        with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 2,
                       "enable.idempotence": True, "on_delivery": acked}) as p:
            i = 0
            while not stop.is_set():
                try:
                    p.produce(topic_name, value=b"%08d" % i)
                except BufferError:  # queue.buffering.max.messages reached: serve reports, retry
                    p.poll(0.1)
                    continue
                sent.append(i)
                i += 1
                if i % 200 == 0:
                    p.poll(0)
            assert p.flush(60) == 0

    writer = threading.Thread(target=stream)
    writer.start()
    wait_until(lambda: len(acked.values) > 3000, 60, 0.05, "a stream in full flow")
    leader = cluster.partition(topic_name, 0).leader
    cluster.nodes[leader].kill9()
    wait_until(lambda: cluster.partition(topic_name, 0).leader not in (leader, -1), 30, 0.1, "failover")
    before = len(acked.values)
    wait_until(lambda: len(acked.values) > before + 3000, 60, 0.05, "the stream to go on after failover")
    stop.set()
    writer.join(90)
    assert not acked.failed
    values = list(read_all(cluster.bootstrap, topic_name, 1).values())
    counts = collections.Counter(values)
    assert [v for v, n in counts.items() if n > 1] == []                 # no duplicate
    assert set(acked.values) <= set(counts)                              # nothing acknowledged lost
    assert values == sorted(values)                                      # in produce order
    assert len(values) == len(sent)                                      # every record, exactly once


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_produce_that_times_out_while_the_isr_shrinks_is_resent_without_a_duplicate(cluster_factory, topic_name,
                                                                                       idempotent):
    # A stopped follower holds the high watermark until it leaves the ISR (replica.lag.time.max.ms),
    # longer than the producer's request timeout: the leader has the batch, the producer hears
    # RequestTimedOut and sends it again. Only the idempotent producer's resend is recognised.
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    leader = cluster.partition(topic_name, 0).leader
    follower = next(n for n in cluster.nodes if n != leader)
    cluster.nodes[follower].pause()
    acked = Acked()
    try:
        with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "request.timeout.ms": 500,
                       "enable.idempotence": idempotent, "on_delivery": acked}) as p:
            for i in range(5):
                p.produce(topic_name, value=b"%d" % i)
            assert p.flush(60) == 0
    finally:
        cluster.nodes[follower].resume()
    values = list(read_all(cluster.bootstrap, topic_name, 1).values())
    assert sorted(acked.values) == [b"%d" % i for i in range(5)]
    if idempotent:
        assert values == [b"%d" % i for i in range(5)]
    else:
        assert len(values) > 5, "the test no longer provokes a resend of a written batch"


def test_a_resend_after_a_broker_restart_is_still_recognised(broker_factory, topic_name):
    node = broker_factory()
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    from broker.records.arrow_body import encode_batch, record_batch
    from broker.records.batch import stamp_producer
    from broker.client.cluster import ClusterClient
    client = ClusterClient(node.bootstrap)
    pid = client.call_any("InitProducerId", pb.InitProducerIdRequest()).producer_id

    def send(seq):
        data = stamp_producer(encode_batch(record_batch([None], [b"%d" % seq], [1])), pid, 0, seq)
        request = pb.ProduceRequest(acks=-1, timeout_ms=5000, topics=[pb.ProduceTopic(
            name=topic_name, partitions=[pb.ProducePartition(partition=0, records=data)])])
        r = client.call_any("Produce", request).topics[0].partitions[0]
        return r.error_code, r.base_offset

    n = IDEMPOTENCE_WINDOW + 3
    assert [send(s) for s in range(n)] == [(0, s) for s in range(n)]
    client.close()
    node.stop()
    node.start()
    client = ClusterClient(node.bootstrap)
    oldest = n - IDEMPOTENCE_WINDOW   # every batch of a full window of unanswered ones can be resent
    assert wait_until(lambda: _quietly(send, oldest) == (0, oldest), 30, 0.1,
                      "the resent batch answered with its first offset")
    assert send(n - 1) == (0, n - 1)
    assert send(n) == (0, n)
    assert send(n + 5)[0] == 45   # OUT_OF_ORDER_SEQUENCE_NUMBER
    client.close()


def test_an_idempotent_producer_keeps_a_partition_s_unanswered_batches_within_the_window(broker_factory,
                                                                                          topic_name):
    """More unanswered batches than the broker remembers could not all be recognised when resent
    after a restart, and would be refused for ever as out of order."""
    node = broker_factory()
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    acked = Acked()
    producer = Producer({"bootstrap.servers": node.bootstrap, "batch.size": 1, "linger.ms": 0,
                         "on_delivery": acked})
    producer.produce(topic_name, value=b"warm-up")
    assert producer.flush(30) == 0
    policy = producer._sender.policy
    node.pause()
    try:
        for i in range(4 * IDEMPOTENCE_WINDOW):
            producer.produce(topic_name, value=b"%d" % i)
        key = (topic_name, 0)
        wait_until(lambda: policy.unanswered(key) >= IDEMPOTENCE_WINDOW, 30, 0.01,
                   "a full window of unanswered batches")
        assert policy.unanswered(key) == IDEMPOTENCE_WINDOW
        assert sum(policy.node_in_flight.values()) < policy.limits.max_in_flight   # the window held it back
    finally:
        node.resume()
    assert producer.flush(60) == 0
    producer.close()
    assert acked.failed == []
    assert acked.values == [b"warm-up"] + [b"%d" % i for i in range(4 * IDEMPOTENCE_WINDOW)]


def test_producer_ids_are_unique_across_brokers_and_restarts(cluster_factory):
    cluster = cluster_factory(3, FAST)
    from broker.client.cluster import ClusterClient
    ids = []
    for node in cluster.nodes.values():
        client = ClusterClient(node.bootstrap)
        ids += [client.call_any("InitProducerId", pb.InitProducerIdRequest()).producer_id for _ in range(3)]
        client.close()
    first = next(iter(cluster.nodes.values()))
    first.stop()
    first.start()
    cluster.wait_for_brokers(3)
    client = ClusterClient(first.bootstrap)
    ids.append(wait_until(lambda: _init(client), 30, 0.1, "a producer id after the restart")[0])
    client.close()
    assert len(set(ids)) == len(ids), ids


def _quietly(fn, *args):
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - the restarted broker may still be catching up
        return None


def _init(client):
    try:
        return (client.call_any("InitProducerId", pb.InitProducerIdRequest()).producer_id,)
    except Exception:  # noqa: BLE001 - the restarted broker may still be catching up
        return None


def test_idempotence_is_on_by_default_with_acks_all_and_refused_with_acks_1(shared_broker):
    for acks, idempotent in (("all", True), (1, False)):
        with Producer({"bootstrap.servers": shared_broker.bootstrap, "acks": acks}) as p:
            assert p._idempotent is idempotent
    with pytest.raises(InvalidConfigError):
        Producer({"bootstrap.servers": shared_broker.bootstrap, "acks": 1, "enable.idempotence": True})
