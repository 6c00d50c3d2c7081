"""An idempotent producer's partition order under retries, lost answers and broker restarts, under
seeded simulation (``producer_sim.py`` has the model and the invariants).

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_producer_simulation.py   # more seeds (default 1000)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation/test_producer_simulation.py     # replay one seed, with its trace
"""
from __future__ import annotations

import pytest

from broker.records.batch import IDEMPOTENCE_WINDOW
from tests.simulation.producer_sim import SimConfig, Simulation, SimulationFailure, Stats, run_seed
from tests.simulation.seeds import ONE_SEED, check_every_seed

pytestmark = pytest.mark.simulation

THIS_TEST = "tests/simulation/test_producer_simulation.py::test_producer_order_holds_for_every_seed"


def test_producer_order_holds_for_every_seed():
    config = SimConfig(trace_events=2_000) if ONE_SEED is not None else SimConfig()  # a replay tells more
    check_every_seed("Producer order", THIS_TEST, lambda seed: run_seed(seed, config), Stats())


def test_a_seed_replays_identically():
    first, second = Simulation(5), Simulation(5)
    assert first.run() == second.run()
    assert {k: p.log for k, p in first.partitions.items()} == {k: p.log for k, p in second.partitions.items()}


def test_more_unanswered_batches_than_the_broker_remembers_is_caught():
    """The bug fixed earlier: a producer with more of a partition's batches unanswered than the
    broker's window, after lost answers, resends the oldest; the broker no longer recognises it and
    refuses it as out of order: for ever, or (refused as the oldest unacknowledged batch) as a
    fatal sequence desynchronisation, as librdkafka. The simulation must fail for some seed then."""
    config = SimConfig(producer_window=2 * IDEMPOTENCE_WINDOW)
    failures = []
    for seed in range(100):
        try:
            run_seed(seed, config)
        except SimulationFailure as failure:
            failures.append(failure)
    assert failures, "a producer window above the broker's went unnoticed"
    assert all("not delivered" in f.message or "log" in f.message or "desynchronization" in f.message
               for f in failures), [f.message for f in failures if "desynchronization" not in f.message][:3]
    for failure in failures[:3]:  # the same seeds pass with the producer's window at the broker's
        run_seed(failure.seed, SimConfig())


@pytest.mark.parametrize("seed", [481, 963])
def test_a_leadership_blip_on_a_partition_s_first_batch_keeps_every_record(seed):
    """A blip refuses a partition's first batch, so the next one, pipelined, is refused
    UnknownProducerId and the producer takes a new epoch while the other partition still holds
    batches numbered under the old one. Those are sent under the old epoch first and that partition
    starts from 0 under the new one after them; nothing is given up."""
    sim = Simulation(seed, SimConfig(leader_blips=True))
    stats = sim.run()
    assert stats.epoch_bumps >= 1 and stats.old_epoch_sends >= 1, stats
    assert {k: p.log for k, p in sim.partitions.items()} == sim.produced
