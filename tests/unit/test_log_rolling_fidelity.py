"""Log management rules checked against Kafka's: truncation and the log start offset, what
ListOffsets answers while a new leader's high watermark lags, the age a cleaned segment keeps, and
the broker's retention and roll times in hours or minutes (UnifiedLog, ReplicaManager, LogCleaner,
KafkaConfig)."""
from __future__ import annotations

import os
import time

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import OffsetNotAvailableError
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.records.batch import validate_batches
from broker.storage import cleaner, retention
from broker.storage.log import Log
from tests.unit._logkit import MAX_BATCH, LogOracle, encode, open_log, read_all

pytestmark = pytest.mark.unit


def _log_of_ten(tmp_path):
    """Ten one-record batches, one segment each."""
    clock = ManualClock()
    log = open_log(tmp_path, {"segment.bytes": 1500}, clock)
    oracle = LogOracle()
    for i in range(10):
        oracle.append(log, [b"k"], [b"x%d" % i + b"x" * 200], [1000 + i])
    assert len(log.segments) == 10
    return log, oracle


def _append_as_follower(log: Log, base_offset: int, values: list[bytes]) -> None:
    data = bytearray(encode([b"k"] * len(values), values, [2000] * len(values)))
    data[:8] = base_offset.to_bytes(8, "big")
    log.append_as_follower(bytes(data), validate_batches(bytes(data), max_batch_bytes=1 << 20))


def test_truncating_below_the_log_start_brings_the_log_start_down(tmp_path):
    """Kafka's UnifiedLog.truncateTo: ``logStartOffset = min(targetOffset, logStartOffset)``. A
    follower whose log start a DeleteRecords moved to 8, cut back to 5 after an unclean election,
    must be able to serve the new leader's records 5.. it copies next, here and after a restart."""
    log, _ = _log_of_ten(tmp_path)
    log.advance_log_start_offset(8)
    log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)
    _append_as_follower(log, 5, [b"new5", b"new6", b"new7"])
    assert [row[2] for row in read_all(log)] == [b"new5", b"new6", b"new7"]
    log.close()
    reopened = open_log(tmp_path, {"segment.bytes": 1500})
    assert (reopened.log_start_offset, reopened.log_end_offset) == (5, 8)
    assert [row[2] for row in read_all(reopened)] == [b"new5", b"new6", b"new7"]


def test_truncating_inside_a_batch_below_the_log_start_keeps_the_start_at_the_end(tmp_path):
    """A batch is never split: the cut may land below ``offset``; the start follows it down."""
    clock = ManualClock()
    log = open_log(tmp_path, {}, clock)
    LogOracle().append(log, [b"k"] * 10, [b"v"] * 10, [1] * 10)   # one batch 0-9
    log.advance_log_start_offset(8)
    log.truncate_to(9)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)


def test_truncating_below_the_first_segment_restarts_the_log_at_that_offset(tmp_path):
    """Kafka's UnifiedLog.truncateTo calls truncateFullyAndStartAt(targetOffset) when the first
    segment starts above it: the log end must be the offset asked for, or the follower would
    fetch from its old first segment on and never copy the leader's records in between."""
    log, _ = _log_of_ten(tmp_path)
    retention.delete_records_before(log, 6, log.log_end_offset)
    assert log.segments[0].base_offset == 6
    log.truncate_to(3)
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert [s.base_offset for s in log.segments] == [3]
    _append_as_follower(log, 3, [b"new3", b"new4"])
    assert [(row[0], row[2]) for row in read_all(log)] == [(3, b"new3"), (4, b"new4")]
    log.close()
    reopened = open_log(tmp_path, {"segment.bytes": 1500})
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 5)


def _lagging_leader(tmp_path) -> Partition:
    """A leader of epoch 4 that started at offset 3 while its high watermark is still 0."""
    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), ManualClock())
    p = Partition("t", 0, "id", log, AppendNotifier(), node_id=1)
    p.make_leader(3, 5, [1, 2], [1, 2])
    p.append_records(arrow_body.encode_batch(arrow_body.record_batch([None] * 3, [b"a", b"b", b"c"],
                                                                     [10, 20, 30])))
    p.make_leader(4, 6, [1, 2], [1, 2])
    assert p.offsets()[1:] == (0, 3)
    return p


@pytest.mark.parametrize("lookup", [lambda p: p.offset_for_timestamp(20), lambda p: p.max_timestamp(),
                                    lambda p: p.offset_for_timestamp(99)],
                         ids=["past-the-hw", "max-timestamp", "none-at-all"])
def test_a_lookup_by_time_while_the_high_watermark_lags_the_epoch_start_is_retriable(tmp_path, lookup):
    """Kafka's ReplicaManager.fetchOffset: a time (or MAX_TIMESTAMP) answer at or past the last
    fetchable offset, or none at all, throws the partition's OFFSET_NOT_AVAILABLE while the high
    watermark is behind the leader epoch's start, so a consumer retries instead of taking -1."""
    p = _lagging_leader(tmp_path)
    try:
        with pytest.raises(OffsetNotAvailableError, match="behind the start offset of leader epoch 4"):
            lookup(p)
        p.read_for_follower(2, 3, 1 << 20, 4)            # the high watermark reaches the epoch start
        assert p.offset_for_timestamp(20) == (1, 20)
        assert p.max_timestamp() == (2, 30)
        assert p.offset_for_timestamp(99) is None
    finally:
        p.close()


@pytest.mark.parametrize("broker, retention_ms, segment_ms", [
    ({}, 604_800_000, 604_800_000),
    ({"log.retention.hours": "24"}, 86_400_000, 604_800_000),
    ({"log.retention.hours": "24", "log.retention.minutes": "30"}, 1_800_000, 604_800_000),
    ({"log.retention.minutes": "30", "log.retention.ms": "5000"}, 5000, 604_800_000),
    ({"log.retention.hours": "-5"}, -1, 604_800_000),
    ({"log.roll.hours": "2"}, 604_800_000, 7_200_000),
    ({"log.roll.hours": "2", "log.roll.ms": "60000"}, 604_800_000, 60_000),
])
def test_broker_retention_and_roll_times_in_hours_and_minutes_follow_kafkas_precedence(
        broker, retention_ms, segment_ms):
    """KafkaConfig.logRetentionTimeMillis (ms, then minutes, then hours; negative is -1) and
    logRollTimeMillis (ms, then hours): a Kafka server.properties' log.retention.hours is honoured."""
    from broker.config import BROKER_CONFIG, topic_defaults
    defaults = topic_defaults(BROKER_CONFIG.parse(broker))
    assert (defaults["retention.ms"], defaults["segment.ms"]) == (retention_ms, segment_ms)
    topic = TOPIC_CONFIG.parse({}, defaults=defaults)
    assert (topic["retention.ms"], topic["segment.ms"]) == (retention_ms, segment_ms)
    assert TOPIC_CONFIG.parse({"retention.ms": "1"}, defaults=defaults)["retention.ms"] == 1


def test_a_list_of_log_dirs_is_refused_rather_than_taken_for_one_directory():
    """Kafka's log.dirs is a comma-separated list; one path made of the whole list would hide the
    broker's data in a directory nobody configured."""
    from broker.config import BROKER_CONFIG
    from broker.errors import InvalidConfigError
    with pytest.raises(InvalidConfigError, match="log.dirs.*must be one directory"):
        BROKER_CONFIG.parse({"log.dirs": "/data/kafka-1,/data/kafka-2"})
    assert BROKER_CONFIG.parse({"log.dirs": "/data/kafka-1"})["log.dirs"] == "/data/kafka-1"


def test_a_cleaned_segment_keeps_the_age_of_the_segments_it_replaced(tmp_path):
    """Kafka's Cleaner.cleanSegments gives the cleaned segment the last-modified time of the newest
    one it replaces: for records without timestamps that time is the segment's age
    (LogSegment.largestTimestamp), and a clean must not restart retention.ms for them."""
    day = 86_400_000
    now = int(time.time() * 1000)
    log = open_log(tmp_path, {"cleanup.policy": "compact,delete", "retention.ms": day,
                              "min.cleanable.dirty.ratio": 0.0}, ManualClock(now))
    for i in range(6):
        data = encode([b"k%d" % (i % 2)], [b"v%d" % i], [-1])
        log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    log.roll(now)
    data = encode([b"x"], [b"y"], [-1])
    log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))
    two_days_ago = (now - 2 * day) / 1000
    os.utime(log.segments[0].log_path, (two_days_ago, two_days_ago))

    assert cleaner.clean(log, log.log_end_offset, now).swapped
    assert [row[2] for row in read_all(log)] == [b"v4", b"v5", b"y"]       # compacted: a new file
    assert now - log.segments[0].largest_timestamp() >= 2 * day - 1000
    assert retention.deletable_segments(log, now, log.log_end_offset) == [retention.RETENTION_MS]


@pytest.mark.parametrize("first_empty", [False, True], ids=["after-records", "into-an-empty-log"])
def test_a_follower_rolls_at_the_first_offset_of_a_batch_past_a_huge_compaction_gap(tmp_path, first_empty):
    """Kafka's UnifiedLog.maybeRoll rolls to the batch's first offset (LocalLog.roll takes the larger
    of it and the log end): a segment based at the log end cannot index a batch more than 2^32
    offsets away, and its index could then not even be written."""
    log = open_log(tmp_path, {"index.interval.bytes": 0}, ManualClock())
    if not first_empty:
        _append_as_follower(log, 0, [b"a", b"b"])
    far = 2**33 + 100
    _append_as_follower(log, far, [b"far"])
    _append_as_follower(log, far + 1, [b"next"])
    assert log.active.base_offset == far and log.log_end_offset == far + 2
    log.flush()
    expected = ([] if first_empty else [(0, b"a"), (1, b"b")]) + [(far, b"far"), (far + 1, b"next")]
    assert [(row[0], row[2]) for row in read_all(log)] == expected
    log.close()
    reopened = open_log(tmp_path, {"index.interval.bytes": 0}, clean_shutdown=False)
    assert [(row[0], row[2]) for row in read_all(reopened)] == expected
    assert reopened.log_end_offset == far + 2
