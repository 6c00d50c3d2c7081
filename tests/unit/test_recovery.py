"""Crash recovery: a torn, corrupt or garbage tail is cut at the last whole batch, never served."""
from __future__ import annotations

import os
import random
import shutil
import struct

import pytest

from broker.records.batch import HEADER_SIZE
from broker.storage.log_loader import RECOVERY_POINT_FILE
from broker.storage.offset_index import OffsetIndex
from broker.storage.segment import segment_name
from broker.storage.time_index import TimeIndex
from tests.unit._logkit import COMPRESSIONS, LogOracle, open_log, random_records, read_all

pytestmark = pytest.mark.unit

MULTI = {"segment.bytes": 6000, "index.interval.bytes": 300}
SINGLE = {"segment.bytes": 10**7, "index.interval.bytes": 500}


class Crashed:
    """A log directory left by a crash, its oracle, and where the last segment's batches start."""

    def __init__(self, directory, config: dict, seed: int, batches: int):
        self.directory, self.config = str(directory), config
        rng = random.Random(seed)
        log = open_log(directory, config)
        self.oracle = LogOracle()
        for _ in range(batches):
            self.oracle.append(log, *random_records(rng), compression=rng.choice(COMPRESSIONS))
        self.segment_bases = [s.base_offset for s in log.segments]
        log.close_without_flush()
        self.tail = [b for b in self.oracle.batches if b.base >= self.segment_bases[-1]]
        self.starts = [sum(b.size for b in self.tail[:i]) for i in range(len(self.tail) + 1)]

    def log_path(self, directory, base: int | None = None) -> str:
        base = self.segment_bases[-1] if base is None else base
        return os.path.join(directory, segment_name(base) + ".log")

    def copy(self, destination) -> str:
        shutil.copytree(self.directory, destination)
        return str(destination)

    def survivors(self, valid_bytes: int) -> tuple[int, LogOracle]:
        """(log end, oracle) after cutting the last segment to ``valid_bytes``: whole batches only."""
        complete = sum(1 for end in self.starts[1:] if end <= valid_bytes)
        end = self.tail[complete].base if complete < len(self.tail) else self.oracle.end
        kept = LogOracle()
        kept.batches = [b for b in self.oracle.batches if b.last < end]
        return end, kept


def assert_recovered(directory, config, end: int, oracle: LogOracle, rng: random.Random,
                     log_file: tuple[str, int] | None = None) -> None:
    """Reopen after a crash: the log ends at ``end``, serves ``oracle`` exactly and takes appends.

    ``log_file`` = (path, size): the segment file the recovery must have cut to that size.
    """
    log = open_log(directory, config, clean_shutdown=False)
    assert log.log_end_offset == end
    if log_file is not None:
        assert os.path.getsize(log_file[0]) == log_file[1]
    assert read_all(log, max_bytes=rng.choice((1, 700, 5000))) == oracle.rows()
    assert log.read(end, 10**6) is None
    oracle.append(log, *random_records(rng))  # asserts the append lands at ``end``
    assert read_all(log) == oracle.rows()
    log.close()


def truncate_file(path: str, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def cut_positions(crashed: Crashed, rng: random.Random, random_count: int) -> list[int]:
    size = crashed.starts[-1]
    positions = {p + d for p in crashed.starts for d in (-1, 0, 1, HEADER_SIZE - 1, HEADER_SIZE)}
    positions |= {rng.randrange(size + 1) for _ in range(random_count)}
    return sorted(p for p in positions if 0 <= p <= size)


# ---------------------------------------------------------------------------------- torn tails
@pytest.mark.parametrize("config, batches, seed", [(MULTI, 50, 11), (SINGLE, 25, 12)], ids=["multi", "single"])
def test_torn_tail_at_any_byte_is_cut_to_the_last_whole_batch(tmp_path, config, batches, seed):
    crashed = Crashed(tmp_path / "crashed", config, seed, batches)
    if config is MULTI:
        assert len(crashed.segment_bases) >= 4
    rng = random.Random(seed)
    positions = cut_positions(crashed, rng, random_count=100)
    assert len(positions) >= 100

    for i, position in enumerate(positions):
        directory = crashed.copy(tmp_path / f"cut-{position}")
        truncate_file(crashed.log_path(directory), position)
        end, kept = crashed.survivors(position)
        whole = crashed.starts[sum(1 for b in kept.batches if b.base >= crashed.segment_bases[-1])]

        assert_recovered(directory, config, end, kept, rng, (crashed.log_path(directory), whole))
        if i % 10 == 0:  # and the result survives a clean reopen
            log = open_log(directory, config)
            assert read_all(log) == kept.rows()
            log.close()
        shutil.rmtree(directory)


# -------------------------------------------------------------------------------- corruption
@pytest.mark.parametrize("config, seed", [(MULTI, 21), (SINGLE, 22)], ids=["multi", "single"])
def test_flipped_byte_in_an_earlier_batch_cuts_the_log_there(tmp_path, config, seed):
    crashed = Crashed(tmp_path / "crashed", config, seed, 30)
    rng = random.Random(seed)
    for k, batch in enumerate(crashed.tail):
        directory = crashed.copy(tmp_path / f"flip-{k}")
        middle = crashed.starts[k] + HEADER_SIZE + (batch.size - HEADER_SIZE) // 2
        with open(crashed.log_path(directory), "r+b") as f:
            f.seek(middle)
            byte = f.read(1)[0]
            f.seek(middle)
            f.write(bytes([byte ^ 0x5A]))

        end, kept = crashed.survivors(crashed.starts[k])
        assert end == batch.base
        assert_recovered(directory, config, end, kept, rng, (crashed.log_path(directory), crashed.starts[k]))
        shutil.rmtree(directory)


@pytest.mark.parametrize("length", [0, -1, 10, 2**31 - 1], ids=["zero", "negative", "too-small", "huge"])
def test_damaged_length_field_cuts_the_log_at_that_batch(tmp_path, length):
    crashed = Crashed(tmp_path / "crashed", SINGLE, 23, 8)
    directory = crashed.copy(tmp_path / "damaged")
    k = len(crashed.tail) // 2
    with open(crashed.log_path(directory), "r+b") as f:
        f.seek(crashed.starts[k] + 8)
        f.write(struct.pack(">i", length))
    end, kept = crashed.survivors(crashed.starts[k])
    assert end == crashed.tail[k].base
    assert_recovered(directory, SINGLE, end, kept, random.Random(0),
                     (crashed.log_path(directory), crashed.starts[k]))


def test_corrupt_earlier_segment_past_the_recovery_point_drops_later_segments(tmp_path):
    crashed = Crashed(tmp_path / "crashed", MULTI, 24, 50)
    directory = crashed.copy(tmp_path / "damaged")
    os.unlink(os.path.join(directory, RECOVERY_POINT_FILE))  # nothing known to be flushed: scan all
    second = crashed.segment_bases[1]
    victim = next(i for i, b in enumerate(crashed.oracle.batches) if b.base > second)
    batch = crashed.oracle.batches[victim]
    position = sum(b.size for b in crashed.oracle.batches if second <= b.base < batch.base)
    with open(crashed.log_path(directory, second), "r+b") as f:
        f.seek(position + batch.size - 1)
        last = f.read(1)[0]
        f.seek(position + batch.size - 1)
        f.write(bytes([last ^ 1]))

    kept = LogOracle()
    kept.batches = crashed.oracle.batches[:victim]
    assert_recovered(directory, MULTI, batch.base, kept, random.Random(0))
    remaining = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    assert remaining == [segment_name(b) + ".log" for b in crashed.segment_bases[:2]]


# ---------------------------------------------------------------------------------- garbage
def append_to_file(path: str, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_short_garbage_tail_is_removed(tmp_path):
    crashed = Crashed(tmp_path / "crashed", SINGLE, 31, 6)
    for n in (1, 17, HEADER_SIZE - 1):
        directory = crashed.copy(tmp_path / f"garbage-{n}")
        append_to_file(crashed.log_path(directory), random.Random(n).randbytes(n))
        _, kept = crashed.survivors(crashed.starts[-1])
        assert_recovered(directory, SINGLE, crashed.oracle.end, kept, random.Random(n),
                         (crashed.log_path(directory), crashed.starts[-1]))


def test_copy_of_an_earlier_batch_at_the_tail_is_removed(tmp_path):
    """A whole, CRC-valid batch whose offsets go backwards is not a continuation of the log."""
    crashed = Crashed(tmp_path / "crashed", SINGLE, 32, 6)
    directory = crashed.copy(tmp_path / "dup")
    with open(crashed.log_path(directory), "rb") as f:
        first = f.read(crashed.starts[1])
    append_to_file(crashed.log_path(directory), first)
    _, kept = crashed.survivors(crashed.starts[-1])
    assert_recovered(directory, SINGLE, crashed.oracle.end, kept, random.Random(0),
                     (crashed.log_path(directory), crashed.starts[-1]))


def test_zero_filled_tail_is_removed(tmp_path):
    """A file system can extend a file with zeros after a crash; that tail is not a batch."""
    crashed = Crashed(tmp_path / "crashed", SINGLE, 33, 6)
    directory = crashed.copy(tmp_path / "zeros")
    append_to_file(crashed.log_path(directory), bytes(4096))
    _, kept = crashed.survivors(crashed.starts[-1])
    assert_recovered(directory, SINGLE, crashed.oracle.end, kept, random.Random(0),
                     (crashed.log_path(directory), crashed.starts[-1]))


def test_random_garbage_tails_are_removed(tmp_path):
    crashed = Crashed(tmp_path / "crashed", SINGLE, 34, 6)
    for seed in range(30):
        rng = random.Random(seed)
        directory = crashed.copy(tmp_path / f"garbage-{seed}")
        append_to_file(crashed.log_path(directory), rng.randbytes(rng.randint(HEADER_SIZE, 3000)))
        _, kept = crashed.survivors(crashed.starts[-1])
        assert_recovered(directory, SINGLE, crashed.oracle.end, kept, rng,
                         (crashed.log_path(directory), crashed.starts[-1]))
        shutil.rmtree(directory)


# ---------------------------------------------------------------------------- index files
def test_recovered_index_files_hold_exactly_the_rebuilt_entries(tmp_path):
    """After an unclean open rebuilds a segment's indexes, later clean opens can trust the files."""
    config = {"segment.bytes": 10**7, "index.interval.bytes": 0}
    rng = random.Random(41)
    log = open_log(tmp_path, config)
    oracle = LogOracle()
    for _ in range(5):
        oracle.append(log, *random_records(rng))
    log.close()  # index files written
    log = open_log(tmp_path, config)
    for _ in range(5):
        oracle.append(log, *random_records(rng))
    log.close_without_flush()

    log = open_log(tmp_path, config, clean_shutdown=False)
    offsets = list(log.active.offset_index.keys)
    log.close()
    times = log.active.time_index

    stem = str(tmp_path / segment_name(0))
    assert os.path.getsize(stem + ".index") == OffsetIndex.ENTRY.size * len(offsets)
    assert OffsetIndex.load(stem + ".index", 0).keys == offsets
    assert os.path.getsize(stem + ".timeindex") == TimeIndex.ENTRY.size * len(times)
    loaded = TimeIndex.load(stem + ".timeindex", 0)
    assert loaded is not None, "the .timeindex file is torn or out of order"
    assert (loaded.keys, loaded.values) == (times.keys, times.values) and len(times) > 0
