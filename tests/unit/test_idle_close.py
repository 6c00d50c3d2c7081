"""Closing a log or producer state that changed nothing since its last flush writes nothing: a
broker with thousands of idle partitions would otherwise spend seconds of fsyncs at every stop.
What changed must still be made durable, and reopening must find every record."""
from __future__ import annotations

import os

import pytest

from broker.storage.producer_state import SNAPSHOT_FILE, ProducerStateManager
from tests.unit._logkit import encode, open_log

pytestmark = pytest.mark.unit


def _append(log, n: int = 3) -> None:
    from broker.records.batch import validate_batches
    data = encode([b"k"] * n, [b"v"] * n, [1000] * n)
    log.append(data, validate_batches(data, max_batch_bytes=1 << 20))


@pytest.fixture
def fsyncs(monkeypatch):
    """The paths of every file descriptor fsynced (real fsyncs, counted)."""
    seen, real = [], os.fsync

    def counting(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)
    monkeypatch.setattr(os, "fsync", counting)
    return seen


def test_an_idle_log_closes_without_fsyncing_its_segment(tmp_path, fsyncs):
    log = open_log(tmp_path)
    _append(log)
    log.close()
    log = open_log(tmp_path)
    fsyncs.clear()
    log.close()
    assert not [p for p in fsyncs if p.endswith(".log")]
    assert open_log(tmp_path).log_end_offset == 3


def test_a_log_written_since_opening_fsyncs_its_segment_on_close(tmp_path, fsyncs):
    log = open_log(tmp_path)
    _append(log)
    log.close()
    log = open_log(tmp_path)
    _append(log)
    fsyncs.clear()
    log.close()
    assert [p for p in fsyncs if p.endswith(".log")]
    assert open_log(tmp_path).log_end_offset == 6


def test_a_truncated_log_fsyncs_its_segment_on_close(tmp_path, fsyncs):
    log = open_log(tmp_path)
    _append(log)
    _append(log)
    log.flush()
    log.truncate_to(3)
    fsyncs.clear()
    log.close()
    assert [p for p in fsyncs if p.endswith(".log")]
    assert open_log(tmp_path).log_end_offset == 3


def test_an_unchanged_producer_snapshot_is_not_rewritten(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.snapshot(10)
    path = tmp_path / SNAPSHOT_FILE
    first = os.stat(path).st_ino
    reloaded = ProducerStateManager(str(tmp_path))
    assert reloaded.load() == 10
    reloaded.snapshot(10)
    assert os.stat(path).st_ino == first  # write_atomically would have renamed a new file in
    reloaded.snapshot(11)
    assert os.stat(path).st_ino != first
    assert ProducerStateManager(str(tmp_path)).load() == 11


def test_a_removed_snapshot_is_written_again(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.snapshot(10)
    os.unlink(tmp_path / SNAPSHOT_FILE)
    state.snapshot(10)
    assert ProducerStateManager(str(tmp_path)).load() == 10
