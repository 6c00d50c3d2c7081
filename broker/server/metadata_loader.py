"""Replaying committed metadata records into an image and handing each new image to publishers.

Kafka's ``MetadataLoader``: the broker's metadata thread feeds it what it fetched (a snapshot and/or
committed entries); every record is applied to a private working image, and once the batch is in,
a copy is handed to each publisher in turn (the replica manager, then the image request threads
read). A failure never stops the thread: a record whose replay raises is logged with the record
and skipped, a publisher that raises is logged and the next publisher still runs, and each counts
in a :class:`FaultHandler` (Kafka's ``metadata-load-error-count`` and
``metadata-apply-error-count`` broker metrics), so the node keeps following the log and the
failure stays visible.

Threading: one thread (the broker's ``riverlog-metadata``) calls :meth:`MetadataLoader.load`;
fault counters may be read from any thread.
"""
from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.metadata.image import MetadataImage

log = logging.getLogger(__name__)

_SHOWN_RECORDS = 5  # records of a load named in a publishing fault's report


@dataclass(frozen=True)
class Fault:
    message: str
    error: str


class FaultHandler:
    """Logs a failure and counts it, instead of letting it end the thread (Kafka's
    ``LoggingFaultHandler`` plus its error-count metric).

        faults = FaultHandler("metadata-apply-error-count")
        faults.handle("could not remove orders-0", err)
        faults.count, faults.last   # 1, Fault("could not remove orders-0", "OSError(...)")
    """

    def __init__(self, name: str):
        self.name = name
        self.count = 0
        self.last: Fault | None = None
        self._lock = threading.Lock()

    def handle(self, message: str, error: BaseException) -> None:
        with self._lock:
            self.count += 1
            self.last = Fault(message, repr(error))
            count = self.count
        log.error("%s (%s %d): %r", message, self.name, count, error, exc_info=error)


class MetadataLoader:
    """Applies fetched metadata to a working image and publishes a copy after each change.

    ``publishers``: ``(name, fn(image, first))`` called in order with a private copy of the image
    (never mutated afterwards); ``first`` is true for the first image this loader publishes.
    """

    def __init__(self, publishers: Iterable[tuple[str, Callable[[MetadataImage, bool], None]]],
                 load_faults: FaultHandler | None = None, apply_faults: FaultHandler | None = None):
        self.publishers = list(publishers)
        self.load_faults = load_faults or FaultHandler("metadata-load-error-count")
        self.apply_faults = apply_faults or FaultHandler("metadata-apply-error-count")
        self.working = MetadataImage()
        self.offset = -1
        self._published = False
        self._batch: list[tuple[str, dict]] = []  # the records of the load being published, for fault reports

    def load(self, applied: int, entries: Iterable[tuple[int, list[dict]]],
             snapshot: list[dict] | None = None) -> MetadataImage | None:
        """Apply a snapshot (replacing the image) and/or entries committed up to ``applied``;
        returns the published image, or None when nothing moved. An answer behind this loader
        (a voter that lags the leader) is ignored, and so is any entry already applied: the offset
        only moves forward and no record is replayed twice (a replayed partition change would bump
        its epochs again), as a KRaft observer's ``nextOffset``."""
        self._batch = []
        if applied < self.offset:
            return None
        if snapshot is not None:
            self.working = MetadataImage()
            for record in snapshot:
                self._replay(record, applied, "snapshot")
        for index, records in entries:
            if snapshot is None and index <= self.offset:
                continue
            for record in records:
                self._replay(record, index, f"offset {index}")
        if applied == self.offset:
            return None
        self.offset = self.working.offset = applied
        image = copy.deepcopy(self.working)
        first, self._published = not self._published, True
        for name, publish in self.publishers:
            try:
                publish(image, first)
            except Exception as e:  # noqa: BLE001 - counted and logged; the next publisher still runs
                self.publish_fault(f"error publishing metadata to {name}", e)
        return image

    def publish_fault(self, message: str, error: BaseException) -> None:
        """Report a failure while publishing the current image, with the records that led to it
        (publishers may call this for a part that failed while the rest went on)."""
        shown = "; ".join(f"{where}: {record!r}" for where, record in self._batch[-_SHOWN_RECORDS:])
        more = len(self._batch) - _SHOWN_RECORDS
        records = (f"{more} earlier record(s), then " if more > 0 else "") + (shown or "no new records")
        self.apply_faults.handle(f"{message} (metadata offset {self.offset}, after {records})", error)

    def _replay(self, record: dict, offset: int, where: str) -> None:
        if where != "snapshot":
            self._batch.append((where, record))
        try:
            self.working.apply(record, offset)
        except Exception as e:  # noqa: BLE001 - skip the record, keep following the log (as Kafka)
            self.load_faults.handle(f"error replaying metadata record at {where}: {record!r}", e)
