"""Helpers shared by the storage unit tests: random batches, a list oracle, decoding reads."""
from __future__ import annotations

import bisect
import random
from dataclasses import dataclass

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.records import arrow_body
from broker.records.batch import iter_headers, validate_batches
from broker.records.reader import decode_records
from broker.storage.log import Log

MAX_BATCH = 10**7
COMPRESSIONS = ("none", "lz4", "zstd")


def encode(keys, values, timestamps, compression: str = "none", headers=None) -> bytes:
    return arrow_body.encode_batch(arrow_body.record_batch(keys, values, timestamps, headers), compression)


def random_records(rng: random.Random, max_records: int = 8, max_value: int = 300,
                   base_ts: int = 1_000_000, ts_spread: int = 100_000):
    """(keys, values, timestamps) with Nones and timestamps in no particular order."""
    n = rng.randint(1, max_records)
    keys = [None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20)) for _ in range(n)]
    values = [None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, max_value)) for _ in range(n)]
    timestamps = [base_ts + rng.randint(0, ts_spread) for _ in range(n)]
    return keys, values, timestamps


# Logs opened by a test, closed after it (tests/unit/conftest.py): a segment holds a file descriptor,
# and the run's Spark tests share the process, whose py4j callback server cannot select() on a
# descriptor above 1023.
OPENED: list[Log] = []
AFTER_TEST: list = []   # other closers (e.g. cleaned segments a test never swaps in)


def open_log(directory, config: dict | None = None, clock: ManualClock | None = None,
             clean_shutdown: bool = True) -> Log:
    log = Log.open(str(directory), TOPIC_CONFIG.parse(config or {}), clock or ManualClock(),
                   clean_shutdown=clean_shutdown)
    OPENED.append(log)
    return log


def close_opened() -> None:
    """Close every segment file of the logs :func:`open_log` opened (no flush: a test may have
    left one as a crash would)."""
    while OPENED:
        OPENED.pop().close_without_flush()
    while AFTER_TEST:
        AFTER_TEST.pop()()


@dataclass
class OracleBatch:
    base: int
    last: int
    keys: list
    values: list
    timestamps: list
    size: int

    def rows(self, start: int = 0) -> list[tuple]:
        return [(self.base + i, k, v, t)
                for i, (k, v, t) in enumerate(zip(self.keys, self.values, self.timestamps))
                if self.base + i >= start]


class LogOracle:
    """What a log must hold: the batches appended, in order, as plain Python lists."""

    def __init__(self):
        self.batches: list[OracleBatch] = []

    @property
    def end(self) -> int:
        return self.batches[-1].last + 1 if self.batches else 0

    def append(self, log: Log, keys, values, timestamps, compression: str = "none"):
        data = encode(keys, values, timestamps, compression)
        info = log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
        assert info.first_offset == self.end
        assert info.last_offset == self.end + len(values) - 1
        assert info.record_count == len(values)
        self.batches.append(OracleBatch(info.first_offset, info.last_offset, list(keys), list(values),
                                        list(timestamps), len(data)))
        return info

    def batch_index(self, offset: int) -> int:
        return bisect.bisect_right([b.base for b in self.batches], offset) - 1

    def rows(self, start: int = 0) -> list[tuple]:
        return [row for b in self.batches if b.last >= start for row in b.rows(start)]

    def first_at_or_after(self, timestamp: int, start: int = 0):
        """Brute force: (offset, timestamp) of the first record at or after offset ``start`` whose
        timestamp is >= ``timestamp``."""
        for offset, _, _, ts in self.rows(start):
            if ts >= timestamp:
                return offset, ts
        return None

    def max_timestamp(self):
        """(offset of the first record holding the largest timestamp, that timestamp), or None."""
        if not self.batches:
            return None
        best = max(max(b.timestamps) for b in self.batches)
        return next(offset for offset, _, _, ts in self.rows() if ts == best), best

    def truncate(self, offset: int) -> None:
        """Keep the batches that end before ``offset`` (a batch boundary)."""
        self.batches = [b for b in self.batches if b.last < offset]
        assert self.end == offset


def decoded_rows(data, start_offset: int) -> list[tuple]:
    """(offset, key, value, timestamp) of every record in fetched bytes at or after ``start_offset``."""
    rows = []
    for batch in decode_records(data, start_offset):
        cols = batch.records.to_pydict()
        rows += [(batch.base_offset + i, cols["key"][i], cols["value"][i], cols["timestamp"][i])
                 for i in range(batch.records.num_rows)]
    return rows


def assert_whole_batches(data) -> list:
    """The headers of ``data``, which must be complete batches with nothing left over."""
    headers = [h for _, h in iter_headers(data)]
    assert headers, "a read returned bytes without a complete batch"
    assert sum(h.size for h in headers) == len(data), "a read returned a partial batch"
    return headers


def read_all(log: Log, max_bytes: int = 4096) -> list[tuple]:
    """Every record from the log start to the end, fetched the way a consumer does."""
    rows, offset = [], log.log_start_offset
    while True:
        data = log.read(offset, max_bytes)
        if data is None:
            return rows
        assert_whole_batches(data)
        batches = decode_records(data, offset)
        rows += decoded_rows(data, offset)
        offset = batches[-1].next_offset
