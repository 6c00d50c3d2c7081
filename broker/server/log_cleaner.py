"""The cleaner thread: compacts ``cleanup.policy=compact`` partitions hosted here (Kafka's LogCleaner).

Every replica compacts its own log, leader or follower, as in Kafka. One thread: each pass offers
every compacted partition to :meth:`Partition.clean`, which decides whether a clean is due
(``broker.storage.cleaner``) and does the heavy rewriting outside the partition lock. When a pass
cleaned nothing the thread sleeps ``log.cleaner.backoff.ms``. Stopping aborts a clean in progress
(its ``.cleaned`` files are removed; the old segments were never touched).
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from broker.clock import Clock
from broker.config import Config
from broker.partition import Partition
from broker.storage.cleaner import CleaningAborted

log = logging.getLogger(__name__)


class LogCleaner:
    def __init__(self, config: Config, clock: Clock, partitions: Callable[[], list[Partition]]):
        self.config = config
        self.clock = clock
        self.partitions = partitions
        self.cleaned_bytes = 0   # bytes of source segments rewritten since start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="riverlog-log-cleaner", daemon=True)

    def start(self) -> None:
        if self.config["log.cleaner.enable"]:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def _run(self) -> None:
        backoff = self.config["log.cleaner.backoff.ms"] / 1000.0
        while not self._stop.is_set():
            cleaned = False
            for partition in self.partitions():
                if self._stop.is_set():
                    return
                if "compact" not in partition.log.config["cleanup.policy"]:
                    continue
                try:
                    cleaned |= self._clean(partition)
                except CleaningAborted:
                    return
                except Exception:  # noqa: BLE001 - one broken log must not stop the others
                    log.exception("cleaning %s-%d failed", partition.topic, partition.index)
            if not cleaned:
                self._stop.wait(backoff)

    def _clean(self, partition: Partition) -> bool:
        result = partition.clean(self.clock.time_ms(), self._stop.is_set)
        if result is None or not result.swapped:
            return False
        s = result.stats
        self.cleaned_bytes += s.bytes_read
        log.info("cleaned %s-%d: %d -> %d bytes, %d of %d records kept, %d tombstones, %d aborted records and "
                 "%d transaction markers removed, %.1f MB/s",
                 partition.topic, partition.index, s.bytes_read, s.bytes_written, s.records_kept,
                 s.records_read, s.tombstones_dropped, s.aborted_dropped, s.markers_dropped,
                 s.bytes_read / max(s.seconds, 1e-9) / 1e6)
        return True
