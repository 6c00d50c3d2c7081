"""The consumer's per-partition fetch state, driven directly: no broker, no threads, a ManualClock."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.fetch_buffer import BATCH_SCHEMA
from broker.client.fetch_phase import FETCH_PHASES, FetchPhase
from broker.client.fetch_state import FetchState
from broker.client.message import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED, TopicPartition
from broker.client.start_offsets import EARLIEST, LATEST
from broker.clock import ManualClock
from broker.errors import (CorruptRecordError, NotLeaderOrFollowerError, OffsetOutOfRangeError, PartitionEOF,
                           RiverlogError, InvalidRequestError, KafkaError, UnknownTopicOrPartitionError)
from broker.records.arrow_body import record_batch
from broker.records.reader import DecodedBatch, DecodeFailure
from broker.state_machine import IllegalStateTransition

pytestmark = pytest.mark.unit

TP0 = ("orders", 0)


def make(reset=EARLIEST, eof=False, limit=1 << 20, clock=None) -> FetchState:
    return FetchState(reset, eof, 0.1, limit, clock or ManualClock())


def decoded(base: int, n: int) -> DecodedBatch:
    values = [f"v{base + i}".encode() for i in range(n)]
    return DecodedBatch(base, record_batch([None] * n, values, [1_700_000_000_000 + i for i in range(n)]),
                        False, base + n)


def deliver(state: FetchState, key, offset: int, n: int, high_watermark: int = 1000, generation: int = 0) -> bool:
    """One fetch from ``offset`` that returns ``n`` records, through both fetcher steps."""
    following = offset + n
    assert state.on_fetched(key, generation, high_watermark, 0, following)
    return state.on_decoded(key, generation, offset, [decoded(offset, n)], None, following, high_watermark)


def drain(state: FetchState) -> list[int]:
    offsets = []
    while True:
        if state.events:
            offsets.append(("event", state.events.popleft()))
            continue
        chunk = state.head()
        if chunk is None:
            return offsets
        message = state.take_one(chunk)
        offsets.append(message.offset() if message.error() is None else ("error", message))


def leader_1(topic, partition):
    return 1


# ------------------------------------------------------------------------------ the transition table
def test_transition_table_allows_only_the_documented_moves():
    assert FETCH_PHASES.can_move(FetchPhase.AWAITING_RESET, FetchPhase.FETCHING)
    assert FETCH_PHASES.can_move(FetchPhase.FETCHING, FetchPhase.HALTED)
    assert FETCH_PHASES.can_move(FetchPhase.HALTED, FetchPhase.FETCHING)
    assert not FETCH_PHASES.can_move(FetchPhase.AWAITING_RESET, FetchPhase.HALTED)
    assert not FETCH_PHASES.can_move(FetchPhase.HALTED, FetchPhase.HALTED)
    assert FETCH_PHASES.finals() == set()


def test_an_illegal_move_fails_loudly():
    state = make()
    state.assign([TopicPartition("orders", 0, OFFSET_BEGINNING)])
    with pytest.raises(IllegalStateTransition):
        state.partitions[TP0].move(FetchPhase.HALTED)


# ------------------------------------------------------------------------------ assignment and resets
@pytest.mark.parametrize("offset,phase", [(5, FetchPhase.FETCHING), (OFFSET_BEGINNING, FetchPhase.AWAITING_RESET),
                                          (OFFSET_STORED, FetchPhase.AWAITING_RESET)])
def test_assigned_partition_starts_fetching_only_with_an_offset(offset, phase):
    state = make()
    state.assign([TopicPartition("orders", 0, offset)])
    assert state.partitions[TP0].phase is phase


def test_to_fetch_asks_the_leader_only_and_lists_resets_first():
    state = make()
    state.assign([TopicPartition("orders", 0, 7), TopicPartition("orders", 1, OFFSET_END),
                  TopicPartition("orders", 2, 3)])
    parts, resets = state.to_fetch(1, lambda t, p: 2 if p == 2 else 1)
    assert parts == [(TP0, 7, 0)]
    generation = state.partitions[("orders", 1)].generation
    assert resets == [(("orders", 1), generation, OFFSET_END)]
    assert state.reset_target(("orders", 1), OFFSET_END) == LATEST
    assert state.reset_resolved(("orders", 1), generation, 40)
    assert state.partitions[("orders", 1)].phase is FetchPhase.FETCHING
    assert state.position(("orders", 1)) == 40


@pytest.mark.parametrize("reset", [EARLIEST, LATEST])
def test_no_committed_offset_uses_auto_offset_reset(reset):
    state = make(reset=reset)
    state.assign([TopicPartition("orders", 0, OFFSET_INVALID)])
    assert state.reset_target(TP0, OFFSET_INVALID) == reset
    assert state.reset_target(TP0, OFFSET_BEGINNING) == EARLIEST


def test_no_position_with_reset_error_reports_once_and_pauses():
    state = make(reset=None)
    state.assign([TopicPartition("orders", 0, OFFSET_STORED)])
    assert state.reset_target(TP0, OFFSET_STORED) is None
    error = state.events.popleft().error()
    assert error.code() == KafkaError._AUTO_OFFSET_RESET == -140, "librdkafka's code for auto.offset.reset=error"
    assert isinstance(error.exception(), OffsetOutOfRangeError)
    assert state.to_fetch(1, leader_1) == ([], [])
    state.set_paused([TP0], False)
    assert state.to_fetch(1, leader_1)[1] == [(TP0, 0, OFFSET_STORED)]


def test_a_reset_answer_for_an_older_generation_is_ignored():
    state = make()
    state.assign([TopicPartition("orders", 0, OFFSET_BEGINNING)])
    state.seek(TP0, OFFSET_END)
    assert not state.reset_resolved(TP0, 0, 0)
    assert state.partitions[TP0].phase is FetchPhase.AWAITING_RESET


# ------------------------------------------------------------------------------ responses
def test_records_come_out_in_order_and_move_the_position():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    assert deliver(state, TP0, 0, 3)
    assert deliver(state, TP0, 3, 2)
    assert state.partitions[TP0].fetch_offset == 5
    assert drain(state) == [0, 1, 2, 3, 4]
    assert state.position(TP0) == 5


def test_a_stale_response_is_dropped():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    assert state.on_fetched(TP0, 0, 100, 0, 10)
    state.seek(TP0, 50)
    assert not state.on_decoded(TP0, 0, 0, [decoded(0, 10)], None, 10, 100)
    assert not state.on_fetched(TP0, 0, 100, 0, 10)
    assert drain(state) == []
    assert state.partitions[TP0].fetch_offset == 50


def test_a_fetch_made_before_a_partition_was_revoked_and_assigned_again_is_dropped():
    """An eager rebalance takes everything away and gives a partition back while a fetch for it
    is in flight: that fetch's records must not be delivered under the new assignment (they were
    read once the new assignment's offset reset then started the partition again from 0)."""
    state = make()
    state.assign([TopicPartition("orders", 0, OFFSET_INVALID)])
    (_, old, _), = state.to_fetch(1, leader_1)[1]
    assert state.reset_resolved(TP0, old, 0)
    assert state.to_fetch(1, leader_1)[0] == [(TP0, 0, old)]
    state.assign([])
    state.assign([TopicPartition("orders", 0, OFFSET_INVALID)])   # no commit: the offset is reset again
    assert not state.on_fetched(TP0, old, 100, 0, 91)
    assert not state.on_decoded(TP0, old, 0, [decoded(0, 91)], None, 91, 100)
    assert drain(state) == []
    (_, new, _), = state.to_fetch(1, leader_1)[1]
    assert new != old and not state.reset_resolved(TP0, old, 0)
    assert state.reset_resolved(TP0, new, 0)
    assert deliver(state, TP0, 0, 91, generation=new)
    assert drain(state) == list(range(91))


def test_seek_drops_what_was_prefetched():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    deliver(state, TP0, 0, 10)
    state.take_one(state.head())
    state.seek(TP0, 3)
    assert state.buffer.queued_bytes == 0
    assert drain(state) == []
    assert state.to_fetch(1, leader_1)[0] == [(TP0, 3, 1)]


def test_markers_after_the_last_record_move_the_position_once_it_is_taken():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    state.on_fetched(TP0, 0, 100, 0, 6)
    state.on_decoded(TP0, 0, 0, [decoded(0, 3)], None, 6, 100)  # offsets 3..5: a marker, an aborted batch
    state.take_one(state.head())
    assert state.position(TP0) == 1
    drain(state)
    assert state.position(TP0) == 6


def test_nothing_but_markers_moves_the_position_at_once():
    state = make()
    state.assign([TopicPartition("orders", 0, 4)])
    state.on_fetched(TP0, 0, 100, 0, 9)
    state.on_decoded(TP0, 0, 4, [], None, 9, 100)
    assert state.position(TP0) == 9


def test_poll_batch_slices_keep_offsets_and_position():
    state = make()
    state.assign([TopicPartition("orders", 0, 10)])
    deliver(state, TP0, 10, 5)
    chunk = state.head()
    batch = state.take_slice(chunk, 2)
    assert batch.schema == BATCH_SCHEMA
    assert batch.column(2).to_pylist() == [10, 11]
    assert state.position(TP0) == 12


def test_the_buffer_limit_stops_prefetching_until_the_application_takes_records():
    state = make(limit=1)
    state.assign([TopicPartition("orders", 0, 0)])
    deliver(state, TP0, 0, 3)
    assert state.wanted() == []
    assert state.to_fetch(1, leader_1) == ([], [])
    chunk = state.head()
    for _ in range(3):
        state.take_one(chunk)
    assert state.head() is None and state.room  # the used-up chunk is let go: room to fetch again
    assert state.to_fetch(1, leader_1)[0] == [(TP0, 3, 0)]


def test_partition_eof_is_reported_once_per_arrival_at_the_end():
    state = make(eof=True)
    state.assign([TopicPartition("orders", 0, 0)])
    deliver(state, TP0, 0, 2, high_watermark=2)
    drain(state)
    assert state.on_fetched(TP0, 0, 2, 0, None)
    assert state.on_decoded(TP0, 0, 2, [], None, None, 2)
    assert not state.on_decoded(TP0, 0, 2, [], None, None, 2)
    event = state.events.popleft()
    assert isinstance(event.error().exception(), PartitionEOF) and event.offset() == 2


# ------------------------------------------------------------------------------ decode failures
def failure_at(offset: int, following: int) -> DecodeFailure:
    return DecodeFailure(offset, following, CorruptRecordError(f"CRC-32C mismatch in batch at offset {offset}"))


def test_a_batch_that_cannot_be_decoded_halts_its_partition_at_its_offset():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    state.on_fetched(TP0, 0, 100, 0, 20)
    assert state.on_decoded(TP0, 0, 0, [decoded(0, 4)], failure_at(4, 9), 20, 100)
    assert state.partitions[TP0].phase is FetchPhase.HALTED
    assert state.partitions[TP0].fetch_offset == 4
    out = drain(state)
    assert out[:4] == [0, 1, 2, 3]
    kind, message = out[4]
    assert kind == "error" and message.offset() == 4 and isinstance(message.error().exception(), CorruptRecordError)
    assert state.position(TP0) == 4
    assert state.to_fetch(1, leader_1) == ([], [])
    # data fetched before the halt and arriving after it is ignored; so is an offset reset
    assert not state.on_fetched(TP0, 0, 100, 0, 30)
    assert not state.on_error(TP0, 0, OffsetOutOfRangeError("gone"), 50, 60)
    assert state.position(TP0) == 4


def test_a_failure_before_the_offset_asked_for_halts_at_that_offset():
    state = make()
    state.assign([TopicPartition("orders", 0, 7)])
    state.on_fetched(TP0, 0, 100, 0, 20)
    state.on_decoded(TP0, 0, 7, [], failure_at(5, 10), 20, 100)
    assert state.partitions[TP0].fetch_offset == 7
    assert drain(state)[0][1].offset() == 7


def test_seek_lifts_a_halt():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    state.on_fetched(TP0, 0, 100, 0, 9)
    state.on_decoded(TP0, 0, 0, [], failure_at(0, 9), 9, 100)
    state.seek(TP0, 9)
    assert state.partitions[TP0].phase is FetchPhase.FETCHING
    assert drain(state) == []  # the error event was for the old position
    assert state.to_fetch(1, leader_1)[0] == [(TP0, 9, 1)]


def test_pause_keeps_a_halt_and_resume_returns_to_it():
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    state.on_fetched(TP0, 0, 100, 0, 9)
    state.on_decoded(TP0, 0, 0, [], failure_at(0, 9), 9, 100)
    state.set_paused([TP0], True)
    state.set_paused([TP0], False)
    assert state.partitions[TP0].phase is FetchPhase.HALTED
    assert state.wanted() == []


# ------------------------------------------------------------------------------ errors
def test_offset_out_of_range_resets_to_earliest_at_the_log_start_the_error_carries():
    state = make(reset=EARLIEST)
    state.assign([TopicPartition("orders", 0, 500)])
    assert not state.on_error(TP0, 0, OffsetOutOfRangeError("500 is past the end"), 10, 90)
    assert state.position(TP0) == 10
    assert state.partitions[TP0].generation == 1
    assert state.to_fetch(1, leader_1)[0] == [(TP0, 10, 1)]


def test_offset_out_of_range_resets_to_latest_through_list_offsets_not_to_the_log_end():
    """librdkafka's rd_kafka_offset_reset sets the logical END and asks the cluster: ListOffsets
    LATEST is the high watermark, or the last stable offset under read_committed, never the log
    end the error carries (records past the LSO may belong to a transaction that commits later)."""
    state = make(reset=LATEST)
    state.assign([TopicPartition("orders", 0, 500)])
    assert not state.on_error(TP0, 0, OffsetOutOfRangeError("500 is past the end"), 10, 90)
    assert state.position(TP0) == OFFSET_INVALID
    assert state.partitions[TP0].phase is FetchPhase.AWAITING_RESET
    assert state.to_fetch(1, leader_1) == ([], [(TP0, 1, OFFSET_END)])
    assert state.reset_target(TP0, OFFSET_END) == LATEST
    assert state.reset_resolved(TP0, 1, 80)                      # what ListOffsets answered
    assert state.position(TP0) == 80
    assert state.to_fetch(1, leader_1)[0] == [(TP0, 80, 1)]


def test_partitions_that_returned_records_are_fetched_last():
    """Kafka's SubscriptionState.movePartitionToEnd: the broker lets only the first partition with
    records exceed what is left of fetch.max.bytes, so one that got nothing comes first next."""
    state = make()
    keys = [("orders", p) for p in range(3)]
    state.assign([TopicPartition(t, p, 0) for t, p in keys])
    assert [k for k, _, _ in state.to_fetch(1, leader_1)[0]] == keys
    assert state.on_fetched(keys[0], 0, 100, 0, 5)               # records for partition 0 only
    assert [k for k, _, _ in state.to_fetch(1, leader_1)[0]] == [keys[1], keys[2], keys[0]]
    assert state.on_fetched(keys[2], 2, 100, 0, 5)
    assert [k for k, _, _ in state.to_fetch(1, leader_1)[0]] == [keys[1], keys[0], keys[2]]
    assert state.on_fetched(keys[1], 1, 100, 0, None)            # nothing: its place is kept
    assert [k for k, _, _ in state.to_fetch(1, leader_1)[0]] == [keys[1], keys[0], keys[2]]
    assert [tp.partition for tp in state.positions()] == [0, 1, 2]   # assignment order kept


def test_offset_out_of_range_without_reset_is_reported_and_pauses():
    state = make(reset=None)
    state.assign([TopicPartition("orders", 0, 500)])
    state.on_error(TP0, 0, OffsetOutOfRangeError("500 is past the end"), 10, 90)
    error = state.events.popleft().error()
    assert error.code() == KafkaError._AUTO_OFFSET_RESET and isinstance(error.exception(), OffsetOutOfRangeError)
    assert state.position(TP0) == 500
    assert state.to_fetch(1, leader_1) == ([], [])


def test_not_leader_asks_for_a_metadata_refresh_and_reports_nothing():
    state = make()
    state.assign([TopicPartition("orders", 0, 5)])
    assert state.on_error(TP0, 0, NotLeaderOrFollowerError("moved"), -1, -1)
    assert not state.events and state.position(TP0) == 5


def test_a_fatal_fetch_error_is_reported():
    state = make()
    state.assign([TopicPartition("orders", 0, 5)])
    assert not state.on_error(TP0, 0, InvalidRequestError("no"), -1, -1)
    assert isinstance(state.events.popleft().error().exception(), InvalidRequestError)


def test_unknown_partition_is_reported_once():
    state = make()
    state.assign([TopicPartition("orders", 9, 0)])
    error = UnknownTopicOrPartitionError("topic 'orders' has 3 partitions; partition 9 does not exist")
    assert state.stop_unknown(("orders", 9), error)
    assert not state.stop_unknown(("orders", 9), error)
    assert len(state.events) == 1


def test_metadata_refreshes_are_spaced_by_the_backoff():
    clock = ManualClock()
    state = make(clock=clock)
    assert state.refresh_due()
    assert not state.refresh_due()
    clock.advance(99)
    assert not state.refresh_due()
    clock.advance(1)
    assert state.refresh_due()


def test_seek_of_an_unassigned_partition_is_refused():
    with pytest.raises(RiverlogError, match="not assigned"):
        make().seek(TP0, 0)


# ------------------------------------------------------------------------------ a property
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["fetch", "take", "seek", "oor"]), st.integers(0, 5)), max_size=40))
def test_delivered_offsets_are_contiguous_between_seeks(steps):
    """Whatever the interleaving, the application sees each offset once, in order, from its
    position, and records fetched before an offset reset before the reset's; nothing of an older
    generation comes out. The model: each queued offset with the position after taking it."""
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    queued: list[list[int]] = []
    for op, n in steps:
        s = state.partitions[TP0]
        if op == "fetch" and n:
            queued += [[o, o + 1] for o in range(s.fetch_offset, s.fetch_offset + n)]
            deliver(state, TP0, s.fetch_offset, n, generation=s.generation)
        elif op == "take":
            for _ in range(n):
                chunk = state.head()
                if chunk is None:
                    assert not queued
                    break
                offset, after = queued.pop(0)
                assert state.take_one(chunk).offset() == offset
                assert state.position(TP0) == after
        elif op == "seek":
            state.seek(TP0, n * 10)
            queued = []
        else:
            state.on_error(TP0, s.generation, OffsetOutOfRangeError("gone"), n, 100)
            if queued:
                queued[-1][1] = max(queued[-1][1], n)
            else:
                assert state.position(TP0) == n
