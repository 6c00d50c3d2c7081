"""``elect_leaders(ElectionType.UNCLEAN, ...)``, as Kafka's ``electLeaders``: a leaderless
partition whose in-sync replicas are all gone gets a live replica from outside the ISR when the
operator asks (the records only the lost ISR held are gone, the operator's choice); a partition
with a leader needs no election, one with no live replica has no eligible leader."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, ElectionType, KafkaError, NewTopic, Producer, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, read_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _produce(bootstrap: str, topic: str, values) -> None:
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 1_000_000}) as p:
        for v in values:
            p.produce(topic, value=v, partition=0)
        assert p.flush(60) == 0


def diverged(cluster_factory, topic_name):
    """Brokers 1 and 2 (3: the controller) replicate one partition; 10 records reach both, then
    broker 2 is killed and 5 more (``only-1-*``) reach broker 1 alone: an unclean election to
    broker 2 would lose them."""
    cluster = cluster_factory(3, FAST, roles={1: "broker", 2: "broker", 3: "controller"})
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic_name, 1, replica_assignment=[[1, 2]],
                                      config={"min.insync.replicas": "1"})])[topic_name].result(30)
    wait_until(lambda: sorted(cluster.partition(topic_name, 0).isr) == [1, 2], 30, 0.1, "both replicas in sync")
    _produce(cluster.bootstrap, topic_name, [b"both-%d" % i for i in range(10)])
    cluster.nodes[2].kill9()
    wait_until(lambda: cluster.partition(topic_name, 0).isr == [1], 30, 0.1, "broker 2 out of the ISR")
    _produce(cluster.bootstrap, topic_name, [b"only-1-%d" % i for i in range(5)])
    return cluster


def test_an_unclean_election_brings_back_a_partition_whose_isr_is_gone(cluster_factory, topic_name):
    cluster = diverged(cluster_factory, topic_name)
    tp = TopicPartition(topic_name, 0)
    cluster.nodes[1].kill9()
    wait_until(lambda: cluster.partition(topic_name, 0).leader == -1, 30, 0.1, "no leader")

    def elect(kind):
        with AdminClient({"bootstrap.servers": cluster.nodes[3].bootstrap}) as admin:
            error = admin.elect_leaders(kind, [tp]).result(30)[tp]
            return None if error is None else error.args[0].code()

    assert elect(ElectionType.UNCLEAN) == KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE
    cluster.nodes[2].restart()
    cluster.wait_for_brokers(1)
    assert cluster.partition(topic_name, 0).leader == -1      # out of the ISR: not elected on its own
    assert elect(ElectionType.PREFERRED) == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    assert elect(ElectionType.UNCLEAN) is None
    wait_until(lambda: (cluster.partition(topic_name, 0).leader, cluster.partition(topic_name, 0).isr) == (2, [2]),
               30, 0.1, "broker 2 leading alone")
    assert elect(ElectionType.UNCLEAN) == KafkaError.ELECTION_NOT_NEEDED
    assert sorted(read_all(cluster.bootstrap, topic_name).values()) == sorted(b"both-%d" % i for i in range(10))
    from tests.integration.test_cli import run_cli
    again = run_cli(cluster.bootstrap, "topics", "elect-leaders", topic_name, "--election-type", "unclean", check=False)
    # kafka-leader-election: a partition that needs no election is a no-op, not a failure
    assert again.returncode == 0 and f"Valid replica already elected for partitions {topic_name}-0" in again.stdout
