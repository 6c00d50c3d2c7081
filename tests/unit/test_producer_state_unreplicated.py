"""A completed transaction holds the last stable offset back until the high watermark passes its
marker (Kafka's ``ProducerStateManager.unreplicatedTxns`` / ``onHighWatermarkUpdated``): before
that, a new leader may lack the marker, so read_committed must not see the transaction yet."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL, parse_header
from broker.records.control import marker_batch
from broker.storage.log import Log
from broker.storage.producer_state import CompletedTxn, ProducerStateManager

pytestmark = pytest.mark.unit

PID = 1000


def _txn_batch(n: int = 3, sequence: int = 0) -> bytes:
    return encode_batch(record_batch([b"k"] * n, [b"v"] * n, [1] * n), attributes=TRANSACTIONAL,
                        producer_id=PID, producer_epoch=0, base_sequence=sequence)


def _partition(tmp_path, replicas=(0, 1)) -> Partition:
    clock = ManualClock()
    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, list(replicas), list(replicas))
    return partition


def _committed_read(p: Partition, offset: int = 0) -> bytes:
    return bytes(p.read(offset, 1 << 20, read_committed=True).records)


def test_a_completed_transaction_is_unstable_until_the_high_watermark_passes_its_marker():
    state = ProducerStateManager()
    data = _txn_batch()
    state.update(parse_header(data), 0, 2)
    marker = marker_batch(PID, 0, True, 0, 1)
    state.end_transaction(parse_header(marker), 3, commit=True)
    assert state.open_transactions() == []           # no longer open ...
    assert state.first_unstable_offset() == 0         # ... but not stable yet
    state.on_high_watermark_updated(3)                # the marker itself is not below the HW
    assert state.first_unstable_offset() == 0
    state.on_high_watermark_updated(4)
    assert state.first_unstable_offset() is None
    assert state.unreplicated == []


def test_an_aborted_transaction_is_listed_and_unstable_until_replicated():
    state = ProducerStateManager()
    state.update(parse_header(_txn_batch()), 5, 7)
    state.end_transaction(parse_header(marker_batch(PID, 0, False, 0, 1)), 8, commit=False)
    assert [(a.first_offset, a.last_offset) for a in state.aborted] == [(5, 8)]
    assert state.first_unstable_offset() == 5
    state.on_high_watermark_updated(9)
    assert state.first_unstable_offset() is None
    assert [(a.first_offset, a.last_offset) for a in state.aborted] == [(5, 8)]


def test_a_marker_with_no_open_transaction_leaves_nothing_unstable():
    state = ProducerStateManager()
    state.end_transaction(parse_header(marker_batch(PID, 0, False, 0, 1)), 0, commit=False)
    assert state.first_unstable_offset() is None and state.unreplicated == []


def test_the_leader_holds_read_committed_back_until_every_isr_member_has_the_marker(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch())                                  # 0-2
    p.read_for_follower(1, 3, 1 << 20, 0)                           # follower holds 0-2: HW 3
    assert p.stable_offsets() == (0, 3)
    p.write_marker(PID, 0, True, 0)                                 # 3: commit, on the leader only
    assert p.producers.open_transactions() == []
    assert p.stable_offsets() == (0, 3)
    assert _committed_read(p) == b""
    p.read_for_follower(1, 4, 1 << 20, 0)                           # the follower has the marker: HW 4
    assert p.stable_offsets() == (4, 4)
    assert len(_committed_read(p)) > 0


def test_an_isr_shrink_that_moves_the_high_watermark_makes_the_transaction_stable(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch())
    p.read_for_follower(1, 3, 1 << 20, 0)
    p.write_marker(PID, 0, True, 0)
    assert p.stable_offsets() == (0, 3)
    p.clock.advance(10_001)   # follower 1 lagged replica.lag.time.max.ms: it no longer holds the HW
    p.make_leader(0, 1, [0, 1], [0])                                # follower 1 left the ISR
    assert p.stable_offsets() == (4, 4)


def test_a_single_replica_exposes_a_committed_transaction_at_once(tmp_path):
    p = _partition(tmp_path, replicas=(0,))
    p.append_records(_txn_batch())
    assert p.stable_offsets() == (0, 3)
    p.write_marker(PID, 0, True, 0)
    assert p.stable_offsets() == (4, 4)
    assert p.producers.unreplicated == []
    assert len(_committed_read(p)) > 0


def test_a_follower_tracks_the_last_stable_offset_from_the_leaders_high_watermark(tmp_path):
    leader = _partition(tmp_path / "leader")
    leader.append_records(_txn_batch())
    leader.read_for_follower(1, 3, 1 << 20, 0)
    leader.write_marker(PID, 0, True, 0)
    clock = ManualClock()
    follower = Partition("t", 0, "id", Log.open(str(tmp_path / "follower"), TOPIC_CONFIG.parse({}), clock),
                         AppendNotifier(), node_id=1, clock=clock)
    follower.make_follower(0, 0, 0, [0, 1], [0, 1])
    while follower.offsets()[2] < 4:                                    # one segment per read
        data = leader.read_for_follower(1, follower.offsets()[2], 1 << 20, 0).records
        follower.append_as_follower(data, leader_hw=3, leader_log_start=0)   # marker held, HW below it
    assert follower.stable_offsets() == (0, 3)
    follower.append_as_follower(b"", leader_hw=4, leader_log_start=0)
    assert follower.stable_offsets() == (4, 4)


def test_after_a_restart_the_transaction_stays_unstable_until_the_high_watermark_passes_again(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch())
    p.read_for_follower(1, 3, 1 << 20, 0)
    p.write_marker(PID, 0, True, 0)
    p.close()                                                       # snapshot with the marker unreplicated
    clock = ManualClock()
    reopened = Partition("t", 0, "id", Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), clock),
                         AppendNotifier(), clock=clock)
    assert reopened.producers.unreplicated == [CompletedTxn(PID, 0, 3)]
    reopened.make_leader(1, 1, [0, 1], [0, 1])
    assert reopened.stable_offsets()[0] == 0
    reopened.read_for_follower(1, 4, 1 << 20, 1)
    assert reopened.stable_offsets() == (4, 4)


def test_a_single_replica_restart_rebuilt_from_the_log_exposes_the_committed_transaction(tmp_path):
    p = _partition(tmp_path, replicas=(0,))
    p.append_records(_txn_batch())
    p.write_marker(PID, 0, True, 0)
    p.log.close_without_flush()                                     # a crash: no snapshot, replayed from the log
    clock = ManualClock()
    reopened = Partition("t", 0, "id", Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), clock),
                         AppendNotifier(), clock=clock)
    reopened.make_leader(1, 1, [0], [0])
    assert reopened.stable_offsets() == (4, 4)
    assert len(_committed_read(reopened)) > 0


def test_a_marker_is_refused_before_it_is_appended_while_the_isr_is_below_min_insync_replicas(tmp_path):
    """Kafka's markers are acks=all appends: NOT_ENOUGH_REPLICAS before the append, so the
    coordinator's retries (every 100 ms until the partition recovers) add no marker each."""
    from broker.errors import NotEnoughReplicasError
    clock = ManualClock()
    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({"min.insync.replicas": "2"}), clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0, 1], [0])                  # the follower is out of the ISR
    partition.append_records(_txn_batch(), acks=1)
    end = partition.log.log_end_offset
    for _ in range(3):
        with pytest.raises(NotEnoughReplicasError, match="min.insync.replicas=2"):
            partition.write_marker(PID, 0, True, 0)
    assert partition.log.log_end_offset == end and partition.producers.open_transactions()
