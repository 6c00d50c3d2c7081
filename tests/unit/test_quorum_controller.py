"""The active controller's decisions against a metadata image: fencing, elections, ISR changes, topics."""
from __future__ import annotations

import random

import pytest

from broker.config import BROKER_CONFIG, topic_defaults
from broker.controller.quorum_controller import QuorumController
from broker.errors import (FencedLeaderEpochError, InvalidPartitionsError, InvalidReplicationFactorError,
                           InvalidRequestError, StaleBrokerEpochError, TopicAlreadyExistsError)
from broker.metadata.image import MetadataImage

pytestmark = pytest.mark.unit

SESSION = 1000


class Harness:
    """A controller plus an image that records are applied to, as if each were committed at once."""

    def __init__(self, brokers=(1, 2, 3), **config):
        values = {"broker.session.timeout.ms": SESSION, "leader.imbalance.check.interval.seconds": 5, **config}
        self.config = BROKER_CONFIG.parse(values)
        self.c = QuorumController(self.config, random.Random(7))
        self.image = MetadataImage()
        self.offset = 0
        self.now = 0
        self.epochs = {}
        for b in brokers:
            self.register(b)
        self.c.activate(self.image, self.now)
        for b in brokers:
            self.heartbeat(b)
        self.commit(self.c.reconcile(self.image, self.now))

    def commit(self, records):
        for r in records:
            self.image.apply(r, self.offset)
            self.offset += 1
        return records

    def register(self, b):
        offset = self.offset
        self.commit(self.c.register_broker(self.image, b, "127.0.0.1", 9000 + b, f"inc-{b}-{offset}", self.now))
        self.epochs[b] = self.image.brokers[b].broker_epoch

    def heartbeat(self, b, shut_down=False):
        records, reply = self.c.heartbeat(self.image, b, self.epochs[b], self.image.offset, shut_down, self.now)
        self.commit(records)
        return reply

    def tick(self, ms, alive=None):
        """Advance time; brokers in ``alive`` heartbeat first."""
        self.now += ms
        for b in (alive or []):
            self.heartbeat(b)
        return self.commit(self.c.reconcile(self.image, self.now))

    def create(self, name, partitions=3, rf=3, **configs):
        return self.commit(self.c.create_topic(self.image, name, partitions, rf, configs,
                                               topic_defaults(self.config)))

    def partitions(self, name):
        return self.image.topics[name].partitions


def test_registered_brokers_are_unfenced_by_a_heartbeat_once_caught_up():
    h = Harness(brokers=())
    h.register(1)
    assert h.image.brokers[1].fenced
    records, reply = h.c.heartbeat(h.image, 1, h.epochs[1], h.epochs[1] - 1, False, 0)
    assert records == [] and reply.fenced, "a broker behind its own registration stays fenced"
    h.heartbeat(1)
    assert not h.image.brokers[1].fenced and h.image.live_brokers() == [1]
    assert "cluster.id" in h.image.broker_configs and h.tick(0) == []


def test_a_heartbeat_with_an_old_broker_epoch_is_refused():
    h = Harness()
    with pytest.raises(StaleBrokerEpochError):
        h.c.heartbeat(h.image, 1, h.epochs[1] - 1, h.image.offset, False, h.now)


def test_topic_creation_spreads_leaders_and_checks_the_replication_factor():
    h = Harness()
    h.create("orders", partitions=6, rf=3)
    parts = h.partitions("orders")
    assert all(sorted(p.replicas) == [1, 2, 3] and p.isr == p.replicas and p.leader == p.replicas[0] for p in parts)
    assert sorted(p.leader for p in parts) == [1, 1, 2, 2, 3, 3]
    with pytest.raises(InvalidReplicationFactorError):
        h.create("wide", rf=4)
    with pytest.raises(TopicAlreadyExistsError):
        h.create("orders")
    with pytest.raises(InvalidPartitionsError):
        h.create("none", partitions=0)


def test_a_silent_broker_is_fenced_and_its_leaderships_move_to_the_isr():
    h = Harness()
    h.create("orders", partitions=3, rf=3)
    led_by_1 = [i for i, p in enumerate(h.partitions("orders")) if p.leader == 1]
    epochs = {i: h.partitions("orders")[i].leader_epoch for i in led_by_1}
    h.tick(SESSION // 2, alive=[1, 2, 3])
    h.tick(SESSION + 1, alive=[2, 3])
    assert h.image.brokers[1].fenced
    for i, p in enumerate(h.partitions("orders")):
        assert p.leader in (2, 3) and 1 not in p.isr
        if i in led_by_1:
            assert p.leader_epoch == epochs[i] + 1


def test_the_last_isr_member_is_kept_so_the_partition_waits_instead_of_losing_data():
    h = Harness()
    h.create("solo", partitions=1, rf=1)
    owner = h.partitions("solo")[0].leader
    others = [b for b in (1, 2, 3) if b != owner]
    h.tick(SESSION + 1, alive=others)
    p = h.partitions("solo")[0]
    assert p.leader == -1 and p.isr == [owner]
    h.heartbeat(owner)  # back, caught up: unfenced, then elected again
    h.tick(0, alive=others + [owner])
    assert h.partitions("solo")[0].leader == owner



def test_a_whole_cluster_crash_comes_back_with_the_in_sync_replicas_that_return():
    """Every node killed, a new active controller, only 1 and 2 back: the restarted replicas are
    fenced until caught up but stay in the ISRs; the silent 3 (a full session from the new
    controller) leaves them when its session expires, and 1 or 2 lead."""
    h = Harness()
    h.create("t", partitions=3, rf=3)
    assert all(sorted(p.isr) == [1, 2, 3] for p in h.partitions("t"))
    h.now += 10 * SESSION
    h.c.activate(h.image, h.now)                     # the quorum's new leader, before any broker
    h.register(1)
    h.register(2)
    assert h.image.brokers[1].fenced and h.image.brokers[2].fenced
    h.tick(1)
    for p in h.partitions("t"):
        assert sorted(p.isr) == [1, 2, 3], "being fenced while re-registering is not leaving the ISR"
        assert p.leader in (3, -1)
    h.tick(SESSION // 2, alive=[1, 2])               # caught up: unfenced
    h.tick(SESSION, alive=[1, 2])                    # 3's session expires
    assert h.image.brokers[3].fenced
    for p in h.partitions("t"):
        assert p.isr == [r for r in p.replicas if r in (1, 2)] and p.leader == p.isr[0]


def test_a_restarted_broker_leaves_the_isrs_that_have_a_live_member_and_keeps_the_others():
    h = Harness()
    h.create("t", partitions=3, rf=3)
    h.create("solo", partitions=1, rf=1)
    owner = h.partitions("solo")[0].leader
    h.tick(SESSION // 2, alive=[1, 2, 3])
    led = [i for i, p in enumerate(h.partitions("t")) if p.leader == owner]
    h.register(owner)                                # restarted at once: a new incarnation
    for i, p in enumerate(h.partitions("t")):
        assert owner not in p.isr and p.leader != owner and p.leader in p.isr
        assert (p.leader_epoch == 1) == (i in led)
    p = h.partitions("solo")[0]
    assert p.isr == [owner] and p.leader == owner    # its only replica: it stays, and leads again
    h.tick(1, alive=[b for b in (1, 2, 3) if b != owner])
    assert h.partitions("solo")[0].leader == -1
    h.tick(1, alive=[1, 2, 3])
    assert h.partitions("solo")[0].leader == owner and h.partitions("solo")[0].isr == [owner]

@pytest.mark.parametrize("value", ["true", " TRUE ", "1", "yes"])
def test_unclean_election_only_when_the_topic_allows_it(value):
    # Every spelling the topic config accepts (and describe_configs shows as true) enables it.
    h = Harness()
    h.create("t", partitions=1, rf=3)
    p = h.partitions("t")[0]
    leader, (f1, f2) = p.leader, [r for r in p.replicas if r != p.leader]
    topic_id = h.image.topics["t"].topic_id
    h.commit(h.c.alter_partition(h.image, leader, topic_id, 0, p.leader_epoch, p.partition_epoch, [leader]))
    h.tick(SESSION + 1, alive=[f1, f2])
    assert h.partitions("t")[0].leader == -1
    h.commit([{"type": "config", "resource": "topic", "name": "t", "key": "unclean.leader.election.enable",
               "value": value}])
    h.tick(1, alive=[f1, f2])
    p = h.partitions("t")[0]
    assert p.leader in (f1, f2) and p.isr == [p.leader]


def test_alter_partition_validates_epochs_and_members():
    h = Harness()
    h.create("t", partitions=1, rf=3)
    p = h.partitions("t")[0]
    tid = h.image.topics["t"].topic_id
    follower = [r for r in p.replicas if r != p.leader][0]
    with pytest.raises(FencedLeaderEpochError):
        h.c.alter_partition(h.image, p.leader, tid, 0, p.leader_epoch - 1, p.partition_epoch, [p.leader])
    with pytest.raises(InvalidRequestError):
        h.c.alter_partition(h.image, p.leader, tid, 0, p.leader_epoch, p.partition_epoch, [follower])
    shrunk = [r for r in p.replicas if r != follower]
    h.commit(h.c.alter_partition(h.image, p.leader, tid, 0, p.leader_epoch, p.partition_epoch, shrunk))
    assert h.partitions("t")[0].isr == shrunk and h.partitions("t")[0].leader_epoch == p.leader_epoch


def test_controlled_shutdown_moves_leadership_away_before_the_broker_may_stop():
    h = Harness()
    h.create("t", partitions=3, rf=3)
    assert any(p.leader == 2 for p in h.partitions("t"))
    reply = h.heartbeat(2, shut_down=True)
    assert not reply.should_shut_down
    h.tick(1, alive=[1, 3])
    assert all(p.leader != 2 and 2 not in p.isr for p in h.partitions("t"))
    assert h.heartbeat(2, shut_down=True).should_shut_down


def test_preferred_leaders_return_when_in_sync():
    h = Harness()
    h.create("t", partitions=3, rf=3)
    h.tick(SESSION + 1, alive=[2, 3])
    moved = [i for i, p in enumerate(h.partitions("t")) if p.replicas[0] == 1]
    assert moved and all(h.partitions("t")[i].leader != 1 for i in moved)
    h.heartbeat(1)  # back and unfenced; not in any ISR yet, so no leadership
    h.tick(5000, alive=[1, 2, 3])
    assert all(h.partitions("t")[i].leader != 1 for i in moved)
    tid = h.image.topics["t"].topic_id
    for i in moved:  # the leaders add it back once it caught up
        p = h.partitions("t")[i]
        h.commit(h.c.alter_partition(h.image, p.leader, tid, i, p.leader_epoch, p.partition_epoch, p.replicas))
    h.tick(5000, alive=[1, 2, 3])
    assert all(h.partitions("t")[i].leader == 1 for i in moved)


def test_adding_partitions_keeps_the_replication_factor():
    h = Harness()
    h.create("t", partitions=2, rf=2)
    h.commit(h.c.create_partitions(h.image, "t", 5))
    parts = h.partitions("t")
    assert len(parts) == 5 and all(len(set(p.replicas)) == 2 for p in parts)
    with pytest.raises(InvalidPartitionsError):
        h.c.create_partitions(h.image, "t", 5)


def test_replaying_the_snapshot_records_rebuilds_the_same_image():
    h = Harness()
    h.create("t", partitions=4, rf=3, **{"retention.ms": "1000"})
    h.tick(SESSION + 1, alive=[1, 3])
    copy = MetadataImage()
    for r in h.image.to_records():
        copy.apply(r, h.image.offset)
    assert copy.topics == h.image.topics and copy.brokers == h.image.brokers
    assert copy.broker_configs == h.image.broker_configs


def test_a_settled_walk_is_not_repeated_but_any_change_of_image_or_liveness_is_seen():
    """The partition walk is skipped while image and live brokers are as when it found nothing;
    a proposal that was never applied is proposed again, and a broker going silent is acted on."""
    h = Harness()
    h.create("orders", partitions=3, rf=3)
    assert h.tick(0, alive=[1, 2, 3]) == [] and h.tick(0) == []
    h.now += SESSION + 1
    for b in (2, 3):
        h.heartbeat(b)
    lost = h.c.reconcile(h.image, h.now)               # broker 1 silent: fenced, leaderships moved
    assert any(r["type"] == "partition_change" for r in lost)
    again = h.c.reconcile(h.image, h.now)              # not applied (say leadership was lost): again
    assert [r for r in again if r["type"] == "partition_change"] == \
        [r for r in lost if r["type"] == "partition_change"]
    h.commit(again)
    assert all(p.leader in (2, 3) and 1 not in p.isr for p in h.partitions("orders"))
    assert h.tick(0, alive=[2, 3]) == []
    h.create("more", partitions=2, rf=2)                # a new image: walked again, nothing to do
    assert h.tick(0, alive=[2, 3]) == []
