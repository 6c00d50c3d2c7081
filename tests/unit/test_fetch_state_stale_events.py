"""A partition's error events (``_PARTITION_EOF``, fetch errors) not yet returned belong to the
position they were found at: ``seek``, ``pause`` and unassigning drop them, as librdkafka's
version barrier (``rd_kafka_toppar_version_new_barrier`` on seek/pause/stop) makes every
``rd_kafka_consumer_err`` of the older fetch version outdated. Client-level events stay."""
from __future__ import annotations

import pytest

from broker.client.fetch_state import FetchState
from broker.client.message import OFFSET_INVALID, Message, TopicPartition
from broker.client.start_offsets import EARLIEST
from broker.clock import ManualClock
from broker.errors import KafkaError, PartitionEOF
from broker.records.arrow_body import record_batch
from broker.records.reader import DecodedBatch

pytestmark = pytest.mark.unit

TP0, TP1 = ("orders", 0), ("orders", 1)


def at_end(keys=(TP0,)) -> FetchState:
    """Each of ``keys`` read to its end (2 records taken), with its ``_PARTITION_EOF`` queued, unpolled."""
    state = FetchState(EARLIEST, True, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(t, p, 0) for t, p in keys])
    for key in keys:
        generation = state.partitions[key].generation
        assert state.on_fetched(key, generation, 2, 0, 2)
        batch = record_batch([None, None], [b"a", b"b"], [1, 2])
        state.on_decoded(key, generation, 0, [DecodedBatch(0, batch, False, 2)], None, 2, 2)
    while (chunk := state.head()) is not None:
        state.take_one(chunk)
    for key in keys:
        generation = state.partitions[key].generation
        assert state.on_fetched(key, generation, 2, 0, None)
        assert state.on_decoded(key, generation, 2, [], None, None, 2)
    assert [isinstance(m.error().exception(), PartitionEOF) for m in state.events] == [True] * len(keys)
    return state


def partitions_of_events(state: FetchState) -> list:
    return [(m.topic(), m.partition()) for m in state.events]


def test_seek_back_drops_the_end_of_partition_event_of_the_old_position():
    state = at_end()
    state.seek(TP0, 0)
    assert partitions_of_events(state) == []  # an app reading "until EOF" must get offset 0 next, not EOF at 2


def test_pause_drops_the_partitions_pending_events():
    state = at_end([TP0, TP1])
    state.set_paused([TP0], True)
    assert partitions_of_events(state) == [TP1]


def test_unassigned_partitions_events_are_not_returned():
    state = at_end([TP0, TP1])
    state.remove([TopicPartition(*TP0)])
    assert partitions_of_events(state) == [TP1]


def test_a_new_assignment_drops_partition_events_but_keeps_client_level_ones():
    state = at_end([TP0, TP1])
    exceeded = KafkaError(KafkaError._MAX_POLL_EXCEEDED, "Application maximum poll interval exceeded")
    state.events.append(Message(None, -1, OFFSET_INVALID, error=exceeded))
    state.assign([TopicPartition(*TP1, 0)])
    assert [m.error().code() for m in state.events] == [KafkaError._MAX_POLL_EXCEEDED]


def test_a_reset_decided_for_an_older_generation_neither_stops_nor_reports():
    """The fetcher lists a partition without a position (``to_fetch``), asks for its committed
    offset outside the lock, and meanwhile the application seeks it: ``auto.offset.reset=error``
    must not then stop the sought partition and report it as having no position."""
    from broker.client.message import OFFSET_INVALID as INVALID

    state = FetchState(None, False, 0.1, 1 << 20, ManualClock())  # auto.offset.reset=error
    state.assign([TopicPartition(*TP0, INVALID)])
    _, resets = state.to_fetch(1, lambda t, p: 1)
    [(key, generation, offset)] = resets
    state.seek(TP0, 5)                                   # the application's thread, in between
    assert state.reset_target(key, offset, generation) is None
    assert not state.events and not state.partitions[TP0].paused
    assert state.to_fetch(1, lambda t, p: 1)[0] == [(TP0, 5, state.partitions[TP0].generation)]
