"""The consumer group protocol end to end (``membership_sim.py`` has the model: real client
memberships and the real coordinator core over a transport the history controls), and the bugs
it found, pinned.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_membership_simulation.py   # more seeded runs
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.simulation.membership_sim import (ASSIGNORS, OP_POOL, OPS, ModelFailure, Sim, Stats, add, random_ops, run,
                                             threadless)
from tests.simulation.seeds import SEEDS, with_trace

pytestmark = pytest.mark.simulation

BEAT, POLL, TIME, JOIN, LATE = (OPS.index(name) for name in ("beat", "poll", "time", "join", "late"))
HOLD = 9  # a beat's argument that holds its request back (FAULTS[9]), delivered by a later LATE

#: c1 is told its partitions, then its heartbeats stall past its session (the process paused); the
#: coordinator hands them to c2, which takes them up; c1's next poll() must not take them up too.
STALE_ASSIGNMENT_AFTER_PAUSE = [(BEAT, 0), (TIME, 5), (JOIN, 3), (BEAT, 1), (POLL, 1), (POLL, 0)]
#: c1's first join is held up; its retry joins and c1 takes its partitions up; c2 joins; the held
#: join (the previous epoch, owning nothing) then arrives: the coordinator must not take it as c1
#: having let go, and hand c2 what c1 still reads.
OVERTAKEN_JOIN_AFTER_ASSIGN = [(BEAT, HOLD), (BEAT, 0), (POLL, 0), (JOIN, 1), (BEAT, 1), (LATE, 0), (BEAT, 1),
                               (POLL, 1)]
#: the same, c1 having reported what it owns at the current epoch first.
OVERTAKEN_JOIN_AFTER_REPORT = [(BEAT, HOLD), (BEAT, 0), (POLL, 0), (BEAT, 0), (JOIN, 1), (BEAT, 1), (LATE, 0),
                               (BEAT, 1), (POLL, 1)]
#: the same for a static member (c2, i2): its held join, under its own member id, replaced it with
#: a member owning nothing.
OVERTAKEN_STATIC_JOIN = [(JOIN, 0), (BEAT, HOLD), (BEAT, 1), (POLL, 1), (BEAT, 1), (BEAT, 0), (LATE, 0), (BEAT, 0),
                         (POLL, 0)]
PINNED = {"stale assignment after a pause": STALE_ASSIGNMENT_AFTER_PAUSE,
          "overtaken join after on_assign": OVERTAKEN_JOIN_AFTER_ASSIGN,
          "overtaken join after a report": OVERTAKEN_JOIN_AFTER_REPORT,
          "overtaken static join": OVERTAKEN_STATIC_JOIN}

histories = st.lists(st.tuples(st.sampled_from(OP_POOL), st.integers(0, 11)), max_size=60)


def replay(ops, assignor) -> None:
    with_trace(run, ModelFailure, ops, assignor)


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories, st.sampled_from(ASSIGNORS))
@example(STALE_ASSIGNMENT_AFTER_PAUSE, "range")
@example(OVERTAKEN_JOIN_AFTER_ASSIGN, "cooperative-sticky")
@example(OVERTAKEN_STATIC_JOIN, "range")
def test_no_partition_is_consumed_by_two_members_and_every_one_finds_an_owner(ops, assignor):
    replay(ops, assignor)


@pytest.mark.parametrize("assignor", ASSIGNORS)
@pytest.mark.parametrize("history", PINNED)
def test_pinned_histories(history, assignor):
    """What the simulation found. A member that heard nothing for session.timeout.ms treats its
    partitions as lost on every turn, not only after a failed heartbeat (librdkafka's
    rd_kafka_cgrp_session_timeout_check runs on every turn of its group loop), so it does not take
    up an assignment the coordinator gave away. A heartbeat at the previous epoch (Kafka's
    throwIfConsumerGroupMemberEpochIsInvalid accepts it: the answer may have been lost) may be an
    overtaken request: it never lets partitions go, only one at the current epoch does."""
    replay(PINNED[history], assignor)


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_a_static_member_that_restarts_gets_its_partitions_back(assignor):
    """guard (already matched): KIP-848 static membership: a crashed instance restarted under its
    group.instance.id within its session takes its partitions back, and the others see no
    rebalance."""
    sim = Sim(assignor)
    with threadless(sim.clock):
        static = sim.new_app("i1", ["a", "b"])
        sim.new_app("", ["a", "b"])
        sim.settle()
        held = sorted(static._owned)
        assert held, "the static member got nothing to take back"
        before = len(sim.callbacks)
        sim.crash(static)
        sim.restart(0)
        sim.settle()
    assert sim.callbacks[before:] == [("c3", "assign", held)]


def test_seeded_histories_exercise_every_outcome():
    """Longer seeded histories (``RIVERLOG_SIM_SEEDS`` scales them) must reach every outcome the
    invariants judge, or passing means little."""
    total = Stats()
    for seed in range(max(SEEDS // 10, 60)):
        for assignor in ASSIGNORS:
            add(total, with_trace(run, ModelFailure, random_ops(seed, 80), assignor,
                                  label=f"seed {seed} {assignor}: ").stats)
    unexercised = [name for name, value in vars(total).items() if value == 0]
    assert not unexercised, f"no run exercised: {unexercised} ({total})"
