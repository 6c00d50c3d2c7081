"""The controller's answers to admin calls on a real three-node cluster, held to Kafka's
``ReplicationControlManager``: per-partition ElectLeaders errors, CreatePartitions refusals, and
a replication factor that counts a broker that is down (placed, out of the ISR, until it returns).

One cluster for the module; each test uses its own topics."""
from __future__ import annotations

import pytest

from broker.client import NewPartitions, NewTopic, TopicPartition
from broker.client.admin import ElectionType
from broker.errors import ElectionNotNeededError, InvalidPartitionsError, UnknownTopicOrPartitionError
from tests.conftest import Cluster, wait_until
from tests.integration.test_cluster import FAST, _leaders_known

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("controller-fidelity")), 3, FAST)
    try:
        yield c.start()
    finally:
        c.kill_all()


def create(cluster, name, partitions, rf):
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, partitions, rf)])[name].result(30)
    wait_until(lambda: all(_leaders_known(cluster, name, n) for n in cluster.nodes.values() if n.alive),
               30, 0.05, "leaders known to every live broker")


def test_preferred_election_answers_per_partition_as_kafka(cluster, topic_name):
    create(cluster, topic_name, 2, 3)
    with cluster.admin() as admin:
        tp0, missing = TopicPartition(topic_name, 0), TopicPartition(topic_name, 9)
        result = admin.elect_leaders(ElectionType.PREFERRED, [tp0, missing]).result(30)
        assert isinstance(result[tp0], ElectionNotNeededError), result
        assert isinstance(result[missing], UnknownTopicOrPartitionError), result
        everything = admin.elect_leaders(ElectionType.PREFERRED, None).result(30)
        assert not [tp for tp in everything if tp.topic == topic_name], \
            "electing every partition leaves out those whose preferred replica leads (Kafka's electLeaders)"


def test_create_partitions_cannot_shrink_or_stay(cluster, topic_name):
    create(cluster, topic_name, 3, 1)
    with cluster.admin() as admin:
        with pytest.raises(InvalidPartitionsError, match="3 partition\\(s\\); 2 would not be an increase"):
            admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(30)
        with pytest.raises(InvalidPartitionsError, match="Topic already has 3 partition\\(s\\)."):
            admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(30)
        assert len(admin.list_topics(topic_name).topics[topic_name].partitions) == 3


def test_a_broker_that_is_down_still_counts_for_the_replication_factor(cluster, topic_name):
    """Kafka places replicas on every registered broker (``StripedReplicaPlacer``), fenced ones
    last and out of the ISR: with one of three brokers down, RF 3 is created under-replicated
    and the broker joins the ISR once it is back."""
    down = cluster.nodes[3]
    down.kill9()

    def fenced():
        with cluster.admin() as admin:
            nodes = admin.describe_cluster(include_fenced_brokers=True).result(10).nodes
        return any(n.id == 3 and n.fenced for n in nodes)
    wait_until(fenced, 30, 0.1, "broker 3 fenced")
    try:
        create(cluster, topic_name, 2, 3)
        with cluster.admin() as admin:
            parts = admin.list_topics(topic_name).topics[topic_name].partitions.values()
        assert all(sorted(p.replicas) == [1, 2, 3] and 3 not in p.isr and p.leader in (1, 2) for p in parts)
    finally:
        down.start()
    wait_until(lambda: all(len(cluster.partition(topic_name, i).isr) == 3 for i in range(2)), 60, 0.2,
               "broker 3 back in every ISR")
