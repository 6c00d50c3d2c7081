"""Connect's connector and task lifecycle over random histories (``connect_sim.py`` has the model:
Kafka's herder rules over the pure cores and the three topics' records), and what it found, pinned.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_connect_simulation.py   # more seeded runs
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.simulation.connect_sim import OP_POOL, OPS, ModelFailure, Stats, add, random_ops, run
from tests.simulation.seeds import ONE_SEED, SEEDS, replay_command, with_trace

pytestmark = pytest.mark.simulation

CREATE, UPDATE, PAUSE, RESTART = (OPS.index(name) for name in ("create", "update", "pause", "worker_restart"))

#: A connector with one task is paused, then its config is written again (PUT, its task configs
#: unchanged); the worker restarts after compaction kept only the latest record of each key: the
#: last ``commit-a`` was ahead of the last ``connector-a``, read as a deleted connector's, and the
#: paused connector came back without its task.
PAUSED_TASKS_LOST_TO_COMPACTION = [(CREATE, 0), (PAUSE, 0), (UPDATE, 3), (RESTART, 0)]

histories = st.lists(st.tuples(st.sampled_from(OP_POOL), st.integers(0, 59)), max_size=40)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories, st.integers(0, 2 ** 16))
@example(PAUSED_TASKS_LOST_TO_COMPACTION, 0)
def test_connector_lifecycle_and_its_topics_match_kafka(ops, seed):
    with_trace(lambda trace: run(ops, trace, seed), ModelFailure)


def test_seeded_histories_exercise_every_outcome():
    """Longer seeded histories (``RIVERLOG_SIM_SEEDS`` scales them) must reach every outcome the
    invariants judge, or passing means little."""
    total = Stats()
    seeds = [int(ONE_SEED)] if ONE_SEED is not None else range(max(SEEDS // 8, 40))
    for seed in seeds:
        add(total, with_trace(lambda ops, trace: run(ops, trace, seed), ModelFailure, random_ops(seed, 120),
                              label=f"seed {seed} ({replay_command(__file__, seed)}): ").stats)
    if ONE_SEED is None:
        unexercised = [name for name, value in vars(total).items() if value == 0]
        assert not unexercised, f"no run exercised: {unexercised} ({total})"
