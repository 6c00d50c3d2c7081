"""KIP-320 in the consumer over random histories of one partition's leadership: the real
``FetchState``/``FetchValidation`` against a model of replicas, clean and unclean elections and
late answers (``consumer_validation_sim.py`` has the model and the invariants). Hypothesis draws
the histories (derandomized: the same examples every run) and shrinks a failing one to its steps.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_consumer_validation_simulation.py  # more seeded runs
"""
from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from broker.client.start_offsets import EARLIEST, LATEST
from tests.simulation.consumer_validation_sim import OP_POOL, OPS, ModelFailure, Stats, random_ops, run
from tests.simulation.seeds import SEEDS

pytestmark = pytest.mark.simulation

histories = st.lists(st.tuples(st.sampled_from(OP_POOL), st.integers(0, 7)), max_size=80)
policies = st.sampled_from([EARLIEST, LATEST, None])

W, REP, CLEAN, UNCLEAN, REFRESH, ROUND, ANSWER, POLL = range(8)
RETENTION = 14
assert OPS[UNCLEAN] == "elect_unclean" and OPS[POLL] == "poll" and OPS[RETENTION] == "retention"

#: The consumer validates on broker 0 (epoch 1); before broker 0 answers "valid", broker 1 is
#: elected uncleanly (epoch 2, other records from offset 3) and asked too: broker 0's answer
#: must not end the validation (it did: the consumer then skipped broker 1's 3..4).
STALE_ANSWER = [(W, 2), (REP, 1), (W, 1), (ROUND, 0), (ANSWER, 0), (POLL, 7), (CLEAN, 0), (REFRESH, 0),
                (ROUND, 0), (UNCLEAN, 1), (REFRESH, 0), (ROUND, 0), (ANSWER, 0), (ANSWER, 0)]
#: auto.offset.reset=error: brokers 1 (epoch 1) and 2 (epoch 2) are both asked and both answer that
#: the log was truncated: one event (there were two).
TWO_ANSWERS = [(W, 2), (REP, 1), (W, 1), (ROUND, 0), (ANSWER, 0), (POLL, 7), (UNCLEAN, 1), (REFRESH, 0),
               (ROUND, 0), (REP, 5), (CLEAN, 2), (REFRESH, 0), (ROUND, 0), (ANSWER, 0), (ANSWER, 0)]

#: A slow application: broker 0's records 0..2 (epoch 0) fill the buffer, one is taken; broker 1 is
#: elected uncleanly (epoch 1, other records at 0..1) and the consumer's metadata says so. The
#: next round fetches nothing (the buffer is full) but must still stop the partition and drop the
#: records queued: they were handed out (the epoch was noted only for partitions fetched).
FULL_BUFFER = [(W, 2), (ROUND, 0), (ANSWER, 0), (POLL, 0), (UNCLEAN, 1), (REFRESH, 0), (ROUND, 0), (POLL, 7)]

#: auto.offset.reset=latest: record 0 is queued, retention deletes up to 3, the fetch at 1 is out
#: of range; ListOffsets answers 4 in epoch 0 while record 0 is still queued. Once it is taken the
#: position is 4 in epoch 0 (it had no epoch, so it was never validated).
DEFERRED_RESET = [(W, 0), (ROUND, 0), (ANSWER, 0), (W, 2), (RETENTION, 2), (ROUND, 0), (ANSWER, 0), (ROUND, 0),
                  (POLL, 0)]


def replay(ops, reset) -> None:
    trace: list[str] = []
    try:
        run(ops, reset, trace)
    except ModelFailure as failure:
        raise ModelFailure(f"{failure}\n" + "\n".join(trace[-60:])) from None


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(histories, policies)
@example(STALE_ANSWER, EARLIEST)
@example(TWO_ANSWERS, None)
@example(FULL_BUFFER, EARLIEST)
@example(DEFERRED_RESET, LATEST)
def test_the_consumer_follows_the_leaders_log_across_unclean_elections(ops, reset):
    logging.disable(logging.WARNING)  # every truncation logs a warning: thousands here
    try:
        replay(ops, reset)
    finally:
        logging.disable(logging.NOTSET)


def test_seeded_histories_exercise_every_outcome():
    """Longer seeded histories (``RIVERLOG_SIM_SEEDS`` scales them) must reach every outcome the
    invariants judge, or passing means little."""
    total = Stats()
    logging.disable(logging.WARNING)
    try:
        for seed in range(max(SEEDS // 10, 30)):
            for reset in (EARLIEST, LATEST, None):
                m = run(random_ops(seed, 80), reset)
                for name, value in vars(m.stats).items():
                    setattr(total, name, getattr(total, name) + value)
    finally:
        logging.disable(logging.NOTSET)
    unexercised = [name for name, value in vars(total).items() if value == 0]
    assert not unexercised, f"no run exercised: {unexercised} ({total})"
