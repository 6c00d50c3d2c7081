"""The sink's run memo: a task skips the decision log only for a batch later than one its run
already found undecided, never for a run's first batch (the one a restart may replay); and a
batch write inside ``foreachBatch`` belongs to a run only when Spark's micro-batch properties agree."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_sink.protocol import RunMemo, stream_run

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


def _micro_batch(run="run-1", query="query-1", batch="7", **changed):
    """The local properties Spark gives a job started inside foreachBatch for micro-batch ``batch``."""
    props = {"spark.jobGroup.id": run, "sql.streaming.queryId": query, "streaming.sql.batchId": batch,
             "spark.job.description": f"orders\nid = {query}\nrunId = {run}\nbatch = {batch}"}
    props.update(changed)
    return props.get


def test_a_write_is_a_runs_micro_batch_only_when_every_property_agrees():
    assert stream_run(_micro_batch(), 7) == "run-1"
    assert stream_run(_micro_batch(), 8) is None                      # its batchId is not the micro-batch's
    assert stream_run(_micro_batch(), None) is None                   # no batchId: a plain batch write
    assert stream_run({}.get, 7) is None                              # outside any streaming query
    # A job group the user set inside foreachBatch: the description still names Spark's run.
    assert stream_run(_micro_batch(**{"spark.jobGroup.id": "nightly"}), 7) is None
    # A description the user set (setJobDescription): the run is no longer named.
    assert stream_run(_micro_batch(**{"spark.job.description": "my job"}), 7) is None
    assert stream_run(_micro_batch(**{"sql.streaming.queryId": None}), 7) is None
    assert stream_run(_micro_batch(**{"spark.job.description": None}), 7) is None
