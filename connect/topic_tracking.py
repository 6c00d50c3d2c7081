"""Kafka Connect's topic tracking (KIP-558): the topics each connector has used, kept in
connect-status, answered by ``GET /connectors/{name}/topics`` and cleared by
``PUT /connectors/{name}/topics/reset``.

Kafka's task records a topic the first time it produces a record to it (a source,
``AbstractWorkerSourceTask``) or converts a record consumed from it (a sink, ``WorkerSinkTask``):
``WorkerTask.recordActiveTopic`` writes ``status-topic-<topic>:connector-<name>`` once, unless the
status store already has that topic for the connector. Here a connector is one streaming query, so
its frame is observed (:func:`observed`: Spark's ``observe``, a ``collect_set`` of the ``topic``
column computed with the batch's own job, nothing read twice) when it is a source connector's
output; a sink connector's topics are those whose offsets its batch moved, which the query's
progress already says. :class:`~connect.query_status.QueryMetrics` collects each batch's set, and the worker's supervisor hands the new
ones to :meth:`TopicTracker.record`, which writes only topics connect-status does not list yet.

    tracker = TopicTracker(storage, TrackingConfig.of(worker_config))
    tracker.record("orders-sink", {"orders"})                # one record the first time, then nothing
    tracker.active("orders-sink")                           # ['orders']
    tracker.reset("orders-sink")                            # tombstones

``topic.tracking.enable`` (default true) turns recording and both endpoints on;
``topic.tracking.allow.reset`` (default true) allows the reset. Not thread-safe: the worker calls it
under its lock.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connect.storage_format import TopicStatus

TOPICS_METRIC = "connect-topics"
"""The name of the observed metric (one row, column ``topics``) on a connector's streaming frame."""

@dataclass(frozen=True)
class TrackingConfig:
    """``WorkerConfig``'s two topic-tracking keys (``topic.tracking.enable``,
    ``topic.tracking.allow.reset``)."""
    enabled: bool = True
    allow_reset: bool = True

    @classmethod
    def of(cls, worker) -> "TrackingConfig":
        return cls(worker.topic_tracking_enable, worker.topic_tracking_allow_reset)


def observed(frame, config: TrackingConfig):
    """``frame`` with :data:`TOPICS_METRIC` observed: the set of its rows' ``topic`` (a row flagged
    with an error, where the frame carries the flag, is not written and so not counted)."""
    if not config.enabled:
        return frame
    from pyspark.sql import functions as F

    from connect import record_frame
    topic = F.col("topic")
    if record_frame.ERROR in frame.columns:
        topic = F.when(F.col(record_frame.ERROR).isNull(), topic)
    return frame.observe(TOPICS_METRIC, F.collect_set(topic).alias("topics"))


def progress_topics(progress) -> set[str]:
    """The topics one progress event says its batch used: a source connector's observed metric
    (the topics it wrote to), else, for a sink connector (nothing observed: its input's offsets
    already say it, at no cost to the batch), the topics whose offsets the batch moved."""
    row = (getattr(progress, "observedMetrics", None) or {}).get(TOPICS_METRIC)
    if row is not None:
        return {str(t) for t in getattr(row, "topics", None) or () if t is not None}
    if not getattr(progress, "numInputRows", 0):
        return set()
    out: set[str] = set()
    for source in getattr(progress, "sources", None) or ():
        start, end = _offsets(getattr(source, "startOffset", None)), _offsets(getattr(source, "endOffset", None))
        for topic, parts in end.items():
            before = start.get(topic, {})
            if any(isinstance(o, int) and o > before.get(p, -1 if start else 0) for p, o in parts.items()):
                out.add(topic)
    return out


def _offsets(doc) -> dict:
    """A riverlog source offset (``{"topic": {"partition": offset}}``, as JSON text or parsed), or
    {} for anything else."""
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return {}
    if not isinstance(doc, dict):
        return {}
    return {t: ps for t, ps in doc.items() if isinstance(ps, dict)}


class TopicTracker:
    """Kafka's ``recordActiveTopic``, ``connectorActiveTopics`` and ``resetConnectorActiveTopics``
    over the worker's :class:`~connect.storage.ConnectStorage` (its status view is the cache)."""

    def __init__(self, storage, config: TrackingConfig, clock: Callable[[], float] = time.time):
        self.storage, self.config, self.clock = storage, config, clock

    def record(self, connector: str, topics: Iterable[str], task: int = 0) -> list[str]:
        """Write a ``TopicStatus`` for each of ``topics`` not yet recorded for ``connector``; the
        topics written (one query runs all of a connector's tasks: they are task 0's)."""
        if not self.config.enabled:
            return []
        known = self.storage.statuses.topics.get(connector, {})
        new = sorted(t for t in set(topics) if t not in known)
        now_ms = int(self.clock() * 1000)
        for topic in new:
            self.storage.put_topic_status(TopicStatus(topic, connector, task, now_ms))
        return new

    def active(self, connector: str) -> list[str]:
        """The topics recorded for ``connector`` (any name: Kafka answers an empty list for one it
        does not know), sorted."""
        return sorted(self.storage.statuses.topics.get(connector, {}))

    def reset(self, connector: str) -> None:
        """A tombstone for each recorded topic; a topic used again is recorded again."""
        for topic in self.active(connector):
            self.storage.delete_topic_status(connector, topic)


__all__ = ["TOPICS_METRIC", "TopicTracker", "TrackingConfig", "observed", "progress_topics"]
