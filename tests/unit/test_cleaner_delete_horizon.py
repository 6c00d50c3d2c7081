"""The cleaner's delete horizon (KIP-534): tombstones and transaction markers stay at least
``delete.retention.ms`` after the clean that first kept them, whatever their own timestamps.

A real Log in a temporary directory and a manual clock; each clean is forced by new dirty data, so
only the horizon decides what goes.
"""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.records import arrow_body
from broker.records.batch import (DELETE_HORIZON, HEADER_SIZE, TRANSACTIONAL, iter_headers, parse_header,
                                  stamp_delete_horizon, validate_batches)
from broker.records.control import marker_batch
from broker.storage import cleaner, cleaner_plan
from broker.storage.cleaner_checkpoint import CleanerCheckpoint
from broker.storage.producer_state import AbortedTxn
from tests.unit._logkit import MAX_BATCH, open_log, read_all

pytestmark = pytest.mark.unit

DAY = 86_400_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 100, "min.cleanable.dirty.ratio": 0.0,
           "delete.retention.ms": DAY}
PID = 7


def append(log, keys, values, timestamps, **header_fields):
    data = arrow_body.encode_batch(arrow_body.record_batch(keys, values, timestamps), **header_fields)
    return log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))


def append_marker(log, commit: bool, timestamp: int):
    data = marker_batch(PID, 0, commit, 0, timestamp)
    return log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))


def clean_again(log, clock, aborted=()):
    """A clean now, made due by one new record of another key (and a roll past it)."""
    append(log, [b"filler-%d" % clock.time_ms()], [b"f"], [clock.time_ms()])
    log.roll()
    result = cleaner.clean(log, log.log_end_offset, clock.time_ms(), aborted=aborted)
    assert result is not None and result.swapped
    return result


def headers(log) -> dict:
    """Header of every batch on disk, by base offset."""
    out, offset = {}, log.log_start_offset
    while (data := log.read(offset, 10**7)) is not None:
        for _, h in iter_headers(data):
            out[h.base_offset] = h
            offset = h.next_offset
    return out


def rows(log) -> dict:
    return {o: (k, v, t) for o, k, v, t in read_all(log)}


def test_a_tombstone_with_an_old_timestamp_stays_delete_retention_ms_after_the_first_clean(tmp_path):
    """A CDC tombstone stamped with its source time, two days old: the first clean keeps it and
    stamps the horizon; a later clean keeps that horizon; the clean at the horizon removes it."""
    clock = ManualClock()
    log = open_log(tmp_path, COMPACT, clock)
    source_time = clock.time_ms() - 2 * DAY
    append(log, [b"k1"], [b"v1"], [clock.time_ms()])
    append(log, [b"k1"], [None], [source_time])                  # offset 1
    append(log, [b"x"], [b"active"], [clock.time_ms()])
    first_clean = clock.time_ms()
    result = cleaner.clean(log, log.log_end_offset, first_clean)

    assert result.swapped and result.stats.tombstones_dropped == 0
    assert rows(log)[1] == (b"k1", None, source_time), "the tombstone went at the first clean"
    h = headers(log)[1]
    assert h.attributes & DELETE_HORIZON and h.delete_horizon_ms == first_clean + DAY
    assert h.max_timestamp == source_time, "the record time retention and ListOffsets see changed"
    assert log.offset_for_timestamp(source_time) == (1, source_time)
    assert log.cleaner_checkpoint.delete_horizon_ms == first_clean + DAY

    clock.advance(DAY // 2)
    clean_again(log, clock)
    assert 1 in rows(log) and headers(log)[1].delete_horizon_ms == first_clean + DAY, "horizon re-extended"

    log.close()
    log = open_log(tmp_path, COMPACT, clock, clean_shutdown=False)   # the horizon is on disk
    assert headers(log)[1].delete_horizon_ms == first_clean + DAY
    clock.advance(DAY // 2 - 1)   # one millisecond before the horizon
    clean_again(log, clock)
    assert 1 in rows(log)
    clock.advance(1)
    assert cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms()).reason == "delete.retention.ms"
    result = cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert result.stats.tombstones_dropped == 1 and 1 not in rows(log)
    assert log.cleaner_checkpoint.delete_horizon_ms == -1


def test_the_horizon_goes_in_the_header_only_and_runs_cut_from_a_batch_carry_it(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, {**COMPACT, "segment.bytes": 10_000}, clock)
    now = clock.time_ms()
    append(log, [b"a", b"b", b"a"], [b"1", None, b"2"], [now - 3, now - 2, now - 1], compression="zstd")
    append(log, [b"c", b"d"], [None, b"4"], [now - 5, now - 4], attributes=TRANSACTIONAL,
           producer_id=PID, producer_epoch=0, base_sequence=0)
    whole = log.read(3, 10**6)
    log.roll()
    append(log, [b"x"], [b"active"], [now])
    cleaner.clean(log, log.log_end_offset, now)

    after = headers(log)
    assert sorted(after) == [1, 3, 5]
    cut = after[1]    # offsets 1, 2 of the first batch: one run, rebuilt
    assert (cut.record_count, cut.delete_horizon_ms, cut.max_timestamp, cut.compression) == (2, now + DAY, now - 1, 4)
    kept = after[3]   # every record survived: the same body, the header stamped
    assert kept.delete_horizon_ms == now + DAY and kept.is_transactional and kept.producer_id == PID
    stored = bytes(log.read(3, 10**6))[:kept.size]
    assert stored == stamp_delete_horizon(whole[:kept.size], now + DAY)
    assert stored[HEADER_SIZE:] == bytes(whole[HEADER_SIZE:kept.size])
    assert after[5].delete_horizon_ms is None, "a batch without tombstones got a horizon"
    assert [(o, t) for o, (_, _, t) in sorted(rows(log).items())] == [
        (1, now - 2), (2, now - 1), (3, now - 5), (4, now - 4), (5, now)]


def test_a_batch_stamped_with_a_horizon_reads_and_validates_like_any_other():
    now = 1_700_000_000_000
    data = arrow_body.encode_batch(arrow_body.record_batch([b"k"], [None], [now - DAY]))
    stamped = stamp_delete_horizon(data, now + DAY)
    h = parse_header(stamped)
    assert h.delete_horizon_ms == now + DAY and parse_header(data).delete_horizon_ms is None
    assert validate_batches(stamped, max_batch_bytes=MAX_BATCH) == [h]    # CRC recomputed
    assert (h.max_timestamp, h.record_count) == (now - DAY, 1)


def test_a_marker_whose_transaction_is_gone_follows_the_horizon_not_its_timestamp(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, COMPACT, clock)
    old = clock.time_ms() - 2 * DAY
    append(log, [b"a"], [b"txn"], [old], attributes=TRANSACTIONAL, producer_id=PID, producer_epoch=0,
           base_sequence=0)                                            # offset 0
    append_marker(log, commit=True, timestamp=old)                    # offset 1
    append(log, [b"a"], [b"plain"], [clock.time_ms()])                 # shadows offset 0
    append(log, [b"x"], [b"active"], [clock.time_ms()])
    first_clean = clock.time_ms()
    result = cleaner.clean(log, log.log_end_offset, first_clean)

    # Offset 0's record is gone; the producer's last batch stays empty, keeping its sequence.
    assert result.stats.markers_dropped == 0 and headers(log)[0].record_count == 0
    assert not headers(log)[0].is_transactional
    marker = headers(log)[1]
    assert marker.is_control and marker.delete_horizon_ms == first_clean + DAY
    assert marker.max_timestamp == old
    clock.advance(DAY - 1)
    clean_again(log, clock)
    assert headers(log)[1].delete_horizon_ms == first_clean + DAY
    clock.advance(1)
    assert clean_again(log, clock).stats.markers_dropped == 1 and 1 not in headers(log)


def test_an_abort_marker_gets_its_horizon_when_its_records_go_and_stays_while_listed(tmp_path):
    clock = ManualClock()
    log = open_log(tmp_path, COMPACT, clock)
    old = clock.time_ms() - 2 * DAY
    append(log, [b"a"], [b"aborted"], [old], attributes=TRANSACTIONAL, producer_id=PID, producer_epoch=0,
           base_sequence=0)                                            # offset 0
    append_marker(log, commit=False, timestamp=old)                   # offset 1
    append(log, [b"x"], [b"active"], [clock.time_ms()])
    listed = [AbortedTxn(PID, 0, 1)]
    first_clean = clock.time_ms()
    result = cleaner.clean(log, log.log_end_offset, first_clean, aborted=listed)

    assert result.stats.aborted_dropped == 1 and result.stats.markers_dropped == 0
    assert headers(log)[1].delete_horizon_ms == first_clean + DAY
    clock.advance(DAY)
    clean_again(log, clock, aborted=listed)      # past the horizon, but the range is still listed
    assert 1 in headers(log)
    assert clean_again(log, clock).stats.markers_dropped == 1 and 1 not in headers(log)


def test_a_checkpoint_from_before_horizons_makes_one_early_clean_that_keeps_the_tombstone(tmp_path):
    """An older checkpoint holds the oldest kept tombstone's timestamp: read as a horizon already
    passed, it makes a clean due, which stamps a horizon instead of removing the tombstone."""
    clock = ManualClock()
    log = open_log(tmp_path, COMPACT, clock)
    append(log, [b"k"], [None], [clock.time_ms() - DAY])
    append(log, [b"x"], [b"active"], [clock.time_ms()])
    log.set_cleaner_checkpoint(CleanerCheckpoint(log.active.base_offset, clock.time_ms() - DAY))
    plan = cleaner_plan.plan_cleaning(log, log.log_end_offset, clock.time_ms())
    assert plan.reason == "delete.retention.ms"
    plan.close()
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert 0 in rows(log) and headers(log)[0].delete_horizon_ms == clock.time_ms() + DAY


def test_a_produced_batch_may_not_carry_a_delete_horizon(tmp_path):
    """Only the cleaner sets the horizon: a producer setting bit 6 with an old base timestamp would
    otherwise have its tombstones removed at the first clean."""
    from broker.errors import InvalidRecordError
    from broker.partition import AppendNotifier, Partition
    from broker.config import TOPIC_CONFIG
    from broker.storage.log import Log
    clock = ManualClock()
    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({"cleanup.policy": "compact"}), clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    data = arrow_body.encode_batch(arrow_body.record_batch([b"k"], [None], [1]))
    with pytest.raises(InvalidRecordError, match="delete-horizon"):
        partition.append_records(stamp_delete_horizon(data, 1))
    assert partition.append_records(data).first_offset == 0
