"""The leader's replication state: HW over the (maximal) ISR, Kafka's caught-up rule, ISR changes,
acks=all completion, against hand-worked cases and a replayed oracle."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import (NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                           NotLeaderOrFollowerError, OffsetOutOfRangeError)
from broker.replication.leader_state import LeaderState

pytestmark = pytest.mark.unit

LAG = 100


def leader(isr=(1, 2, 3), leo=10, hw=5, now=0, epoch=3) -> LeaderState:
    return LeaderState(1, [1, 2, 3], list(isr), epoch, leo, hw, now, replica_lag_time_max_ms=LAG)


# ----------------------------------------------------------------------------------- construction
@pytest.mark.parametrize("replicas, isr, leo, hw", [
    ([1, 2, 3], [2, 3], 10, 5),        # leader not in ISR
    ([2, 3], [1, 2], 10, 5),           # leader not a replica
    ([1, 2, 3], [1, 4], 10, 5),        # ISR member not a replica
    ([1, 2, 2], [1, 2], 10, 5),        # repeated replica
    ([1, 2, 3], [1, 2], 10, 11),       # HW past the log end
    ([1, 2, 3], [1, 2], 10, -1),
])
def test_constructor_rejects_impossible_states(replicas, isr, leo, hw):
    with pytest.raises(ValueError):
        LeaderState(1, replicas, isr, 0, leo, hw, 0)


def test_new_leader_starts_its_epoch_at_the_log_end_with_followers_unknown():
    s = leader()
    assert s.leader_epoch_start_offset == 10
    assert s.follower_offsets() == {2: -1, 3: -1}
    assert s.high_watermark == 5 and s.isr == (1, 2, 3) and s.pending_isr is None


def test_a_leader_alone_in_the_isr_moves_the_hw_with_its_log():
    s = leader(isr=[1])
    assert s.high_watermark == 10
    assert s.on_leader_append(12)
    assert s.high_watermark == 12


# ----------------------------------------------------------------------------------- the HW
def test_hw_is_the_smallest_leo_over_the_isr_and_waits_for_every_member():
    s = leader()
    assert not s.on_follower_fetch(2, 10, now_ms=1)     # 3 has not fetched: unknown holds the HW
    assert s.high_watermark == 5
    assert s.on_follower_fetch(3, 8, now_ms=2)
    assert s.high_watermark == 8
    assert s.on_follower_fetch(3, 10, now_ms=3)
    assert s.high_watermark == 10
    assert s.follower_offsets() == {2: 10, 3: 10}


def test_hw_never_decreases():
    s = leader(isr=[1, 2])
    s.on_follower_fetch(2, 10, now_ms=1)
    assert s.high_watermark == 10
    s.set_isr([1, 2, 3])                               # 3 has not fetched in this epoch
    assert s.high_watermark == 10
    s.on_follower_fetch(2, 7, now_ms=2, broker_epoch=5)  # 2 restarted with less
    assert s.high_watermark == 10


def test_out_of_isr_followers_do_not_hold_the_hw():
    s = leader(isr=[1, 2])
    s.on_follower_fetch(2, 10, now_ms=1)
    s.on_follower_fetch(3, 6, now_ms=1)
    assert s.high_watermark == 10


def test_shrinking_the_isr_can_advance_the_hw():
    s = leader()
    s.on_follower_fetch(2, 10, now_ms=1)
    assert s.high_watermark == 5
    assert s.set_isr([1, 2])
    assert s.high_watermark == 10


def test_a_leaders_log_never_shrinks():
    with pytest.raises(ValueError):
        leader().on_leader_append(9)


# ----------------------------------------------------------------------------------- fetch checks
def test_fetch_past_the_leader_log_end_is_out_of_range():
    with pytest.raises(OffsetOutOfRangeError) as info:
        leader().on_follower_fetch(2, 11, now_ms=1)
    assert info.value.details["log_end_offset"] == 10


def test_fetch_from_a_non_replica_is_refused():
    with pytest.raises(NotLeaderOrFollowerError):
        leader().on_follower_fetch(4, 0, now_ms=1)
    with pytest.raises(NotLeaderOrFollowerError):
        leader().on_follower_fetch(1, 0, now_ms=1)      # the leader does not follow itself


def test_a_fetch_from_an_older_registration_is_stale():
    s = leader()
    s.on_follower_fetch(2, 10, now_ms=1, broker_epoch=7)
    with pytest.raises(NotLeaderOrFollowerError):
        s.on_follower_fetch(2, 10, now_ms=2, broker_epoch=6)
    assert s.follower_state(2).last_fetch_ms == 1
    s.on_follower_fetch(2, 4, now_ms=3, broker_epoch=8)  # restarted: the lower offset is believed
    assert s.follower_offsets()[2] == 4 and s.follower_state(2).broker_epoch == 8


# ----------------------------------------------------------------------------------- caught up
def test_caught_up_now_when_fetching_at_the_leader_log_end():
    s = leader(now=0)
    s.on_follower_fetch(2, 10, now_ms=50)
    assert s.follower_state(2).last_caught_up_ms == 50


def test_caught_up_as_of_the_previous_fetch_when_reaching_its_leader_log_end():
    s = leader(now=0)
    s.on_follower_fetch(2, 8, now_ms=40)      # leader LEO 10 then
    s.on_leader_append(15)
    s.on_follower_fetch(2, 10, now_ms=70)     # reached 10, the LEO as of the fetch at 40
    assert s.follower_state(2).last_caught_up_ms == 40
    s.on_follower_fetch(2, 12, now_ms=90)     # short of 15, the LEO as of the fetch at 70
    assert s.follower_state(2).last_caught_up_ms == 40


def test_isr_followers_start_caught_up_and_others_do_not():
    s = leader(isr=[1, 2], now=500)
    assert s.follower_state(2).last_caught_up_ms == 500
    assert s.follower_state(3).last_caught_up_ms == 0


# ----------------------------------------------------------------------------------- shrink / expand
def test_shrink_candidates_are_isr_followers_lagging_longer_than_the_limit():
    s = leader(now=0)
    s.on_follower_fetch(2, 10, now_ms=30)
    s.on_follower_fetch(3, 9, now_ms=30)
    assert s.shrink_candidates(now_ms=100, replica_lag_time_max_ms=LAG) == []
    assert s.shrink_candidates(now_ms=101, replica_lag_time_max_ms=LAG) == [3]
    s.on_leader_append(11)
    assert s.shrink_candidates(now_ms=131, replica_lag_time_max_ms=LAG) == [2, 3]


def test_a_follower_at_the_leader_log_end_never_lags():
    s = leader(now=0)
    s.on_follower_fetch(2, 10, now_ms=1)
    assert 2 not in s.shrink_candidates(now_ms=10_000, replica_lag_time_max_ms=LAG)


def test_expand_needs_the_hw_and_the_leader_epoch_start():
    s = leader(isr=[1, 2], leo=10, hw=4)
    s.on_follower_fetch(3, 4, now_ms=1)
    assert s.high_watermark == 4
    assert not s.expand_candidate(3)          # at the HW but before this epoch began (10)
    s.on_follower_fetch(3, 10, now_ms=2)
    assert s.expand_candidate(3)
    assert not s.expand_candidate(2)          # already in the ISR


def test_expand_needs_the_hw():
    s = leader(isr=[1, 2], leo=10, hw=4)
    s.on_leader_append(20)
    s.on_follower_fetch(2, 20, now_ms=1)
    assert s.high_watermark == 20
    s.on_follower_fetch(3, 15, now_ms=2)
    assert not s.expand_candidate(3)
    s.on_follower_fetch(3, 20, now_ms=3)
    assert s.expand_candidate(3)


def test_a_pending_expansion_holds_the_hw_for_the_joining_replica():
    s = leader(isr=[1, 2], leo=10, hw=10)
    s.on_follower_fetch(2, 10, now_ms=1)
    s.on_follower_fetch(3, 10, now_ms=1, broker_epoch=4)
    members = s.propose_isr([1, 2, 3])
    assert members == [(1, -1), (2, -1), (3, 4)]
    assert s.maximal_isr == (1, 2, 3) and s.isr == (1, 2)
    s.on_leader_append(20)
    s.on_follower_fetch(2, 20, now_ms=2)
    assert s.high_watermark == 10             # 3 may be committed to the ISR any moment
    assert not s.expand_candidate(3) and s.shrink_candidates(10_000, LAG) == []
    with pytest.raises(ValueError):
        s.propose_isr([1, 2])                 # one change in flight at a time
    # refused: 3 leaves the maximal ISR, but caught up (at 1) and eligible it still holds the HW
    # (Kafka's maybeIncrementLeaderHW), until it lags replica.lag.time.max.ms
    assert not s.abort_isr_change(now_ms=2)
    assert s.maximal_isr == (1, 2) and s.high_watermark == 10
    assert not s.update_high_watermark(now_ms=1 + LAG)
    assert s.update_high_watermark(now_ms=2 + LAG) and s.high_watermark == 20


def test_a_pending_shrink_keeps_the_hw_over_the_larger_isr():
    s = leader(leo=10, hw=10, now=0)
    s.on_follower_fetch(2, 10, now_ms=1)
    s.on_follower_fetch(3, 10, now_ms=1)
    s.on_leader_append(20)
    s.on_follower_fetch(2, 20, now_ms=300)
    s.propose_isr([1, 2])
    assert s.maximal_isr == (1, 2, 3) and s.high_watermark == 10
    assert s.set_isr([1, 2])
    assert s.high_watermark == 20 and s.pending_isr is None


def test_set_isr_validates():
    with pytest.raises(ValueError):
        leader().set_isr([2, 3])
    with pytest.raises(ValueError):
        leader().propose_isr([1, 5])


# ----------------------------------------------------------------------------------- acks
def test_check_min_isr_uses_the_committed_isr():
    s = leader(isr=[1, 2])
    s.check_min_isr(2)
    with pytest.raises(NotEnoughReplicasError) as info:
        s.check_min_isr(3)
    assert info.value.retriable and info.value.code == 19


def test_acks_all_completes_once_the_hw_passes_the_batch():
    s = leader(isr=[1, 2])
    s.on_leader_append(13)                   # a batch at offsets 10..12: required offset 13
    assert not s.acks_all_done(13, 2)
    s.on_follower_fetch(2, 12, now_ms=1)
    assert not s.acks_all_done(13, 2)
    s.on_follower_fetch(2, 13, now_ms=2)
    assert s.acks_all_done(13, 2)


def test_acks_all_fails_after_append_when_the_isr_shrank_below_the_minimum():
    s = leader(isr=[1, 2])
    s.on_leader_append(13)
    s.set_isr([1])
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        s.acks_all_done(13, 2)


# ----------------------------------------------------------------------------------- oracle
events = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5)),
    st.tuples(st.just("fetch"), st.sampled_from([2, 3, 4]), st.integers(0, 30), st.integers(0, 2)),
    st.tuples(st.just("isr"), st.sets(st.sampled_from([2, 3, 4]))),
    st.tuples(st.just("propose"), st.sets(st.sampled_from([2, 3, 4]))),
    st.tuples(st.just("abort")),
    st.tuples(st.just("tick"), st.integers(0, 2 * LAG)),
), max_size=60)


@settings(max_examples=300, deadline=None, database=None)
@given(events, st.sets(st.sampled_from([2, 3, 4])), st.integers(0, 10), st.sets(st.sampled_from([2, 3, 4])))
def test_state_matches_a_replay_of_kafkas_rules(evs, initial_followers, initial_hw, ineligible):
    """Replays the same events into plain records and recomputes HW and caught-up times."""
    replicas = [1, 2, 3, 4]
    isr = [1] + sorted(initial_followers)
    leo, now = 10, 1000
    s = LeaderState(1, replicas, isr, 5, leo, initial_hw, now, replica_lag_time_max_ms=LAG,
                    eligible=lambda broker, _epoch: broker not in ineligible)
    fetches: dict[int, list[tuple[int, int, int]]] = {r: [] for r in (2, 3, 4)}  # (offset, t, leader leo)
    committed, pending = list(isr), None
    hw = initial_hw if len(isr) > 1 else leo
    for ev in evs:
        now += 7
        kind = ev[0]
        moves_hw = kind != "propose"   # a proposal only widens the maximal ISR: the HW stays
        if kind == "append":
            leo += ev[1]
            s.on_leader_append(leo, now)
        elif kind == "fetch":
            follower, back = ev[1], ev[2]
            offset = max(0, leo - back)
            s.on_follower_fetch(follower, offset, now)
            fetches[follower].append((offset, now, leo))
        elif kind == "isr":
            committed, pending = [1] + sorted(ev[1]), None
            s.set_isr(committed, now)
        elif kind == "propose" and pending is None:
            pending = [1] + sorted(ev[1])
            s.propose_isr(pending)
        elif kind == "abort":
            pending = None
            s.abort_isr_change(now)
        elif kind == "tick":
            now += ev[1]
            s.update_high_watermark(now)
        maximal = set(committed) | (set(pending) - set(committed) if pending else set())
        known = [leo] + [fetches[r][-1][0] if fetches[r] else -1 for r in maximal if r != 1]
        for r in set(fetches) - maximal:   # caught up and eligible: about to join, the HW waits
            caught = _caught_up(fetches[r], 1000 if r in isr else 0)
            if fetches[r] and caught and r not in ineligible \
                    and (fetches[r][-1][0] == leo or now - caught <= LAG):
                known.append(fetches[r][-1][0])
        if moves_hw:
            hw = max(hw, min(known))
        assert s.high_watermark == hw
        assert set(s.maximal_isr) == maximal
        for r in (2, 3, 4):
            assert s.follower_state(r).last_caught_up_ms == _caught_up(fetches[r], 1000 if r in isr else 0)
            assert s.follower_offsets()[r] == (fetches[r][-1][0] if fetches[r] else -1)
        for r in s.shrink_candidates(now, LAG):
            assert r in committed and r != 1 and pending is None
            assert s.follower_offsets()[r] != leo and now - s.follower_state(r).last_caught_up_ms > LAG


def _caught_up(history: list[tuple[int, int, int]], initial: int) -> int:
    """Kafka's rule as a fold over a follower's fetches (offset, time, leader LEO at that time)."""
    caught = initial
    for i, (offset, t, leader_leo) in enumerate(history):
        if offset >= leader_leo:
            caught = max(caught, t)
        elif i and offset >= history[i - 1][2]:
            caught = max(caught, history[i - 1][1])
    return caught


def test_the_high_watermark_waits_while_the_isr_is_under_min_insync_replicas():
    # KAFKA-15583 (PartitionTest.testHighWatermarkAdvanceShouldNotAdvanceWhenUnderMinISR): records
    # held by fewer than min.insync.replicas replicas (acks=1) are not shown to consumers.
    min_isr = [2]
    s = LeaderState(1, [1, 2, 3], [1], 3, 10, 10, 0, lambda: min_isr[0])
    assert not s.on_leader_append(15) and s.high_watermark == 10
    assert not s.on_follower_fetch(2, 15, now_ms=1)   # caught up, but not yet in the ISR
    s.propose_isr([1, 2])
    assert s.set_isr([1, 2]) and s.high_watermark == 15
    # min.insync.replicas above the replication factor counts as the replication factor
    single = LeaderState(1, [1], [1], 0, 0, 0, 0, lambda: 3)
    assert single.on_leader_append(4) and single.high_watermark == 4 and single.effective_min_isr == 1
