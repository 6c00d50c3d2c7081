"""ListGroups as Kafka's coordinator answers it (``GroupCoordinatorService.listGroups`` over
``scheduleReadAllOperation``): every ``__consumer_offsets`` partition this broker coordinates is
read at its replicated state; one it leads but has not loaded yet fails the call with
``COORDINATOR_LOAD_IN_PROGRESS`` instead of leaving its groups out, and one another broker leads is
skipped (that broker lists it). Real :class:`GroupRuntime`, handlers and partitions."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import CoordinatorLoadInProgressError, NotLeaderOrFollowerError
from broker.group.coordinator import OFFSETS_TOPIC, partition_for
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.records.arrow_body import encode_batch, record_batch
from broker.storage.log import Log

pytestmark = pytest.mark.unit


class _Broker:
    """Node 0 leads ``__consumer_offsets-0`` (alone in its ISR, unless ``isr`` says otherwise);
    partition 1 is led by node 1, so this broker does not coordinate it."""

    def __init__(self, tmp_path, isr=(0,)):
        self.node_id, self.clock, self.serving, self.shutting_down = 0, ManualClock(), True, False
        self.config = BROKER_CONFIG.parse({"log.dirs": str(tmp_path), "offsets.commit.timeout.ms": 50})
        self.offsets = Partition(OFFSETS_TOPIC, 0, "id", Log.open(
            str(tmp_path / "offsets-0"), TOPIC_CONFIG.parse({"cleanup.policy": "compact"}), self.clock),
            AppendNotifier(), clock=self.clock)
        self.offsets.make_leader(0, 0, list(isr), list(isr))
        self.topic_deletion_listeners = []
        self.image = NS(topics={OFFSETS_TOPIC: NS(num_partitions=2, partitions=[NS(leader=0), NS(leader=1)]),
                                "t": NS(num_partitions=2, partitions=[NS(leader=0), NS(leader=0)])})

    def partition(self, topic: str, index: int) -> Partition:
        if index != 0:
            raise NotLeaderOrFollowerError(f"{topic}-{index} is not here")
        return self.offsets


def _group_on(partition: int) -> str:
    return next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 2) == partition)


def _handlers(broker):
    from broker.server.group_handlers import GroupHandlers
    from broker.server.group_runtime import GroupRuntime
    return GroupHandlers(GroupRuntime(broker))


def _join(handlers, group: str) -> None:
    handlers.heartbeat(pb.ConsumerGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=0,
                                                        subscribed_topics=["t"], session_timeout_ms=10_000))


def test_a_partition_still_loading_fails_the_listing_instead_of_hiding_its_groups(tmp_path):
    handlers = _handlers(_Broker(tmp_path))
    # __consumer_offsets-0 is this broker's, not loaded yet (its coordinator thread has not run)
    with pytest.raises(CoordinatorLoadInProgressError, match=r"partition\(s\) \[0\]"):
        handlers.list_groups(pb.ListGroupsRequest())
    handlers.runtime._sync()
    group = _group_on(0)
    _join(handlers, group)
    listed = handlers.list_groups(pb.ListGroupsRequest())
    assert [(g.group_id, g.state, g.coordinator) for g in listed.groups] == [(group, "Stable", 0)]


def test_groups_not_replicated_yet_are_not_listed_as_if_they_were(tmp_path):
    # A new coordinator inherited a group's records beyond the high watermark (its follower is
    # behind): Kafka reads at the last committed offset; the listing is retried, not answered
    # with a group a failover may still take back.
    broker = _Broker(tmp_path, isr=(0, 1))
    group = _group_on(0)
    key = f'{{"group":"{group}","type":"group"}}'.encode()
    value = b'{"assignor":"range","assignment_epoch":1,"group_epoch":1,"topic_sizes":{}}'
    broker.offsets.append_records(encode_batch(record_batch([key], [value], [0])), acks=1)
    handlers = _handlers(broker)
    handlers.runtime._sync()
    assert group in handlers.runtime.shards()[0].groups
    with pytest.raises(CoordinatorLoadInProgressError, match="not replicated"):
        handlers.list_groups(pb.ListGroupsRequest())


def test_a_partition_another_broker_leads_is_left_to_it(tmp_path):
    handlers = _handlers(_Broker(tmp_path))
    handlers.runtime._sync()
    assert handlers.list_groups(pb.ListGroupsRequest()).groups == []


def test_a_partition_about_to_be_led_again_after_a_restart_is_waited_for(tmp_path):
    # A restarted broker serves once unfenced; its partitions' leader is elected by the controller
    # just after (leaderless meanwhile, with this broker alone in their ISR). Its groups are this
    # broker's to list: the listing is retried, not answered without them.
    broker = _Broker(tmp_path)
    broker.image.topics[OFFSETS_TOPIC].partitions[0] = NS(leader=-1, isr=[0])
    handlers = _handlers(broker)
    with pytest.raises(CoordinatorLoadInProgressError, match=r"partition\(s\) \[0\]"):
        handlers.list_groups(pb.ListGroupsRequest())
    broker.image.topics[OFFSETS_TOPIC].partitions[0] = NS(leader=0, isr=[0])
    handlers.runtime._sync()
    group = _group_on(0)
    _join(handlers, group)
    assert [g.group_id for g in handlers.list_groups(pb.ListGroupsRequest()).groups] == [group]


def test_a_leaderless_partition_another_broker_will_lead_is_left_to_it(tmp_path):
    broker = _Broker(tmp_path)
    broker.image.topics[OFFSETS_TOPIC].partitions[0] = NS(leader=-1, isr=[1])
    assert _handlers(broker).list_groups(pb.ListGroupsRequest()).groups == []


def test_a_broker_shutting_down_does_not_wait_for_partitions_it_will_not_lead(tmp_path):
    broker = _Broker(tmp_path)
    broker.shutting_down = True
    broker.image.topics[OFFSETS_TOPIC].partitions[0] = NS(leader=-1, isr=[0])
    assert _handlers(broker).list_groups(pb.ListGroupsRequest()).groups == []
