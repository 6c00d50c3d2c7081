"""Recovery as Kafka's ``LogLoader`` does it, for damage outside the unflushed tail: a fsynced segment
whose indexes do not match its file is repaired alone (``recoverSegment``), never taking the later
segments with it; index files left without their ``.log`` are deleted (``loadSegmentFiles``)."""
from __future__ import annotations

import os
import random

import pytest

from broker.records.batch import iter_headers
from broker.storage.log_loader import RECOVERY_POINT_FILE
from broker.storage.segment import segment_name
from tests.unit._logkit import LogOracle, open_log, random_records, read_all

pytestmark = pytest.mark.unit

MULTI = {"segment.bytes": 6000, "index.interval.bytes": 300}


def fill(directory, config: dict, batches: int, seed: int):
    """(oracle, segment base offsets, the open log) after ``batches`` random batches."""
    rng = random.Random(seed)
    log = open_log(directory, config)
    oracle = LogOracle()
    for i in range(batches):
        keys, values, _ = random_records(rng)
        oracle.append(log, keys, values, [1_000_000 + 1000 * i + j for j in range(len(values))])
    return oracle, [s.base_offset for s in log.segments], log


@pytest.mark.parametrize("clean_shutdown", [True, False], ids=["clean", "kill9"])
def test_garbage_after_a_fsynced_segment_is_cut_and_the_later_segments_stay(tmp_path, clean_shutdown):
    """100 stray bytes at the end of a rolled (fsynced) segment: that segment is cut back to its
    last batch and every later segment stays. Kafka never drops fsynced segments for it (a repaired
    segment below the recovery point is cut alone); dropping them lost every acknowledged record
    after the damage."""
    oracle, bases, log = fill(tmp_path, MULTI, 60, seed=3)
    log.close() if clean_shutdown else log.close_without_flush()
    victim = os.path.join(tmp_path, segment_name(bases[1]) + ".log")
    size = os.path.getsize(victim)
    with open(victim, "ab") as f:
        f.write(b"\x07" * 100)
    assert int(open(tmp_path / RECOVERY_POINT_FILE).read()) > bases[2]  # the victim was fsynced

    log = open_log(tmp_path, MULTI, clean_shutdown=clean_shutdown)
    assert os.path.getsize(victim) == size
    assert [s.base_offset for s in log.segments] == bases
    assert log.log_end_offset == oracle.end
    assert read_all(log, max_bytes=700) == oracle.rows()
    ts = oracle.batches[-3].timestamps[0]
    assert log.offset_for_timestamp(ts) == oracle.first_at_or_after(ts)
    oracle.append(log, [b"k"], [b"after"], [2_000_000])
    assert read_all(log) == oracle.rows()


def test_a_corrupt_batch_in_a_fsynced_segment_with_a_lost_index_keeps_the_later_segments(tmp_path):
    """A flipped byte in a rolled segment's last batch and its ``.index`` gone: the segment is
    rebuilt and cut at that batch (Kafka's ``recoverSegment``); the segments after it are kept, the
    gap they leave is skipped by readers as a compacted log's gaps are."""
    oracle, bases, log = fill(tmp_path, MULTI, 60, seed=4)
    log.close()
    second = os.path.join(tmp_path, segment_name(bases[1]) + ".log")
    with open(second, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)[0]
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last ^ 1]))
    os.unlink(os.path.join(tmp_path, segment_name(bases[1]) + ".index"))
    lost = next(b for b in reversed(oracle.batches) if b.base < bases[2])

    log = open_log(tmp_path, MULTI, clean_shutdown=True)
    assert [s.base_offset for s in log.segments] == bases
    assert log.log_end_offset == oracle.end
    assert read_all(log) == [row for row in oracle.rows() if not lost.base <= row[0] <= lost.last]


def test_orphaned_index_files_are_deleted_before_a_new_segment_takes_their_base(tmp_path):
    """A crash inside ``LogSegment.delete`` (the ``.log`` is unlinked first) leaves ``B.index`` and
    ``B.timeindex``. Once the log grows to B again the new segment must not append to them: after a
    clean restart their stale positions pointed into the middle of a batch (CorruptRecordError)."""
    config = {"segment.bytes": 10**6, "index.interval.bytes": 100}
    log = open_log(tmp_path, config)
    oracle = LogOracle()

    def add(count: int, size: int, per_batch: int = 1) -> None:
        for i in range(count):
            oracle.append(log, [None] * per_batch, [bytes([i]) * size] * per_batch,
                          [1000 + oracle.end] * per_batch)

    add(5, 60)
    base = log.roll().base_offset
    add(2, 60)  # one index entry: (1, a small position)
    log.flush()
    stale = {ext: (tmp_path / (segment_name(base) + ext)).read_bytes() for ext in (".index", ".timeindex")}
    log.truncate_to(base)
    oracle.truncate(base)
    for ext, data in stale.items():  # the crash: the segment's .log went, its indexes did not
        (tmp_path / (segment_name(base) + ext)).write_bytes(data)
    log.close()

    log = open_log(tmp_path, config)
    assert not any(n.startswith(segment_name(base)) for n in os.listdir(tmp_path))
    assert log.roll().base_offset == base
    add(1, 400, per_batch=3)  # the new first index entry is (3, ...): stale (1, ...) sorted before it
    add(4, 60)
    log.close()

    log = open_log(tmp_path, config)
    for offset in range(base, oracle.end):
        header = next(iter_headers(log.read(offset, 10**6)))[1]
        assert header.base_offset <= offset <= header.last_offset
    assert read_all(log) == oracle.rows()
