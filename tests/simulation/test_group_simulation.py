"""The consumer-group coordinator over random histories (``group_sim.py`` has the model, Kafka's
rules it checks and the invariants), and the bugs it found, pinned.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_group_simulation.py   # more seeded runs
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from broker.errors import FencedInstanceIdError, IllegalGenerationError, StaleMemberEpochError
from broker.group.coordinator import GroupShard
from broker.group.group import Committed
from broker.proto import riverlog_pb2 as pb
from tests.simulation.group_sim import ASSIGNORS, OP_POOL, OPS, ModelFailure, Stats, add, random_ops, run
from tests.simulation.seeds import SEEDS, with_trace

pytestmark = pytest.mark.simulation

G = "g"
BEAT, LEAVE, CRASH, RESTART, ZOMBIE, JOIN, TIME, COMMIT, MOVE = (
    OPS.index(name) for name in ("beat", "leave", "crash", "restart", "zombie", "join", "time", "commit", "move"))

#: Two members of an eager group; the second's join takes everything from the first, which is told
#: so but has not let go when the coordinator moves: the new one must not hand the partitions on.
MOVE_MID_REVOCATION = [(JOIN, 1), (BEAT, 1), (BEAT, 1), (JOIN, 1), (BEAT, 1), (MOVE, 0), (BEAT, 2), (BEAT, 2)]
#: A static member leaves for now (-2), then commits late with the epoch it had.
LATE_COMMIT_OF_AWAY_MEMBER = [(JOIN, 0), (BEAT, 1), (BEAT, 1), (LEAVE, 0), (COMMIT, 1)]
#: A static member crashes, its session runs out, it restarts under a new member id; its old
#: incarnation speaks (and is fenced), the coordinator moves, and the old one joins again.
ZOMBIE_AFTER_MOVE = [(JOIN, 0), (BEAT, 1), (CRASH, 0), (TIME, 2), (RESTART, 1), (ZOMBIE, 1), (MOVE, 0),
                     (ZOMBIE, 0), (BEAT, 0)]

histories = st.lists(st.tuples(st.sampled_from(OP_POOL), st.integers(0, 11)), max_size=60)


def replay(ops, assignor) -> None:
    with_trace(run, ModelFailure, ops, assignor)


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories, st.sampled_from(ASSIGNORS))
@example(MOVE_MID_REVOCATION, "range")
@example(LATE_COMMIT_OF_AWAY_MEMBER, "range")
@example(ZOMBIE_AFTER_MOVE, "cooperative-sticky")
def test_the_coordinator_answers_as_kafka_and_its_records_replay_to_the_same_group(ops, assignor):
    replay(ops, assignor)


def test_seeded_histories_exercise_every_outcome():
    """Longer seeded histories (``RIVERLOG_SIM_SEEDS`` scales them) must reach every outcome the
    invariants judge, or passing means little."""
    total = Stats()
    for seed in range(max(SEEDS // 10, 40)):
        for assignor in ASSIGNORS:
            add(total, with_trace(run, ModelFailure, random_ops(seed, 80), assignor,
                                  label=f"seed {seed} {assignor}: ").stats)
    unexercised = [name for name, value in vars(total).items() if value == 0]
    assert not unexercised, f"no run exercised: {unexercised} ({total})"


# ------------------------------------------------------------------------------ pinned, direct
def _beat(shard, member_id, epoch, now, owned=(), **kw):
    result, records = shard.heartbeat(G, member_id, epoch, partitions={"t": 4}, now_ms=now, topics=["t"],
                                      owned=set(owned), **kw)
    return result, records


def test_a_partition_being_revoked_is_not_handed_on_by_a_coordinator_that_takes_over():
    """Kafka persists a member's ``partitionsPendingRevocation`` (and restarts its rebalance timeout
    on load): a new coordinator must not give them to another member before their owner let go."""
    shard, log = GroupShard(0), []
    a, recs = _beat(shard, "a", 0, 0)
    log += recs
    a, recs = _beat(shard, "a", a.member_epoch, 1, owned=a.assignment)
    log += recs
    owned_by_a = a.assignment
    assert len(owned_by_a) == 4
    b, recs = _beat(shard, "b", 0, 2)
    log += recs
    a, recs = _beat(shard, "a", a.member_epoch, 3, owned=owned_by_a)  # told to give everything up
    log += recs
    assert a.assignment == set()
    moved = GroupShard(0)
    moved.load(log, 4)
    b, _ = _beat(moved, "b", b.member_epoch, 5, owned=b.assignment)
    assert not b.assignment & owned_by_a, f"b got {sorted(b.assignment)} that a still consumes"
    assert moved.groups[G].members["a"].revoking_since_ms == 4  # its rebalance timeout runs again
    # once a reports it let them go, they move
    _beat(moved, "a", a.member_epoch, 6)
    b, _ = _beat(moved, "b", b.member_epoch, 7, owned=b.assignment)
    assert b.assignment, "nothing moved once a let go"


def test_a_late_commit_of_a_static_member_away_for_now_is_stale():
    """Kafka sets a static member that leaves for now to epoch -2 (``consumerGroupStaticMemberGroupLeave``):
    its OffsetCommit with the epoch it had is ``STALE_MEMBER_EPOCH``, its TxnOffsetCommit
    ``ILLEGAL_GENERATION``, as OffsetFetch already answers it; the offset is not written."""
    shard = GroupShard(0)
    r, _ = _beat(shard, "a", 0, 0, instance_id="i")
    r, _ = _beat(shard, "a", r.member_epoch, 1, owned=r.assignment, instance_id="i")
    _beat(shard, "a", -2, 2, instance_id="i")
    with pytest.raises(StaleMemberEpochError):
        shard.commit(G, "a", r.member_epoch, {("t", 0): Committed(5)})
    with pytest.raises(IllegalGenerationError):
        shard.commit_in_transaction(G, "a", r.member_epoch, 9, 0, {("t", 0): Committed(5)})
    assert shard.committed(G, None) == {}


def test_a_fence_decided_by_a_refused_heartbeat_is_written(tmp_path):
    """A replaced static incarnation (its member was gone when its successor joined) heartbeats and
    is told FENCED_INSTANCE_ID; the coordinator remembers its id as fenced. That memory must be
    written to ``__consumer_offsets`` too: a coordinator that takes over let the old incarnation's
    next join replace its live successor."""
    from broker.server.group_handlers import GroupHandlers
    from broker.server.group_runtime import GroupRuntime
    from tests.unit.test_group_txn_offset_commit_handler import _Broker

    broker = _Broker(tmp_path)
    runtime = GroupRuntime(broker)
    runtime._sync()
    handlers = GroupHandlers(runtime)

    def beat(member_id, epoch, handlers=handlers):
        return handlers.heartbeat(pb.ConsumerGroupHeartbeatRequest(
            group_id=G, member_id=member_id, member_epoch=epoch, instance_id="i", subscribed_topics=["t"],
            session_timeout_ms=10_000))

    old = beat("old", 0)
    broker.clock.advance(11_000)
    runtime.run(G, lambda shard: (None, shard.expire(runtime.topic_sizes(), broker.clock.time_ms())))
    new = beat("new", 0)
    with pytest.raises(FencedInstanceIdError):
        beat("old", old.member_epoch)
    taken_over = GroupRuntime(broker)  # replays the partition
    taken_over._sync()
    assert "old" in taken_over.shards()[0].groups[G].fenced_members
    with pytest.raises(FencedInstanceIdError):
        beat("old", 0, GroupHandlers(taken_over))
    assert set(taken_over.shards()[0].groups[G].members) == {new.member_id}
