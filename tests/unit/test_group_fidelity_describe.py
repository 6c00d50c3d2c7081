"""DescribeGroups through a group's life, as Kafka's ``ConsumerGroup.asDescribedGroup`` and
``GroupCoordinatorService.describeGroups`` answer it: Dead (no error) for a group that does not
exist or was deleted, then Reconciling / Stable / Empty; a static member that left for now is at
epoch -2 (Kafka's ``consumerGroupStaticMemberGroupLeave``), the epoch its commits must carry.
Real :class:`GroupRuntime`, handlers and ``__consumer_offsets`` partition."""
from __future__ import annotations

import pytest

from broker.errors import KafkaError
from broker.proto import riverlog_pb2 as pb
from tests.unit.test_group_offset_commit_handler import _Broker

pytestmark = pytest.mark.unit

G = "g"


@pytest.fixture
def handlers(tmp_path):
    from broker.server.group_handlers import GroupHandlers
    from broker.server.group_runtime import GroupRuntime
    runtime = GroupRuntime(_Broker(tmp_path))
    runtime._sync()
    return GroupHandlers(runtime)


def _heartbeat(handlers, member_id, epoch, owned=(), instance_id=""):
    r = handlers.heartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id=G, member_id=member_id, member_epoch=epoch, instance_id=instance_id, subscribed_topics=["t"],
        session_timeout_ms=10_000, owned=[pb.GroupPartitions(topic="t", partitions=list(owned))] if owned else []))
    return r.member_epoch, sorted(p for t in r.assignment for p in t.partitions)


def _describe(handlers):
    d = handlers.describe_groups(pb.DescribeGroupsRequest(group_ids=[G])).groups[0]
    assert d.error_code == 0
    return d.state, {m.member_id: m.member_epoch for m in d.members}


def _commit(handlers, member_id, epoch) -> int:
    r = handlers.offset_commit(pb.OffsetCommitRequest(group_id=G, member_id=member_id, member_epoch=epoch, topics=[
        pb.CommitTopic(name="t", partitions=[pb.CommitPartition(partition=0, offset=5)])]))
    return r.results[0].error_code


def test_states_through_a_group_life(handlers):
    assert _describe(handlers) == ("Dead", {})
    epoch, owned = _heartbeat(handlers, "a", 0)
    assert owned == [0, 1] and _describe(handlers) == ("Stable", {"a": epoch})
    _heartbeat(handlers, "b", 0)                 # range is eager: a gives everything up first
    state, epochs = _describe(handlers)
    assert state == "Reconciling" and epochs["a"] == epoch
    _heartbeat(handlers, "a", epoch, owned=[0, 1])
    a_epoch, a_owned = _heartbeat(handlers, "a", epoch)
    b_epoch, b_owned = _heartbeat(handlers, "b", epochs["b"])
    assert (a_owned, b_owned) == ([0], [1])
    assert _describe(handlers) == ("Stable", {"a": a_epoch, "b": b_epoch})
    assert _commit(handlers, "", -1) == KafkaError.UNKNOWN_MEMBER_ID     # not while it has members
    assert _commit(handlers, "a", a_epoch) == 0
    _heartbeat(handlers, "a", -1)
    _heartbeat(handlers, "b", -1)
    handlers.runtime._tick()                     # kept: it has an offset
    assert _describe(handlers) == ("Empty", {})
    assert _commit(handlers, "", -1) == 0
    assert handlers.delete_groups(pb.DeleteGroupsRequest(group_ids=[G])).results[0].error_code == 0
    assert _describe(handlers) == ("Dead", {})


def test_a_static_member_away_for_now_is_described_at_epoch_minus_2(handlers):
    epoch, _ = _heartbeat(handlers, "s", 0, instance_id="pod-1")
    _heartbeat(handlers, "s", epoch, owned=[0, 1], instance_id="pod-1")
    _heartbeat(handlers, "s", -2, instance_id="pod-1")
    state, epochs = _describe(handlers)
    assert epochs == {"s": -2}
    # the epoch described is the one the coordinator holds it to (Kafka's validateOffsetCommit)
    assert _commit(handlers, "s", epochs["s"]) == 0
    assert _commit(handlers, "s", epoch) == KafkaError.STALE_MEMBER_EPOCH
    # it comes back under its instance id: its epoch again, no rebalance
    assert _heartbeat(handlers, "s", 0, instance_id="pod-1")[0] == epoch
    assert _describe(handlers) == ("Stable", {"s": epoch})
