"""Seeded runs of one partition on three brokers (RF=3, min.insync.replicas=2) under crashes, power
loss, a lossy network and leader moves; see ``replication_sim.py`` for the model and invariants.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation     # more seeds (default 1000)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation       # replay one seed, with its trace
"""
from __future__ import annotations

import dataclasses
import os

import pytest

from tests.simulation.replication_sim import SimConfig, Simulation, SimulationFailure, Stats, run_seed

pytestmark = pytest.mark.simulation

SEEDS = int(os.environ.get("RIVERLOG_SIM_SEEDS", "1000"))
ONE_SEED = os.environ.get("RIVERLOG_SIM_SEED")
THIS_FILE = os.path.relpath(__file__, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def replay_command(seed: int) -> str:
    return (f"RIVERLOG_SIM_SEED={seed} .venv/bin/python -m pytest "
            f"{THIS_FILE}::test_replication_invariants_hold_for_every_seed -q -p no:cacheprovider")


def test_replication_invariants_hold_for_every_seed():
    seeds = [int(ONE_SEED)] if ONE_SEED is not None else range(SEEDS)
    total = Stats()
    for seed in seeds:
        try:
            total.add(run_seed(seed))
        except SimulationFailure as failure:
            print(f"\nreplication simulation failed with seed {seed}; replay with:\n  {replay_command(seed)}")
            pytest.fail(f"{failure}\nreplay: {replay_command(seed)}\n" + "\n".join(failure.trace),
                        pytrace=False)
    if ONE_SEED is None and SEEDS >= 200:
        # The runs must actually exercise what the invariants are about, or passing means little.
        unexercised = [name for name, value in dataclasses.asdict(total).items() if value == 0]
        assert not unexercised, f"no run exercised: {unexercised} ({total})"


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
