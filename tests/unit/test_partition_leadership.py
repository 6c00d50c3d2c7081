"""A hosted partition's leadership as a state machine: follower <-> leader, then closed for good.
The table is checked move by move, and then through the Partition's own operations."""
from __future__ import annotations

import uuid

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import NotLeaderOrFollowerError
from broker.partition import LEADERSHIP, AppendNotifier, Leadership as L, Partition
from broker.server.metadata_loader import MetadataLoader
from broker.server.replica_manager import ReplicaManager
from broker.state_machine import IllegalStateTransition
from broker.storage.log import Log
from broker.storage.log_manager import LogManager

pytestmark = pytest.mark.unit

ALLOWED = {(L.FOLLOWER, L.FOLLOWER), (L.FOLLOWER, L.LEADER), (L.FOLLOWER, L.CLOSED),
           (L.LEADER, L.LEADER), (L.LEADER, L.FOLLOWER), (L.LEADER, L.CLOSED)}
REFUSED = sorted({(a, b) for a in L for b in L} - ALLOWED)


def test_the_table():
    assert {(a, b) for a in L for b in L if LEADERSHIP.can_move(a, b)} == ALLOWED
    assert LEADERSHIP.finals() == {L.CLOSED}
    assert L.LEADER == "leader" and L.FOLLOWER == "follower"   # what callers have always compared with


@pytest.mark.parametrize("current, target", sorted(ALLOWED), ids=lambda s: s.value)
def test_every_allowed_move_is_made(current, target):
    assert LEADERSHIP.move(current, target) is target


@pytest.mark.parametrize("current, target", REFUSED, ids=lambda s: s.value)
def test_every_move_not_in_the_table_raises(current, target):
    with pytest.raises(IllegalStateTransition, match=f"{current.name} -> {target.name}"):
        LEADERSHIP.move(current, target)


def partition_in(role: L, directory) -> Partition:
    log = Log.open(str(directory), TOPIC_CONFIG.parse({}), ManualClock())
    p = Partition("t", 0, "id", log, AppendNotifier(), node_id=1)
    assert p.role is L.FOLLOWER   # every partition opens as a follower
    if role is L.LEADER:
        p.make_leader(3, 5, [1, 2], [1, 2])
    elif role is L.CLOSED:
        p.close()
    assert p.role is role
    return p


OPERATIONS = {
    L.LEADER: lambda p: p.make_leader(4, 6, [1, 2], [1]),
    L.FOLLOWER: lambda p: p.make_follower(2, 4, 6, [1, 2], [2]),
    L.CLOSED: lambda p: p.close(),
}


@pytest.mark.parametrize("current, target", sorted(ALLOWED), ids=lambda s: s.value)
def test_every_operation_the_table_allows_moves_the_partition(current, target, tmp_path):
    p = partition_in(current, tmp_path)
    OPERATIONS[target](p)
    assert p.role is target
    assert p.is_leader == (target is L.LEADER)


@pytest.mark.parametrize("target", [L.LEADER, L.FOLLOWER], ids=lambda s: s.value)
def test_a_closed_partition_is_never_led_or_followed_again_and_nothing_changes(target, tmp_path):
    p = partition_in(L.CLOSED, tmp_path)
    before = (p.leader_id, p.leader_epoch, p.partition_epoch, p.replicas, p.isr, p.epochs.latest_epoch())
    with pytest.raises(IllegalStateTransition, match=f"CLOSED -> {target.name}"):
        OPERATIONS[target](p)
    assert p.role is L.CLOSED
    assert (p.leader_id, p.leader_epoch, p.partition_epoch, p.replicas, p.isr, p.epochs.latest_epoch()) == before


def test_closing_is_idempotent_and_a_closed_partition_serves_nothing(tmp_path):
    p = partition_in(L.LEADER, tmp_path / "a")
    p.close()
    p.close()
    p.close_for_removal()
    assert p.role is L.CLOSED
    with pytest.raises(NotLeaderOrFollowerError):
        p.check_leader()
    with pytest.raises(NotLeaderOrFollowerError):
        p.append_as_follower(b"", 0, 0)
    removed = partition_in(L.FOLLOWER, tmp_path / "b")
    removed.close_for_removal()
    assert removed.role is L.CLOSED


class NoFetchers:
    def add(self, *a): pass
    def remove(self, *a): pass
    def close(self): pass


def _hosting(tmp_path):
    config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path)})
    replicas = ReplicaManager(config, ManualClock(1_000), LogManager(str(tmp_path), ManualClock(1_000)),
                              NoFetchers(), lambda *a: None)
    loader = MetadataLoader([("replicas", lambda image, first: replicas.apply_image(image))])
    replicas.on_fault = loader.publish_fault
    return replicas, loader


def _topic(name: str) -> dict:
    return {"type": "topic", "name": name, "topic_id": uuid.uuid4().hex, "replicas": [[1]]}


def test_a_partition_removed_from_this_broker_ends_closed(tmp_path):
    replicas, loader = _hosting(tmp_path)
    topic = _topic("a")
    loader.load(1, [(1, [topic])])
    p = replicas.partitions[("a", 0)]
    assert p.role is L.LEADER
    loader.load(2, [(2, [{"type": "remove_topic", "name": "a", "topic_id": topic["topic_id"]}])])
    assert p.role is L.CLOSED and ("a", 0) not in replicas.partitions and loader.apply_faults.count == 0
    replicas.close()


def test_metadata_arriving_after_shutdown_changes_no_closed_partition(tmp_path):
    """The broker does not join its metadata thread at shutdown: a late image must neither reopen
    a closed partition (the table would refuse it, as a fault) nor open new ones."""
    replicas, loader = _hosting(tmp_path)
    topic = _topic("a")
    loader.load(1, [(1, [topic])])
    p = replicas.partitions[("a", 0)]
    replicas.close()
    assert p.role is L.CLOSED
    loader.load(2, [(2, [{"type": "remove_topic", "name": "a", "topic_id": topic["topic_id"]}, _topic("b")])])
    assert loader.apply_faults.count == 0 and p.role is L.CLOSED
    assert set(replicas.partitions) == {("a", 0)}


def test_a_new_leader_refuses_list_offsets_until_its_high_watermark_reaches_its_epoch_start(tmp_path):
    # Kafka's fetchOffsetForTimestamp (PartitionTest.testMonotonicOffsetsAfterLeaderChange): the HW a
    # new leader inherited may be below the one its predecessor showed; "latest" is refused until
    # the HW reaches the epoch's start, so it never goes backwards.
    from broker.errors import OffsetNotAvailableError
    from broker.records import arrow_body
    p = partition_in(L.LEADER, tmp_path)            # epoch 3, ISR [1, 2]
    p.append_records(arrow_body.encode_batch(arrow_body.record_batch([None] * 3, [b"a", b"b", b"c"], [1, 2, 3])))
    assert p.offsets()[1:] == (0, 3)                # follower 2 has not fetched: HW 0
    p.check_offsets_available()                     # the epoch started at 0
    p.make_leader(4, 6, [1, 2], [1, 2])             # a new epoch starting at 3, HW still 0
    with pytest.raises(OffsetNotAvailableError, match="behind the start offset of leader epoch 4"):
        p.check_offsets_available()
    p.read_for_follower(2, 3, 1 << 20, 4)
    assert p.offsets()[1] == 3
    p.check_offsets_available()
