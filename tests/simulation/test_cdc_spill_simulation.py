"""The compact (spilling) transaction assembler against the in-memory one over random pgoutput
histories (``cdc_spill_sim.py`` has the histories and the invariant).

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_cdc_spill_simulation.py   # more seeds (default 1000)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation/test_cdc_spill_simulation.py     # replay one seed, with its trace
"""
from __future__ import annotations

import pytest

from tests.simulation.cdc_spill_sim import Stats, run_seed
from tests.simulation.seeds import check_every_seed

pytestmark = pytest.mark.simulation

THIS_TEST = ("tests/simulation/test_cdc_spill_simulation.py::"
             "test_the_compact_assembler_emits_what_the_in_memory_one_does_for_every_seed")


def test_the_compact_assembler_emits_what_the_in_memory_one_does_for_every_seed():
    check_every_seed("CDC spill", THIS_TEST, run_seed, Stats())
