"""PostgreSQL CDC (pgoutput assembly, Debezium and Riverlog offsets, crash and resume) over random
WAL histories against the committed history (``cdc_sim.py`` has the model and the invariants).

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_cdc_simulation.py   # more seeds (default 1000)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation/test_cdc_simulation.py     # replay one seed, with its trace
"""
from __future__ import annotations

import pytest

from tests.simulation.cdc_sim import Simulation, Stats, run_seed
from tests.simulation.seeds import check_every_seed

pytestmark = pytest.mark.simulation

THIS_TEST = "tests/simulation/test_cdc_simulation.py::test_cdc_delivers_every_committed_change_once_for_every_seed"


def test_cdc_delivers_every_committed_change_once_for_every_seed():
    check_every_seed("CDC", THIS_TEST, run_seed, Stats())


def test_a_seed_replays_identically():
    first, second = Simulation(7), Simulation(7)
    first.run()
    second.run()
    assert (first.stats, first.trace) == (second.stats, second.trace)
    assert first.trace, "a run leaves a trace to replay"
