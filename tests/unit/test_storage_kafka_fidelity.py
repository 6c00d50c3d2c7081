"""Storage behaviours checked against Kafka's own unit tests of the same parts (LogCleanerTest,
LogCleanerManagerTest, LogConfig, ProducerStateManagerTest), on real logs in temporary directories."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import InvalidTxnStateError
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import stamp_producer, validate_batches
from broker.storage import cleaner, cleaner_plan
from broker.storage.cleaner_checkpoint import CleanerCheckpoint
from broker.storage.log import Log
from broker.storage.producer_state import ProducerStateManager
from tests.unit._logkit import MAX_BATCH, LogOracle, open_log, read_all
from tests.unit.test_cleaner_transactions import History

pytestmark = pytest.mark.unit

DAY = 86_400_000
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY}


def append(log, keys, values, ts):
    data = encode_batch(record_batch(keys, values, [ts] * len(keys)))
    return log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))


def values_by_offset(log) -> dict[int, bytes | None]:
    return {offset: value for offset, _, value, _ in read_all(log, max_bytes=1 << 20)}


# ------------------------------------------------------------------------ truncation inside an indexed batch
@pytest.mark.parametrize("reopen", [None, True, False])
def test_truncating_inside_an_indexed_batch_ends_the_log_before_that_batch(tmp_path, reopen):
    """LogSegmentTest.testTruncate: the log ends at the cut batch's base offset, and the next append
    continues there, also when the cut batch has an offset index entry (index.interval.bytes 0)."""
    clock = ManualClock()
    config = {"index.interval.bytes": 0}
    log = open_log(tmp_path, config, clock)
    oracle = LogOracle()
    oracle.append(log, [None] * 5, [b"a"] * 5, [1] * 5)   # offsets 0-4
    oracle.append(log, [None] * 5, [b"b"] * 5, [2] * 5)   # offsets 5-9, indexed
    log.truncate_to(7)
    oracle.truncate(5)
    assert log.log_end_offset == 5
    if reopen is not None:
        log.close() if reopen else log.close_without_flush()
        log = open_log(tmp_path, config, clock, clean_shutdown=reopen)
    oracle.append(log, [None] * 2, [b"c"] * 2, [3] * 2)   # offsets 5-6
    assert read_all(log) == oracle.rows()
    assert log.offset_for_timestamp(3) == (5, 3)


# ------------------------------------------------------------------------ max.compaction.lag.ms rolls
def test_a_compacted_log_rolls_its_active_segment_at_max_compaction_lag_ms(tmp_path):
    """Kafka's ``LogConfig.maxSegmentMs``: a compacted log rolls at min(segment.ms,
    max.compaction.lag.ms), so a quiet topic's superseded value is compacted within the lag
    (LogCleanerIntegrationTest.testMaxLogCompactionLag), not kept in the active segment for a week."""
    clock = ManualClock()
    log = open_log(tmp_path, {**COMPACT, "min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000}, clock)
    t0 = clock.time_ms()
    append(log, [b"k"], [b"old"], t0)
    append(log, [b"k"], [b"new"], t0 + 10)
    clock.advance(60_001)
    append(log, [b"other"], [b"x"], clock.time_ms())   # more than the lag after the segment's first batch
    assert [s.base_offset for s in log.segments] == [0, 2]
    result = cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert result is not None and result.swapped
    assert values_by_offset(log) == {1: b"new", 2: b"x"}


@pytest.mark.parametrize("config", [
    {"cleanup.policy": "delete", "segment.ms": 120_000, "max.compaction.lag.ms": 60_000},  # not compacted
    {"cleanup.policy": "compact", "segment.ms": 120_000, "max.compaction.lag.ms": DAY},    # segment.ms is smaller
])
def test_otherwise_segment_ms_alone_decides_the_roll(tmp_path, config):
    """guard (already matched): the lag shortens the roll only for compacted logs, and only when smaller."""
    clock = ManualClock()
    log = open_log(tmp_path, config, clock)
    append(log, [b"k"], [b"a"], clock.time_ms())
    clock.advance(120_000)
    append(log, [b"k"], [b"b"], clock.time_ms())
    assert len(log.segments) == 1
    clock.advance(1)
    append(log, [b"k"], [b"c"], clock.time_ms())
    assert [s.base_offset for s in log.segments] == [0, 2]


# ------------------------------------------------------------------------ cleaner checkpoint outside the log
def test_a_cleaner_checkpoint_past_the_log_end_is_reset_to_the_log_start(tmp_path):
    """LogCleanerManagerTest.testDirtyOffsetResetIfLargerThanEndOffset: the whole log is dirty again."""
    clock = ManualClock()
    log = open_log(tmp_path, COMPACT, clock)
    for i in range(4):
        append(log, [b"k"], [b"v%d" % i], clock.time_ms())
        log.roll()
    log.set_cleaner_checkpoint(CleanerCheckpoint(200))
    result = cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert result is not None and result.swapped
    assert values_by_offset(log) == {3: b"v3"}
    assert log.cleaner_checkpoint.first_dirty_offset == 4


def test_a_cleaner_checkpoint_below_the_log_start_starts_at_the_log_start(tmp_path):
    """guard (already matched): LogCleanerManagerTest.testDirtyOffsetResetIfSmallerThanStartOffset."""
    clock = ManualClock()
    log = open_log(tmp_path, COMPACT, clock)
    for i in range(4):
        append(log, [b"k%d" % i], [b"v"], clock.time_ms())
        log.roll()
    log.advance_log_start_offset(2)
    plan = cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms())
    assert plan is not None and plan.dirty_ratio == pytest.approx(2 / 4)
    plan.close()


# ------------------------------------------------------------------------ a clean racing a truncation
def test_a_clean_planned_before_a_truncation_is_not_swapped_over_rewritten_records(tmp_path):
    """A follower cutting into a sealed segment mid-clean, then refilling it to the same size, must
    not get the planned (divergent) records back (LogCleanerTest's concurrent-change cases)."""
    clock = ManualClock()
    log = open_log(tmp_path, COMPACT, clock)
    now = clock.time_ms()
    append(log, [b"a"], [b"v1"], now)
    append(log, [b"a"], [b"v2"], now)
    log.roll()
    append(log, [b"b"], [b"w"], now)
    log.roll()
    plan = cleaner_plan.plan_cleaning(log, 2, now)            # the first segment only
    cleaned = cleaner.build_cleaned(log, plan, now)
    log.truncate_to(1)                                         # the leader's offset 1 differs
    append(log, [b"a"], [b"vX"], now)                          # same size as the record it replaces
    log.roll()
    assert log.segments[0].size == plan.sources[0].size
    assert not cleaner.swap_cleaned(log, cleaned)
    assert values_by_offset(log) == {0: b"v1", 1: b"vX"}


# ------------------------------------------------------------------------ producer state
def _batch(pid: int, epoch: int, seq: int, transactional: bool = False, keys=(b"k",)):
    data = encode_batch(record_batch(list(keys), [b"v"] * len(keys), [1000] * len(keys)))
    return validate_batches(stamp_producer(data, pid, epoch, seq, transactional), max_batch_bytes=MAX_BATCH)[0]


def test_a_plain_batch_inside_an_open_transaction_is_refused():
    """ProducerStateManagerTest.testNonTransactionalAppendWithOngoingTransaction: INVALID_TXN_STATE,
    also under a newer epoch; once the marker is written plain batches are welcome again."""
    state = ProducerStateManager()
    first = _batch(8, 0, 0, transactional=True)
    state.update(first, 10, 10)
    with pytest.raises(InvalidTxnStateError):
        state.check(_batch(8, 0, 1))
    with pytest.raises(InvalidTxnStateError):
        state.check(_batch(8, 1, 0))
    assert state.check(_batch(8, 0, 1, transactional=True)) is None
    state.end_transaction(first, 11, commit=True)
    assert state.check(_batch(8, 0, 1)) is None


def test_resends_after_a_clean_and_a_restart_get_their_first_offsets(tmp_path):
    """guard (already matched): LogCleanerTest.testDuplicateCheckAfterCleaning."""
    def partition() -> Partition:
        log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({**COMPACT, "segment.bytes": 1 << 20}), clock)
        p = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
        p.make_leader(0, 0, [0], [0])
        return p

    def send(p, pid, keys):
        data = encode_batch(record_batch(keys, [b"%d" % pid] * len(keys), [1000] * len(keys)))
        info = p.append_records(stamp_producer(data, pid, 0, 0))
        return info.first_offset, info.last_offset

    clock = ManualClock()
    p = partition()
    keys = {1: [b"1", b"2", b"3"], 2: [b"3", b"1", b"4"], 3: [b"1", b"4"]}
    first = {pid: send(p, pid, k) for pid, k in keys.items()}
    p.log.roll()
    assert p.clean(clock.time_ms()).swapped
    assert sorted(values_by_offset(p.log)) == [1, 3, 6, 7]
    p.close()
    p = partition()
    for pid in (1, 3, 2):
        assert send(p, pid, keys[pid]) == first[pid]
    assert p.log.log_end_offset == 8
    p.close()


def test_transaction_aware_cleaning_keeps_committed_values_and_markers(tmp_path):
    """guard (already matched): LogCleanerTest.testBasicTransactionAwareCleaning, then
    testAbortMarkerRemoval's second step (the abort marker goes once unlisted and past its horizon)."""
    history = History(str(tmp_path))
    history.write([b"1", b"2"], [False, False], producer=0)   # 0, 1   aborted below
    history.write([b"2", b"3"], [False, False], producer=1)   # 2, 3   committed
    history.write([b"3", b"4"], [False, False], producer=0)   # 4, 5   aborted
    history.end(0, commit=False)                               # 6
    history.end(1, commit=True)                                # 7
    history.write([b"2"], [False], producer=0)                 # 8      committed
    history.end(0, commit=True)                                # 9
    history.roll()
    assert history.partition.clean(history.clock.time_ms()).swapped
    assert {o: k for o, (k, _) in history.records_on_disk().items()} == {3: b"3", 8: b"2"}
    assert history.markers_on_disk() == {6, 7, 9}
    assert history.partition.producers.aborted == []
    history.write([b"5"], [False], None)
    history.roll()
    history.partition.clean(history.clock.time_ms())           # sets the abort marker's horizon
    history.clock.advance(10_001)
    history.partition.clean(history.clock.time_ms())
    assert history.markers_on_disk() == {7, 9}
    history.partition.close()
