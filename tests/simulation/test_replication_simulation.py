"""Seeded runs of one partition on three brokers (RF=3, min.insync.replicas=2) under crashes, power
loss, a lossy network and leader moves; see ``replication_sim.py`` for the model and invariants.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation     # more seeds (default 1000)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation       # replay one seed, with its trace
"""
from __future__ import annotations

import dataclasses

import pytest

from tests.simulation.replication_sim import SimConfig, Simulation, SimulationFailure, Stats, run_seed
from tests.simulation.seeds import check_every_seed

pytestmark = pytest.mark.simulation

THIS_TEST = "tests/simulation/test_replication_simulation.py::test_replication_invariants_hold_for_every_seed"


def test_replication_invariants_hold_for_every_seed():
    check_every_seed("replication", THIS_TEST, run_seed, Stats())


def test_a_seed_replays_identically():
    first, second = Simulation(11), Simulation(11)
    assert first.run() == second.run()
    assert first.committed == second.committed and first.acked == second.acked


@pytest.mark.parametrize("broken, why", [
    (dict(truncation="high_watermark"), "followers cut to their HW, as Kafka before KIP-101"),
    (dict(bound_power_loss=False), "power loss beyond what replication can cover"),
    (dict(check_broker_epochs=False), "the controller trusts a stale follower offset (no KIP-903)"),
])
def test_the_invariants_catch_a_broken_design(broken, why):
    config = dataclasses.replace(SimConfig(), **broken)
    for seed in range(3000):
        try:
            run_seed(seed, config)
        except SimulationFailure:
            return
    pytest.fail(f"3000 seeds and no invariant noticed {why}")
