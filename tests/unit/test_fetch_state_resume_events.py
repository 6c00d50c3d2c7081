"""``resume()`` of a paused or stopped partition drops its error events not yet returned, as
librdkafka's ``rd_kafka_toppar_op_pause_resume`` bumps the partition's version barrier on resume
too: the error that stopped it belongs to before the resume, and the retry reports it again if it
still holds."""
from __future__ import annotations

import pytest

from broker.client.fetch_state import FetchState
from broker.client.message import TopicPartition
from broker.client.start_offsets import EARLIEST
from broker.clock import ManualClock
from broker.errors import UnknownTopicOrPartitionError

pytestmark = pytest.mark.unit

TP0, TP1 = ("orders", 0), ("orders", 1)


def stopped() -> FetchState:
    state = FetchState(EARLIEST, False, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(*TP0, 0), TopicPartition(*TP1, 0)])
    for key in (TP0, TP1):
        assert state.stop_unknown(key, UnknownTopicOrPartitionError(f"{key} does not exist"))
    assert [(m.topic(), m.partition()) for m in state.events] == [TP0, TP1]
    return state


def test_resume_of_a_stopped_partition_drops_its_pending_error_event():
    state = stopped()
    state.set_paused([TP0], False)
    assert [(m.topic(), m.partition()) for m in state.events] == [TP1]
    assert not state.partitions[TP0].paused


def test_resume_of_a_partition_not_paused_keeps_its_events():
    """An error found after the resume stays; resuming a partition that is not paused drops
    nothing (librdkafka bumps no version for it)."""
    state = stopped()
    state.set_paused([TP0], False)
    state.stop_unknown(TP0, UnknownTopicOrPartitionError("still missing"))  # reported again by the retry
    state.set_paused([TP1], False)
    state.set_paused([TP1], False)
    assert [(m.topic(), m.partition()) for m in state.events] == [TP0]
