"""What every seeded simulation test shares: how many seeds, replaying one, and reporting a failure.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation     # more seeds (default 1000)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation       # replay one seed, with its trace
"""
from __future__ import annotations

import dataclasses
import os

import pytest


class ModelFailure(AssertionError):
    """The code under test differed from the model (the message says how); :func:`with_trace`
    replays the history to add its trace."""


class SimulationFailure(AssertionError):
    """A seeded run broke an invariant: its seed, step and trace for the replay."""

    def __init__(self, seed: int, step: int, message: str, trace: list[str]):
        self.seed, self.step, self.message, self.trace = seed, step, message, trace
        super().__init__(f"seed {seed}, step {step}: {message}")


SEEDS = int(os.environ.get("RIVERLOG_SIM_SEEDS", "1000"))
ONE_SEED = os.environ.get("RIVERLOG_SIM_SEED")


def replay_command(test_id: str, seed: int) -> str:
    return f"RIVERLOG_SIM_SEED={seed} .venv/bin/python -m pytest {test_id} -q -p no:cacheprovider"


def check_every_seed(label: str, test_id: str, run, total) -> None:
    """``run(seed)`` returns a run's stats or raises the simulation's failure (with ``seed`` and
    ``trace``); the first failure fails the test with its replay command. ``total`` (a stats
    dataclass with ``add``) must show every counted event exercised, or passing means little."""
    seeds = [int(ONE_SEED)] if ONE_SEED is not None else range(SEEDS)
    for seed in seeds:
        try:
            total.add(run(seed))
        except Exception as failure:  # noqa: BLE001 - each simulation has its own failure type
            if not hasattr(failure, "trace"):
                raise
            command = replay_command(test_id, seed)
            print(f"\n{label} simulation failed with seed {seed}; replay with:\n  {command}")
            pytest.fail(f"{failure}\nreplay: {command}\n" + "\n".join(failure.trace), pytrace=False)
    if ONE_SEED is None and SEEDS >= 200:
        unexercised = [name for name, value in dataclasses.asdict(total).items() if value == 0]
        assert not unexercised, f"no run exercised: {unexercised} ({total})"


def with_trace(run, failure_type: type[Exception], *args, keep: int = 60, label: str = ""):
    """``run(*args, trace)``'s result; a ``failure_type`` it raises is raised again (after
    ``label``) with the trace's last ``keep`` lines, so a failing history shows how it got there."""
    trace: list[str] = []
    try:
        return run(*args, trace)
    except failure_type as failure:
        raise failure_type(f"{label}{failure}\n" + "\n".join(trace[-keep:])) from None
