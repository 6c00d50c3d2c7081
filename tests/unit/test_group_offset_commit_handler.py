"""OffsetCommit as Kafka's ``OffsetMetadataManager.commitOffset`` answers it
(broker/server/group_handlers.py over a real :class:`GroupRuntime` and ``__consumer_offsets``
partition): the caller is checked before any offset's metadata, and a refused caller's error is on
every partition; a caller let in gets ``OFFSET_METADATA_TOO_LARGE`` only for the offsets too large."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import KafkaError
from broker.group.coordinator import OFFSETS_TOPIC
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.storage.log import Log

pytestmark = pytest.mark.unit

G = "g"


class _Broker:
    """What the group runtime and handlers use of a broker: node 0 alone leads
    ``__consumer_offsets-0`` (so a write is acknowledged at once); topic ``t`` has 2 partitions."""

    def __init__(self, tmp_path):
        self.node_id, self.clock, self.serving = 0, ManualClock(), True
        self.config = BROKER_CONFIG.parse({"log.dirs": str(tmp_path), "offset.metadata.max.bytes": 5})
        self.offsets = Partition(OFFSETS_TOPIC, 0, "id", Log.open(
            str(tmp_path / "offsets-0"), TOPIC_CONFIG.parse({"cleanup.policy": "compact"}), self.clock),
            AppendNotifier(), clock=self.clock)
        self.offsets.make_leader(0, 0, [0], [0])
        self.topic_deletion_listeners = []
        self.image = NS(topics={OFFSETS_TOPIC: NS(num_partitions=1, partitions=[NS(leader=0)]),
                                "t": NS(num_partitions=2, partitions=[NS(leader=0), NS(leader=0)])})

    def partition(self, topic: str, index: int) -> Partition:
        return self.offsets


@pytest.fixture
def handlers(tmp_path):
    from broker.server.group_handlers import GroupHandlers
    from broker.server.group_runtime import GroupRuntime
    runtime = GroupRuntime(_Broker(tmp_path))
    runtime._sync()
    assert runtime.loaded_shards()
    return GroupHandlers(runtime)


def _commit(handlers, member_id, epoch, metadata: dict[int, str]) -> dict:
    request = pb.OffsetCommitRequest(group_id=G, member_id=member_id, member_epoch=epoch, topics=[
        pb.CommitTopic(name="t", partitions=[pb.CommitPartition(partition=p, offset=10 + p, metadata=m,
                                                                leader_epoch=3) for p, m in metadata.items()])])
    return {r.partition: r.error_code for r in handlers.offset_commit(request).results}


def _committed(handlers) -> dict:
    fetched = handlers.offset_fetch(pb.OffsetFetchRequest(group_id=G))
    return {o.partition: (o.offset, o.metadata, o.leader_epoch) for o in fetched.offsets}


def test_a_refused_caller_is_told_so_before_its_metadata_is_looked_at(handlers):
    # testOffsetCommitWithUnknownGroup: a member epoch for a group that does not exist, every
    # offset's metadata too large: GROUP_ID_NOT_FOUND, not OFFSET_METADATA_TOO_LARGE
    assert _commit(handlers, "m", 4, {0: "toolarge", 1: "toolarge"}) == {
        0: KafkaError.GROUP_ID_NOT_FOUND, 1: KafkaError.GROUP_ID_NOT_FOUND}
    assert _commit(handlers, "m", 4, {0: "toolarge", 1: "small"}) == {
        0: KafkaError.GROUP_ID_NOT_FOUND, 1: KafkaError.GROUP_ID_NOT_FOUND}
    assert _committed(handlers) == {}


def test_metadata_too_large_fails_only_its_own_partition(handlers):
    # testConsumerGroupOffsetCommitWithOffsetMetadataTooLarge (offset.metadata.max.bytes=5)
    assert _commit(handlers, "", -1, {0: "toolarge", 1: "small"}) == {0: KafkaError.OFFSET_METADATA_TOO_LARGE, 1: 0}
    assert _committed(handlers) == {1: (11, "small", 3)}


def test_metadata_is_measured_as_java_counts_a_string(handlers):
    # Kafka's isMetadataInvalid: String.length(), UTF-16 code units: a character outside the BMP
    # counts twice, so three emoji (6 units) exceed 5 while five accented letters do not
    assert _commit(handlers, "", -1, {0: "\U0001F600" * 3, 1: "\u00e9" * 5}) == {
        0: KafkaError.OFFSET_METADATA_TOO_LARGE, 1: 0}
    assert _committed(handlers) == {1: (11, "\u00e9" * 5, 3)}
