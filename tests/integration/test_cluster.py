"""A replicated cluster of real node processes: replication, ISR, failover, controller loss, restart."""
from __future__ import annotations

import glob
import os
import threading
import time

import pytest

from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, NewPartitions, NewTopic, Producer, TopicPartition
from broker.errors import InvalidReplicationFactorError, NotEnoughReplicasError
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

FAST = {"replica.lag.time.max.ms": 1500, "broker.session.timeout.ms": 1500,
        "broker.heartbeat.interval.ms": 200, "leader.imbalance.check.interval.seconds": 2}


def create(cluster, name, partitions=1, rf=3, **configs):
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, partitions, rf, {k.replace("_", "."): str(v)
                                                             for k, v in configs.items()})])[name].result(30)
    # Every live broker learns of the topic from the metadata log; wait until each one knows its leaders.
    wait_until(lambda: all(_leaders_known(cluster, name, node) for node in cluster.nodes.values() if node.alive),
               30, 0.05, "leaders known to every broker")


def _leaders_known(cluster, name, node) -> bool:
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        info = admin.list_topics(name).topics[name]
    return info.error is None and bool(info.partitions) and all(p.leader >= 0 for p in info.partitions.values())


def _seen_by(node, name, index=0):
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        return admin.list_topics(name).topics[name].partitions[index]


def _partitions(cluster, name):
    with cluster.admin() as admin:
        return list(admin.list_topics(name).topics[name].partitions.values())


def read_all(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 60) -> dict:
    """Every record of ``topic`` as {(partition, offset): value}, up to the high watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)}
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: dict = {}
    deadline = time.monotonic() + timeout
    while len(out) < sum(ends.values()) and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 0.5):
            assert m.error() is None, m.error()
            out[(m.partition(), m.offset())] = m.value()
    consumer.close()
    assert len(out) == sum(ends.values()), f"read {len(out)} of {sum(ends.values())} records"
    return out


class Acked:
    def __init__(self):
        self.lock = threading.Lock()
        self.values: dict = {}
        self.errors: list = []

    def __call__(self, err, msg):
        with self.lock:
            if err is None:
                self.values[(msg.partition(), msg.offset())] = msg.value()
            else:
                self.errors.append(err)

    def count(self) -> int:
        with self.lock:
            return len(self.values)


def test_replicated_topic_is_described_with_leader_replicas_and_isr(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=6, rf=3, min_insync_replicas=2)
    parts = _partitions(cluster, topic_name)
    assert len(parts) == 6
    for p in parts:
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isr) == [1, 2, 3] and p.leader == p.replicas[0]
    assert len({p.leader for p in parts}) == 3, "leaders are spread over the brokers"
    acked = Acked()
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "on_delivery": acked}) as p:
        for i in range(3000):
            p.produce(topic_name, value=b"v%d" % i, key=b"k%d" % (i % 60))
        assert p.flush(60) == 0
    assert not acked.errors and acked.count() == 3000
    assert read_all(cluster.bootstrap, topic_name, 6) == acked.values


def test_kill9_of_the_leader_during_an_acks_all_stream_loses_nothing_acknowledged(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    acked = Acked()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 2,
                         "retries": 1_000_000, "delivery.timeout.ms": 120_000, "on_delivery": acked})
    stop, sent = threading.Event(), [0]

    def write():
        while not stop.is_set():
            try:
                producer.produce(topic_name, value=b"%09d" % sent[0])
                sent[0] += 1
            except BufferError:
                producer.poll(0.05)
            if sent[0] % 200 == 0:
                producer.poll(0.001)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wait_until(lambda: acked.count() >= 5000, 60, 0.05, "records acknowledged before the kill")
    leader = cluster.partition(topic_name, 0).leader
    cluster.nodes[leader].kill9()
    before = acked.count()
    wait_until(lambda: acked.count() >= before + 5000, 60, 0.05, "records acknowledged after failover")
    stop.set()
    writer.join(30)
    assert producer.flush(60) == 0
    producer.close()
    assert not acked.errors
    new_leader = cluster.partition(topic_name, 0).leader
    assert new_leader not in (leader, -1)
    stored = read_all(cluster.bootstrap, topic_name)
    missing = [k for k, v in acked.values.items() if stored.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"


def test_stopped_followers_leave_the_isr_and_acks_all_needs_min_insync(cluster_factory, topic_name):
    # Five nodes, so that with two of them stopped the controller quorum (3 of 5) still decides.
    cluster = cluster_factory(5, FAST)
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    state = cluster.partition(topic_name, 0)
    followers = [r for r in state.replicas if r != state.leader]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0,
                         "delivery.timeout.ms": 10_000, "request.timeout.ms": 5_000})
    results = []
    cb = lambda err, msg: results.append(err)  # noqa: E731

    cluster.nodes[followers[0]].pause()
    wait_until(lambda: len(_seen_by(cluster.nodes[state.leader], topic_name).isr) == 2, 30, 0.1,
               "the leader to see the ISR shrink to 2")
    producer.produce(topic_name, value=b"with one follower away", on_delivery=cb)
    producer.flush(15)
    assert results == [None]

    cluster.nodes[followers[1]].pause()
    # Asked of the leader itself: until it has applied the shrink, it still counts the old ISR
    # (KIP-497), and a write would be appended first and refused after (NotEnoughReplicasAfterAppend).
    wait_until(lambda: _seen_by(cluster.nodes[state.leader], topic_name).isr == [state.leader], 30, 0.1,
               "the leader to see the ISR shrink to 1")
    producer.produce(topic_name, value=b"refused", on_delivery=cb)
    producer.flush(15)
    assert isinstance(results[1].exception(), NotEnoughReplicasError), results

    for f in followers:
        cluster.nodes[f].resume()
    wait_until(lambda: len(_seen_by(cluster.nodes[state.leader], topic_name).isr) == 3, 60, 0.1,
               "the leader to see both followers rejoin")
    producer.produce(topic_name, value=b"all back", on_delivery=cb)
    producer.flush(15)
    assert results[2] is None
    producer.close()
    values = list(read_all(cluster.bootstrap, topic_name).values())
    assert values == [b"with one follower away", b"all back"]


def test_losing_the_active_controller_elects_another_and_topics_can_still_be_created(cluster_factory, topic_name):
    cluster = cluster_factory(3, {**FAST, "metadata.max.snapshot.records": 5})
    old = cluster.describe().controller.id
    cluster.nodes[old].kill9()
    info = wait_until(lambda: (lambda i: i if i.controller and i.controller.id != old else None)(cluster.describe()),
                      30, 0.1, "a new active controller")
    assert info.controller.id in cluster.nodes and info.controller.id != old
    # A new controller gives every broker a fresh session, so the dead one is fenced one timeout later.
    wait_until(lambda: any(n.id == old and n.fenced for n in cluster.describe(include_fenced_brokers=True).nodes), 30, 0.1,
               f"broker {old} fenced by the new controller")
    create(cluster, topic_name, partitions=2, rf=2)
    parts = _partitions(cluster, topic_name)
    assert all(len(p.replicas) == 2 and old not in p.replicas for p in parts), (old, parts, cluster.describe())
    for extra in range(3):
        create(cluster, f"{topic_name}-{extra}", partitions=1, rf=2)
    # The others have snapshotted past what the old controller holds: it catches up from a snapshot.
    cluster.nodes[old].start()
    cluster.wait_for_brokers(3)
    with AdminClient({"bootstrap.servers": cluster.nodes[old].bootstrap}) as admin:
        known = set(admin.list_topics().topics)
    assert {topic_name, *(f"{topic_name}-{extra}" for extra in range(3))} <= known


@pytest.mark.parametrize("asked_role", ["broker,controller", "broker"])
def test_a_paused_active_controller_holds_a_forwarded_operation_only_until_another_is_elected(cluster_factory,
                                                                                             asked_role):
    """A broker forwards an operation (here a block of producer ids for InitProducerId) to the
    active controller; paused, it accepts the call and never answers, and the broker asks the new
    one once it knows of the election — within a deadline shorter than the 30 s it gives a
    controller that is still leading. A node that is a controller too knows from its own Raft; a
    broker-only node hears the quorum's term and leader with each metadata fetch."""
    from broker.client.cluster import ClusterClient
    from broker.errors import RiverlogError
    from broker.proto import riverlog_pb2 as pb
    broker_only = asked_role == "broker"
    cluster = cluster_factory(4 if broker_only else 3, FAST, roles={4: "broker"} if broker_only else None)
    cluster.wait_for_brokers(len(cluster.nodes))
    old = cluster.describe().controller.id
    asked = cluster.nodes[4] if broker_only else next(node for i, node in cluster.nodes.items() if i != old)
    assert asked is not cluster.nodes[old]
    client = ClusterClient(asked.bootstrap, request_timeout_ms=5_000)

    def answered(method, request):
        try:
            return client.call(method, request)
        except RiverlogError as e:
            assert e.retriable, e
            return None   # a broker still starting, or the call timed out: asked again

    # A producer id block once before the pause would leave nothing to forward: none is taken yet.
    wait_until(lambda: answered("Metadata", pb.MetadataRequest()), 30, 0.1, "the asked broker to serve")
    cluster.nodes[old].pause()
    try:
        reply = wait_until(lambda: answered("InitProducerId", pb.InitProducerIdRequest()), 20, 0.1,
                           "a producer id while the old controller is paused")
        assert reply.producer_id >= 0 and reply.producer_epoch == 0
    finally:
        client.close()
        cluster.nodes[old].resume()


def test_a_client_asks_a_broker_that_did_not_answer_after_the_others(broker_factory):
    """A bootstrap broker that accepts connections and never answers (paused) is tried after the
    others once it has failed: with a request timeout shorter than one try per address, every
    call would otherwise be spent on it."""
    from broker.client.cluster import ClusterClient
    from broker.errors import RiverlogError
    from broker.proto import riverlog_pb2 as pb
    paused, node = broker_factory(name="paused"), broker_factory()
    addresses = f"{paused.bootstrap},{node.bootstrap}"

    def connected():
        """A client whose first call the paused one, first in the list, answered: none has failed
        before the pause (a broker still starting may fail a first call fast)."""
        client = ClusterClient(addresses, request_timeout_ms=500)
        if client.call_any("Metadata", pb.MetadataRequest(all_topics=True), timeout=30).brokers \
                and not client._failed_at:
            return client
        client.close()
        return None

    client = wait_until(connected, 60, 0.1, "a first call the paused broker answered")
    try:
        paused.pause()
        with pytest.raises(RiverlogError):
            client.call_any("Metadata", pb.MetadataRequest(all_topics=True))   # spent on the paused one
        for _ in range(3):
            assert client.call_any("Metadata", pb.MetadataRequest(all_topics=True)).brokers
    finally:
        client.close()
        paused.resume()


def test_a_whole_cluster_restart_keeps_data_and_metadata(cluster_factory, topic_name):
    # Snapshot the metadata every few records, so that the restart loads snapshots, not only the log.
    cluster = cluster_factory(3, {**FAST, "metadata.max.snapshot.records": 5})
    create(cluster, topic_name, partitions=3, rf=3, retention_ms=123456789)
    for extra in range(3):
        create(cluster, f"{topic_name}-{extra}", partitions=2, rf=2)
    acked = Acked()
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "on_delivery": acked}) as p:
        for i in range(600):
            p.produce(topic_name, value=b"r%d" % i, key=b"%d" % i)
        assert p.flush(30) == 0
    for node in cluster.nodes.values():
        assert node.stop() == 0
    for node in cluster.nodes.values():
        assert glob.glob(os.path.join(node.data_dir, "__cluster_metadata-0", "snapshot-*.json")), node.data_dir
    for node in cluster.nodes.values():
        node.start()
    cluster.wait_for_brokers(3)
    with cluster.admin() as admin:
        names = set(admin.list_topics().topics)
    assert {topic_name, *(f"{topic_name}-{extra}" for extra in range(3))} <= names
    wait_until(lambda: all(p.leader >= 0 for p in _partitions(cluster, topic_name)), 30, 0.1, "leaders")
    assert read_all(cluster.bootstrap, topic_name, 3) == acked.values
    from broker.client import ConfigResource
    with cluster.admin() as admin:
        configs = next(iter(admin.describe_configs([ConfigResource("topic", topic_name)]).values())).result()
    assert configs["retention.ms"].value == "123456789"



def test_after_a_whole_cluster_crash_the_returning_in_sync_replicas_lead(cluster_factory, topic_name):
    """kill -9 of every node, and only two of three return: the restarted replicas stay in the
    ISRs while they re-register, the missing node leaves them when its session expires, and every
    partition is led again by a replica that was in sync, with everything acknowledged readable."""
    cluster = cluster_factory(3, {**FAST, "auto.leader.rebalance.enable": "false"})
    create(cluster, topic_name, partitions=3, rf=3, min_insync_replicas=2)
    acked = Acked()
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "on_delivery": acked}) as p:
        for i in range(300):
            p.produce(topic_name, value=b"v%d" % i, partition=i % 3)
        assert p.flush(30) == 0
    assert not acked.errors and acked.count() == 300
    assert all(sorted(p.isr) == [1, 2, 3] for p in _partitions(cluster, topic_name))
    for node in cluster.nodes.values():
        node.kill9()
    cluster.nodes[1].start()
    cluster.nodes[2].start()

    def led_by_survivors():
        try:
            return all(p.leader in (1, 2) and set(p.isr) <= {1, 2} for p in _partitions(cluster, topic_name))
        except Exception:  # noqa: BLE001 - the restarted nodes may not answer yet
            return False
    wait_until(led_by_survivors, 30, 0.2, "leaders from the in-sync replicas that came back")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap})
    try:
        wait_until(lambda: [consumer.get_watermark_offsets(TopicPartition(topic_name, i), 5)[1] for i in range(3)]
                   == [100, 100, 100], 30, 0.2, "high watermarks back at every acknowledged record")
    finally:
        consumer.close()
    stored = read_all(cluster.bootstrap, topic_name, 3)
    missing = [k for k, v in acked.values.items() if stored.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "delivery.timeout.ms": 60_000}) as p:
        for i in range(30):
            p.produce(topic_name, value=b"after %d" % i, partition=i % 3)
        assert p.flush(60) == 0, "acks=all with min.insync.replicas=2 works again on the two survivors"

def test_a_returning_broker_catches_up_and_gets_its_preferred_leadership_back(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    preferred = cluster.partition(topic_name, 0).replicas[0]
    cluster.nodes[preferred].kill9()
    wait_until(lambda: cluster.partition(topic_name, 0).leader not in (preferred, -1), 30, 0.1, "failover")
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"}) as p:
        for i in range(500):
            p.produce(topic_name, value=b"while away %d" % i)
        assert p.flush(30) == 0
    cluster.nodes[preferred].start()
    wait_until(lambda: cluster.partition(topic_name, 0).leader == preferred, 60, 0.2,
               "the preferred replica to lead again")
    assert len(cluster.partition(topic_name, 0).isr) == 3
    assert len(read_all(cluster.bootstrap, topic_name)) == 500


def test_partitions_can_be_added(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=2, rf=2)
    with cluster.admin() as admin:
        admin.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(30)
    wait_until(lambda: len(_partitions(cluster, topic_name)) == 5 and all(p.leader >= 0 for p in _partitions(cluster, topic_name)),
               30, 0.1, "five partitions with leaders")
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"}) as p:
        p.produce(topic_name, value=b"in the new partition", partition=4)
        assert p.flush(30) == 0
    assert list(read_all(cluster.bootstrap, topic_name, 5).values()) == [b"in the new partition"]


def test_controlled_shutdown_moves_leadership_away_before_the_node_exits(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=3, rf=3, min_insync_replicas=2)
    victim = cluster.partition(topic_name, 0).leader
    acked = Acked()
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "on_delivery": acked}) as p:
        for i in range(300):
            p.produce(topic_name, value=b"before %d" % i, partition=i % 3)
        assert p.flush(30) == 0
        assert cluster.nodes[victim].stop() == 0
        # Asked at once, before any session timeout could fence it: a kill -9 would still show it leading.
        for part in _partitions(cluster, topic_name):
            assert part.leader not in (victim, -1) and victim not in part.isr, part
        for i in range(300):
            p.produce(topic_name, value=b"after %d" % i, partition=i % 3)
        assert p.flush(30) == 0
    assert not acked.errors and acked.count() == 600
    assert read_all(cluster.bootstrap, topic_name, 3) == acked.values


def test_a_controller_only_node_decides_but_holds_no_partitions(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST, roles={3: "controller"})
    roles = {n.id: n.roles for n in cluster.describe(include_controllers=True).nodes}
    assert roles == {1: "broker,controller", 2: "broker,controller", 3: "controller"}
    # Clients see the brokers they can use, as Kafka's DescribeCluster (getAliveBrokerNodes).
    assert sorted(n.id for n in cluster.describe().nodes) == [1, 2]
    create(cluster, topic_name, partitions=4, rf=2)
    assert all(sorted(p.replicas) == [1, 2] for p in _partitions(cluster, topic_name))
    with cluster.admin() as admin:
        with pytest.raises(InvalidReplicationFactorError) as refused:
            admin.create_topics([NewTopic(topic_name + "-rf3", 1, 3)])[topic_name + "-rf3"].result(30)
        assert topic_name + "-rf3" not in admin.list_topics().topics
    assert "replication" in str(refused.value).lower()


def test_cluster_status_and_topics_describe_on_the_command_line(cluster_factory, topic_name):
    from tests.integration.test_cli import run_cli
    cluster = cluster_factory(3, FAST)
    run_cli(cluster.bootstrap, "topics", "create", topic_name, "--partitions", 2, "--replication-factor", 3,
            "--config", "min.insync.replicas=2")
    wait_until(lambda: all(_leaders_known(cluster, topic_name, n) for n in cluster.nodes.values()), 30, 0.05,
               "leaders")
    described = run_cli(cluster.bootstrap, "topics", "describe", topic_name).stdout
    assert "ReplicationFactor: 3" in described or "ReplicationFactor:3" in described.replace(" ", ""), described
    assert described.count("Isr:") == 2, described
    status = run_cli(cluster.bootstrap, "cluster", "status").stdout
    assert status.count("Roles: broker,controller") == 3 and "UnderReplicatedPartitions: 0" in status, status
    cluster.nodes[3].pause()
    wait_until(lambda: "UnderReplicatedPartitions: 2" in run_cli(cluster.bootstrap, "cluster", "status").stdout,
               30, 0.2, "two under-replicated partitions")
    cluster.nodes[3].resume()


def test_a_watermark_question_to_a_paused_leader_is_asked_again_of_the_new_one(cluster_factory, topic_name):
    """Kafka's clients time each request out after ``request.timeout.ms``, refresh metadata and try
    again until the call's own timeout: a leader stopped with SIGSTOP (it accepts a request and
    never answers) costs one request's time. The whole call's timeout used to go to that one
    request, so the consumer failed although another leader had been elected meanwhile."""
    cluster = cluster_factory(3, FAST)
    create(cluster, topic_name, partitions=1, rf=3)
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"}) as p:
        for i in range(20):
            p.produce(topic_name, value=b"%d" % i)
        assert p.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": ",".join(n.bootstrap for n in cluster.nodes.values()),
                         "group.id": "watermarks", "request.timeout.ms": 2000})
    try:
        tp = TopicPartition(topic_name, 0)
        assert consumer.get_watermark_offsets(tp, 30) == (0, 20)
        leader = _partitions(cluster, topic_name)[0].leader
        cluster.nodes[leader].pause()
        started = time.monotonic()
        assert consumer.get_watermark_offsets(tp, 30) == (0, 20)
        assert time.monotonic() - started < 20, "answered by the new leader within the call's timeout"
        assert _partitions(cluster, topic_name)[0].leader != leader
    finally:
        cluster.nodes[leader].resume()
        consumer.close()


def test_the_exactly_once_decision_log_is_replicated_as_a_transaction_log(cluster_factory):
    """The committers' decisions topic gets three replicas and min.insync.replicas=2 (Kafka's
    transaction log settings), not default.replication.factor's one: a single broker down would
    otherwise stop every exactly-once writer of the cluster."""
    from broker.client import ConfigResource
    from broker.client.decision_log import DECISIONS_TOPIC, DecisionLog
    cluster = cluster_factory(3, FAST)
    DecisionLog({"bootstrap.servers": cluster.bootstrap}).ensure_topic()
    wait_until(lambda: len(_partitions(cluster, DECISIONS_TOPIC)) == 1, 30, 0.1, "the decisions topic")
    assert sorted(_partitions(cluster, DECISIONS_TOPIC)[0].replicas) == [1, 2, 3]
    with cluster.admin() as admin:
        resource = ConfigResource("topic", DECISIONS_TOPIC)
        configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["min.insync.replicas"].value == "2" and configs["cleanup.policy"].value == "compact"

