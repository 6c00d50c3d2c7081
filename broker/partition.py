"""A partition as this broker hosts it: its log, its lock and its high watermark.

The log knows offsets and bytes; the partition adds what readers may see. Consumers read below the
high watermark (on a single replica it follows the log end at once; replication moves it as
followers catch up). Every append bumps the broker-wide :class:`AppendNotifier` so long-polling
fetches wake.

Threading: every method takes ``self.lock``; reads copy what they need under it.
"""
from __future__ import annotations

import threading
from typing import NamedTuple

from broker.records.batch import validate_batches
from broker.storage.log import AppendInfo, Log


class AppendNotifier:
    """A counter that fetch requests wait on: "has anything been appended since I looked?"."""

    def __init__(self):
        self._cond = threading.Condition()
        self.sequence = 0

    def bump(self) -> None:
        with self._cond:
            self.sequence += 1
            self._cond.notify_all()

    def wait_past(self, sequence: int, timeout: float) -> None:
        with self._cond:
            if self.sequence == sequence:
                self._cond.wait(timeout)


class ReadResult(NamedTuple):
    records: bytes | memoryview
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class Partition:
    def __init__(self, topic: str, index: int, topic_id: str, log: Log, notifier: AppendNotifier,
                 leader_epoch: int = 0):
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.notifier = notifier
        self.leader_epoch = leader_epoch
        self.lock = threading.RLock()
        self.high_watermark = log.log_end_offset

    def append_records(self, data) -> AppendInfo:
        """Validate a produce payload against this partition's limits, then append it as leader."""
        headers = validate_batches(data, max_batch_bytes=self.log.config["max.message.bytes"])
        with self.lock:
            info = self.log.append(data, headers, self.leader_epoch)
            self.high_watermark = self.log.log_end_offset
        self.notifier.bump()
        return info

    def read(self, offset: int, max_bytes: int, *, up_to_high_watermark: bool = True) -> ReadResult:
        with self.lock:
            limit = self.high_watermark if up_to_high_watermark else None
            data = self.log.read(offset, max_bytes, limit)
            return ReadResult(b"" if data is None else data, self.high_watermark,
                              self.log.log_start_offset, self.log.log_end_offset)

    def offsets(self) -> tuple[int, int, int]:
        """(log start offset, high watermark, log end offset)."""
        with self.lock:
            return self.log.log_start_offset, self.high_watermark, self.log.log_end_offset

    def offset_for_timestamp(self, timestamp: int):
        with self.lock:
            found = self.log.offset_for_timestamp(timestamp)
        if found is not None and found[0] >= self.high_watermark:
            return None
        return found

    def max_timestamp(self):
        with self.lock:
            return self.log.max_timestamp()

    def set_config(self, config) -> None:
        with self.lock:
            self.log.set_config(config)

    def maybe_flush(self) -> None:
        with self.lock:
            self.log.maybe_flush_on_time()

    def close(self) -> None:
        with self.lock:
            self.log.close()
