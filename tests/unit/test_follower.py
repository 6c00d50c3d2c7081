"""Follower truncation (KIP-101/KIP-279) and the follower's high watermark.

The oracle: replicas built by a history of elections, appends and partial replication, where each
epoch has one leader. After truncating against any leader, a follower's log must be exactly the
longest prefix it shares with the leader: never longer (divergent data kept) nor shorter (good
data thrown away).
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.replication.follower import (TruncationStep, follower_high_watermark, truncation_offset,
                                         truncation_step)
from broker.storage.leader_epoch_cache import LeaderEpochCache

pytestmark = pytest.mark.unit


def cache(*entries) -> LeaderEpochCache:
    return LeaderEpochCache(None, entries)


# ----------------------------------------------------------------------------------- one round
def test_same_latest_epoch_cuts_at_the_shorter_log():
    # KIP-101 scenario 1: both wrote epoch 2, the leader kept less of it.
    assert truncation_step(cache((0, 0), (2, 10)), 20, (2, 15)) == TruncationStep(15, True)
    assert truncation_step(cache((0, 0), (2, 10)), 12, (2, 15)) == TruncationStep(12, True)


def test_an_epoch_the_leader_never_had_is_cut_where_the_leader_moved_on():
    # Follower wrote epoch 3 (a leader that lost its data); the leader went from epoch 2 to 4 at 30.
    assert truncation_step(cache((0, 0), (2, 10), (3, 25)), 40, (2, 30)) == TruncationStep(25, True)


def test_a_floor_epoch_the_follower_lacks_needs_another_round():
    # KIP-279: follower epochs 1 then 3, leader answers epoch 2: everything from 3 goes, ask again.
    assert truncation_step(cache((1, 0), (3, 20)), 30, (2, 25)) == TruncationStep(20, False)


def test_a_leader_answer_below_every_local_epoch_cuts_everything_local():
    assert truncation_step(cache((4, 10), (5, 20)), 30, (2, 18)) == TruncationStep(10, True)


def test_iterating_against_the_leader_reaches_the_divergence_point():
    follower = cache((1, 0), (3, 20), (5, 30))
    leader = cache((1, 0), (2, 24), (4, 26), (6, 40))
    asked = []

    def ask(epoch):
        asked.append(epoch)
        return leader.end_offset_for(epoch, 50)

    assert truncation_offset(follower, 35, ask) == 20
    assert asked == [5, 3, 1]
    assert follower.entries() == [(1, 0), (3, 20), (5, 30)]   # the caller cuts, not this function


def test_a_plain_answer_gives_the_offset_of_that_round():
    assert truncation_offset([(1, 0), (3, 20)], 30, (2, 25)) == 20
    assert truncation_offset([(1, 0), (3, 20)], 30, (3, 27)) == 27


def test_without_epochs_or_an_answer_the_high_watermark_is_the_fallback():
    assert truncation_step(cache(), 10, (-1, -1), high_watermark=4) == TruncationStep(4, True)
    assert truncation_step(cache((1, 0)), 10, (-1, -1), high_watermark=12) == TruncationStep(10, True)
    assert truncation_offset([], 0, lambda e: (-1, -1), high_watermark=0) == 0
    with pytest.raises(ValueError):
        truncation_step(cache((1, 0)), 10, (-1, -1))


def test_a_leader_without_epoch_numbers_limits_by_its_offset():
    assert truncation_step(cache((1, 0)), 10, (-1, 7)) == TruncationStep(7, True)


@pytest.mark.parametrize("leader_hw, leo, start, expected", [
    (10, 20, 0, 10), (30, 20, 0, 20), (3, 20, 5, 5), (0, 0, 0, 0)])
def test_follower_high_watermark_never_passes_its_log_end(leader_hw, leo, start, expected):
    assert follower_high_watermark(leader_hw, leo, start) == expected


# ----------------------------------------------------------------------------------- oracle
class Replica:
    def __init__(self):
        self.log: list[tuple[int, int]] = []     # (epoch, record id)
        self.cache = LeaderEpochCache()

    def copy_prefix_of(self, leader: "Replica", length: int) -> None:
        """What truncation and fetching achieve: the first ``length`` records of the leader."""
        self.log = list(leader.log[:length])
        self.cache = LeaderEpochCache()
        for offset, (epoch, _) in enumerate(self.log):
            self.cache.assign(epoch, offset)


history = st.lists(st.tuples(
    st.integers(0, 3),                 # who is elected
    st.integers(0, 4),                 # records the new leader appends
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 100)), max_size=3),  # who copies how much
), min_size=1, max_size=8)


@settings(max_examples=400, deadline=None, database=None)
@given(history, st.integers(0, 3), st.integers(0, 3))
def test_truncation_keeps_exactly_the_prefix_shared_with_the_leader(steps, leader_id, follower_id):
    replicas = [Replica() for _ in range(4)]
    epoch, record_id = 0, 0
    for elected, appends, copies in steps:
        epoch += 1
        leader = replicas[elected]
        leader.cache.assign(epoch, len(leader.log))     # becoming leader: the epoch starts at its LEO
        for _ in range(appends):
            record_id += 1
            leader.cache.assign(epoch, len(leader.log))
            leader.log.append((epoch, record_id))
        for who, percent in copies:
            if who != elected:
                replicas[who].copy_prefix_of(leader, len(leader.log) * percent // 100)
    epoch += 1
    leader, follower = replicas[leader_id], replicas[follower_id]
    leader.cache.assign(epoch, len(leader.log))
    if follower is leader:
        return

    offset = truncation_offset(follower.cache, len(follower.log),
                               lambda e: leader.cache.end_offset_for(e, len(leader.log)),
                               high_watermark=0)
    shared = 0
    while (shared < min(len(follower.log), len(leader.log))
           and follower.log[shared] == leader.log[shared]):
        shared += 1
    assert offset == shared

    # The same, one round at a time, cutting the cache between rounds as a broker does.
    local = LeaderEpochCache(None, follower.cache.entries())
    leo = len(follower.log)
    for _ in range(len(local) + 1):
        latest = local.latest_epoch()
        if latest is None:
            leo = min(leo, 0)
            break
        step = truncation_step(local, leo, leader.cache.end_offset_for(latest, len(leader.log)),
                               high_watermark=0)
        leo = step.offset
        local.truncate_from_end(leo)
        if step.complete:
            break
    assert leo == shared
