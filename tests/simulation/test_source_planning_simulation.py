"""The Spark source's offset planning over random histories (``source_planning_sim.py`` has the model,
Spark's Kafka source rules it checks and the invariants), and the bugs it found, pinned.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_source_planning_simulation.py   # more seeds
    RIVERLOG_SIM_SEED=123 pytest tests/simulation/test_source_planning_simulation.py     # replay one
"""
from __future__ import annotations

import logging

import pytest

from tests.simulation.seeds import check_every_seed
from tests.simulation.source_planning_sim import Brokers, Simulation, Stats, run_seed

pytestmark = pytest.mark.simulation

THIS_TEST = ("tests/simulation/test_source_planning_simulation.py::"
             "test_the_source_plans_as_sparks_kafka_source_for_every_seed")


def test_the_source_plans_as_sparks_kafka_source_for_every_seed():
    logging.disable(logging.WARNING)   # data-loss warnings are expected by the thousand
    try:
        check_every_seed("source planning", THIS_TEST, run_seed, Stats())
    finally:
        logging.disable(logging.NOTSET)


def test_a_seed_replays_identically():
    first, second = Simulation(11), Simulation(11)
    assert first.run() == second.run()
    assert first.trace == second.trace and first.read == second.read


# ---------------------------------------------------------------------------------- pinned examples
def _sim(**config) -> Simulation:
    sim = Simulation(0)
    sim.max_rows, sim.min_rows, sim.min_partitions = config.get("max_rows"), config.get("min_rows"), None
    sim.fail_on_data_loss, sim.checkpoint, sim.initial = True, None, None
    sim.brokers = Brokers()
    sim.brokers.topics, sim.brokers.epochs = {"a": [[0, 10, 0]]}, {"a": 0}
    return sim


def test_an_available_now_run_keeps_its_end_when_spark_asks_for_batch_0s_start_again():
    """Found by the simulation: Spark asks for batch 0's start when it constructs the batch and again
    when it plans it; the second answer fixed the run's end again, so the run read what producers
    wrote after it began (Spark's Kafka source fixes the end once, in prepareForTriggerAvailableNow)."""
    sim = _sim(max_rows=4)
    reader = sim.new_reader()
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()                         # constructing batch 0
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"a": {"0": 4}}
    sim.brokers.topics["a"][0][1] = 25                     # produced after the run began
    assert reader.initialOffset() == start                 # planning batch 0
    reader.partitions(start, end)
    reader.commit(end)
    ends = []
    while (nxt := reader.latestOffset(end, reader.getDefaultReadLimit())) != end:
        ends.append(nxt["a"]["0"])
        end = nxt
    assert ends == [8, 10]                                 # the end fixed when it began: 10, not 25


def test_an_available_now_run_with_min_offsets_per_trigger_reads_to_its_end():
    """Found by the simulation: a run ends at the first trigger that plans nothing, and
    ``minOffsetsPerTrigger`` held back a last batch smaller than it, so the run ended with records
    it was started to read unread (until ``maxTriggerDelay`` and another run)."""
    sim = _sim(max_rows=4, min_rows=3)
    reader = sim.new_reader()
    reader.prepareForTriggerAvailableNow()
    end = reader.initialOffset()
    ends = []
    while (nxt := reader.latestOffset(end, reader.getDefaultReadLimit())) != end:   # no time passes
        ends.append(nxt["a"]["0"])
        end = nxt
    assert ends == [4, 8, 10]
    # a query that is not an AvailableNow run still waits for minOffsetsPerTrigger
    stream = sim.new_reader()
    assert stream.latestOffset({"a": {"0": 0}}, stream.getDefaultReadLimit()) == {"a": {"0": 4}}
    assert stream.latestOffset({"a": {"0": 8}}, stream.getDefaultReadLimit()) == {"a": {"0": 8}}
