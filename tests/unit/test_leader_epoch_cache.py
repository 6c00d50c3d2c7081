"""The leader-epoch cache against an oracle log of per-offset epochs, its file format and crashes."""
from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import KafkaStorageError
from broker.storage.leader_epoch_cache import (LEADER_EPOCH_CHECKPOINT_FILE, EpochEntry,
                                               LeaderEpochCache)

pytestmark = pytest.mark.unit

ORACLE = settings(max_examples=150, deadline=None, database=None)


def cache(*entries) -> LeaderEpochCache:
    return LeaderEpochCache(None, entries)


# ----------------------------------------------------------------------------------- queries
def test_empty_cache_knows_nothing():
    c = cache()
    assert c.latest_epoch() is None and c.latest_entry() is None and len(c) == 0
    assert c.epoch_for_offset(0) is None
    assert c.end_offset_for(0, 10) == (-1, -1)


@pytest.mark.parametrize("offset, epoch", [(0, None), (9, None), (10, 1), (19, 1), (20, 3), (29, 3),
                                           (30, 6), (1000, 6)])
def test_epoch_for_offset(offset, epoch):
    assert cache((1, 10), (3, 20), (6, 30)).epoch_for_offset(offset) == epoch


@pytest.mark.parametrize("requested, answer", [
    (6, (6, 45)),     # the latest epoch ends at the log end
    (7, (-1, -1)),    # newer than anything known
    (5, (3, 30)),     # floor epoch 3, ended where epoch 6 began
    (4, (3, 30)),
    (3, (3, 30)),
    (2, (1, 20)),
    (1, (1, 20)),
    (0, (0, 10)),     # below the first epoch: Kafka answers the requested epoch and the first start
    (-1, (-1, -1)),   # undefined
])
def test_end_offset_for_follows_offsets_for_leader_epoch(requested, answer):
    assert cache((1, 10), (3, 20), (6, 30)).end_offset_for(requested, 45) == answer


# ----------------------------------------------------------------------------------- assign
def test_assign_appends_newer_epochs_and_ignores_the_latest_again():
    c = cache()
    assert c.assign(0, 0)
    assert not c.assign(0, 5)          # every batch of epoch 0 passes through assign
    assert c.assign(2, 10)
    assert not c.assign(2, 11)
    assert c.entries() == [EpochEntry(0, 0), EpochEntry(2, 10)]
    assert c.latest_epoch() == 2


def test_assign_replaces_an_empty_epoch_at_the_same_offset():
    # Led epoch 3 at offset 10 without writing, then follows a leader whose offset 10 is epoch 2.
    c = cache((1, 0), (3, 10))
    assert c.assign(2, 10)
    assert c.entries() == [(1, 0), (2, 10)]


def test_assign_drops_entries_the_log_contradicts():
    c = cache((1, 0), (3, 10), (5, 20))
    assert c.assign(4, 15)             # epoch 5 starts after the new log end, and 4 < 5
    assert c.entries() == [(1, 0), (3, 10), (4, 15)]
    assert c.assign(2, 30)             # an older epoch after epoch 3 and 4: they cannot stand
    assert c.entries() == [(1, 0), (2, 30)]


def test_assign_moves_the_latest_epoch_start_back():
    c = cache((1, 0), (3, 10))
    assert c.assign(3, 5)
    assert c.entries() == [(1, 0), (3, 5)]


def test_assign_keeps_an_earlier_start_of_the_same_epoch():
    # An entry starting past the log end was not cut (Kafka would rewrite epoch 1 to start at 4).
    c = cache((1, 0), (4, 8))
    assert c.assign(1, 4)
    assert c.entries() == [(1, 0)]
    assert c.epoch_for_offset(2) == 1


@pytest.mark.parametrize("epoch, offset", [(-1, 0), (0, -1)])
def test_assign_rejects_negative_values(epoch, offset):
    with pytest.raises(ValueError):
        cache().assign(epoch, offset)


def test_constructor_rejects_non_monotonic_entries():
    with pytest.raises(ValueError):
        cache((1, 10), (1, 20))
    with pytest.raises(ValueError):
        cache((1, 10), (2, 10))


# ----------------------------------------------------------------------------------- truncation
@pytest.mark.parametrize("end, expected", [
    (100, [(1, 10), (3, 20), (6, 30)]),
    (31, [(1, 10), (3, 20), (6, 30)]),
    (30, [(1, 10), (3, 20)]),
    (21, [(1, 10), (3, 20)]),
    (20, [(1, 10)]),
    (10, []),
    (0, []),
])
def test_truncate_from_end(end, expected):
    c = cache((1, 10), (3, 20), (6, 30))
    assert c.truncate_from_end(end) == (len(expected) != 3)
    assert c.entries() == expected


@pytest.mark.parametrize("start, expected", [
    (5, [(1, 10), (3, 20), (6, 30)]),
    (10, [(1, 10), (3, 20), (6, 30)]),
    (15, [(1, 15), (3, 20), (6, 30)]),
    (20, [(3, 20), (6, 30)]),
    (29, [(3, 29), (6, 30)]),
    (50, [(6, 50)]),
])
def test_truncate_from_start_keeps_the_epoch_holding_the_new_start(start, expected):
    c = cache((1, 10), (3, 20), (6, 30))
    assert c.truncate_from_start(start) == (expected != [(1, 10), (3, 20), (6, 30)])
    assert c.entries() == expected


# ----------------------------------------------------------------------------------- the file
def test_file_format_is_kafkas_checkpoint_text(tmp_path):
    c = LeaderEpochCache.load(str(tmp_path))
    c.assign(0, 0)
    c.assign(2, 150)
    c.assign(5, 320)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n3\n0 0\n2 150\n5 320\n"
    assert LeaderEpochCache.load(str(tmp_path)).entries() == [(0, 0), (2, 150), (5, 320)]


def test_every_change_is_persisted(tmp_path):
    c = LeaderEpochCache.load(str(tmp_path))
    for epoch, start in [(0, 0), (1, 10), (4, 30), (6, 40)]:
        c.assign(epoch, start)
    c.truncate_from_end(35)
    c.truncate_from_start(12)
    assert LeaderEpochCache.load(str(tmp_path)).entries() == [(1, 12), (4, 30)]
    c.clear()
    assert LeaderEpochCache.load(str(tmp_path)).entries() == []
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n0\n"


def test_missing_file_is_an_empty_cache_and_a_stale_temp_file_is_ignored(tmp_path):
    (tmp_path / (LEADER_EPOCH_CHECKPOINT_FILE + ".tmp")).write_text("0\n1\n9 9")  # a crash mid-write
    assert LeaderEpochCache.load(str(tmp_path)).entries() == []
    c = LeaderEpochCache.load(str(tmp_path))
    c.assign(3, 7)
    assert LeaderEpochCache.load(str(tmp_path)).entries() == [(3, 7)]
    assert not os.path.exists(tmp_path / (LEADER_EPOCH_CHECKPOINT_FILE + ".tmp"))


def test_in_memory_cache_writes_nothing(tmp_path):
    c = LeaderEpochCache()
    c.assign(1, 0)
    assert c.path is None and os.listdir(tmp_path) == []


@pytest.mark.parametrize("text", [
    "", "0\n", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0 0\n1 5\n", "0\n1\nzero 0\n", "0\n1\n0 0 0\n",
    "0\n2\n3 0\n2 10\n", "0\n2\n1 10\n2 10\n", "0\n1\n-1 0\n",
])
def test_a_damaged_file_raises_a_storage_error(tmp_path, text):
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text(text)
    with pytest.raises(KafkaStorageError) as info:
        LeaderEpochCache.load(str(tmp_path))
    assert LEADER_EPOCH_CHECKPOINT_FILE in str(info.value)


def test_after_a_crash_the_owner_cuts_epochs_past_the_recovered_log(tmp_path):
    # The epoch is assigned before the batch is appended; the batch was lost with the page cache.
    c = LeaderEpochCache.load(str(tmp_path))
    c.assign(0, 0)
    c.assign(3, 50)
    recovered = LeaderEpochCache.load(str(tmp_path))
    recovered.truncate_from_end(48)     # the recovered log ends at 48
    assert recovered.entries() == [(0, 0)]
    # Kept in memory until the next change: every open repeats the cut, so the file may still
    # name epoch 3; the next assign writes the cut list before any batch of its own lands.
    again = LeaderEpochCache.load(str(tmp_path))
    again.truncate_from_end(48)
    assert again.entries() == [(0, 0)]
    recovered.assign(4, 48)
    assert LeaderEpochCache.load(str(tmp_path)).entries() == [(0, 0), (4, 48)]


def test_a_cut_kept_in_memory_is_written_by_a_no_op_assign_before_the_batch_lands(tmp_path):
    c = LeaderEpochCache.load(str(tmp_path))
    c.assign(0, 0)
    c.assign(3, 50)                      # led epoch 3 at 50 without writing
    c = LeaderEpochCache.load(str(tmp_path))
    c.truncate_from_end(50)              # the owner's cut after opening
    assert not c.assign(0, 50)           # follows epoch 0's leader: a batch of epoch 0 at offset 50
    reopened = LeaderEpochCache.load(str(tmp_path))
    reopened.truncate_from_end(60)       # the log now ends past 50: epoch 3 must not come back
    assert reopened.entries() == [(0, 0)]


# ----------------------------------------------------------------------------------- oracle
class LogOracle:
    """A log as one epoch per offset, plus an epoch assigned at the log end by a new leader that
    has not written yet; the cache must always equal the runs of this log."""

    def __init__(self):
        self.epochs: list[int] = []
        self.start = 0
        self.empty_epoch: int | None = None
        self.max_epoch = -1

    @property
    def end(self) -> int:
        return len(self.epochs)

    def expected(self) -> list[tuple[int, int]]:
        runs = []
        for offset in range(self.start, self.end):
            if not runs or runs[-1][0] != self.epochs[offset]:
                runs.append((self.epochs[offset], offset))
        if self.empty_epoch is not None:
            runs.append((self.empty_epoch, self.end))
        return runs

    def end_offset_for(self, requested: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer, worked out from the runs by search."""
        runs = self.expected()
        if requested < 0 or not runs:
            return -1, -1
        if requested == runs[-1][0]:
            return requested, self.end
        lower = [r for r in runs if r[0] <= requested]
        higher = [r for r in runs if r[0] > requested]
        if not higher:
            return -1, -1
        if not lower:
            return requested, higher[0][1]
        return lower[-1][0], higher[0][1]


operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 2)),   # count, epoch step
    st.tuples(st.just("follow"), st.integers(1, 4), st.integers(0, 3)),   # older data after an empty epoch
    st.tuples(st.just("lead"), st.integers(1, 3)),
    st.tuples(st.just("truncate"), st.integers(0, 12)),
    st.tuples(st.just("advance_start"), st.integers(0, 12)),
    st.tuples(st.just("reload")),
), max_size=40)


@ORACLE
@given(operations)
def test_cache_matches_the_log_through_appends_elections_and_truncations(ops):
    with tempfile.TemporaryDirectory() as directory:
        c = LeaderEpochCache.load(directory)
        o = LogOracle()
        for op in ops:
            kind = op[0]
            data_epoch = o.epochs[-1] if o.end > o.start else None
            if kind == "append":
                epoch = max(o.max_epoch, 0) + op[2] if o.empty_epoch is None else o.empty_epoch
                _append(c, o, epoch, op[1])
            elif kind == "follow" and o.empty_epoch is not None:
                floor = data_epoch if data_epoch is not None else 0
                epoch = floor + op[2] % max(1, o.empty_epoch - floor)   # in [floor, empty epoch)
                _append(c, o, epoch, op[1])
            elif kind == "lead":
                o.max_epoch = max(o.max_epoch, 0) + op[1]
                assert c.assign(o.max_epoch, o.end)
                o.empty_epoch = o.max_epoch
            elif kind == "truncate":
                target = max(o.start, o.end - op[1])
                c.truncate_from_end(target)
                del o.epochs[target:]
                o.empty_epoch = None
            elif kind == "advance_start" and o.end - o.start > 1:
                target = min(o.end - 1, o.start + op[1])
                c.truncate_from_start(target)
                o.start = target
            elif kind == "reload":  # a restart: the owner cuts epochs at or past its log end
                c = LeaderEpochCache.load(directory)
                c.truncate_from_end(o.end)
                o.empty_epoch = None
            assert c.entries() == o.expected(), op
            for offset in range(o.start, o.end):
                assert c.epoch_for_offset(offset) == o.epochs[offset]
            for requested in range(-1, o.max_epoch + 3):
                assert c.end_offset_for(requested, o.end) == o.end_offset_for(requested)
        reloaded = LeaderEpochCache.load(directory)
        reloaded.truncate_from_end(o.end)
        assert reloaded.entries() == [e for e in c.entries() if e.start_offset < o.end]


def _append(c: LeaderEpochCache, o: LogOracle, epoch: int, count: int) -> None:
    for _ in range(count):
        c.assign(epoch, o.end)
        o.epochs.append(epoch)
    o.max_epoch = max(o.max_epoch, epoch)
    o.empty_epoch = None
