"""KIP-320 while records are queued for the application: a slow application must not be handed
records of an old leader once the metadata tells of a newer epoch (Kafka's ``FetchCollector``
returns no buffered records of a partition awaiting validation; librdkafka's
``rd_kafka_toppar_leader_update`` validates when metadata arrives, whatever its queue holds), and
a reset deferred behind queued records keeps the epoch ListOffsets gave it."""
from __future__ import annotations

import threading

import pytest

from broker.client.cluster import PartitionInfo, TopicInfo
from broker.client.fetch_phase import FetchPhase
from broker.client.fetcher import Fetcher
from broker.client.message import TopicPartition
from broker.client.start_offsets import EARLIEST, LATEST
from broker.errors import OffsetOutOfRangeError
from tests.unit.test_fetch_state import TP0, drain, leader_1, make
from tests.unit.test_offset_validation import deliver

pytestmark = pytest.mark.unit


class Cluster:
    """The metadata a consumer holds: one partition led by broker 1; asking for more is counted."""

    def __init__(self, epoch: int):
        self.topics = {"orders": TopicInfo("orders", "id", {0: PartitionInfo(0, 1, epoch, [1], [1])})}
        self.refreshes = 0

    def leader_and_epoch(self, topic, partition):
        p = self.topics[topic].partitions[partition]
        return p.leader, p.leader_epoch

    def refresh(self, *args, **kwargs):
        self.refreshes += 1


def fetcher_over(state, cluster) -> Fetcher:
    fetcher = object.__new__(Fetcher)       # its rounds alone, without its threads
    fetcher.cluster, fetcher.state, fetcher._cond, fetcher._committed = cluster, state, threading.Condition(), None
    fetcher.config = {"retry.backoff.ms": 100, "request.timeout.ms": 1000, "isolation.level": "read_uncommitted"}
    return fetcher


def test_a_full_buffer_does_not_hide_a_grown_leader_epoch_from_the_records_queued():
    """The buffer is full of records of epoch 3 the application takes slowly; an unclean election
    makes epoch 4, and the metadata held says so: the next round of the fetcher (which fetches
    nothing, the buffer being full) stops the partition for validation and drops what was queued,
    without asking for metadata."""
    state = make(limit=1)                   # one chunk fills the buffer
    state.assign([TopicPartition("orders", 0, 0)])
    cluster = Cluster(3)
    fetcher = fetcher_over(state, cluster)
    assert [(key, offset) for key, offset, _ in fetcher._fetchable(1)] == [(TP0, 0)]
    assert deliver(state, TP0, 0, 10, epochs={10: 3})
    assert state.take_one(state.head()).offset() == 0
    assert state.buffer.full() and fetcher._fetchable(1) == []
    cluster.topics["orders"].partitions[0].leader_epoch = 4
    assert fetcher._fetchable(1) == []
    part = state.partitions[TP0]
    assert part.phase is FetchPhase.VALIDATING and state.head() is None and drain(state) == []
    assert (state.position(TP0), part.epoch) == (1, 3) and cluster.refreshes == 0
    assert state.to_validate(1, leader_1) == [(TP0, part.generation, 3, 4)]


def test_a_paused_partitions_grown_epoch_is_validated_before_it_fetches_again():
    """Noted while paused, as every assigned partition's (before, the first round after resume()
    noted it, with the same outcome)."""
    state = make()
    state.assign([TopicPartition("orders", 0, 0)])
    cluster = Cluster(3)
    fetcher = fetcher_over(state, cluster)
    fetcher._fetchable(1)
    assert deliver(state, TP0, 0, 5, epochs={5: 3}) and drain(state) == [0, 1, 2, 3, 4]
    state.set_paused([TP0], True)
    cluster.topics["orders"].partitions[0].leader_epoch = 4
    assert fetcher._fetchable(1) == []
    state.set_paused([TP0], False)
    assert state.to_fetch(1, leader_1) == ([], [])
    assert state.to_validate(1, leader_1) == [(TP0, state.partitions[TP0].generation, 3, 4)]


def _deferred_reset(reset, take_slices: bool):
    """Records 0..2 (epoch 2) queued, then OffsetOutOfRange at 3: the reset waits for them."""
    state = make(reset)
    state.assign([TopicPartition("orders", 0, 0)])
    state.note_leader_epochs({TP0: 2})
    assert deliver(state, TP0, 0, 3, epochs={3: 2})
    generation = state.partitions[TP0].generation
    state.on_error(TP0, generation, OffsetOutOfRangeError("gone"), 50, 90, 3)
    if reset == LATEST:                     # ListOffsets answers 90 in epoch 4
        assert state.reset_resolved(TP0, generation, 90, 4)
    if take_slices:
        chunk = state.head()
        assert state.take_slice(chunk, chunk.remaining).num_rows == 3
    else:
        assert drain(state) == [0, 1, 2]
    return state


@pytest.mark.parametrize("take_slices", [False, True])
def test_a_reset_deferred_behind_queued_records_takes_the_listoffsets_epoch(take_slices):
    """Once the queued records are taken the position is ListOffsets' offset in its epoch (as a
    reset taken at once): committed with it, and validated when the epoch grows."""
    state = _deferred_reset(LATEST, take_slices)
    assert (state.position(TP0), state.partitions[TP0].epoch) == (90, 4)
    assert state.to_commit()[0].leader_epoch == 4
    state.note_leader_epochs({TP0: 5})
    assert state.partitions[TP0].phase is FetchPhase.VALIDATING
    assert state.to_validate(1, leader_1) == [(TP0, state.partitions[TP0].generation, 4, 5)]


def test_an_earliest_reset_at_the_log_start_the_error_carried_has_no_epoch():
    """Guard (already matched, documented): the log start came without an epoch, so the position
    has none and is not validated; never the epoch of the records before it."""
    state = _deferred_reset(EARLIEST, False)
    assert (state.position(TP0), state.partitions[TP0].epoch) == (50, -1)
    state.note_leader_epochs({TP0: 5})
    assert state.partitions[TP0].phase is FetchPhase.FETCHING
