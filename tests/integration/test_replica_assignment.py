"""Manual replica assignments (``NewTopic``/``NewPartitions`` ``replica_assignment``), as Kafka's
``ReplicationControlManager`` takes them: each partition on the brokers given, the first active
one leading; refused per topic with ``INVALID_REPLICA_ASSIGNMENT`` and Kafka's messages, and by
the client before sending where confluent-kafka refuses (``ValueError``)."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, KafkaError, NewPartitions, NewTopic
from broker.errors import InvalidReplicaAssignmentError
from tests.integration.test_cluster import FAST

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _code(future) -> int:
    with pytest.raises(Exception) as caught:
        future.result(30)
    return caught.value.args[0].code()


def test_topics_and_partitions_go_where_the_assignment_says(cluster_factory, topic_name):
    cluster = cluster_factory(3, FAST)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, replica_assignment=[[3, 1], [2, 3]])])[topic_name].result(30)
        parts = admin.list_topics(topic_name, timeout=30).topics[topic_name].partitions
        assert [(p.replicas, p.leader) for _, p in sorted(parts.items())] == [([3, 1], 3), ([2, 3], 2)]
        admin.create_partitions([NewPartitions(topic_name, 3, [[1, 2]])])[topic_name].result(30)
        parts = admin.list_topics(topic_name, timeout=30).topics[topic_name].partitions
        assert (parts[2].replicas, parts[2].leader) == ([1, 2], 1)

        bad = {"unknown": [[1, 9]], "twice": [[1, 1]], "uneven": [[1, 2], [3]]}
        futures = admin.create_topics([NewTopic(f"{topic_name}-{k}", len(a), replica_assignment=a)
                                       for k, a in bad.items()])
        messages = {}
        for k in bad:
            with pytest.raises(Exception) as caught:
                futures[f"{topic_name}-{k}"].result(30)
            error = caught.value.args[0]
            assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
            messages[k] = error.str()
        assert "includes broker 9, but no such broker is registered" in messages["unknown"]
        assert "includes the broker 1 more than once" in messages["twice"]
        assert "1 replica(s), but this is not consistent with previous partitions, which have 2" in messages["uneven"]
        # new partitions keep the topic's replication factor, one list per partition added
        assert _code(admin.create_partitions([NewPartitions(topic_name, 4, [[1, 2, 3]])])[topic_name]) == \
            KafkaError.INVALID_REPLICA_ASSIGNMENT
        assert _code(admin.create_partitions([NewPartitions(topic_name, 5, [[1, 2]])])[topic_name]) == \
            KafkaError.INVALID_REPLICA_ASSIGNMENT
        assert len(admin.list_topics(topic_name, timeout=30).topics[topic_name].partitions) == 3


def test_the_client_refuses_what_confluent_kafka_refuses(shared_broker, topic_name):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        with pytest.raises(ValueError, match="replication_factor and replica_assignment are mutually exclusive"):
            admin.create_topics([NewTopic(topic_name, 1, 1, [[0]])])
        with pytest.raises(ValueError, match="default partition count and a replica assignment"):
            admin.create_topics([NewTopic(topic_name, replica_assignment=[[0]])])
        with pytest.raises(ValueError, match="outer size of num_partitions"):
            admin.create_topics([NewTopic(topic_name, 2, replica_assignment=[[0]])])
        with pytest.raises(ValueError, match="outer size of new_total_count"):
            admin.create_partitions([NewPartitions(topic_name, 2, [[0], [1], [2]])])
    assert InvalidReplicaAssignmentError.code == 39
