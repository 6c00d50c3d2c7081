"""The segmented log against a list oracle: reads by offset and timestamp, rolls, reopen, truncation."""
from __future__ import annotations

import os
import random
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.clock import ManualClock
from broker.errors import OffsetOutOfRangeError
from broker.records.batch import validate_batches
from broker.storage.log import Log
from broker.storage.offset_index import OffsetIndex
from broker.storage.segment import segment_name
from broker.storage.time_index import TimeIndex
from tests.unit._logkit import (COMPRESSIONS, MAX_BATCH, LogOracle, assert_whole_batches, decoded_rows,
                                encode, open_log, random_records, read_all)

pytestmark = pytest.mark.unit

ORACLE = settings(max_examples=25, deadline=None, database=None)


def build(directory, rng: random.Random, config: dict, batches: int, clock=None):
    """A log of ``batches`` random batches and the oracle of what it must hold."""
    log = open_log(directory, config, clock)
    oracle = LogOracle()
    for _ in range(batches):
        oracle.append(log, *random_records(rng), compression=rng.choice(COMPRESSIONS))
    return log, oracle


def expected_segments(sizes: list[int], segment_bytes: int) -> list[int]:
    """Index of the first batch of each segment when rolling only by size."""
    starts, used = [0], 0
    for i, size in enumerate(sizes):
        if used and used + size > segment_bytes:
            starts.append(i)
            used = 0
        used += size
    return starts


def check_read(log: Log, oracle: LogOracle, offset: int, max_bytes: int) -> bytes:
    """log.read must start with the batch holding ``offset`` and hold oracle records only."""
    data = log.read(offset, max_bytes)
    assert data is not None
    headers = assert_whole_batches(data)
    first = oracle.batches[oracle.batch_index(offset)]
    assert (headers[0].base_offset, headers[0].last_offset) == (first.base, first.last)
    assert len(data) <= max(max_bytes, first.size)
    rows = decoded_rows(data, offset)
    assert rows == oracle.rows(offset)[:len(rows)]
    assert rows[0][0] == offset
    return bytes(data)


def timestamp_probes(oracle: LogOracle, rng: random.Random, count: int = 40) -> list[int]:
    stamps = [row[3] for row in oracle.rows()]
    probes = [min(stamps) - 1, min(stamps), max(stamps), max(stamps) + 1]
    probes += [rng.choice(stamps) + rng.choice((-1, 0, 1)) for _ in range(count)]
    return probes


def fingerprint(log: Log, oracle: LogOracle, probes: list[int]) -> tuple:
    """Everything a client can observe: the batches served for each offset and timestamp answers."""
    reads = tuple(bytes(log.read(b.base, 1)) for b in oracle.batches)
    times = tuple(log.offset_for_timestamp(ts) for ts in probes)
    assert log.max_timestamp() == oracle.max_timestamp()
    return log.log_end_offset, reads, times


# ------------------------------------------------------------------------------- the oracle
@ORACLE
@given(seed=st.integers(0, 2**32 - 1), segment_bytes=st.integers(2000, 20000),
       interval=st.integers(0, 600), batches=st.integers(20, 70))
def test_reads_and_timestamp_lookups_match_the_oracle(seed, segment_bytes, interval, batches):
    rng = random.Random(seed)
    config = {"segment.bytes": segment_bytes, "index.interval.bytes": interval}
    with tempfile.TemporaryDirectory() as d:
        log, oracle = build(d, rng, config, batches)

        assert log.log_end_offset == oracle.end
        starts = expected_segments([b.size for b in oracle.batches], segment_bytes)
        assert [s.base_offset for s in log.segments] == [oracle.batches[i].base for i in starts]

        for offset in [b.base for b in oracle.batches] + [rng.randrange(oracle.end) for _ in range(60)]:
            check_read(log, oracle, offset, rng.choice((1, 200, 1500, 5000)))
        assert read_all(log, max_bytes=rng.randint(1, 3000)) == oracle.rows()
        assert log.read(oracle.end, 1000) is None

        for ts in timestamp_probes(oracle, rng):
            assert log.offset_for_timestamp(ts) == oracle.first_at_or_after(ts), ts
        assert log.max_timestamp() == oracle.max_timestamp()
        log.close()


def test_read_outside_the_log_is_out_of_range(tmp_path):
    log, oracle = build(tmp_path, random.Random(1), {"segment.bytes": 3000}, 10)
    for offset in (-1, oracle.end + 1, oracle.end + 1000):
        with pytest.raises(OffsetOutOfRangeError) as info:
            log.read(offset, 100)
        assert info.value.details == {"log_start_offset": 0, "log_end_offset": oracle.end}
    assert log.read(oracle.end, 100) is None


def test_read_stops_before_max_offset(tmp_path):
    log, oracle = build(tmp_path, random.Random(2), {"segment.bytes": 10**6}, 12)
    limit = oracle.batches[6].base
    data = log.read(0, 10**6, max_offset=limit)
    assert [h.base_offset for h in assert_whole_batches(data)] == [b.base for b in oracle.batches[:6]]
    assert log.read(limit, 10**6, max_offset=limit) is None


def test_a_batch_larger_than_max_bytes_is_returned_whole(tmp_path):
    log = open_log(tmp_path)
    oracle = LogOracle()
    oracle.append(log, [None] * 5, [b"x" * 1000] * 5, [1] * 5)
    oracle.append(log, [None], [b"y"], [2])
    data = log.read(2, 10)
    assert [h.base_offset for h in assert_whole_batches(data)] == [0]
    assert decoded_rows(data, 2) == oracle.rows(2)[:3]


def test_without_min_one_batch_a_first_batch_larger_than_max_bytes_gives_nothing(tmp_path):
    """Kafka's LogSegment.read with minOneMessage false: the big batch is not returned, and neither
    is any later batch in its place (not in this segment, nor in the next one after a roll)."""
    log = open_log(tmp_path)
    oracle = LogOracle()
    oracle.append(log, [None] * 5, [b"x" * 1000] * 5, [1] * 5)
    log.roll()
    oracle.append(log, [None], [b"y"], [2])
    big = oracle.batches[0].size
    assert log.read(2, big - 1, min_one_batch=False) is None
    assert log.read(4, big - 1, min_one_batch=False) is None
    data = log.read(2, big, min_one_batch=False)  # it fits exactly: returned
    assert [h.base_offset for h in assert_whole_batches(data)] == [0]
    small = log.read(5, 10**6, min_one_batch=False)
    assert [h.base_offset for h in assert_whole_batches(small)] == [5]


@settings(max_examples=20, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), interval=st.integers(0, 600))
def test_offset_for_timestamp_with_out_of_order_timestamps(seed, interval):
    """Timestamps jump backwards across and within batches; the first record at or after wins."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        log = open_log(d, {"segment.bytes": 4000, "index.interval.bytes": interval})
        oracle = LogOracle()
        for _ in range(40):
            n = rng.randint(1, 6)
            oracle.append(log, [None] * n, [b"v" * rng.randint(0, 200)] * n,
                          [rng.randint(0, 1000) for _ in range(n)])
        for ts in list(range(-1, 1003, 11)) + [0, 1000, 1001]:
            assert log.offset_for_timestamp(ts) == oracle.first_at_or_after(ts), ts
        log.close()


# ----------------------------------------------------------------------------------- rolling
def test_segments_roll_when_segment_bytes_would_be_exceeded(tmp_path):
    data = encode([None], [b"x" * 100], [1])
    log = open_log(tmp_path, {"segment.bytes": 2 * len(data)})
    for _ in range(7):
        log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    assert [s.size for s in log.segments] == [2 * len(data)] * 3 + [len(data)]
    names = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    assert names == [segment_name(b) + ".log" for b in (0, 2, 4, 6)]


def test_a_batch_larger_than_segment_bytes_gets_its_own_segment(tmp_path):
    small, big = encode([None], [b"s"], [1]), encode([None], [b"b" * 5000], [1])
    log = open_log(tmp_path, {"segment.bytes": 1000})
    for data in (small, big, small):
        log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    assert [(s.base_offset, s.size) for s in log.segments] == [(0, len(small)), (1, len(big)), (2, len(small))]


def test_segments_roll_after_segment_ms(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {"segment.ms": 1000}, clock)
    oracle = LogOracle()
    oracle.append(log, [None], [b"a"], [clock.time_ms()])
    clock.advance(1000)   # exactly segment.ms: no roll yet (LogSegment.shouldRoll compares with >)
    oracle.append(log, [None], [b"b"], [clock.time_ms()])
    assert len(log.segments) == 1
    clock.advance(1)
    oracle.append(log, [None], [b"c"], [clock.time_ms()])
    assert [s.base_offset for s in log.segments] == [0, 2]
    clock.advance(500)
    oracle.append(log, [None], [b"d"], [clock.time_ms()])
    assert [s.base_offset for s in log.segments] == [0, 2]
    clock.advance(501)
    oracle.append(log, [None], [b"e"], [clock.time_ms()])
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert read_all(log) == oracle.rows()


def test_segment_ms_counts_from_the_first_batch_across_a_restart(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {"segment.ms": 1000}, clock)
    oracle = LogOracle()
    oracle.append(log, [None], [b"a"], [clock.time_ms()])
    log.close()
    clock.advance(600)
    log = open_log(tmp_path, {"segment.ms": 1000}, clock)
    clock.advance(401)  # past 1000 ms after the first batch, only 401 after the reopen
    oracle.append(log, [None], [b"b"], [clock.time_ms()])
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert read_all(log) == oracle.rows()


def test_old_record_timestamps_do_not_force_a_roll(tmp_path):
    """Kafka measures segment.ms in record time, so replaying old data does not roll every batch."""
    log = open_log(tmp_path, {"segment.ms": 1000}, ManualClock())
    oracle = LogOracle()
    for ts in (1, 2, 500):
        oracle.append(log, [None], [b"old"], [ts])
    assert [s.base_offset for s in log.segments] == [0]
    oracle.append(log, [None], [b"later"], [1002])
    assert [s.base_offset for s in log.segments] == [0, 3]


def test_an_empty_active_segment_never_rolls(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {"segment.ms": 10}, clock)
    clock.advance(10_000)
    LogOracle().append(log, [None], [b"a"], [1])
    assert [s.base_offset for s in log.segments] == [0]


def test_roll_fsyncs_and_moves_the_recovery_point(tmp_path):
    data = encode([None] * 3, [b"x" * 200] * 3, [1] * 3)
    log = open_log(tmp_path, {"segment.bytes": len(data)})
    for _ in range(3):
        log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    assert log.recovery_point == 6
    assert open(tmp_path / "recovery-point").read() == "6"


def test_flush_messages_moves_the_recovery_point(tmp_path):
    log = open_log(tmp_path, {"flush.messages": 5})
    oracle = LogOracle()
    oracle.append(log, [None] * 3, [b"a"] * 3, [1] * 3)
    assert log.recovery_point == 0
    oracle.append(log, [None] * 2, [b"a"] * 2, [1] * 2)
    assert log.recovery_point == 5


def test_flush_ms_moves_the_recovery_point(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {"flush.ms": 1000}, clock)
    oracle = LogOracle()
    oracle.append(log, [None], [b"a"], [1])
    assert log.recovery_point == 0
    clock.advance(1000)
    oracle.append(log, [None], [b"b"], [2])
    assert log.recovery_point == 2


# --------------------------------------------------------------------------- timestamp types
def test_log_append_time_stamps_the_broker_clock(tmp_path):
    clock = ManualClock(5_000_000)
    log = open_log(tmp_path, {"message.timestamp.type": "LogAppendTime"}, clock)
    data = encode([None] * 3, [b"a", b"b", b"c"], [1, 2, 3])
    info = log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    clock.advance(10)
    data2 = encode([None], [b"d"], [4])
    info2 = log.append(data2, validate_batches(data2, max_batch_bytes=MAX_BATCH))

    assert (info.first_offset, info.last_offset, info.log_append_time) == (0, 2, 5_000_000)
    assert info2.log_append_time == 5_000_010
    assert [row[3] for row in read_all(log)] == [5_000_000] * 3 + [5_000_010]
    assert log.offset_for_timestamp(0) == (0, 5_000_000)
    assert log.offset_for_timestamp(5_000_001) == (3, 5_000_010)
    assert log.offset_for_timestamp(5_000_011) is None


def test_create_time_keeps_producer_timestamps(tmp_path):
    log = open_log(tmp_path)
    info = LogOracle().append(log, [None] * 2, [b"a", b"b"], [7, 3])
    assert info.log_append_time == -1
    assert [row[3] for row in read_all(log)] == [7, 3]


# ----------------------------------------------------------------------------------- reopen
def index_entries(log: Log) -> list:
    return [(s.base_offset, list(s.offset_index.keys), list(s.offset_index.values)) for s in log.segments]


@settings(max_examples=12, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), segment_bytes=st.integers(2000, 12000), interval=st.integers(0, 600))
def test_reopen_clean_unclean_and_without_indexes_serves_identical_reads(seed, segment_bytes, interval):
    rng = random.Random(seed)
    config = {"segment.bytes": segment_bytes, "index.interval.bytes": interval}
    with tempfile.TemporaryDirectory() as d:
        log, oracle = build(d, rng, config, 40)
        probes = timestamp_probes(oracle, rng)
        expected = fingerprint(log, oracle, probes)
        indexes = index_entries(log)
        log.close()

        log = open_log(d, config)  # clean: indexes trusted
        assert fingerprint(log, oracle, probes) == expected
        assert index_entries(log) == indexes
        log.close_without_flush()

        log = open_log(d, config, clean_shutdown=False)  # unclean: active segment rescanned
        assert fingerprint(log, oracle, probes) == expected
        assert index_entries(log) == indexes
        log.close()

        os.unlink(os.path.join(d, "recovery-point"))
        log = open_log(d, config, clean_shutdown=False)  # nothing known flushed: every segment rescanned
        assert fingerprint(log, oracle, probes) == expected
        assert index_entries(log) == indexes
        log.close()
        log = open_log(d, config)  # then trusted again, unsealed older segments included
        assert fingerprint(log, oracle, probes) == expected
        log.close()

        for name in os.listdir(d):
            if name.endswith((".index", ".timeindex")):
                os.unlink(os.path.join(d, name))
        log = open_log(d, config)  # indexes gone: rebuilt from the .log files
        assert fingerprint(log, oracle, probes) == expected
        assert index_entries(log) == indexes
        assert read_all(log) == oracle.rows()
        log.close()
        for base, keys, _ in indexes:
            assert os.path.getsize(os.path.join(d, segment_name(base) + ".index")) == 8 * len(keys)

        log = open_log(d, config)  # appending after all that continues at the end
        oracle.append(log, *random_records(rng))
        assert read_all(log) == oracle.rows()
        log.close()


def test_ascending_timestamps_are_found_after_every_kind_of_reopen(tmp_path):
    """Each segment's newest record sits in its last batches, past its last index entries."""
    config = {"segment.bytes": 3000, "index.interval.bytes": 400}
    rng = random.Random(6)
    log, oracle = open_log(tmp_path, config), LogOracle()
    while oracle.end < 150:
        n = rng.randint(1, 5)
        oracle.append(log, [None] * n, [rng.randbytes(rng.randint(0, 200)) for _ in range(n)],
                      [10 * (oracle.end + i) for i in range(n)])
    assert len(log.segments) >= 5

    def check(log):
        for offset in range(oracle.end):
            assert log.offset_for_timestamp(10 * offset - 5) == (offset, 10 * offset)
        assert log.offset_for_timestamp(10 * oracle.end) is None
        assert log.max_timestamp() == (oracle.end - 1, 10 * (oracle.end - 1))

    check(log)
    log.close_without_flush()
    os.unlink(tmp_path / "recovery-point")
    for clean_shutdown in (False, True, True):  # every segment rescanned, then the files trusted
        log = open_log(tmp_path, config, clean_shutdown=clean_shutdown)
        check(log)
        log.close()


def test_index_files_on_disk_match_the_rebuilt_indexes(tmp_path):
    """A segment whose index files were partly lost rebuilds them; the files must hold just the rebuild."""
    config = {"segment.bytes": 10**6, "index.interval.bytes": 0}
    log, oracle = build(tmp_path, random.Random(3), config, 12)
    log.close()
    stem = str(tmp_path / segment_name(0))
    os.unlink(stem + ".timeindex")  # the .index file survives

    log = open_log(tmp_path, config)
    entries = list(log.active.offset_index.keys)
    log.close()
    times = log.active.time_index

    loaded = OffsetIndex.load(stem + ".index", 0)
    assert loaded is not None, "the .index file was left out of order, so every open rebuilds it"
    assert loaded.keys == entries
    rebuilt = TimeIndex.load(stem + ".timeindex", 0)
    assert rebuilt is not None, "the lost .timeindex file was not written again"
    assert (rebuilt.keys, rebuilt.values) == (times.keys, times.values) and len(times) > 0


def test_reopen_keeps_rolling_by_size(tmp_path):
    data = encode([None], [b"x" * 100], [1])
    config = {"segment.bytes": 2 * len(data)}
    log = open_log(tmp_path, config)
    for _ in range(3):
        log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    log.close()
    log = open_log(tmp_path, config)
    log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    assert [s.base_offset for s in log.segments] == [0, 2, 4]


# -------------------------------------------------------------------------------- truncation
@settings(max_examples=25, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), interval=st.integers(0, 600), cut=st.floats(0, 1))
def test_truncate_to_a_batch_boundary_removes_the_tail(seed, interval, cut):
    rng = random.Random(seed)
    config = {"segment.bytes": 4000, "index.interval.bytes": interval}
    with tempfile.TemporaryDirectory() as d:
        log, oracle = build(d, rng, config, 30)
        target = oracle.batches[min(int(cut * len(oracle.batches)), len(oracle.batches) - 1)].base

        log.truncate_to(target)
        oracle.truncate(target)

        assert log.log_end_offset == target
        assert all(s.base_offset < target for s in log.segments[1:])
        assert read_all(log) == oracle.rows()
        assert log.read(target, 100) is None
        with pytest.raises(OffsetOutOfRangeError):
            log.read(target + 1, 100)
        probes = [rng.randint(1_000_000, 1_100_001) for _ in range(20)]
        for ts in probes:
            assert log.offset_for_timestamp(ts) == oracle.first_at_or_after(ts)
        assert log.max_timestamp() == oracle.max_timestamp()

        for i in range(4):  # appends continue at the cut; newer timestamps must be found
            oracle.append(log, *random_records(rng, base_ts=2_000_000 + i * 1000, ts_spread=500))
        probes += [1_999_999, 2_000_000, 2_001_000, 2_002_200, 2_003_000, 2_003_501]
        assert read_all(log) == oracle.rows()
        for ts in probes:
            assert log.offset_for_timestamp(ts) == oracle.first_at_or_after(ts), ts
        assert log.max_timestamp() == oracle.max_timestamp()
        log.close()

        log = open_log(d, config)
        assert read_all(log) == oracle.rows()
        for ts in probes:
            assert log.offset_for_timestamp(ts) == oracle.first_at_or_after(ts)
        assert log.max_timestamp() == oracle.max_timestamp()
        log.close_without_flush()
        log = open_log(d, config, clean_shutdown=False)
        assert read_all(log) == oracle.rows()
        log.close()


def test_truncate_to_inside_a_batch_removes_every_record_at_or_after_it(tmp_path):
    """Log.truncate_to promises to remove every record at or after the offset; batches are never
    split, so the batch holding it must go (Kafka's LogSegment.truncateTo does the same)."""
    log, oracle = open_log(tmp_path), LogOracle()
    oracle.append(log, [None] * 5, [b"a"] * 5, [1] * 5)   # offsets 0-4
    oracle.append(log, [None] * 5, [b"b"] * 5, [2] * 5)   # offsets 5-9
    log.truncate_to(7)
    assert log.log_end_offset <= 7
    assert all(offset < 7 for offset, *_ in read_all(log))


def test_truncate_to_the_end_or_beyond_is_a_no_op(tmp_path):
    log, oracle = build(tmp_path, random.Random(4), {"segment.bytes": 3000}, 10)
    log.truncate_to(oracle.end)
    log.truncate_to(oracle.end + 100)
    assert read_all(log) == oracle.rows()


def test_truncate_to_zero_empties_the_log(tmp_path):
    log, oracle = build(tmp_path, random.Random(5), {"segment.bytes": 3000}, 10)
    log.truncate_to(0)
    assert log.log_end_offset == 0 and len(log.segments) == 1
    assert log.read(0, 100) is None
    assert log.offset_for_timestamp(0) is None
    assert LogOracle().append(log, [None], [b"again"], [1]).first_offset == 0


# ------------------------------------------------------------------------------- log start offset
@settings(max_examples=20, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), interval=st.integers(0, 600), segment_bytes=st.integers(1500, 6000))
def test_offset_for_timestamp_skips_only_the_records_below_the_log_start(seed, interval, segment_bytes):
    """DeleteRecords moves the log start inside a batch: the first record at or past it with a
    late enough timestamp is the answer, even when earlier records of its batch or segment match."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        log = open_log(d, {"segment.bytes": segment_bytes, "index.interval.bytes": interval})
        oracle = LogOracle()
        for _ in range(30):
            n = rng.randint(1, 6)
            oracle.append(log, [None] * n, [b"v" * rng.randint(0, 300)] * n,
                          [rng.randint(0, 1000) for _ in range(n)])
        for start in sorted(rng.sample(range(oracle.end), 4)):
            log.advance_log_start_offset(start)
            for ts in list(range(-1, 1003, 37)) + [0, 1000, 1001]:
                assert log.offset_for_timestamp(ts) == oracle.first_at_or_after(ts, start), (start, ts)
        log.close()


def test_a_log_start_inside_the_only_batch_still_finds_the_records_after_it(tmp_path):
    log = open_log(tmp_path)
    oracle = LogOracle()
    oracle.append(log, [None] * 6, [b"v"] * 6, [10, 20, 30, 40, 50, 60])
    log.advance_log_start_offset(3)
    assert [log.offset_for_timestamp(ts) for ts in (0, 10, 40, 41, 60, 61)] == \
        [(3, 40), (3, 40), (3, 40), (4, 50), (5, 60), None]


def test_max_timestamp_names_the_first_record_holding_it(tmp_path):
    """As Kafka's ``offsetOfMaxTimestamp``: not the batch's last offset."""
    log = open_log(tmp_path)
    oracle = LogOracle()
    oracle.append(log, [None] * 3, [b"v"] * 3, [10, 30, 20])
    oracle.append(log, [None] * 3, [b"v"] * 3, [15, 30, 30])
    assert log.max_timestamp() == (1, 30) == oracle.max_timestamp()
