"""The group coordinator moving: its ``__consumer_offsets`` partition's leader killed -9 on a real
3-node cluster. Acknowledged commits stay, deleted groups stay deleted, members find the new
coordinator and no partition has two owners."""
from __future__ import annotations

import threading

import pytest

from broker.client import OFFSET_INVALID, AdminClient, TopicPartition
from broker.client.group_admin import ConsumerGroupState, ConsumerGroupTopicPartitions
from broker.errors import RiverlogError
from tests.conftest import wait_until
from tests.integration.test_groups import GROUP_CONFIG, Member, consumer, make_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CLUSTER_CONFIG = {**GROUP_CONFIG, "replica.lag.time.max.ms": 1500, "broker.session.timeout.ms": 1500,
                  "broker.heartbeat.interval.ms": 200}


COOPERATIVE = {"partition_assignment_strategy": "cooperative-sticky"}


def _admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "request.timeout.ms": 10000})


def _describe(cluster, group: str):
    try:
        with _admin(cluster) as admin:
            return admin.describe_consumer_groups([group])[group].result(15)
    except RiverlogError:
        return None   # the coordinator may still be moving


def _offsets(cluster, group: str):
    try:
        with _admin(cluster) as admin:
            found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    except RiverlogError:
        return None
    return {tp.partition: tp.offset for tp in found.topic_partitions if tp.offset != OFFSET_INVALID}


def test_every_acknowledged_commit_survives_the_coordinators_kill_9(cluster_factory, topic_name):
    """Kafka answers a commit once its record is replicated to the ISR: killing the coordinator
    right after never takes an acknowledged offset back."""
    cluster = cluster_factory(3, CLUSTER_CONFIG)
    make_topic(cluster.bootstrap, topic_name, partitions=1, records=1, rf=3)
    c = consumer(cluster.bootstrap, "acked", enable_auto_commit=False, request_timeout_ms=60000)
    c.assign([TopicPartition(topic_name, 0)])
    acked = []
    stop = threading.Event()

    def commit():
        offset = 0
        while not stop.is_set():
            offset += 1
            try:
                c.commit(offsets=[TopicPartition(topic_name, 0, offset)], asynchronous=False)
                acked.append(offset)
            except RiverlogError:
                pass   # not acknowledged: may or may not be kept

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()
    try:
        wait_until(lambda: len(acked) >= 20, 60, 0.01, "commits acknowledged")
        coordinator = c._coordinator.node_id
        cluster.nodes[coordinator].kill9()
        killed_at = len(acked)
        wait_until(lambda: len(acked) > killed_at + 5, 90, 0.05, "commits acknowledged by the new coordinator")
    finally:
        stop.set()
        committer.join(90)
    last = acked[-1]
    found = wait_until(lambda: _offsets(cluster, "acked"), 60, 0.2, "the committed offset")
    assert found[0] >= last
    assert _describe(cluster, "acked").coordinator != coordinator
    c.close()


def test_a_deleted_group_stays_deleted_after_the_coordinator_moves(cluster_factory, topic_name):
    """DeleteGroups writes tombstones; the new coordinator replays them, so neither the group nor
    its offsets come back."""
    cluster = cluster_factory(3, CLUSTER_CONFIG)
    make_topic(cluster.bootstrap, topic_name, partitions=2, records=10, rf=3)
    c = consumer(cluster.bootstrap, "deleted", enable_auto_commit=False)
    c.commit(offsets=[TopicPartition(topic_name, p, 3) for p in range(2)], asynchronous=False)
    coordinator = c._coordinator.node_id
    c.close()
    with _admin(cluster) as admin:
        admin.delete_consumer_groups(["deleted"])["deleted"].result(15)
    cluster.nodes[coordinator].kill9()
    moved = wait_until(lambda: (lambda d: d if d is not None and d.coordinator != coordinator else None)(
        _describe(cluster, "deleted")), 60, 0.2, "the group described by the new coordinator")
    assert moved.state == ConsumerGroupState.DEAD and moved.members == []
    assert wait_until(lambda: _offsets(cluster, "deleted") == {} or None, 30, 0.2, "no offsets")
    with _admin(cluster) as admin:
        assert "deleted" not in {g.group_id for g in admin.list_consumer_groups().result(15).valid}


def test_members_follow_the_coordinator_and_no_partition_has_two_owners(cluster_factory, topic_name):
    cluster = cluster_factory(3, CLUSTER_CONFIG)
    make_topic(cluster.bootstrap, topic_name, partitions=6, records=60, rf=3)
    alive = [n.bootstrap for n in cluster.nodes.values()]
    # cooperative-sticky: an eager member given partitions in steps (as the previous owners' sessions
    # run out) is a client matter, not the coordinator's
    members = [Member(",".join(alive), "moving-members", topic_name, **COOPERATIVE) for _ in range(2)]
    try:
        wait_until(lambda: len(members[0].owned) + len(members[1].owned) == 6
                   and not members[0].owned & members[1].owned, 60, 0.05, "the first assignment")
        before = _describe(cluster, "moving-members")
        cluster.nodes[before.coordinator].kill9()
        after = wait_until(lambda: (lambda d: d if d is not None and d.coordinator != before.coordinator
                                    and len(d.members) == 2 else None)(_describe(cluster, "moving-members")),
                           60, 0.2, "the group on its new coordinator")
        assert after.group_epoch >= before.group_epoch
        owned = [{tp.partition for tp in m.assignment.topic_partitions} for m in after.members]
        assert not owned[0] & owned[1]
        # members keep heartbeating to the new coordinator: their sessions do not run out
        m3 = Member(cluster.bootstrap, "moving-members", topic_name, **COOPERATIVE)
        members.append(m3)
        wait_until(lambda: all(m.owned for m in members) and sum(len(m.owned) for m in members) == 6
                   and len(set().union(*(m.owned for m in members))) == 6, 60, 0.05, "three members sharing six")
        final = _describe(cluster, "moving-members")
        assert len(final.members) == 3
        seen = [tp.partition for m in final.members for tp in m.assignment.topic_partitions]
        assert len(seen) == len(set(seen))
        assert all(m.alive for m in members)
    finally:
        for m in members:
            m.close()
