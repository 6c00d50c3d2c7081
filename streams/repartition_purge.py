"""Kafka Streams' purge of repartition topics: every ``repartition.purge.interval.ms`` the records
a sub-topology has consumed from its repartition topics are deleted (``DeleteRecords``), so such a
topic holds only what is still to be read instead of growing for ever (it keeps records by
``retention.ms=-1``, since they carry their event time).

The point purged to is the end offsets of the newest batch in the reading query's commit log.
Spark never reads below them again: a batch replayed after a crash starts where the previous batch
ended, and a batch reaches the commit log only after its output (and the offsets the application
commits with it) is committed. An application restarted from the broker alone resumes at its
committed offsets, which are not below them either.
"""
from __future__ import annotations

import logging
import os
import threading

from spark_sink.offset_log import topic_offsets

log = logging.getLogger(__name__)

PURGE_INTERVAL_MS_DEFAULT = 30_000     # Kafka's repartition.purge.interval.ms


def purge_points(checkpoint: str, topics: set[str]) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` below which ``topics`` may be purged: the end offsets of
    the newest batch in ``checkpoint``'s commit log (nothing before its first batch)."""
    commits = os.path.join(checkpoint, "commits")
    done = [int(n) for n in os.listdir(commits) if n.isdigit()] if os.path.isdir(commits) else []
    if not done:
        return {}
    try:
        ends = topic_offsets(checkpoint, max(done))
    except FileNotFoundError:
        return {}
    return {(t, p): o for t, p, o in ends if t in topics and o > 0}


class RepartitionPurger:
    """A thread deleting consumed repartition records for the queries ``(checkpoint, topics)``,
    through its own admin client of ``client`` (the config's bootstrap servers)."""

    def __init__(self, client: dict, readers: list[tuple[str, set[str]]], interval_ms: int):
        from broker.client import AdminClient
        self.admin, self.readers, self.interval = AdminClient(client), readers, interval_ms / 1000
        self.purged: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def purge(self) -> dict[tuple[str, int], int]:
        """Purge once, up to the current points; returns the points newly purged to."""
        from broker.client import TopicPartition
        wanted: dict[tuple[str, int], int] = {}
        for checkpoint, topics in self.readers:
            wanted.update(purge_points(checkpoint, topics))
        new = {k: o for k, o in wanted.items() if o > self.purged.get(k, 0)}
        if not new:
            return {}
        futures = self.admin.delete_records([TopicPartition(t, p, o) for (t, p), o in sorted(new.items())])
        done = {}
        for tp, f in futures.items():
            try:
                f.result(30)
            except Exception as e:  # noqa: BLE001 - a purge that fails is tried again at the next interval
                log.warning("could not purge %s[%d] below %d: %s", tp.topic, tp.partition, new[(tp.topic, tp.partition)], e)
                continue
            done[(tp.topic, tp.partition)] = new[(tp.topic, tp.partition)]
        self.purged.update(done)
        return done

    def _run(self) -> None:
        while not self._stop.wait(max(self.interval, 0.05)):
            try:
                self.purge()
            except Exception:  # noqa: BLE001 - the broker may be away for a while; the next interval tries again
                log.warning("repartition purge failed", exc_info=True)

    def start(self) -> "RepartitionPurger":
        if self.readers:
            self._thread = threading.Thread(target=self._run, name="streams-repartition-purge", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.admin.close()
