"""Periodic metadata refresh: ``metadata.max.age.ms`` (librdkafka's ``topic.metadata.refresh.interval.ms``).

Without it a client learns of new partitions, moved leaders and new topics only when a request
fails or it asks. Every ``metadata.max.age.ms`` the refresher asks for the whole cluster's
metadata (never creating topics) and hands the answer to its listeners: a regex subscription
(:mod:`broker.client.subscription`) picks up new matching topics this way, as librdkafka's does.

Threading: one daemon thread per client, sleeping between refreshes; listeners run on it and
must only hand work to their owner's thread (or set a field it reads). ``close()`` stops it.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from broker.errors import RiverlogError

log = logging.getLogger("broker.client.cluster")


class MetadataRefresher:
    """Refreshes ``cluster`` (anything with ``refresh(topics)``) every ``max_age_ms``; 0 turns it off.
    ``wait(seconds) -> stopped`` is the pause between refreshes (tests pass their own)."""

    def __init__(self, cluster, max_age_ms: int, wait: Callable[[float], bool] | None = None,
                 start: bool = True):
        self.cluster = cluster
        self.interval = max_age_ms / 1000.0
        self.listeners: list[Callable] = []
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread = None
        if start and max_age_ms > 0:
            self._thread = threading.Thread(target=self._run, name="riverlog-metadata", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._wait(self.interval) and not self._stop.is_set():
            self.refresh_now()

    def refresh_now(self):
        """One refresh of every topic's metadata, then the listeners; None if no broker answered."""
        try:
            response = self.cluster.refresh(None)
        except RiverlogError as e:
            log.debug("periodic metadata refresh failed: %r", e)
            return None
        for listener in list(self.listeners):
            try:
                listener(response)
            except Exception:  # noqa: BLE001 - one listener's bug must not stop the refreshes
                log.exception("metadata listener failed")
        return response

    def close(self) -> None:
        """Stop, and wait for a refresh under way: nothing of a closed client may still be calling."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)


def start_refresher(cluster, cfg) -> MetadataRefresher:
    """The refresher of a client made from configuration (``metadata.max.age.ms``)."""
    return MetadataRefresher(cluster, cfg.get("metadata.max.age.ms", 0))


def stop_refresher(cluster) -> None:
    refresher = getattr(cluster, "refresher", None)
    if refresher is not None:
        refresher.close()
