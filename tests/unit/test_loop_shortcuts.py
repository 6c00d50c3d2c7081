"""The broker answers short produce and fetch work on its event loop instead of a pool thread, but
only when that cannot stall the loop: every partition lock free (taken without waiting, or none),
no fsync or segment roll due, and a read estimated small. A waiter woken by an append made on the
loop's own thread wakes at once; from another thread, through the loop."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.server.rpc import AsyncWaiter, hold_if_free
from broker.storage.log import Log

pytestmark = pytest.mark.unit


def _partition(tmp_path, **config) -> Partition:
    clock = ManualClock()
    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({k.replace("_", "."): str(v) for k, v in config.items()}), clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    return partition


NOW = ManualClock().time_ms()


def _batch(n: int, size: int = 100) -> bytes:
    return encode_batch(record_batch([None] * n, [b"v" * size] * n, [NOW] * n))


def test_hold_if_free_takes_every_lock_or_none():
    a, b, c = threading.Lock(), threading.Lock(), threading.Lock()
    held = hold_if_free([a, b, c])
    assert held == [a, b, c] and all(lock.locked() for lock in held)
    for lock in held:
        lock.release()

    b.acquire()   # another thread's
    try:
        assert hold_if_free([a, b, c]) is None
        assert not a.locked() and not c.locked()   # what it took before meeting b is released again
    finally:
        b.release()


def test_an_append_is_quick_only_without_fsync_roll_or_recompression(tmp_path):
    assert _partition(tmp_path / "plain").append_is_quick(1000)
    assert not _partition(tmp_path / "flush", flush_messages=1000).append_is_quick(1000)
    assert not _partition(tmp_path / "flushms", flush_ms=1000).append_is_quick(1000)
    assert not _partition(tmp_path / "zstd", compression_type="zstd").append_is_quick(1000)
    small = _partition(tmp_path / "small", segment_bytes=20_000)
    small.append_records(_batch(100))
    used = small.log.active.size
    assert small.append_is_quick(20_000 - used - 1)
    assert not small.append_is_quick(20_000 - used)   # this append would roll the segment
    aged = _partition(tmp_path / "aged", segment_ms=3_600_000)
    aged.append_records(_batch(1))
    assert aged.append_is_quick(1000)
    aged.clock.advance(3_600_000 - 30_000)             # a time roll is half a minute away
    assert not aged.append_is_quick(1000)


def test_read_size_hint_follows_the_bytes_below_the_high_watermark(tmp_path):
    p = _partition(tmp_path)
    assert p.read_size_hint(0) == 0                    # nothing to read
    for _ in range(10):
        p.append_records(_batch(10))                   # offsets 0-99, ten equal batches
    size = p.log.active.size
    assert p.read_size_hint(100) == 0
    assert p.read_size_hint(0) == size
    assert p.read_size_hint(90) == size // 10
    p.log.roll()
    p.append_records(_batch(10))
    assert p.read_size_hint(0) > 1 << 60               # below the active segment: never "small"


def _in_loop(coro):
    return asyncio.run(coro)


def test_a_waiter_wakes_when_the_loop_itself_appends():
    notifier = AppendNotifier()
    waiter = AsyncWaiter(notifier)

    async def scenario():
        loop = asyncio.get_running_loop()
        loop.call_soon(notifier.bump)                  # an append done on the loop thread
        start = time.monotonic()
        await waiter.wait_past(notifier.sequence, 5.0)
        return time.monotonic() - start

    assert _in_loop(scenario()) < 1.0
    assert not notifier._callbacks


def test_a_waiter_wakes_when_another_thread_appends_and_times_out_otherwise():
    notifier = AppendNotifier()
    waiter = AsyncWaiter(notifier)

    async def scenario():
        seq = notifier.sequence
        start = time.monotonic()
        await waiter.wait_past(seq, 0.05)              # nothing appended: the timeout ends it
        timed_out = time.monotonic() - start
        threading.Timer(0.05, notifier.bump).start()
        start = time.monotonic()
        await waiter.wait_past(notifier.sequence, 5.0)
        return timed_out, time.monotonic() - start

    timed_out, woken = _in_loop(scenario())
    assert 0.04 <= timed_out < 1.0
    assert woken < 1.0
    assert not notifier._callbacks                     # the wait left no callback behind
