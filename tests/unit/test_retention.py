"""Retention and DeleteRecords on a real Log: which segments go, and the log start offset that follows."""
from __future__ import annotations

import os

import pytest

from broker.clock import ManualClock
from broker.errors import CorruptRecordError, OffsetOutOfRangeError
from broker.records.batch import validate_batches
from broker.storage import retention
from broker.storage.log_loader import LOG_START_FILE
from tests.unit._logkit import LogOracle, encode, open_log, read_all

pytestmark = pytest.mark.unit

HOUR = 3_600_000


def build(tmp_path, config: dict, batches: int = 20, clock=None, step_ms: int = HOUR):
    """A log whose segments hold 2 batches each, one batch per ``step_ms`` of record time."""
    clock = clock or ManualClock()
    log = open_log(tmp_path, {"segment.bytes": 1500, **config}, clock)
    oracle = LogOracle()
    for i in range(batches):
        oracle.append(log, [b"k%d" % i] * 3, [b"x" * 200] * 3, [clock.time_ms()] * 3)
        clock.advance(step_ms)
    assert len(log.segments) >= batches // 2
    return clock, log, oracle


def persisted_start(tmp_path) -> int:
    with open(os.path.join(tmp_path, LOG_START_FILE)) as f:
        return int(f.read())


def test_segments_older_than_retention_ms_go_and_the_log_start_follows(tmp_path):
    clock, log, oracle = build(tmp_path, {"retention.ms": 5 * HOUR})
    newest_kept = clock.time_ms() - 5 * HOUR
    result = retention.apply_retention(log, clock.time_ms(), log.log_end_offset)
    assert result.segments > 0 and set(result.reasons) == {retention.RETENTION_MS}
    assert all(s.max_timestamp >= newest_kept for s in log.segments[:-1])
    assert log.log_start_offset == log.segments[0].base_offset == persisted_start(tmp_path)
    assert read_all(log) == oracle.rows(log.log_start_offset)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1000)
    log.close()
    assert open_log(tmp_path, {"segment.bytes": 1500}).log_start_offset == result.log_start_offset


@pytest.mark.parametrize("config", [{"retention.ms": HOUR}, {"retention.bytes": 0}])
def test_an_expired_active_segment_goes_once_the_high_watermark_reached_the_log_end(tmp_path, config):
    """As Kafka: an idle partition's last records expire too; an empty segment is rolled at the
    log end first, and appends go on from there."""
    clock, log, oracle = build(tmp_path, config)
    clock.advance(10 * HOUR)
    end = log.log_end_offset
    retention.apply_retention(log, clock.time_ms(), end - 1)
    assert log.active.size > 0 and log.log_start_offset == log.active.base_offset < end
    result = retention.apply_retention(log, clock.time_ms(), end)
    assert result.segments == 1 and result.log_start_offset == end == persisted_start(tmp_path)
    assert [(s.base_offset, s.size) for s in log.segments] == [(end, 0)]
    assert retention.apply_retention(log, clock.time_ms(), end).segments == 0  # an empty one stays
    assert read_all(log) == [] and log.offset_for_timestamp(0) is None and log.max_timestamp() is None
    oracle.append(log, [b"k"], [b"new"], [clock.time_ms()])
    assert read_all(log) == oracle.rows(end)
    log.close()
    reopened = open_log(tmp_path, {"segment.bytes": 1500})
    assert (reopened.log_start_offset, reopened.log_end_offset) == (end, end + 1)


def test_retention_bytes_removes_the_oldest_segments_while_the_partition_is_bigger(tmp_path):
    _, log, oracle = build(tmp_path, {"retention.bytes": 5000})
    result = retention.apply_retention(log, 0, log.log_end_offset)
    assert set(result.reasons) == {retention.RETENTION_BYTES}
    # As Kafka: a segment goes only if the partition stays at least retention.bytes without it.
    assert log.size_bytes - log.segments[0].size < 5000 <= log.size_bytes
    assert read_all(log) == oracle.rows(log.log_start_offset)


def test_nothing_at_or_past_the_high_watermark_is_removed(tmp_path):
    clock, log, _ = build(tmp_path, {"retention.ms": 0})
    hw = log.segments[3].base_offset + 1
    retention.apply_retention(log, clock.time_ms(), hw)
    assert log.segments[0].base_offset <= hw - 1 < log.segments[1].base_offset
    assert log.log_start_offset == log.segments[0].base_offset


def test_compact_only_topics_keep_old_segments_but_not_those_below_the_log_start(tmp_path):
    clock, log, oracle = build(tmp_path, {"retention.ms": 0, "cleanup.policy": "compact"})
    count = len(log.segments)
    assert retention.apply_retention(log, clock.time_ms(), log.log_end_offset).segments == 0
    target = log.segments[2].base_offset + 1
    assert retention.delete_records_before(log, target, log.log_end_offset) == target
    assert len(log.segments) == count - 2 and log.log_start_offset == target
    assert read_all(log) == oracle.rows(target)


def test_delete_records_moves_the_log_start_inside_a_batch_and_refuses_past_the_high_watermark(tmp_path):
    _, log, oracle = build(tmp_path, {})
    hw = log.log_end_offset - 3
    with pytest.raises(OffsetOutOfRangeError):
        retention.delete_records_before(log, hw + 1, hw)
    assert retention.delete_records_before(log, 7, hw) == 7 == persisted_start(tmp_path)
    assert read_all(log)[0][0] == 7 and read_all(log) == oracle.rows(7)
    assert retention.delete_records_before(log, 2, hw) == 7  # never moves back
    assert retention.delete_records_before(log, hw, hw) == hw
    assert len(log.segments) <= 2


def test_a_follower_restarts_empty_at_the_leaders_log_start(tmp_path):
    clock, log, _ = build(tmp_path, {}, batches=4)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (1000, 1000, 1)
    data = encode([b"k"], [b"v"], [clock.time_ms()])
    with pytest.raises(CorruptRecordError):  # below the log end: the follower diverged
        log.append_as_follower(bytes(data), validate_batches(data, max_batch_bytes=10**6))
    copied = bytearray(data)
    copied[0:8] = (1005).to_bytes(8, "big")  # a compacted leader's batch after a gap
    log.append_as_follower(bytes(copied), validate_batches(copied, max_batch_bytes=10**6))
    assert [r[0] for r in read_all(log)] == [1005]
    log.close()
    reopened = open_log(tmp_path, {"segment.bytes": 1500})
    assert (reopened.log_start_offset, reopened.log_end_offset) == (1000, 1006)
