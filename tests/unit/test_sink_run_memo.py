"""The sink's run memo: a task skips the decision log only for a batch later than one its run
already found undecided, never for a run's first batch (the one a restart may replay)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_sink.protocol import RunMemo

pytestmark = pytest.mark.unit


def test_only_a_later_batch_of_the_same_run_and_sink_is_known_undecided():
    memo = RunMemo()
    assert not memo.known_undecided("s", "run-1", 5)          # nothing seen: read the log
    memo.found_undecided("s", "run-1", 5)
    assert not memo.known_undecided("s", "run-1", 5)          # the same batch (a retried task): read it
    assert memo.known_undecided("s", "run-1", 6)
    assert not memo.known_undecided("s", "run-2", 6)          # a restart: its first batch may be a replay
    assert not memo.known_undecided("t", "run-1", 6)          # another sink
    memo.found_undecided("s", "run-2", 6)
    assert not memo.known_undecided("s", "run-1", 7)          # the old run is forgotten
    assert memo.known_undecided("s", "run-2", 7)


def test_without_a_run_id_nothing_is_known():
    memo = RunMemo()
    memo.found_undecided("s", None, 1)
    memo.found_undecided("s", "", 1)
    assert not memo.known_undecided("s", None, 2) and not memo.known_undecided("s", "", 2)


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["r1", "r2"]), st.integers(0, 20))),
       st.sampled_from(["a", "b"]), st.sampled_from(["r1", "r2"]), st.integers(0, 20))
def test_known_undecided_needs_an_earlier_batch_found_in_that_run(found, sink, run, batch):
    memo = RunMemo()
    for s, r, b in found:
        memo.found_undecided(s, r, b)
    if memo.known_undecided(sink, run, batch):
        assert any(s == sink and r == run and b < batch for s, r, b in found)
