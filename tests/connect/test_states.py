"""Connector and task state machines: every legal and illegal move; restart backoff decisions."""
from __future__ import annotations

import itertools

import pytest

from connect.states import (CONNECTOR, RETRIES_DELAY_MIN_MS, TARGET, TASK, ConnectorState, Failures,
                            IllegalStateTransition, TargetState, restart_decision, running_state)

pytestmark = pytest.mark.unit
C = ConnectorState

CONNECTOR_LEGAL = {
    C.UNASSIGNED: {C.RUNNING, C.PAUSED, C.STOPPED, C.FAILED, C.RESTARTING, C.DESTROYED},
    C.RUNNING: {C.PAUSED, C.STOPPED, C.FAILED, C.RESTARTING, C.UNASSIGNED, C.DESTROYED},
    C.PAUSED: {C.RUNNING, C.STOPPED, C.FAILED, C.RESTARTING, C.UNASSIGNED, C.DESTROYED},
    C.STOPPED: {C.RUNNING, C.PAUSED, C.FAILED, C.RESTARTING, C.UNASSIGNED, C.DESTROYED},
    C.FAILED: {C.RESTARTING, C.STOPPED, C.UNASSIGNED, C.DESTROYED},
    C.RESTARTING: {C.RUNNING, C.PAUSED, C.STOPPED, C.FAILED, C.UNASSIGNED, C.DESTROYED},
    C.DESTROYED: set(),
}
TASK_LEGAL = {
    C.UNASSIGNED: {C.RUNNING, C.PAUSED, C.FAILED, C.RESTARTING, C.DESTROYED},
    C.RUNNING: {C.PAUSED, C.FAILED, C.RESTARTING, C.UNASSIGNED, C.DESTROYED},
    C.PAUSED: {C.RUNNING, C.FAILED, C.RESTARTING, C.UNASSIGNED, C.DESTROYED},
    C.FAILED: {C.RESTARTING, C.UNASSIGNED, C.DESTROYED},
    C.RESTARTING: {C.RUNNING, C.PAUSED, C.FAILED, C.UNASSIGNED, C.DESTROYED},
    C.STOPPED: set(),
    C.DESTROYED: set(),
}


@pytest.mark.parametrize("machine,legal", [(CONNECTOR, CONNECTOR_LEGAL), (TASK, TASK_LEGAL)], ids=["connector", "task"])
@pytest.mark.parametrize("current,target", list(itertools.product(ConnectorState, ConnectorState)))
def test_every_move_is_allowed_or_refused_as_the_table_says(machine, legal, current, target):
    if target in legal[current]:
        assert machine.move(current, target) is target
    else:
        with pytest.raises(IllegalStateTransition, match=f"{current.name} -> {target.name} is not allowed"):
            machine.move(current, target)


def test_states_serialise_as_kafkas_names():
    assert [s.value for s in ConnectorState] == ["UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED",
                                                 "RESTARTING", "STOPPED"]
    assert [t.value for t in TargetState] == ["STARTED", "PAUSED", "STOPPED"]
    assert str(C.FAILED) == "FAILED"


def test_target_states_may_follow_each_other_and_map_to_a_running_status():
    for a, b in itertools.product(TargetState, TargetState):
        assert TARGET.move(a, b) is b
    assert [running_state(t) for t in TargetState] == [C.RUNNING, C.PAUSED, C.STOPPED]


def test_a_zero_retry_timeout_never_restarts():
    d = restart_decision(0, 60_000, attempt=1, elapsed_ms=0, jitter=0.0)
    assert not d.restart and "not retried" in d.reason


def test_backoff_doubles_from_300_ms():
    delays = [restart_decision(-1, 60_000, attempt=a, elapsed_ms=0, jitter=0.0).delay_ms for a in range(1, 9)]
    assert delays == [RETRIES_DELAY_MIN_MS << i for i in range(8)]  # 300 ... 38400


def test_past_the_maximum_delay_the_wait_is_a_draw_below_it():
    # 300 << 8 = 76800 > 60000: Kafka draws uniformly in [0, max)
    assert restart_decision(-1, 60_000, attempt=9, elapsed_ms=0, jitter=0.5).delay_ms == 30_000
    assert restart_decision(-1, 60_000, attempt=9, elapsed_ms=0, jitter=0.0).delay_ms == 0
    assert restart_decision(-1, 1_000, attempt=3, elapsed_ms=0, jitter=0.25).delay_ms == 250
    assert restart_decision(-1, 0, attempt=1, elapsed_ms=0, jitter=0.9).delay_ms == 0
    assert restart_decision(-1, 60_000, attempt=500, elapsed_ms=0, jitter=0.1).delay_ms == 6_000


def test_infinite_timeout_always_restarts():
    assert restart_decision(-1, 60_000, attempt=10_000, elapsed_ms=10**12, jitter=0.3).restart


def test_a_finite_timeout_stops_restarts_once_passed_and_never_waits_past_it():
    assert restart_decision(10_000, 60_000, attempt=1, elapsed_ms=9_999, jitter=0.0).restart
    assert restart_decision(10_000, 60_000, attempt=1, elapsed_ms=9_999, jitter=0.0).delay_ms == 1
    late = restart_decision(10_000, 60_000, attempt=4, elapsed_ms=10_000, jitter=0.0)
    assert not late.restart and "10000 ms has passed" in late.reason


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        restart_decision(-1, 1, attempt=0, elapsed_ms=0, jitter=0.0)
    with pytest.raises(ValueError):
        restart_decision(-1, 1, attempt=1, elapsed_ms=0, jitter=1.0)


def test_failures_fold_counts_attempts_from_the_first_failure():
    f = Failures().failed(now_ms=1_000).failed(now_ms=2_000)
    assert (f.attempts, f.first_failure_ms) == (2, 1_000)
    d = f.decide(now_ms=5_000, retry_timeout_ms=10_000, retry_delay_max_ms=60_000, jitter=0.0)
    assert d.restart and d.delay_ms == 600
    assert not f.decide(now_ms=11_000, retry_timeout_ms=10_000, retry_delay_max_ms=60_000, jitter=0.0).restart
    assert f.recovered() == Failures()
