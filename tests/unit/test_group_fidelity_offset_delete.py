"""OffsetDelete as Kafka answers it (``KafkaApis.handleOffsetDeleteRequest`` then
``OffsetMetadataManager.deleteOffsets``): a topic or partition number the cluster does not have is
``UNKNOWN_TOPIC_OR_PARTITION`` for its partitions, not a success; the group is still checked
(``GROUP_ID_NOT_FOUND`` for every partition), and a subscribed topic's partitions keep their
offsets (``GROUP_SUBSCRIBED_TO_TOPIC``). Real :class:`GroupRuntime`, handlers and partitions."""
from __future__ import annotations

import pytest

from broker.errors import KafkaError
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped
from tests.unit.test_group_offset_commit_handler import _Broker

pytestmark = pytest.mark.unit

G = "g"


@pytest.fixture
def handlers(tmp_path):
    from broker.server.group_handlers import GroupHandlers
    from broker.server.group_runtime import GroupRuntime
    runtime = GroupRuntime(_Broker(tmp_path))     # topic "t" has partitions 0 and 1
    runtime._sync()
    return GroupHandlers(runtime)


def _delete(handlers, group, tps) -> dict:
    response = handlers.offset_delete(pb.OffsetDeleteRequest(group_id=group, partitions=grouped(tps)))
    return {(r.topic, r.partition): r.error_code for r in response.results}


def _commit(handlers, member_id="", epoch=-1) -> None:
    r = handlers.offset_commit(pb.OffsetCommitRequest(group_id=G, member_id=member_id, member_epoch=epoch, topics=[
        pb.CommitTopic(name="t", partitions=[pb.CommitPartition(partition=p, offset=7) for p in (0, 1)])]))
    assert [x.error_code for x in r.results] == [0, 0]


def _committed(handlers) -> set:
    return {(o.topic, o.partition) for o in handlers.offset_fetch(pb.OffsetFetchRequest(group_id=G)).offsets}


def test_an_unknown_topic_or_partition_is_reported_not_deleted(handlers):
    _commit(handlers)
    assert _delete(handlers, G, [("t", 0), ("typo", 0), ("t", 9)]) == {
        ("t", 0): 0, ("typo", 0): KafkaError.UNKNOWN_TOPIC_OR_PART,
        ("t", 9): KafkaError.UNKNOWN_TOPIC_OR_PART}
    assert _committed(handlers) == {("t", 1)}


def test_the_group_is_checked_even_when_no_partition_exists(handlers):
    assert _delete(handlers, "nobody", [("typo", 0)]) == {("typo", 0): KafkaError.GROUP_ID_NOT_FOUND}
    assert _delete(handlers, "", [("typo", 0)]) == {("typo", 0): KafkaError.INVALID_GROUP_ID}


def test_a_topic_a_member_subscribes_to_keeps_its_offsets(handlers):
    _commit(handlers)
    r = handlers.heartbeat(pb.ConsumerGroupHeartbeatRequest(group_id=G, member_id="m", member_epoch=0,
                                                            subscribed_topics=["t"], session_timeout_ms=10_000))
    assert r.member_epoch > 0
    assert _delete(handlers, G, [("t", 0), ("t", 1)]) == {
        ("t", 0): KafkaError.GROUP_SUBSCRIBED_TO_TOPIC, ("t", 1): KafkaError.GROUP_SUBSCRIBED_TO_TOPIC}
    assert _committed(handlers) == {("t", 0), ("t", 1)}
