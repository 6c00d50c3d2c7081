"""KIP-320 in the consumer: the pure decisions (``broker.client.offset_validation``) and how the
fetch state applies them, driven directly: no broker, no threads, a ManualClock. The cases are
librdkafka's ``rd_kafka_toppar_handle_OffsetForLeaderEpoch`` and ``tests/0139-offset_validation_mock.c``."""
from __future__ import annotations

import pytest

from broker.client.fetch_phase import FETCH_PHASES, FetchPhase
from broker.client.message import OFFSET_BEGINNING, OFFSET_INVALID, TopicPartition
from broker.client.offset_validation import LOG_TRUNCATION, Verdict, decide, needs_validation
from broker.client.start_offsets import EARLIEST, LATEST
from broker.clock import ManualClock
from broker.errors import (FencedLeaderEpochError, KafkaError, NotLeaderOrFollowerError, OffsetOutOfRangeError,
                           UnknownLeaderEpochError, UnsupportedVersionError)
from tests.unit.test_fetch_state import TP0, decoded, drain, leader_1, make

pytestmark = pytest.mark.unit


def deliver(state, key, offset: int, n: int, generation: int | None = None, epochs=None) -> bool:
    """One fetch from ``offset`` returning ``n`` records of one batch, with its leader epochs."""
    generation = state.partitions[key].generation if generation is None else generation
    following = offset + n
    assert state.on_fetched(key, generation, 1000, 0, following, offset)
    return state.on_decoded(key, generation, offset, [decoded(offset, n)], None, following, 1000, epochs)


# ------------------------------------------------------------------------------ the pure decisions
@pytest.mark.parametrize("end_epoch,end_offset", [(3, 20), (5, 20), (3, 25)])
def test_an_epoch_ending_at_or_past_the_position_is_valid(end_epoch, end_offset):
    assert decide(20, 3, end_epoch, end_offset, False, "t [0]").verdict is Verdict.VALID


def test_an_epoch_ending_before_the_position_moves_it_to_the_end_offset_without_an_event():
    d = decide(20, 3, 2, 12, False, "t [0]")
    assert (d.verdict, d.offset, d.leader_epoch, d.error) == (Verdict.TRUNCATED, 12, 2, None)


def test_a_truncation_under_auto_offset_reset_error_is_reported_at_no_offset():
    d = decide(20, 3, 2, 12, True, "t [0]")
    assert (d.verdict, d.offset) == (Verdict.STOP, OFFSET_INVALID)
    assert d.error.code() == KafkaError._AUTO_OFFSET_RESET
    assert "Partition log truncation detected at t [0] offset 20" in d.error.str()
    assert d.error.str().endswith(LOG_TRUNCATION) and "broker end offset is 12" in d.error.str()


@pytest.mark.parametrize("end_epoch,end_offset", [(-1, -1), (2, -1), (-1, 7)])
def test_no_epoch_known_at_or_below_the_positions_applies_auto_offset_reset(end_epoch, end_offset):
    assert decide(20, 3, end_epoch, end_offset, False, "t [0]").verdict is Verdict.RESET
    d = decide(20, 3, end_epoch, end_offset, True, "t [0]")
    assert (d.verdict, d.offset, d.error.code()) == (Verdict.STOP, 20, KafkaError._AUTO_OFFSET_RESET)
    assert "No epoch found less or equal to t [0] offset 20" in d.error.str()


@pytest.mark.parametrize("position,epoch,known,leader,expected", [
    (20, 3, 3, 4, True),     # the epoch grew
    (20, 3, -1, 3, True),    # the first epoch seen after an offset assigned with its epoch
    (20, 3, 4, 4, False),    # unchanged
    (20, 3, 5, 4, False),    # stale metadata
    (20, -1, 3, 4, False),   # a position without an epoch is not validated (librdkafka skips it)
    (-1001, -1, 3, 4, False),
    (20, 3, 3, -1, False),   # metadata without an epoch
])
def test_which_leader_epoch_changes_call_for_validation(position, epoch, known, leader, expected):
    assert needs_validation(position, epoch, known, leader) is expected


def test_the_phase_table_lets_only_a_fetching_partition_await_validation():
    assert FETCH_PHASES.can_move(FetchPhase.FETCHING, FetchPhase.VALIDATING)
    assert FETCH_PHASES.can_move(FetchPhase.VALIDATING, FetchPhase.FETCHING)
    assert FETCH_PHASES.can_move(FetchPhase.VALIDATING, FetchPhase.AWAITING_RESET)
    assert not FETCH_PHASES.can_move(FetchPhase.HALTED, FetchPhase.VALIDATING)
    assert not FETCH_PHASES.can_move(FetchPhase.AWAITING_RESET, FetchPhase.VALIDATING)


# ------------------------------------------------------------------------------ the fetch state
def fetching_at(position: int, epoch: int, reset=EARLIEST, clock=None):
    """A partition that took records up to ``position`` in leader epoch ``epoch`` (leader epoch known)."""
    state = make(reset, clock=clock)
    state.assign([TopicPartition("orders", 0, 0)])
    state.note_leader_epochs({TP0: epoch})
    assert deliver(state, TP0, 0, position, epochs={position: epoch})
    assert drain(state)[-1] == position - 1
    return state


def test_records_carry_their_batchs_epoch_and_so_do_the_position_and_its_commit():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    assert deliver(state, TP0, 0, 3, epochs={3: 7})
    message = state.take_one(state.head())
    assert message.leader_epoch() == 7 and state.partitions[TP0].epoch == 7
    assert state.to_commit()[0].leader_epoch == 7


def test_a_grown_leader_epoch_stops_fetching_drops_prefetched_records_and_validates_the_position():
    state = fetching_at(10, 3)
    assert deliver(state, TP0, 10, 5, epochs={15: 3})       # prefetched, not yet taken
    state.note_leader_epochs({TP0: 4})
    assert state.partitions[TP0].phase is FetchPhase.VALIDATING and state.head() is None
    assert state.to_fetch(1, leader_1) == ([], [])
    generation = state.partitions[TP0].generation
    assert state.to_validate(1, leader_1) == [(TP0, generation, 3, 4)]
    assert state.leader_epoch_of(TP0) == 4
    assert not state.on_validated(TP0, generation, 3, 30)   # valid: fetch on from the position
    assert state.to_fetch(1, leader_1) == ([(TP0, 10, generation)], [])


def test_a_truncated_log_is_read_from_where_it_diverged():
    state = fetching_at(15, 3)
    state.note_leader_epochs({TP0: 5})
    generation = state.partitions[TP0].generation
    assert not state.on_validated(TP0, generation, 3, 10)
    assert state.position(TP0) == 10 and state.partitions[TP0].epoch == 3 and not state.events
    assert state.to_fetch(1, leader_1) == ([(TP0, 10, generation)], [])
    assert deliver(state, TP0, 10, 8, generation=generation, epochs={18: 5})
    assert drain(state) == list(range(10, 18))


def test_a_truncation_under_auto_offset_reset_error_is_one_event_and_stops_the_partition_until_seek():
    state = fetching_at(15, 3, reset=None)
    state.note_leader_epochs({TP0: 5})
    assert state.on_validated(TP0, state.partitions[TP0].generation, 3, 10)
    event = state.events.popleft()
    assert (event.offset(), event.error().code()) == (None, KafkaError._AUTO_OFFSET_RESET)  # OFFSET_INVALID
    assert state.position(TP0) == 15 and state.to_fetch(1, leader_1) == ([], [])
    assert state.to_validate(1, leader_1) == []
    state.seek(TP0, 10)
    assert state.to_fetch(1, leader_1)[0][0][:2] == (TP0, 10)


@pytest.mark.parametrize("reset,phase,offset", [(EARLIEST, FetchPhase.AWAITING_RESET, OFFSET_BEGINNING),
                                                (LATEST, FetchPhase.AWAITING_RESET, -1)])
def test_no_epoch_known_on_the_leader_resets_by_auto_offset_reset(reset, phase, offset):
    state = fetching_at(15, 3, reset=reset)
    state.note_leader_epochs({TP0: 5})
    assert not state.on_validated(TP0, state.partitions[TP0].generation, -1, -1)
    assert state.partitions[TP0].phase is phase and state.partitions[TP0].fetch_offset == offset
    assert state.to_fetch(1, leader_1)[1][0][2] == offset


@pytest.mark.parametrize("error", [FencedLeaderEpochError("fenced"), UnknownLeaderEpochError("unknown")])
def test_a_fetch_fenced_by_its_leader_epoch_validates_before_fetching_again(error):
    state = fetching_at(10, 3)
    generation = state.partitions[TP0].generation
    assert state.on_error(TP0, generation, error, 0, 10, 10)    # refresh metadata
    assert state.partitions[TP0].phase is FetchPhase.VALIDATING


def test_a_failed_validation_is_asked_again_after_the_backoff():
    clock = ManualClock()
    state = fetching_at(10, 3, clock=clock)
    state.note_leader_epochs({TP0: 4})
    generation = state.partitions[TP0].generation
    state.on_validation_failed(TP0, generation, NotLeaderOrFollowerError("moved"))
    assert state.to_validate(1, leader_1) == []
    clock.advance(100)
    assert state.to_validate(1, leader_1) == [(TP0, generation, 3, 4)]
    state.on_validation_failed(TP0, generation, UnsupportedVersionError("no such call"))
    assert state.to_fetch(1, leader_1) == ([(TP0, 10, generation)], [])  # a broker without the call: skipped


def test_an_offset_assigned_or_sought_with_its_epoch_is_validated_and_one_without_is_not():
    state = make()
    state.assign([TopicPartition("orders", 0, 15, leader_epoch=3), TopicPartition("orders", 1, 15)])
    state.note_leader_epochs({TP0: 5, ("orders", 1): 5})
    assert state.partitions[TP0].phase is FetchPhase.VALIDATING
    assert state.partitions[("orders", 1)].phase is FetchPhase.FETCHING
    state.seek(("orders", 1), 20, 4)
    assert state.partitions[("orders", 1)].phase is FetchPhase.VALIDATING
    state.seek(TP0, 20)
    assert state.partitions[TP0].phase is FetchPhase.FETCHING


def test_an_answer_for_an_older_generation_is_dropped():
    state = fetching_at(15, 3)
    state.note_leader_epochs({TP0: 5})
    old = state.partitions[TP0].generation
    state.seek(TP0, 15, 3)
    assert not state.on_validated(TP0, old, 3, 10)
    assert state.position(TP0) == 15 and state.partitions[TP0].phase is FetchPhase.VALIDATING


def test_a_lower_leader_epoch_is_adopted_for_fetches_but_not_validated():
    state = fetching_at(10, 5)
    state.note_leader_epochs({TP0: 2})     # stale metadata, or the topic was made again
    assert state.partitions[TP0].phase is FetchPhase.FETCHING and state.leader_epoch_of(TP0) == 2


def test_a_listoffsets_start_takes_the_answers_epoch():
    state = make()
    state.assign([TopicPartition("orders", 0, OFFSET_BEGINNING)])
    generation = state.partitions[TP0].generation
    assert state.reset_resolved(TP0, generation, 40, 6)
    assert (state.position(TP0), state.partitions[TP0].epoch) == (40, 6)
    state.note_leader_epochs({TP0: 7})
    assert state.to_validate(1, leader_1) == [(TP0, state.partitions[TP0].generation, 6, 7)]


def test_the_position_takes_the_epoch_of_the_markers_it_passes():
    """Kafka's CompletedFetch takes every batch's epoch, a control batch's too: a position moved
    past a marker written in a newer epoch is that epoch's, so a later validation does not take
    the marker for a truncation."""
    state = make(None)                                   # auto.offset.reset=error
    state.assign([TopicPartition("orders", 0, 0)])
    state.note_leader_epochs({TP0: 5})
    assert deliver(state, TP0, 0, 10, epochs={10: 5})
    assert drain(state) == list(range(10))
    state.note_leader_epochs({TP0: 6})
    assert not state.on_validated(TP0, state.partitions[TP0].generation, 5, 10)
    generation = state.partitions[TP0].generation
    assert state.on_fetched(TP0, generation, 1000, 0, 11, 10)
    state.on_decoded(TP0, generation, 10, [], None, 11, 1000, {11: 6})     # a marker alone, epoch 6
    assert (state.position(TP0), state.partitions[TP0].epoch) == (11, 6)
    state.note_leader_epochs({TP0: 7})
    assert not state.on_validated(TP0, state.partitions[TP0].generation, 6, 11)
    assert not state.events and state.partitions[TP0].phase is FetchPhase.FETCHING


def test_records_then_a_marker_in_one_response_give_the_position_the_markers_epoch():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    state.note_leader_epochs({TP0: 6})
    generation = state.partitions[TP0].generation
    assert state.on_fetched(TP0, generation, 1000, 0, 11, 0)
    state.on_decoded(TP0, generation, 0, [decoded(0, 10)], None, 11, 1000, {10: 5, 11: 6})
    assert drain(state) == list(range(10))
    assert (state.position(TP0), state.partitions[TP0].epoch) == (11, 6)



def test_a_partition_without_a_leader_does_not_hold_back_the_others():
    """Around an unclean election one partition has no leader: the others are still fetched."""
    import threading

    from broker.client.fetcher import Fetcher
    from broker.errors import LeaderNotAvailableError

    class Cluster:
        topics: dict = {}

        def leader_and_epoch(self, topic, partition):
            if partition == 1:
                raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now")
            return 1, 3

    fetcher = object.__new__(Fetcher)       # its round alone, without its threads
    fetcher.cluster, fetcher.state, fetcher._cond, fetcher._committed = Cluster(), make(), threading.Condition(), None
    fetcher.config = {"retry.backoff.ms": 100, "request.timeout.ms": 1000, "isolation.level": "read_uncommitted"}
    fetcher.state.assign([TopicPartition("orders", 0, 10), TopicPartition("orders", 1, 10)])
    assert [(key, offset) for key, offset, _ in fetcher._fetchable(1)] == [(TP0, 10)]
