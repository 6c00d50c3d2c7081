"""A connector's live metrics from Spark's ``StreamingQueryListener``: rows per second, the last
batch's id and time, lag (how far the batch's end is behind the source's latest offset), and the
topics its batches used (topic tracking's observed metric, drained by the worker).

Spark calls the listener from its own thread; the worker reads :meth:`QueryMetrics.get` from the
REST threads, so the table is guarded by a lock. Lag is the sum, over every numeric leaf two
offsets share, of ``latestOffset - endOffset`` (records for the riverlog source, bytes for the
file source); None when the source reports no latest offset.
"""
from __future__ import annotations

import json
import threading
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from connect.topic_tracking import progress_topics


def _leaves(offset: Any, prefix: tuple = ()) -> dict[tuple, float]:
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return {}
    if isinstance(offset, dict):
        out = {}
        for k, v in offset.items():
            out.update(_leaves(v, prefix + (k,)))
        return out
    if isinstance(offset, (int, float)) and not isinstance(offset, bool):
        return {prefix: offset}
    return {}


def lag(end_offset: Any, latest_offset: Any) -> int | None:
    """``latest - end`` summed over the positions both offsets name (never negative)."""
    if latest_offset is None or end_offset is None:
        return None
    end, latest = _leaves(end_offset), _leaves(latest_offset)
    shared = [k for k in latest if k in end]
    if not shared:
        return None
    return int(sum(max(0, latest[k] - end[k]) for k in shared))


class QueryMetrics(StreamingQueryListener):
    """Register once per session (``spark.streams.addListener``); keyed by the query's run id
    (a restarted query keeps its id, and must not show its previous run's batches)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_query: dict[str, dict] = {}
        self._topics: dict[str, set[str]] = {}   # topics seen since the worker last drained them

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        p = event.progress
        total = None
        for s in p.sources:
            one = lag(s.endOffset, getattr(s, "latestOffset", None))
            if one is not None:
                total = (total or 0) + one
        rate = p.processedRowsPerSecond
        topics = progress_topics(p)
        with self._lock:
            if topics:
                self._topics.setdefault(str(p.runId), set()).update(topics)
            self._by_query[str(p.runId)] = {
                "rows_per_second": None if rate is None or rate != rate else float(rate),
                "last_batch_id": p.batchId, "last_batch_at": p.timestamp, "lag": total,
                "num_input_rows": p.numInputRows}

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    def drain_topics(self, run_id: str) -> set[str]:
        """The topics the run's batches used (:mod:`connect.topic_tracking`) since the last call."""
        with self._lock:
            return self._topics.pop(str(run_id), set())

    def requeue_topics(self, run_id: str, topics: set[str]) -> None:
        """Give back drained topics the worker could not record."""
        with self._lock:
            self._topics.setdefault(str(run_id), set()).update(topics)

    def get(self, run_id: str | None) -> dict:
        empty = {"rows_per_second": None, "last_batch_id": None, "last_batch_at": None, "lag": None}
        if run_id is None:
            return empty
        with self._lock:
            found = self._by_query.get(str(run_id))
        return {k: found.get(k) for k in empty} if found else empty


__all__ = ["QueryMetrics", "lag"]
