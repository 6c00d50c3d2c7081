"""OffsetFetch as Kafka's OffsetFetch v9 (KIP-848) answers it: ``OffsetMetadataManager.fetchOffsets``
/ ``fetchAllOffsets`` with ``ConsumerGroup.validateOffsetFetch`` (their cases in
``OffsetMetadataManagerTest`` and ``ConsumerGroupTest.testValidateOffsetFetch``), through
broker/server/group_handlers.py over a real :class:`GroupRuntime` and ``__consumer_offsets`` partition."""
from __future__ import annotations

import pytest

from broker.errors import KafkaError
from broker.proto import riverlog_pb2 as pb
from tests.unit.test_group_offset_commit_handler import handlers  # noqa: F401 - the fixture

pytestmark = pytest.mark.unit

G = "g"


def _beat(handlers, member_id: str, epoch: int, instance_id: str = "", owned=None) -> pb.ConsumerGroupHeartbeatResponse:
    request = pb.ConsumerGroupHeartbeatRequest(group_id=G, member_id=member_id, member_epoch=epoch,
                                               instance_id=instance_id, subscribed_topics=["t"], assignor="range")
    if owned is not None:
        request.owned.extend(owned)
    return handlers.heartbeat(request)


def _member_with_offsets(handlers) -> int:
    """Member "m" joins the group (it gets both partitions of t) and commits t-0 at 100; its epoch."""
    epoch = _beat(handlers, "m", 0).member_epoch
    assert epoch > 0
    commit = pb.OffsetCommitRequest(group_id=G, member_id="m", member_epoch=epoch, topics=[
        pb.CommitTopic(name="t", partitions=[pb.CommitPartition(partition=0, offset=100, leader_epoch=-1)])])
    assert [r.error_code for r in handlers.offset_commit(commit).results] == [0]
    return epoch


def _fetch(handlers, member_id: str = "", epoch: int | None = None, partitions=True, group: str = G):
    request = pb.OffsetFetchRequest(group_id=group, member_id=member_id)
    if epoch is not None:
        request.member_epoch = epoch
    if partitions:
        request.partitions.add(topic="t", partitions=[0, 1])
    response = handlers.offset_fetch(request)
    return response.error_code, {o.partition: o.offset for o in response.offsets}


@pytest.mark.parametrize("partitions", [True, False], ids=["some", "all"])
def test_the_member_at_its_epoch_and_a_reader_from_outside_the_group_are_answered(handlers, partitions):
    # testConsumerGroupOffsetFetchWithMemberIdAndEpoch, testConsumerGroupOffsetFetchFromAdminClient
    epoch = _member_with_offsets(handlers)
    assert _fetch(handlers, "m", epoch, partitions) == (0, {0: 100})
    assert _fetch(handlers, partitions=partitions) == (0, {0: 100})             # no member id, no epoch
    assert _fetch(handlers, "", -1, partitions) == (0, {0: 100})                # no member id, epoch -1


@pytest.mark.parametrize("partitions", [True, False], ids=["some", "all"])
def test_a_member_the_group_does_not_have_is_unknown(handlers, partitions):
    # testConsumerGroupOffsetFetchWithUnknownMemberId: "" with epoch 0, and an unknown member id
    epoch = _member_with_offsets(handlers)
    assert _fetch(handlers, "gone", epoch, partitions) == (KafkaError.UNKNOWN_MEMBER_ID, {})
    assert _fetch(handlers, "", 0, partitions) == (KafkaError.UNKNOWN_MEMBER_ID, {})


@pytest.mark.parametrize("partitions", [True, False], ids=["some", "all"])
def test_another_epoch_than_the_members_is_stale(handlers, partitions):
    # testConsumerGroupOffsetFetchWithStaleMemberEpoch; a member id without an epoch is at -1
    epoch = _member_with_offsets(handlers)
    assert _fetch(handlers, "m", epoch + 10, partitions) == (KafkaError.STALE_MEMBER_EPOCH, {})
    assert _fetch(handlers, "m", epoch - 1, partitions) == (KafkaError.STALE_MEMBER_EPOCH, {})
    assert _fetch(handlers, "m", None, partitions) == (KafkaError.STALE_MEMBER_EPOCH, {})


def test_the_error_says_what_the_member_should_do(handlers):
    epoch = _member_with_offsets(handlers)
    response = handlers.offset_fetch(pb.OffsetFetchRequest(group_id=G, member_id="m", member_epoch=epoch + 1))
    assert f"expected member epoch {epoch}" in response.error_message and "heartbeat" in response.error_message


def test_a_group_that_does_not_exist_has_no_offsets_and_no_error_whoever_asks(handlers):
    # testFetchOffsetsWithUnknownGroup / testFetchAllOffsetsWithUnknownGroup: GroupIdNotFound is no error
    _member_with_offsets(handlers)
    assert _fetch(handlers, "m", 5, group="other") == (0, {})
    assert _fetch(handlers, "m", 5, partitions=False, group="other") == (0, {})
    assert _fetch(handlers, group="other") == (0, {})


def test_a_member_that_left_is_unknown_to_an_empty_group_that_keeps_its_offsets(handlers):
    epoch = _member_with_offsets(handlers)
    _beat(handlers, "m", -1)                                        # leaves: the group keeps its offsets
    assert _fetch(handlers, "m", epoch) == (KafkaError.UNKNOWN_MEMBER_ID, {})
    assert _fetch(handlers) == (0, {0: 100})


def test_a_static_member_away_for_now_is_at_epoch_minus_2(handlers):
    # Kafka's consumerGroupStaticMemberGroupLeave stores the member at LEAVE_GROUP_STATIC_MEMBER_EPOCH
    epoch = _beat(handlers, "s", 0, instance_id="i").member_epoch
    assert epoch > 0
    _beat(handlers, "s", -2, instance_id="i")
    assert _fetch(handlers, "s", epoch) == (KafkaError.STALE_MEMBER_EPOCH, {})
    assert _fetch(handlers, "s", -2) == (0, {})


def test_a_replaced_static_members_id_is_unknown_not_fenced(handlers):
    # Kafka's validateOffsetFetch looks the member id up and knows no fenced ids: UNKNOWN_MEMBER_ID
    first = _beat(handlers, "old", 0, instance_id="i").member_epoch
    _beat(handlers, "old", -2, instance_id="i")
    _beat(handlers, "new", 0, instance_id="i")                      # the restarted instance replaces it
    assert _fetch(handlers, "old", first) == (KafkaError.UNKNOWN_MEMBER_ID, {})


def test_validate_offset_fetch_on_the_group_alone():
    # ConsumerGroupTest.testValidateOffsetFetch, on the pure core
    from broker.errors import StaleMemberEpochError, UnknownMemberIdError
    from broker.group.group import ConsumerGroup
    from broker.group.offset_fetch import check_fetch
    group = ConsumerGroup(G)
    check_fetch(group, "", -1)                                      # the admin client: no member id, no epoch
    with pytest.raises(UnknownMemberIdError):
        check_fetch(group, "member-id", 0)
    epoch = group.heartbeat("member-id", 0, topics=["t"], partitions={"t": 1}, now_ms=0).member_epoch
    with pytest.raises(StaleMemberEpochError):
        check_fetch(group, "member-id", epoch + 10)
    check_fetch(group, "member-id", epoch)
