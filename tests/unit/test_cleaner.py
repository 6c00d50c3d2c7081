"""Log compaction on a real Log in a temporary directory, against a dict model of the last value per key."""
from __future__ import annotations

import os
import random

import pytest

from broker.clock import ManualClock
from broker.records import arrow_body
from broker.records.batch import CONTROL, iter_headers, validate_batches
from broker.storage import cleaner, cleaner_plan, retention
from broker.storage.cleaner_checkpoint import CLEANER_CHECKPOINT_FILE, CleanerCheckpoint
from tests.unit._logkit import COMPRESSIONS, MAX_BATCH, decoded_rows, open_log, read_all

pytestmark = pytest.mark.unit

DAY = 86_400_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 3000, "min.cleanable.dirty.ratio": 0.0,
           "delete.retention.ms": DAY}


def append(log, keys, values, timestamps, compression="none", **header_fields):
    data = arrow_body.encode_batch(arrow_body.record_batch(keys, values, timestamps), compression, **header_fields)
    return log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))


def fill(log, clock, rng: random.Random, batches: int, keys: int = 12, tombstone_share: float = 0.15):
    """Random updates of ``keys`` keys; returns every row as (offset, key, value, timestamp)."""
    rows = []
    for _ in range(batches):
        n = rng.randint(1, 6)
        ks = [b"key-%d" % rng.randrange(keys) for _ in range(n)]
        vs = [None if rng.random() < tombstone_share else rng.randbytes(rng.randint(1, 40)) for _ in range(n)]
        ts = [clock.time_ms()] * n
        info = append(log, ks, vs, ts, rng.choice(COMPRESSIONS))
        rows += [(info.first_offset + i, k, v, t) for i, (k, v, t) in enumerate(zip(ks, vs, ts))]
        clock.advance(rng.randint(0, 5))
    return rows


def compacted(rows, end: int):
    """The model of a first clean: below ``end``, the latest row per key (a tombstone too: the
    first clean that keeps one only sets its delete horizon); at or past ``end``, every row."""
    latest = {}
    for row in rows:
        if row[0] < end:
            latest[row[1]] = row
    return sorted(list(latest.values()) + [r for r in rows if r[0] >= end])


def last_value_per_key(rows) -> dict:
    model = {}
    for _, key, value, _ in rows:
        model[key] = value
    return model


def files(directory, suffix: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(suffix))


@pytest.mark.parametrize("seed", range(3))
def test_compaction_keeps_the_latest_record_per_key_at_its_original_offset(tmp_path, seed):
    clock, rng = ManualClock(), random.Random(seed)
    log = open_log(tmp_path, COMPACT, clock)
    rows = fill(log, clock, rng, 200)
    active_base = log.active.base_offset
    with open(log.active.log_path, "rb") as f:
        active_bytes = f.read()
    size_before = log.size_bytes

    result = cleaner.clean(log, log.log_end_offset, clock.time_ms())

    assert result.swapped and result.stats.records_kept < result.stats.records_read
    assert log.size_bytes < size_before / 2
    after = read_all(log, max_bytes=rng.choice((1, 500, 10**6)))
    assert after == compacted(rows, active_base)
    assert last_value_per_key(after) == last_value_per_key(rows)
    with open(log.active.log_path, "rb") as f:
        assert f.read() == active_bytes, "the active segment was touched"
    assert log.cleaner_checkpoint.first_dirty_offset == active_base
    assert files(tmp_path, ".cleaned") == files(tmp_path, ".swap") == []
    log.close()
    reopened = open_log(tmp_path, COMPACT, clock, clean_shutdown=False)
    assert read_all(reopened) == after
    assert reopened.cleaner_checkpoint.first_dirty_offset == active_base


def test_reads_inside_a_compaction_gap_return_the_next_surviving_record(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {**COMPACT, "segment.bytes": 100}, clock)
    append(log, [b"a", b"b", b"a", b"c", b"a"], [b"1", b"2", b"3", b"4", b"5"], [clock.time_ms()] * 5)
    append(log, [b"z"], [b"active"], [clock.time_ms()])
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert [(o, k) for o, k, _, _ in read_all(log)] == [(1, b"b"), (3, b"c"), (4, b"a"), (5, b"z")]
    for offset, first in ((0, 1), (2, 3), (4, 3)):  # 3 and 4 survive as one batch
        data = log.read(offset, 10**6)
        assert next(iter_headers(data))[1].base_offset == first


def test_tombstones_stay_until_delete_retention_ms_after_the_clean_that_first_kept_them(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {**COMPACT, "segment.bytes": 200}, clock)
    append(log, [b"a", b"b", b"c"], [b"1", b"2", b"3"], [clock.time_ms()] * 3)
    clock.advance(1000)
    deleted_at = clock.time_ms()
    append(log, [b"a", b"b"], [None, None], [deleted_at, deleted_at])
    append(log, [b"x"], [b"active"], [clock.time_ms()])
    clock.advance(5000)
    first_clean = clock.time_ms()

    cleaner.clean(log, log.log_end_offset, first_clean)
    assert last_value_per_key(read_all(log)) == {b"a": None, b"b": None, b"c": b"3", b"x": b"active"}
    assert log.cleaner_checkpoint.delete_horizon_ms == first_clean + DAY  # the delete horizon

    clock.advance(DAY - 1)  # one millisecond before the horizon: still kept
    assert cleaner.clean(log, log.log_end_offset, clock.time_ms()) is None
    clock.advance(1)
    result = cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert result.swapped and result.stats.tombstones_dropped == 2
    assert last_value_per_key(read_all(log)) == {b"c": b"3", b"x": b"active"}
    assert log.cleaner_checkpoint.delete_horizon_ms == -1
    assert cleaner.clean(log, log.log_end_offset, clock.time_ms()) is None


def test_nothing_at_or_past_the_high_watermark_or_in_the_active_segment_is_cleaned(tmp_path):
    clock, rng = ManualClock(), random.Random(7)
    log = open_log(tmp_path, COMPACT, clock)
    rows = fill(log, clock, rng, 150)
    assert len(log.segments) > 6
    hw = log.segments[4].base_offset + 1  # inside the fifth segment: only the first four are cleanable
    cleaner.clean(log, hw, clock.time_ms())
    assert read_all(log) == compacted(rows, log.segments[4].base_offset)
    assert log.cleaner_checkpoint.first_dirty_offset == log.segments[4].base_offset


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    clock, rng = ManualClock(), random.Random(8)
    log = open_log(tmp_path, {**COMPACT, "min.compaction.lag.ms": 10_000}, clock)
    old_rows = fill(log, clock, rng, 60)
    log.roll()
    boundary = log.log_end_offset
    clock.advance(10_001)
    young_rows = fill(log, clock, rng, 60)
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert read_all(log) == compacted(old_rows + young_rows, boundary)


def test_min_cleanable_dirty_ratio_decides_when_a_clean_is_due_and_survives_a_restart(tmp_path):
    clock, rng = ManualClock(), random.Random(9)
    config = {**COMPACT, "min.cleanable.dirty.ratio": 0.5}
    log = open_log(tmp_path, config, clock)
    fill(log, clock, rng, 150, tombstone_share=0)
    assert cleaner.clean(log, log.log_end_offset, clock.time_ms()).swapped
    checkpoint = log.cleaner_checkpoint
    log.close()
    log = open_log(tmp_path, config, clock)
    assert log.cleaner_checkpoint == checkpoint
    with open(os.path.join(tmp_path, CLEANER_CHECKPOINT_FILE)) as f:
        assert int(f.read().split()[0]) == checkpoint.first_dirty_offset

    clean_bytes = log.size_bytes - log.active.size
    while log.size_bytes - log.active.size < clean_bytes * 1.6:  # dirty share below a half
        fill(log, clock, rng, 1, tombstone_share=0)
    assert cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms()) is None
    while log.size_bytes - log.active.size < clean_bytes * 2.5:
        fill(log, clock, rng, 1, tombstone_share=0)
    plan = cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms())
    assert plan is not None and plan.dirty_ratio >= 0.5 and plan.reason == "min.cleanable.dirty.ratio"
    plan.close()


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(tmp_path):
    clock, rng = ManualClock(), random.Random(10)
    log = open_log(tmp_path, {**COMPACT, "min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000}, clock)
    fill(log, clock, rng, 100, tombstone_share=0)
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    fill(log, clock, rng, 20, tombstone_share=0)
    log.roll()
    assert cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms()) is None
    clock.advance(60_001)
    plan = cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms())
    assert plan is not None and plan.reason == "max.compaction.lag.ms"
    plan.close()


def test_a_dirty_ratio_of_one_leaves_compaction_to_the_maximum_lag(tmp_path):
    # LogCleanerManager takes a log whose ratio is strictly above min.cleanable.dirty.ratio, so
    # 1.0 means "only by max.compaction.lag.ms", even for a log that is all dirty.
    clock, rng = ManualClock(), random.Random(11)
    log = open_log(tmp_path, {**COMPACT, "min.cleanable.dirty.ratio": 1.0, "max.compaction.lag.ms": 60_000}, clock)
    fill(log, clock, rng, 100, tombstone_share=0)
    log.roll()
    assert cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms()) is None
    clock.advance(60_001)
    plan = cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms())
    assert plan is not None and plan.reason == "max.compaction.lag.ms"
    plan.close()


def test_the_maximum_lag_counts_from_the_oldest_dirty_segment_not_the_first(tmp_path):
    # Kafka's maxCompactionDelay: the earliest first-batch timestamp of any dirty segment.
    for age, due in ((30_000, False), (3_600_000, True)):
        clock = ManualClock(10_000_000)
        log = open_log(tmp_path / str(age), {**COMPACT, "min.cleanable.dirty.ratio": 1.0,
                                             "max.compaction.lag.ms": 60_000}, clock)
        now = clock.time_ms()
        append(log, [b"k"], [b"young"], [now])
        log.roll()
        append(log, [b"k"], [b"older"], [now - age])
        log.roll()
        append(log, [b"k"], [b"active"], [now])
        plan = cleaner_plan.plan_cleaning(log, log.log_end_offset, now)
        assert (plan is not None and plan.reason == "max.compaction.lag.ms") == due, (age, plan)
        if plan is not None:
            plan.close()


def test_a_second_clean_merges_small_cleaned_segments(tmp_path):
    clock, rng = ManualClock(), random.Random(11)
    log = open_log(tmp_path, COMPACT, clock)
    rows = fill(log, clock, rng, 200, keys=4)
    segments = len(log.segments)
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    fill(log, clock, rng, 1)
    log.roll()
    log.set_cleaner_checkpoint(CleanerCheckpoint(0))  # everything dirty again
    expected = read_all(log)
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert len(log.segments) < segments / 3
    assert last_value_per_key(read_all(log)) == last_value_per_key(expected) == last_value_per_key(
        rows + [r for r in expected if r[0] >= rows[-1][0] + 1])


def test_records_without_a_key_are_dropped_and_control_batches_kept(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {**COMPACT, "segment.bytes": 10_000}, clock)
    append(log, [b"a", None, b"a"], [b"1", b"keyless", b"2"], [clock.time_ms()] * 3)
    append(log, [None], [b"marker"], [clock.time_ms()], attributes=CONTROL)
    log.roll()
    append(log, [b"x"], [b"active"], [clock.time_ms()])
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    data = log.read(0, 10**6)
    assert [(o, k, v) for o, k, v, _ in decoded_rows(data, 0)] == [(2, b"a", b"2")]
    headers = [h for _, h in iter_headers(data)]
    assert [(h.base_offset, h.is_control) for h in headers] == [(2, False), (3, True)]


def test_a_partly_compacted_batch_keeps_its_producer_fields_and_leader_epoch(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {**COMPACT, "segment.bytes": 10_000}, clock)
    data = arrow_body.encode_batch(arrow_body.record_batch(
        [b"a", b"b", b"a", b"c", b"b"], [b"1", b"2", b"3", b"4", b"5"], [clock.time_ms() + i for i in range(5)]),
        "zstd", producer_id=42, producer_epoch=3, base_sequence=100)
    log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH), leader_epoch=7)
    log.roll()
    append(log, [b"x"], [b"y"], [clock.time_ms()])
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    headers = [h for _, h in iter_headers(log.read(0, 10**6))]
    # survivors: offsets 2, 3 (one run) and 4 (the latest b)... 2,3,4 are consecutive: one batch
    assert [(h.base_offset, h.record_count) for h in headers] == [(2, 3)]
    h = headers[0]
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (42, 3, 102, 7)
    assert h.compression == 4 and (h.base_timestamp, h.max_timestamp) == (clock.time_ms() + 2, clock.time_ms() + 4)
    assert [(o, k, v) for o, k, v, _ in read_all(log)][:3] == [(2, b"a", b"3"), (3, b"c", b"4"), (4, b"b", b"5")]


# ------------------------------------------------------------------------------ crash safety
def built(tmp_path, seed: int):
    clock, rng = ManualClock(), random.Random(seed)
    log = open_log(tmp_path, COMPACT, clock)
    rows = fill(log, clock, rng, 150)
    before = read_all(log)
    plan = cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms())
    cleaned = cleaner.build_cleaned(log, plan, clock.time_ms())
    assert files(tmp_path, ".log.cleaned")
    yield_closed(cleaned.segments)   # never swapped in: closed after the test with its logs
    return clock, log, rows, before, cleaned


def yield_closed(segments) -> None:
    from tests.unit import _logkit
    _logkit.AFTER_TEST.extend(s.close for s in segments)


def test_a_crash_before_the_swap_leaves_the_old_segments(tmp_path):
    clock, log, _, before, cleaned = built(tmp_path, 12)
    cleaned.plan.close()
    log.close_without_flush()  # kill -9 with the .cleaned files complete but not committed
    reopened = open_log(tmp_path, COMPACT, clock, clean_shutdown=False)
    assert read_all(reopened) == before
    assert files(tmp_path, ".cleaned") == []


@pytest.mark.parametrize("old_deleted", [0, 1, "all"])
def test_a_crash_after_the_commit_point_finishes_the_swap_on_open(tmp_path, old_deleted):
    clock, log, rows, _, cleaned = built(tmp_path, 13)
    end = cleaned.plan.end_offset
    group = [cleaned.plan.sources[i].segment for i in cleaned.plan.groups[0]]
    new = cleaned.segments[0]
    os.replace(new.log_path, new.log_path[:-len(".cleaned")] + ".swap")  # the commit point
    for segment in group[:len(group) if old_deleted == "all" else old_deleted]:
        os.unlink(segment.log_path)
    cleaned.plan.close()
    log.close_without_flush()

    reopened = open_log(tmp_path, COMPACT, clock, clean_shutdown=False)
    # The first group is compacted, the other groups still hold their old records.
    first_group_end = reopened.segments[1].base_offset
    got = read_all(reopened)
    want = [r for r in compacted(rows, end) if r[0] < first_group_end]
    assert [r for r in got if r[0] < first_group_end] == want
    assert [r for r in got if r[0] >= first_group_end] == [r for r in rows if r[0] >= first_group_end]
    assert files(tmp_path, ".swap") == files(tmp_path, ".cleaned") == []
    for offset, _, _, _ in got:  # every survivor is found through the rebuilt index
        assert next(iter_headers(reopened.read(offset, 1)))[1].last_offset >= offset


def test_segments_removed_while_cleaning_make_the_swap_a_no_op(tmp_path):
    clock, log, _, before, cleaned = built(tmp_path, 14)
    log.config = log.config.with_overrides({**COMPACT, "retention.ms": 0, "cleanup.policy": "compact,delete"})
    clock.advance(10)
    retention.apply_retention(log, clock.time_ms(), log.log_end_offset)
    survivors = read_all(log)
    assert len(survivors) < len(before)
    assert cleaner.swap_cleaned(log, cleaned) is False
    assert read_all(log) == survivors
    assert files(tmp_path, ".cleaned") == []


def test_logs_without_compact_are_never_cleaned(tmp_path):
    clock, rng = ManualClock(), random.Random(15)
    log = open_log(tmp_path, {**COMPACT, "cleanup.policy": "delete"}, clock)
    fill(log, clock, rng, 100)
    assert cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms()) is None
