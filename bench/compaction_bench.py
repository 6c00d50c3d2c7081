"""Log cleaner benchmark: compaction MB/s on a log with many updates per key.

Builds a log in a temporary directory (100-byte values, ``--keys`` distinct keys, ``--records``
records in batches of 1,000, every segment sealed), then runs one clean in this process and prints
one JSON line per figure. The baseline, measured in the same run in the same directory, writes the
same number of bytes to a file through the page cache: the cleaner reads every byte and writes the
survivors, so that write speed marks what a clean of the whole log could approach.

    python bench/compaction_bench.py [--records 1000000] [--keys 10000] [--quick]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.broker_bench import emit, page_cache_write_mb_s  # noqa: E402
from broker.clock import SYSTEM_CLOCK  # noqa: E402
from broker.config import TOPIC_CONFIG  # noqa: E402
from broker.records import arrow_body  # noqa: E402
from broker.records.batch import validate_batches  # noqa: E402
from broker.storage import cleaner  # noqa: E402
from broker.storage.log import Log  # noqa: E402

BATCH = 1000


def build_log(directory: str, records: int, keys: int, compression: str) -> Log:
    import numpy as np
    import pyarrow as pa
    config = TOPIC_CONFIG.parse({"cleanup.policy": "compact", "segment.bytes": 64 << 20,
                                 "min.cleanable.dirty.ratio": 0.0})
    log = Log.open(directory, config, SYSTEM_CLOCK)
    rng = np.random.default_rng(1)
    value = os.urandom(100)
    now = SYSTEM_CLOCK.time_ms()
    for start in range(0, records, BATCH):
        n = min(BATCH, records - start)
        ids = rng.integers(0, keys, n)
        batch = pa.RecordBatch.from_arrays(
            [pa.array([b"key-%08d" % k for k in ids], pa.binary()), pa.array([value] * n, pa.binary()),
             pa.array(np.full(n, now, dtype=np.int64)), pa.nulls(n, arrow_body.HEADER_TYPE)],
            schema=arrow_body.SCHEMA)
        data = arrow_body.encode_batch(batch, compression)
        log.append(data, validate_batches(data, max_batch_bytes=1 << 30))
    log.roll()
    log.flush()
    return log


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--compression", default="none", choices=("none", "lz4", "zstd"))
    parser.add_argument("--quick", action="store_true", help="a smaller log, for a smoke check")
    args = parser.parse_args()
    records = 100_000 if args.quick else args.records
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    emit("machine", os.cpu_count(), "cpus", **machine)
    with tempfile.TemporaryDirectory(prefix="riverlog-compaction-bench-") as tmp:
        log = build_log(os.path.join(tmp, "bench-0"), records, args.keys, args.compression)
        size = log.size_bytes
        baseline = page_cache_write_mb_s(tmp, max(1, round(size / (1 << 20))))
        emit("baseline.page_cache_write", baseline, "MB/s", bytes=size)

        started = time.perf_counter()
        result = cleaner.clean(log, log.log_end_offset, SYSTEM_CLOCK.time_ms())
        elapsed = time.perf_counter() - started
        stats = result.stats
        mb_s = stats.bytes_read / elapsed / (1 << 20)  # MiB/s, as the baseline
        extra = {"records": records, "keys": args.keys, "compression": args.compression}
        emit("compaction.clean", mb_s, "MB/s", of_baseline=round(mb_s / baseline, 3), **extra)
        emit("compaction.records", stats.records_read / elapsed, "rec/s", **extra)
        emit("compaction.size_after", stats.bytes_written / stats.bytes_read, "ratio",
             bytes_before=stats.bytes_read, bytes_after=stats.bytes_written, records_kept=stats.records_kept)
        log.close()


if __name__ == "__main__":
    main()
