"""The group coordinator answers reads (OffsetFetch, DescribeGroups) only from state its
``__consumer_offsets`` partition has replicated, as Kafka's ``CoordinatorRuntime`` reads at the
last committed offset: an offset whose write the in-sync replicas never acknowledged may be gone
after a failover, so a consumer must not start from it."""
from __future__ import annotations

import threading
from types import SimpleNamespace as NS

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import CoordinatorNotAvailableError, RiverlogError
from broker.group.coordinator import OFFSETS_TOPIC
from broker.group.group import Committed
from broker.partition import AppendNotifier, Partition
from broker.storage.log import Log
from tests.conftest import wait_until

pytestmark = pytest.mark.unit

GROUP = "g"


class _Broker:
    """What :class:`GroupRuntime` uses of a broker: node 0 leading ``__consumer_offsets-0`` with
    node 1 in the ISR, a follower that never fetches (so no write of node 0 is replicated)."""

    def __init__(self, tmp_path):
        self.node_id, self.clock, self.serving = 0, ManualClock(), True
        self.config = BROKER_CONFIG.parse({"log.dirs": str(tmp_path), "offsets.commit.timeout.ms": 1500})
        self.offsets = Partition(OFFSETS_TOPIC, 0, "id", Log.open(
            str(tmp_path / "offsets-0"), TOPIC_CONFIG.parse({"cleanup.policy": "compact"}), self.clock),
            AppendNotifier(), clock=self.clock)
        self.offsets.make_leader(0, 0, [0, 1], [0, 1])
        self.topic_deletion_listeners = []
        led = NS(num_partitions=1, partitions=[NS(leader=0)])
        self.image = NS(topics={OFFSETS_TOPIC: led, "t": led})

    def partition(self, topic: str, index: int) -> Partition:
        return self.offsets


def _runtime(tmp_path):
    from broker.server.group_runtime import GroupRuntime
    broker = _Broker(tmp_path)
    runtime = GroupRuntime(broker)
    runtime._sync()                      # loads the shard of the partition it leads
    assert runtime.loaded_shards()
    return broker, runtime


def _commit(runtime, offset: int):
    return runtime.run(GROUP, lambda shard: (None, shard.commit(GROUP, "", -1, {("t", 0): Committed(offset)})))


def _fetch(runtime):
    return {tp: c.offset for tp, c in runtime.read(GROUP, lambda shard: shard.committed(GROUP, None)).items()}


def test_an_offset_fetch_waiting_on_a_commit_that_fails_does_not_see_its_offset(tmp_path):
    broker, runtime = _runtime(tmp_path)
    outcomes = {}

    def commit():
        try:
            _commit(runtime, 7)
        except RiverlogError as e:
            outcomes["commit"] = e

    def fetch():
        try:
            outcomes["fetch"] = _fetch(runtime)
        except RiverlogError as e:
            outcomes["fetch"] = e

    committer = threading.Thread(target=commit)
    committer.start()
    wait_until(lambda: broker.offsets.log.log_end_offset > 0, 10, 0.01, "the commit appended")
    fetcher = threading.Thread(target=fetch)
    fetcher.start()
    committer.join(10)
    fetcher.join(10)
    assert isinstance(outcomes["commit"], CoordinatorNotAvailableError)
    assert outcomes["fetch"] == {} or isinstance(outcomes["fetch"], RiverlogError), outcomes["fetch"]


def test_a_coordinator_loaded_with_records_not_yet_replicated_does_not_answer_from_them(tmp_path):
    """A new leader's log may end with records its high watermark has not passed (the old leader
    wrote them, the commit was never acknowledged): reads wait for them, and fail retriably."""
    broker, runtime = _runtime(tmp_path)
    with pytest.raises(CoordinatorNotAvailableError):
        _commit(runtime, 7)              # written here, never replicated: not acknowledged
    runtime._sync()                      # the shard dropped by the failed write is loaded again
    assert broker.offsets.high_watermark < broker.offsets.log.log_end_offset
    try:
        seen = _fetch(runtime)
    except RiverlogError as e:
        assert e.retriable, e
    else:
        assert seen == {}, seen
