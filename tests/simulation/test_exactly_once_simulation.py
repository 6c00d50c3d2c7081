"""The exactly-once protocol (the real ``ExactlyOnce`` and its pure decisions) over random histories
of tasks, failed, retried, speculative and zombie attempts, driver deaths at every durable step,
replays, failed batches and lost checkpoints, against the oracle of ``exactly_once_sim.py``.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_exactly_once_simulation.py   # more seeds (default 1000)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation/test_exactly_once_simulation.py     # replay one, with its trace
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.simulation.exactly_once_sim import Cluster, SimConfig, Simulation, SimulationFailure, Stats, run_seed
from tests.simulation.seeds import check_every_seed

pytestmark = pytest.mark.simulation

THIS_TEST = "tests/simulation/test_exactly_once_simulation.py::test_every_batch_is_visible_exactly_once_for_every_seed"


def test_every_batch_is_visible_exactly_once_for_every_seed():
    check_every_seed("Exactly-once", THIS_TEST, run_seed, Stats())


@settings(derandomize=True, max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), batches=st.integers(1, 10), max_tasks=st.integers(1, 5),
       p_crash=st.sampled_from([0.0, 0.3, 0.9]), p_new_owner=st.sampled_from([0.0, 0.3]))
def test_histories_of_every_shape_keep_the_oracle(seed, batches, max_tasks, p_crash, p_new_owner):
    run_seed(seed, SimConfig(batches=batches, max_tasks=max_tasks, p_crash=p_crash, p_new_owner=p_new_owner))


def test_a_seed_replays_identically():
    first, second = Simulation(7), Simulation(7)
    assert first.run() == second.run()
    assert first.cluster.visible == second.cluster.visible and first.trace == second.trace


def test_a_late_attempt_reopening_an_ended_batch_s_decided_id_is_aborted_by_the_next_batch():
    """Batch 0 decides and commits 's-0-0-0'; then an attempt that opens late under the same id
    (a zombie of an earlier run) opens a transaction. Batch 1's commit read batch 0's decision as
    the latest, but an ended batch's ids hold nothing: the late transaction is a stray, aborted,
    not left to hold the last stable offset until transaction.timeout.ms."""
    sim = Simulation(0)
    eo = sim.eo("s")
    eo.commit(0, [sim.write("s", "s-0-0-0", [("s", 0, "r0")])])
    epoch = sim.cluster.init("s-0-0-0", "s")
    assert sim.cluster.produce("s-0-0-0", epoch, [("s", 0, "zombie")])
    eo.commit(1, [sim.write("s", "s-1-0-0", [("s", 1, "r0")])])
    assert sim.cluster.open_ids("s-") == []
    assert sim.cluster.visible == [("s", 0, "r0"), ("s", 1, "r0")]


def test_a_late_attempt_of_an_earlier_run_under_a_reused_id_is_caught():
    """Attempt numbers that start from 0 again in each run of a batch (Spark's attemptNumber; its
    taskAttemptId after a driver restart) let a killed attempt of the earlier run, opening late,
    take over the replay's id and abort its transaction, even once decided: the commit fails with
    TransactionLostError (loudly, the rest of the batch committed). With attempt numbers unique
    across runs the same history keeps the oracle."""
    with pytest.raises(SimulationFailure, match="decided transaction was lost"):
        run_seed(107, SimConfig(attempts_restart=True))
    run_seed(107, SimConfig())


def test_the_fake_fences_a_stale_handle():
    """The model itself: a handle whose epoch was bumped by an abort by id can no longer commit."""
    cluster = Cluster([])
    epoch = cluster.init("s-0-0-0", "s")
    cluster.produce("s-0-0-0", epoch, [("s", 0, "r0")])
    handle = cluster.handle("s-0-0-0")
    cluster.abort_by_id("s-0-0-0")
    with pytest.raises(Exception, match="fenced"):
        cluster.end(handle, True)
    assert cluster.visible == []
