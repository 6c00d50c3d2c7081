"""Topic configs have the effect Kafka gives them: retention.ms of segments whose records carry no
timestamp, and the timestamp type a produced batch may claim."""
from __future__ import annotations

import os
import time

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import InvalidTimestampError
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.records.batch import TIMESTAMP_TYPE_LOG_APPEND, compute_crc, validate_batches
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
