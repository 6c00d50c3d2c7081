"""The stage ``GET /health`` names (Kafka's ``Stage.summarize``) and the worker lock that records it."""
from __future__ import annotations

import threading

import pytest

from connect.worker_health import OPERATION, Stage, StagedLock

pytestmark = pytest.mark.unit


def test_a_stage_is_summarized_as_kafkas_with_javas_instants():
    running = Stage("reading to the end of internal topics", 1_700_000_000.25)
    assert running.summarize() == ("The worker is currently reading to the end of internal topics, which began at "
                                   "2023-11-14T22:13:20.250Z.")
    done = Stage("joining group.id 'g'", 1_700_000_000.0, completed=1_700_000_002.5)
    assert done.summarize() == ("The last operation the worker completed was joining group.id 'g', which began at "
                                "2023-11-14T22:13:20Z and completed at 2023-11-14T22:13:22.500Z.")


def test_the_lock_names_its_holders_innermost_stage_then_the_last_completed_one():
    lock = StagedLock()
    token = OPERATION.set("handling the request POST /connectors")
    try:
        with lock:
            assert lock.held and lock.current().description == "handling the request POST /connectors"
            with lock.stage("bringing connector a to STARTED"):
                assert lock.current().description == "bringing connector a to STARTED"
            assert lock.current().description == "handling the request POST /connectors"
    finally:
        OPERATION.reset(token)
    assert not lock.held
    last = lock.current()
    assert last.description == "handling the request POST /connectors" and last.completed is not None


def test_a_lock_held_by_another_thread_is_not_free_and_names_that_thread():
    lock, taken, release = StagedLock(), threading.Event(), threading.Event()

    def hold():
        with lock:
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold, name="connect-supervisor")
    holder.start()
    try:
        assert taken.wait(10)
        assert not lock.free_within(0.05)
        assert lock.current().description == "running on thread 'connect-supervisor'"
    finally:
        release.set()
        holder.join(10)
    assert lock.free_within(0.05)
