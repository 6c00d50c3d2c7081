"""Topic configs have the effect Kafka gives them: retention.ms of segments whose records carry no
timestamp, the timestamp type a produced batch may claim, and CreateTime taken from the records,
not from what their batch header claims."""
from __future__ import annotations

import os
import time

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import InvalidTimestampError
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.records.batch import (_BASE_TIMESTAMP_OFFSET, TIMESTAMP_TYPE_LOG_APPEND, compute_crc, parse_header,
                                  validate_batches)
from broker.storage import retention
from tests.unit._logkit import MAX_BATCH, encode, open_log

DAY = 86_400_000
NO_TIMESTAMP = -1


def _append(log, ts: int) -> None:
    data = encode([b"k"], [b"v"], [ts])
    log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))


def test_retention_ms_ages_a_segment_without_record_times_by_its_file(tmp_path):
    """Kafka's ``LogSegment.largestTimestamp`` falls back to the file's last-modified time when no
    record has a timestamp; taking -1 as the newest record time would delete such a segment at the
    first retention check whatever retention.ms says."""
    now = int(time.time() * 1000)
    log = open_log(tmp_path, {"retention.ms": DAY}, ManualClock(now))
    _append(log, NO_TIMESTAMP)
    log.roll(now)
    _append(log, NO_TIMESTAMP)
    assert log.segments[0].max_timestamp == NO_TIMESTAMP
    assert retention.deletable_segments(log, now + 1000, log.log_end_offset) == []

    two_days_ago = (now - 2 * DAY) / 1000
    os.utime(log.segments[0].log_path, (two_days_ago, two_days_ago))
    assert retention.deletable_segments(log, now + 1000, log.log_end_offset) == [retention.RETENTION_MS]
    assert retention.apply_retention(log, now + 1000, log.log_end_offset).segments == 1
    assert log.log_start_offset == 1


def _claiming_log_append_time(data: bytes) -> bytes:
    out = bytearray(data)
    attributes = int.from_bytes(out[21:23], "big") | TIMESTAMP_TYPE_LOG_APPEND
    out[21:23] = attributes.to_bytes(2, "big")
    out[17:21] = compute_crc(memoryview(out), 0, len(out)).to_bytes(4, "big")
    return bytes(out)


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_a_produced_batch_may_not_claim_log_append_time(tmp_path, timestamp_type):
    """Kafka's ``LogValidator.validateTimestamp`` refuses it: on a CreateTime topic the producer's
    times would be served as the broker's append times."""
    clock = ManualClock(10_000_000)
    log = open_log(tmp_path, {"message.timestamp.type": timestamp_type}, clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    data = arrow_body.encode_batch(arrow_body.record_batch([b"k"], [b"v"], [1234]))
    with pytest.raises(InvalidTimestampError, match="Producer should not set timestamp type to LogAppendTime"):
        partition.append_records(_claiming_log_append_time(data))
    assert log.log_end_offset == 0
    assert partition.append_records(data).first_offset == 0


def _claiming_times(data: bytes, base: int, high: int) -> bytes:
    out = bytearray(data)
    out[_BASE_TIMESTAMP_OFFSET:_BASE_TIMESTAMP_OFFSET + 8] = base.to_bytes(8, "big", signed=True)
    out[35:43] = high.to_bytes(8, "big", signed=True)
    out[17:21] = compute_crc(memoryview(out), 0, len(out)).to_bytes(4, "big")
    return bytes(out)


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_a_create_time_batch_is_stored_with_its_records_times_whatever_its_header_claims(tmp_path, compression):
    """Kafka's ``LogValidator`` sets a produced batch's max timestamp from its records. A header
    claiming 1970 for records of today would have time-based retention delete them at the next
    check and lookups by time skip them; one claiming the far future would keep a segment forever."""
    now = 1_800_000_000_000
    clock = ManualClock(now)
    log = open_log(tmp_path, {"retention.ms": DAY, "message.timestamp.after.max.ms": 2**63 - 1}, clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    times = [now - 5_000, now - 9_000, now - 1_000]
    data = arrow_body.encode_batch(arrow_body.record_batch([b"a", b"b", b"c"], [b"1", b"2", b"3"], times), compression)
    assert partition.append_records(_claiming_times(data, 5, 7)).first_offset == 0
    future = arrow_body.encode_batch(arrow_body.record_batch([b"d"], [b"4"], [now]), compression)
    partition.append_records(_claiming_times(future, now, 2**62))
    stored = bytes(log.read(0, 10**6))
    first, second = parse_header(stored, 0), parse_header(stored, parse_header(stored, 0).size)
    assert (first.base_timestamp, first.max_timestamp) == (now - 9_000, now - 1_000)
    assert (second.base_timestamp, second.max_timestamp) == (now, now)
    assert len(validate_batches(stored, max_batch_bytes=MAX_BATCH, replicated=True)) == 2   # checksums hold
    assert log.offset_for_timestamp(now - 2_000) == (2, now - 1_000)
    assert log.max_timestamp() == (3, now)
    log.roll(now)
    assert retention.deletable_segments(log, now + 1_000, log.log_end_offset) == []
    assert retention.deletable_segments(log, now + DAY + 1, log.log_end_offset) == [retention.RETENTION_MS]
    # a header that tells the truth is stored byte for byte
    honest = arrow_body.encode_batch(arrow_body.record_batch([b"e"], [b"5"], [now + 1]), compression)
    partition.append_records(honest)
    assert bytes(log.read(4, 10**6))[21:] == honest[21:]


def test_min_compaction_lag_holds_back_a_segment_without_record_times_by_its_file(tmp_path):
    """Kafka's ``LogCleanerManager`` reads ``largestTimestamp`` for ``min.compaction.lag.ms`` too: a
    segment of records without timestamps is as old as its file, not infinitely old."""
    from broker.storage import cleaner_plan
    now = int(time.time() * 1000)
    log = open_log(tmp_path, {"cleanup.policy": "compact", "min.compaction.lag.ms": DAY,
                              "min.cleanable.dirty.ratio": 0.01}, ManualClock(now))
    for _ in range(2):
        _append(log, NO_TIMESTAMP)
        log.roll(now)
    _append(log, NO_TIMESTAMP)
    assert cleaner_plan.plan_cleaning(log, log.log_end_offset, now + 1000) is None     # written just now
    two_days_ago = (now - 2 * DAY) / 1000
    for segment in log.segments[:-1]:
        os.utime(segment.log_path, (two_days_ago, two_days_ago))
    assert cleaner_plan.plan_cleaning(log, log.log_end_offset, now + 1000) is not None


def test_an_empty_cleanup_policy_keeps_every_segment_and_compacts_none(tmp_path):
    """Kafka 4.2: "An empty list means infinite retention - no cleanup policies will be applied and
    log segments will be retained indefinitely": neither retention.ms nor retention.bytes deletes,
    the cleaner takes nothing, and DeleteRecords is refused as on a topic without ``delete``."""
    from broker.errors import PolicyViolationError
    from broker.storage import cleaner_plan
    now = int(time.time() * 1000)
    clock = ManualClock(now)
    config = {"cleanup.policy": "", "retention.ms": 1, "retention.bytes": 1, "min.cleanable.dirty.ratio": 0.01}
    log = open_log(tmp_path, config, clock)
    for _ in range(3):
        _append(log, now - 10 * DAY)
        log.roll(now)
    _append(log, now - 10 * DAY)
    assert retention.deletable_segments(log, now + DAY, log.log_end_offset) == []
    assert retention.apply_retention(log, now + DAY, log.log_end_offset).segments == 0
    assert cleaner_plan.plan_cleaning(log, log.log_end_offset, now + DAY) is None
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    with pytest.raises(PolicyViolationError):
        partition.delete_records(2)
    assert log.log_start_offset == 0
