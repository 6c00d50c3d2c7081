"""The controller's answers to admin requests, held to Kafka's ``ReplicationControlManager``:
preferred elections' per-partition errors, replication-factor and partition-count errors with
Kafka's messages, and placement when a registered broker is fenced (``StripedReplicaPlacer``)."""
from __future__ import annotations

import pytest

from broker.controller import operations
from broker.errors import (ElectionNotNeededError, InvalidPartitionsError, InvalidReplicationFactorError,
                           PreferredLeaderNotAvailableError, UnknownTopicOrPartitionError)
from broker.metadata.image import MetadataImage
from tests.unit.test_quorum_controller import SESSION, Harness

pytestmark = pytest.mark.unit


def run(h: Harness, name: str, body: dict):
    """An operation as the runtime runs it, its records committed."""
    records, result = operations.operation(name, body)(h.c, h.image, h.now)
    h.commit(records)
    return records


def elect(h: Harness, body: dict) -> dict:
    """An ElectLeaders operation's per-partition errors, as the broker answers them: {partition: code}."""
    records, reply = operations.operation("elect_leaders", body)(h.c, h.image, h.now)
    h.commit(records)
    assert reply["elected"] == sorted(r["partition"] for r in records)
    return {i: code for i, code, _ in reply["errors"]}


def move_leader_off_preferred(h: Harness, topic: str, index: int, isr=None) -> int:
    p = h.partitions(topic)[index]
    other = p.replicas[1]
    h.commit([{"type": "partition_change", "topic_id": h.image.topics[topic].topic_id, "partition": index,
               "leader": other, **({"isr": isr} if isr is not None else {})}])
    return other


# ----------------------------------------------------------------------------- ElectLeaders (PREFERRED)
def test_a_partition_led_by_its_preferred_replica_answers_election_not_needed():
    h = Harness()
    h.create("orders", partitions=2, rf=3)
    assert elect(h, {"topic": "orders", "partitions": [0, 7]}) == \
        {0: ElectionNotNeededError.code, 7: UnknownTopicOrPartitionError.code}


def test_a_preferred_replica_out_of_the_isr_answers_preferred_leader_not_available():
    h = Harness()
    h.create("orders", partitions=1, rf=3)
    p = h.partitions("orders")[0]
    leader = move_leader_off_preferred(h, "orders", 0, isr=p.replicas[1:])
    epoch = p.leader_epoch
    assert elect(h, {"topic": "orders", "partitions": [0]}) == {0: PreferredLeaderNotAvailableError.code}
    assert (p.leader, p.leader_epoch) == (leader, epoch), "nothing changed"


def test_electing_a_whole_topic_moves_only_what_needs_moving_and_leaves_out_the_rest():
    h = Harness()
    h.create("orders", partitions=3, rf=3)
    move_leader_off_preferred(h, "orders", 1)
    epochs = [p.leader_epoch for p in h.partitions("orders")]
    records = run(h, "elect_leaders", {"topic": "orders", "partitions": None})
    assert [r["partition"] for r in records] == [1]
    parts = h.partitions("orders")
    assert all(p.leader == p.replicas[0] for p in parts)
    assert [p.leader_epoch for p in parts] == [epochs[0], epochs[1] + 1, epochs[2]]
    assert run(h, "elect_leaders", {"topic": "orders", "partitions": None}) == [], \
        "all preferred: nothing to elect and no error (Kafka leaves ELECTION_NOT_NEEDED out)"


# ----------------------------------------------------------------------------- CreateTopics / CreatePartitions
@pytest.mark.parametrize("partitions, rf, error, message", [
    (1, 4, InvalidReplicationFactorError, "Unable to replicate the partition 4 time(s): The target replication "
                                          "factor of 4 cannot be reached because only 3 broker(s) are registered."),
    (1, 0, InvalidReplicationFactorError, "Replication factor must be larger than 0, or -1 to use the default value."),
    (1, -2, InvalidReplicationFactorError, "Replication factor must be larger than 0, or -1 to use the default value."),
    (0, 1, InvalidPartitionsError, "Number of partitions was set to an invalid non-positive value."),
])
def test_create_topic_refusals_carry_kafkas_messages(partitions, rf, error, message):
    h = Harness()
    with pytest.raises(error) as refused:
        h.create("orders", partitions=partitions, rf=rf)
    assert str(refused.value) == message


def test_create_partitions_refuses_the_same_or_a_smaller_count_with_kafkas_messages():
    h = Harness()
    h.create("orders", partitions=3, rf=1)
    with pytest.raises(InvalidPartitionsError) as same:
        run(h, "create_partitions", {"name": "orders", "total": 3})
    assert str(same.value) == "Topic already has 3 partition(s)."
    with pytest.raises(InvalidPartitionsError) as fewer:
        run(h, "create_partitions", {"name": "orders", "total": 2})
    assert str(fewer.value) == "The topic orders currently has 3 partition(s); 2 would not be an increase."
    assert h.image.topics["orders"].num_partitions == 3


# ----------------------------------------------------------------------------- placement with a fenced broker
def fence_broker_3(h: Harness) -> None:
    h.tick(SESSION + 1, alive=[1, 2])
    assert h.image.brokers[3].fenced and h.image.live_brokers() == [1, 2]
    h.now += 10 * SESSION   # past the controller's start-up grace
    for b in (1, 2):
        h.heartbeat(b)


def test_a_fenced_registered_broker_is_placed_last_and_starts_out_of_the_isr():
    """Kafka counts every registered broker (``usableBrokers``) and leaves fenced ones out of the
    new ISR (``buildPartitionRegistration``): RF 3 with one broker down is created, under-replicated."""
    h = Harness()
    fence_broker_3(h)
    h.create("orders", partitions=4, rf=3)
    for p in h.partitions("orders"):
        assert p.replicas[-1] == 3 and sorted(p.replicas) == [1, 2, 3]
        assert p.isr == p.replicas[:2] and p.leader == p.replicas[0] != 3
    assert sorted(p.leader for p in h.partitions("orders")) == [1, 1, 2, 2]
    run(h, "create_partitions", {"name": "orders", "total": 6})
    assert all(p.replicas[-1] == 3 and 3 not in p.isr for p in h.partitions("orders")[4:])
    # the snapshot of the image rebuilds the same partitions
    rebuilt = MetadataImage()
    for r in h.image.to_records():
        rebuilt.apply(r, h.image.offset)
    assert [(p.replicas, p.isr, p.leader) for p in rebuilt.topics["orders"].partitions] == \
        [(p.replicas, p.isr, p.leader) for p in h.partitions("orders")]
    # back: it can join the ISR of the partitions it was placed on
    h.heartbeat(3)
    assert not h.image.brokers[3].fenced
    p = h.partitions("orders")[0]
    records = h.c.alter_partition(h.image, p.leader, h.image.topics["orders"].topic_id, 0, p.leader_epoch,
                                  p.partition_epoch, p.replicas)
    h.commit(records)
    assert p.isr == p.replicas


def test_the_replication_factor_counts_registered_brokers_and_needs_one_available():
    h = Harness()
    fence_broker_3(h)
    with pytest.raises(InvalidReplicationFactorError, match="only 3 broker"):
        h.create("wide", rf=4)
    h.tick(SESSION + 1)   # every broker silent: all fenced
    h.now += 10 * SESSION
    assert h.image.live_brokers() == []
    with pytest.raises(InvalidReplicationFactorError) as refused:
        h.create("orders", partitions=1, rf=1)
    assert str(refused.value) == "Unable to replicate the partition 1 time(s): All brokers are currently fenced."


def test_an_internal_topic_created_while_a_broker_is_down_keeps_its_replication_factor():
    """``__consumer_offsets`` created on first use with broker 3 down: Kafka's placer counts it,
    so the topic has 3 replicas (3 out of the ISR until it returns), not 2 for good."""
    h = Harness()
    fence_broker_3(h)
    run(h, "create_internal_topic", {"name": "__consumer_offsets", "num_partitions": 3, "replication_factor": 3,
                                     "configs": {"cleanup.policy": "compact"}})
    for p in h.partitions("__consumer_offsets"):
        assert sorted(p.replicas) == [1, 2, 3] and p.replicas[-1] == 3 and 3 not in p.isr
    h2 = Harness(brokers=(1,))
    run(h2, "create_internal_topic", {"name": "__consumer_offsets", "num_partitions": 1, "replication_factor": 3})
    assert h2.partitions("__consumer_offsets")[0].replicas == [1], "still capped by the brokers there are"


def test_deleting_a_topic_while_deletion_is_disabled_is_kafkas_topic_deletion_disabled():
    """``ControllerApis.deleteTopics``: TOPIC_DELETION_DISABLED (73), not a policy violation (44)."""
    from broker.errors import TopicDeletionDisabledError
    h = Harness(**{"delete.topic.enable": False})
    h.create("orders", partitions=1, rf=1)
    with pytest.raises(TopicDeletionDisabledError, match="Topic deletion is disabled") as raised:
        run(h, "delete_topic", {"name": "orders"})
    assert raised.value.code == 73 and "orders" in h.image.topics
