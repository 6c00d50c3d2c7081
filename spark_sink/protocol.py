"""The sink's names for the client's exactly-once protocol (:mod:`broker.client.exactly_once`).

The protocol (decide, record, then commit or abort, keyed by owner, batch, task and attempt) is a
capability of the client, shared with Streams and Connect; the sink is one owner, named by its
``sinkId`` (or its query's id), whose batches are Spark's micro-batches and whose tasks are Spark's
partitions. What is the sink's own: an attempt is a :class:`TransactionHandle`, and an old
``sinkId`` reused by a new checkpoint is a :class:`SinkReusedError` that names the option.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

from broker.client import TransactionHandle
from broker.client import exactly_once
from broker.client.exactly_once import (SKIP, WRITE, Decision, OwnerReusedError, batch_prefix, decision_key, strays,
                                        transactional_id)

Attempt = TransactionHandle


class SinkReusedError(OwnerReusedError):
    """A sink id that already committed a later batch: a new checkpoint with an old ``sinkId``."""


@contextmanager
def sink_errors():
    """Report the protocol's refusal of an old batch in the sink's terms (the ``sinkId`` option)."""
    try:
        yield
    except SinkReusedError:
        raise
    except OwnerReusedError as e:
        d = e.details
        raise SinkReusedError(
            f"sink '{d['owner']}' already committed batch {d['decided_batch_id']}, later than batch {d['batch_id']}: "
            "a sinkId belongs to one checkpoint; give a new checkpoint a new sinkId (or none)",
            config="sinkId", owner=d["owner"], batch_id=d["batch_id"], decided_batch_id=d["decided_batch_id"]) from e


class RunMemo:
    """The batch each sink last found undecided, per query run, in this Python worker.

    Spark replays at most the first batch of a run (a restart resumes at the offset log's last
    batch), and no earlier run can have decided a batch past that one. So once a task of a run
    found a batch undecided in the decision log, every later batch of the same run is undecided
    too, and its tasks need not read the log (five round trips). The run is Spark's ``runId``, new
    at every start of the query; without one, nothing is known."""

    def __init__(self):
        self._runs: dict[str, tuple[str, int]] = {}  # sink id -> (run id, batch found undecided)
        self._lock = threading.Lock()

    def known_undecided(self, sink_id: str, run_id: str | None, batch_id: int) -> bool:
        with self._lock:
            seen = self._runs.get(sink_id)
        return bool(run_id) and seen is not None and seen[0] == run_id and seen[1] < batch_id

    def found_undecided(self, sink_id: str, run_id: str | None, batch_id: int) -> None:
        if not run_id:
            return
        with self._lock:
            seen = self._runs.get(sink_id)
            if seen is None or seen[0] != run_id or seen[1] > batch_id:
                self._runs[sink_id] = (run_id, batch_id)


def stream_run(properties, batch_id: int | None) -> str | None:
    """The run of the streaming query whose micro-batch ``batch_id`` is running this task, or None.

    A batch write inside ``foreachBatch`` (``sinkId`` and ``batchId`` given) runs its jobs on the
    stream's thread, whose local properties Spark set for the micro-batch: the job group is the
    run's id, the job description names the query, the run and the batch. Only when all of them
    agree with the write's own ``batchId`` is the write that micro-batch of that run, and the
    :class:`RunMemo` reasoning holds for it as for a streaming write. A job group or description
    the user set (``setJobGroup`` inside ``foreachBatch``) breaks the agreement: nothing is known.
    ``properties``: a name -> value lookup (``TaskContext.getLocalProperty``)."""
    if batch_id is None:
        return None
    run, query = properties("spark.jobGroup.id"), properties("sql.streaming.queryId")
    description = properties("spark.job.description") or ""
    if not run or not query or properties("streaming.sql.batchId") != str(batch_id):
        return None
    lines = set(description.splitlines())
    wanted = {f"id = {query}", f"runId = {run}", f"batch = {batch_id}"}
    return run if wanted <= lines else None


def write_action(decision: Decision | None, batch_id: int) -> str:
    """WRITE, or SKIP when the batch is already decided (:func:`broker.client.exactly_once.write_action`)."""
    with sink_errors():
        return exactly_once.write_action(decision, batch_id)


def decide(recorded: Decision | None, sink_id: str, batch_id: int, attempts: list[Attempt]) -> tuple[Decision, bool]:
    """The decision to carry out and whether to record it (:func:`broker.client.exactly_once.decide`)."""
    with sink_errors():
        return exactly_once.decide(recorded, sink_id, batch_id, attempts)


__all__ = ["SKIP", "WRITE", "Attempt", "Decision", "RunMemo", "SinkReusedError", "batch_prefix", "decide",
           "decision_key", "sink_errors", "stream_run", "strays", "transactional_id", "write_action"]
