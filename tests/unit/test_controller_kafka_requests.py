"""The controller's answers held to Kafka's ``ReplicationControlManager`` and ``ClusterControlManager``:
``createTopics``' order of checks and messages, ``createPartitions``' refusals, ``AlterPartition``,
``electLeaders``, fencing, re-registration."""
from __future__ import annotations

import pytest

from broker.config import topic_defaults
from broker.controller import operations
from broker.errors import (FencedLeaderEpochError, InvalidConfigError, InvalidReplicaAssignmentError,
                           InvalidReplicationFactorError, InvalidRequestError, TopicAlreadyExistsError,
                           UnknownTopicOrPartitionError)
from tests.unit.test_controller_fidelity import fence_broker_3, run
from tests.unit.test_quorum_controller import SESSION, Harness

pytestmark = pytest.mark.unit


def create(h: Harness, name: str, partitions: int, rf: int, configs=None, assignment=None):
    return h.commit(h.c.create_topic(h.image, name, partitions, rf, configs or {}, topic_defaults(h.config),
                                     assignment=assignment))


# ----------------------------------------------------------------------------- CreateTopics
def test_an_existing_topic_answers_topic_already_exists_with_kafkas_message():
    h = Harness()
    create(h, "orders", 1, 1)
    with pytest.raises(TopicAlreadyExistsError) as refused:
        create(h, "orders", 1, 1)
    assert str(refused.value) == "Topic 'orders' already exists."


def test_an_existing_topic_is_answered_before_its_manual_assignment_is_looked_at():
    """Kafka's ``createTopics`` marks existing names before ``createTopic`` checks the request."""
    h = Harness()
    create(h, "orders", 1, 1)
    with pytest.raises(TopicAlreadyExistsError):
        create(h, "orders", -1, 3, assignment=[[1, 2, 3]])


def test_topic_configs_are_checked_before_the_partition_count_and_replication_factor():
    """Kafka's ``computeConfigChanges`` runs before ``createTopic``'s count checks."""
    h = Harness()
    with pytest.raises(InvalidConfigError):
        create(h, "orders", 0, 0, configs={"cleanup.policy": "bogus"})
    with pytest.raises(InvalidConfigError):
        create(h, "orders", -1, 3, configs={"no.such.config": "1"}, assignment=[[1, 2, 3]])
    assert "orders" not in h.image.topics


# ----------------------------------------------------------------------------- CreatePartitions
def test_an_added_partition_on_fenced_brokers_is_named_by_its_index_in_the_topic():
    """``createPartitions``: "... for partition " + (startPartitionId + i) + " are fenced ..."."""
    h = Harness()
    create(h, "orders", 2, 1)
    fence_broker_3(h)
    with pytest.raises(InvalidReplicaAssignmentError) as refused:
        run(h, "create_partitions", {"name": "orders", "total": 4, "assignment": [[1], [3]]})
    assert str(refused.value) == ("All brokers specified in the manual partition assignment for partition 3 "
                                  "are fenced or in controlled shutdown.")
    assert h.image.topics["orders"].num_partitions == 2


# ----------------------------------------------------------------------------- AlterPartition
def test_alter_partition_refuses_an_old_leader_epoch_and_a_fenced_or_shutting_down_joiner():
    """guard: FENCED_LEADER_EPOCH for an old leader epoch; a fenced broker, or one in controlled
    shutdown, cannot join an ISR (Kafka's ``ineligibleReplicasForIsr``)."""
    h = Harness()
    create(h, "t", 1, 3)
    p = h.partitions("t")[0]
    tid = h.image.topics["t"].topic_id
    out = [r for r in p.replicas if r != p.leader][0]
    h.commit(h.c.alter_partition(h.image, p.leader, tid, 0, p.leader_epoch, p.partition_epoch,
                                 [r for r in p.isr if r != out]))
    with pytest.raises(FencedLeaderEpochError):
        h.c.alter_partition(h.image, p.leader, tid, 0, p.leader_epoch - 1, p.partition_epoch, list(p.replicas))
    h.commit([{"type": "broker_state", "node_id": out, "shutting_down": True}])
    with pytest.raises(InvalidRequestError):
        h.c.alter_partition(h.image, p.leader, tid, 0, p.leader_epoch, p.partition_epoch, list(p.replicas))
    assert out not in h.partitions("t")[0].isr


def test_placement_refusals_name_the_partition_only_when_creating_a_topic():
    """Kafka's ``createTopic`` prefixes the placer's refusal with "Unable to replicate the
    partition N time(s): "; ``createPartitions`` answers the placer's own message."""
    h = Harness()
    create(h, "orders", 1, 1)
    for b in (1, 2, 3):
        h.commit([{"type": "broker_state", "node_id": b, "fenced": True}])
    with pytest.raises(InvalidReplicationFactorError) as added:
        run(h, "create_partitions", {"name": "orders", "total": 2})
    assert str(added.value) == "All brokers are currently fenced."
    with pytest.raises(InvalidReplicationFactorError) as created:
        create(h, "payments", 1, 1)
    assert str(created.value) == "Unable to replicate the partition 1 time(s): All brokers are currently fenced."
    with pytest.raises(InvalidReplicationFactorError) as too_many:
        create(h, "payments", 1, 4)
    assert str(too_many.value) == ("Unable to replicate the partition 4 time(s): The target replication factor "
                                   "of 4 cannot be reached because only 3 broker(s) are registered.")


# ----------------------------------------------------------------------------- BrokerRegistration
def test_re_registering_the_same_incarnation_keeps_the_broker_epoch_and_state():
    """ClusterControlManager "Amending registration": the same incarnation with new addresses keeps
    its broker epoch, fencing and controlled-shutdown state (testReRegistrationAndBrokerEpoch);
    a new incarnation gets a new epoch and starts fenced."""
    h = Harness()
    epoch = h.image.brokers[2].broker_epoch
    incarnation = h.image.brokers[2].incarnation
    assert not h.image.brokers[2].fenced
    records, reply = operations.operation("register_broker", {
        "node_id": 2, "host": "127.0.0.1", "port": 9999, "incarnation": incarnation})(h.c, h.image, h.now)
    h.commit(records)
    reply = reply(h.offset - 1) if callable(reply) else reply
    b = h.image.brokers[2]
    assert (b.port, b.broker_epoch, b.fenced, b.shutting_down) == (9999, epoch, False, False)
    assert reply["broker_epoch"] == epoch
    assert h.heartbeat(2).fenced is False, "its heartbeats with the epoch it had are still good"
    h.register(2)
    assert h.image.brokers[2].broker_epoch > epoch and h.image.brokers[2].fenced


def test_a_null_topic_config_value_is_refused_and_not_stored():
    """``computeConfigChanges``: "Null value not supported for topic configs: ..." (INVALID_CONFIG),
    rather than a topic whose config reads "None"."""
    h = Harness()
    with pytest.raises(InvalidConfigError) as refused:
        create(h, "orders", 1, 1, configs={"cleanup.policy": None, "retention.ms": "1000", "segment.ms": None})
    assert str(refused.value) == "Null value not supported for topic configs: cleanup.policy,segment.ms"
    assert "orders" not in h.image.topics


# ----------------------------------------------------------------------------- ElectLeaders
def test_electing_a_topic_the_cluster_lacks_answers_kafkas_message():
    """``electLeader``: UNKNOWN_TOPIC_OR_PARTITION "No such topic as bar" (testElectPreferredLeaders)."""
    h = Harness()
    with pytest.raises(UnknownTopicOrPartitionError) as refused:
        operations.operation("elect_leaders", {"topic": "bar", "partitions": [0, 1]})(h.c, h.image, h.now)
    assert str(refused.value) == "No such topic as bar"


# ----------------------------------------------------------------------------- fencing
def test_fencing_two_brokers_at_once_moves_their_leaderships_and_shrinks_the_isrs():
    """guard (already matched): testFenceMultipleBrokers."""
    h = Harness(brokers=(0, 1, 2, 3, 4))
    create(h, "foo", -1, -1, assignment=[[1, 2, 3], [2, 3, 4], [0, 2, 1]])
    h.tick(SESSION + 1, alive=[0, 1, 4])
    assert {2, 3} <= {b.node_id for b in h.image.brokers.values() if b.fenced}
    got = [(p.replicas, p.isr, p.leader) for p in h.partitions("foo")]
    assert got == [([1, 2, 3], [1], 1), ([2, 3, 4], [4], 4), ([0, 2, 1], [0, 1], 0)]
