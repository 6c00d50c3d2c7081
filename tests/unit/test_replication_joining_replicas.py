"""A follower outside the ISR that is caught up holds the leader's high watermark until it joins,
unless its broker is fenced, shutting down or fetching from an old registration (Kafka's
``Partition.maybeIncrementLeaderHW`` / ``isReplicaIsrEligible``; PartitionTest's
testHighWatermarkIncreasesWithFencedOrShutdownFollower and
testIsrNotExpandedIfReplicaIsFencedOrShutdown)."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.metadata.image import BrokerRegistration, MetadataImage
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.replication.leader_state import LeaderState
from broker.server.replica_manager import ReplicaManager
from broker.storage.log import Log

pytestmark = pytest.mark.unit

LAG = 100


def test_a_follower_catching_up_under_steady_appends_can_join_the_isr():
    # The leader alone in the ISR appends between every fetch of follower 2. If the HW followed
    # the leader's log end, the follower would always be one append short of it and never join.
    s = LeaderState(1, [1, 2], [1], 5, 100, 100, 0, replica_lag_time_max_ms=LAG)
    s.on_follower_fetch(2, 50, now_ms=1)        # far behind: not caught up
    s.on_leader_append(110, now_ms=2)
    assert s.high_watermark == 110
    s.on_follower_fetch(2, 100, now_ms=3)       # reached the leader's log end as of its last fetch
    assert not s.expand_candidate(2)
    s.on_leader_append(120, now_ms=4)
    assert s.high_watermark == 110              # waits for the caught-up follower
    s.on_follower_fetch(2, 110, now_ms=5)
    assert s.high_watermark == 110 and s.expand_candidate(2)


def test_a_follower_that_never_caught_up_does_not_hold_the_hw():
    s = LeaderState(1, [1, 2], [1], 5, 100, 100, 0, replica_lag_time_max_ms=LAG)
    s.on_follower_fetch(2, 50, now_ms=1)
    assert s.on_leader_append(110, now_ms=2) and s.high_watermark == 110
    assert not s.expand_candidate(2)


def leader_partition(tmp_path, clock, isr) -> Partition:
    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), clock)
    p = Partition("t", 0, "id", log, AppendNotifier(), node_id=1, clock=clock)
    p.replica_lag_time_max_ms = LAG
    p.make_leader(3, 5, [1, 2], isr)
    return p


def append(p: Partition, n: int) -> None:
    p.append_records(arrow_body.encode_batch(arrow_body.record_batch([None] * n, [b"v"] * n, list(range(n)))))


@pytest.mark.parametrize("state", ["fenced", "shutdown", "unfenced"])
def test_the_hw_skips_a_fenced_or_shutting_down_follower_only(tmp_path, state):
    clock = ManualClock()
    p = leader_partition(tmp_path, clock, [1, 2])
    append(p, 10)
    p.read_for_follower(2, 10, 1 << 20, 3)       # the follower holds everything: HW 10
    assert p.offsets()[1] == 10
    if state != "unfenced":
        p.replica_eligible = lambda broker, broker_epoch: broker != 2
    append(p, 10)
    clock.advance(1)
    p.make_leader(3, 6, [1, 2], [1])             # the controller shrank the ISR
    assert p.isr == [1]
    # Unfenced, the follower is still caught up (within replica.lag.time.max.ms) and may rejoin at
    # any moment, so the HW waits for it; fenced or shutting down, it cannot, so the HW moves on.
    assert p.offsets()[1] == (10 if state == "unfenced" else 20)


def test_an_ineligible_follower_is_not_proposed_for_the_isr(tmp_path):
    clock = ManualClock()
    p = leader_partition(tmp_path, clock, [1])
    append(p, 3)
    p.replica_eligible = lambda broker, broker_epoch: False
    p.read_for_follower(2, 3, 1 << 20, 3, broker_epoch=7)
    assert p.propose_isr_change(clock.time_ms(), LAG) is None
    p.replica_eligible = lambda broker, broker_epoch: broker_epoch == 7
    isr, leader_epoch, partition_epoch, members = p.propose_isr_change(clock.time_ms(), LAG)
    assert (isr, leader_epoch, partition_epoch, members) == ([1, 2], 3, 5, [(1, -1), (2, 7)])


def test_the_hw_moves_once_a_silent_follower_stops_counting_as_caught_up(tmp_path):
    clock = ManualClock()
    p = leader_partition(tmp_path, clock, [1])
    append(p, 5)
    p.read_for_follower(2, 2, 1 << 20, 3)        # behind the leader's log end (5)
    append(p, 5)
    clock.advance(1)
    p.read_for_follower(2, 5, 1 << 20, 3)        # reached it: caught up as of its previous fetch
    append(p, 5)
    assert p.offsets()[1] == 10                  # held for the follower that may join
    clock.advance(LAG - 1)
    assert p.propose_isr_change(clock.time_ms(), LAG) is None   # the periodic ISR check
    assert p.offsets()[1] == 10
    clock.advance(1)                             # it has not caught up for replica.lag.time.max.ms
    assert p.propose_isr_change(clock.time_ms(), LAG) is None
    assert p.offsets()[1] == 15                  # readable without waiting for another append
    assert len(p.read(10, 1 << 20).records) > 0


def registration(node: int, epoch: int, **kw) -> BrokerRegistration:
    return BrokerRegistration(node, "127.0.0.1", 9092 + node, "x", epoch, **kw)


def test_the_replica_manager_knows_which_brokers_may_join_an_isr():
    rm = ReplicaManager.__new__(ReplicaManager)   # only its metadata image is needed here
    rm.image = MetadataImage(brokers={
        2: registration(2, 40, fenced=False),
        3: registration(3, 41, fenced=True),
        4: registration(4, 42, fenced=False, shutting_down=True),
    })
    assert rm._isr_eligible(2, 40) and rm._isr_eligible(2, -1)
    assert not rm._isr_eligible(2, 39)            # fetching from an older registration
    assert not rm._isr_eligible(3, 41)            # fenced
    assert not rm._isr_eligible(4, 42)            # in controlled shutdown
    assert not rm._isr_eligible(5, -1)            # not registered
