"""Idempotent producer state: resends recognised, gaps and old epochs refused, state kept across
restarts (snapshot + replay), truncation and replication."""
from __future__ import annotations

import os

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import InvalidProducerEpochError, OutOfOrderSequenceError, UnknownProducerIdError
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import IDEMPOTENCE_WINDOW, MAX_SEQUENCE, stamp_producer, validate_batches
from broker.storage.log import Log
from broker.storage.producer_state import SNAPSHOT_FILE, ProducerStateManager


def batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    return stamp_producer(encode_batch(record_batch([b"k"] * n, [b"v%d" % (seq + i) for i in range(n)],
                                                    [1000] * n)), pid, epoch, seq)


def header(data: bytes):
    return validate_batches(data, max_batch_bytes=1 << 20)[0]


def test_a_resent_batch_is_recognised_and_a_gap_refused():
    state = ProducerStateManager()
    first = header(batch(7, 0, 0))
    assert state.check(first) is None
    state.update(first, 100, 101)
    resent = state.check(first)
    assert (resent.first_offset, resent.last_offset) == (100, 101)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header(batch(7, 0, 5)))
    assert state.check(header(batch(7, 0, 2))) is None


def test_only_the_last_window_of_batches_is_remembered():
    state = ProducerStateManager()
    n = IDEMPOTENCE_WINDOW + 2
    for i in range(n):
        state.update(header(batch(7, 0, 2 * i)), 2 * i, 2 * i + 1)
    oldest = 2 * (n - IDEMPOTENCE_WINDOW)
    assert state.check(header(batch(7, 0, oldest))).first_offset == oldest   # still remembered
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header(batch(7, 0, oldest - 2)))                       # forgotten


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero():
    state = ProducerStateManager()
    state.update(header(batch(7, 1, 0)), 0, 1)
    with pytest.raises(InvalidProducerEpochError):
        state.check(header(batch(7, 0, 2)))
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header(batch(7, 2, 3)))
    assert state.check(header(batch(7, 2, 0))) is None


def test_sequences_wrap_to_zero_after_the_largest_int32():
    """As Kafka: after sequence 2**31 - 1 comes 0, also inside one batch."""
    state = ProducerStateManager()
    state.update(header(batch(7, 0, MAX_SEQUENCE - 3)), 0, 1)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header(batch(7, 0, MAX_SEQUENCE)))
    across = header(batch(7, 0, MAX_SEQUENCE - 1, n=4))  # sequences MAX - 1, MAX, 0, 1
    assert state.check(across) is None and across.last_sequence == 1
    state.update(across, 2, 5)
    assert state.producers[7].last_sequence == 1
    assert state.check(across).first_offset == 2  # a resend of the batch that wrapped
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header(batch(7, 0, 1)))  # 1 again: the next is 2
    assert state.check(header(batch(7, 0, 2))) is None
    ended = ProducerStateManager()
    ended.update(header(batch(7, 0, MAX_SEQUENCE - 1)), 0, 1)
    assert ended.check(header(batch(7, 0, 0))) is None


def test_an_unknown_producer_must_start_at_zero():
    state = ProducerStateManager()
    with pytest.raises(UnknownProducerIdError):
        state.check(header(batch(8, 0, 4)))
    assert state.check(header(batch(-1, -1, -1))) is None  # not idempotent: never checked


def test_an_unknown_transactional_producer_is_accepted_at_any_sequence():
    # Kafka's checkSequence accepts a producer it holds no state for: a transactional producer
    # whose state here expired between two transactions goes on at its next sequence (it cannot
    # take a new epoch inside a transaction). Once known, the sequence rules apply again.
    state = ProducerStateManager()
    first = header(stamp_producer(encode_batch(record_batch([b"k"], [b"v"], [1000])), 8, 0, 4, transactional=True))
    assert state.check(first) is None
    state.update(first, 0, 0)
    assert state.producers[8].last_sequence == 4
    gap = header(stamp_producer(encode_batch(record_batch([b"k"], [b"v"], [1000])), 8, 0, 7, transactional=True))
    with pytest.raises(OutOfOrderSequenceError):
        state.check(gap)


def test_idle_producers_expire_unless_a_transaction_is_open(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update(header(batch(7, 0, 0)), 0, 1, now_ms=1_000)
    txn = stamp_producer(encode_batch(record_batch([b"k"], [b"v"], [1000])), 8, 0, 0, transactional=True)
    state.update(header(txn), 2, 2, now_ms=1_000)
    state.update(header(batch(9, 0, 0)), 3, 4, now_ms=1_500)
    assert state.expire(now_ms=1_999, expiration_ms=1_000) == []
    assert state.expire(now_ms=2_000, expiration_ms=1_000) == [7]
    state.snapshot(5)
    restored = ProducerStateManager(str(tmp_path))
    restored.load()
    assert set(restored.producers) == {8, 9}
    assert restored.expire(now_ms=2_500, expiration_ms=1_000) == [9]   # its last write time was kept
    assert set(restored.producers) == {8}                               # the open transaction stays
    with pytest.raises(UnknownProducerIdError):
        restored.check(header(batch(7, 0, 2)))                           # forgotten: no longer known
    assert restored.check(header(batch(7, 1, 0))) is None                # a new epoch from 0 is welcome


def _partition(directory: str, clean_shutdown: bool = True) -> Partition:
    config = TOPIC_CONFIG.parse({"segment.bytes": "2048"})
    log = Log.open(directory, config, ManualClock(), clean_shutdown=clean_shutdown)
    p = Partition("t", 0, "id", log, AppendNotifier())
    p.make_leader(0, 0, [0], [0])
    return p


def test_a_partition_answers_a_resend_with_the_first_offsets_after_a_restart(tmp_path):
    p = _partition(str(tmp_path))
    for seq in range(0, 40, 2):
        p.append_records(batch(7, 0, seq))
    again = p.append_records(batch(7, 0, 38))
    assert (again.first_offset, again.last_offset) == (38, 39) and p.log.log_end_offset == 40
    p.close()
    assert os.path.exists(tmp_path / SNAPSHOT_FILE)
    p = _partition(str(tmp_path))
    assert p.append_records(batch(7, 0, 38)).first_offset == 38
    assert p.append_records(batch(7, 0, 40)).first_offset == 40
    with pytest.raises(OutOfOrderSequenceError):
        p.append_records(batch(7, 0, 50))


def test_without_a_snapshot_the_state_is_rebuilt_from_the_log(tmp_path):
    p = _partition(str(tmp_path))
    for seq in range(0, 10, 2):
        p.append_records(batch(7, 0, seq))
    p.log.flush()
    p.log.close_without_flush()  # a crash: no snapshot written at close
    if os.path.exists(tmp_path / SNAPSHOT_FILE):
        os.unlink(tmp_path / SNAPSHOT_FILE)
    p = _partition(str(tmp_path), clean_shutdown=False)
    assert p.append_records(batch(7, 0, 8)).first_offset == 8
    assert p.append_records(batch(7, 0, 10)).first_offset == 10


def test_truncation_forgets_the_batches_it_removes(tmp_path):
    p = _partition(str(tmp_path))
    for seq in range(0, 10, 2):
        p.append_records(batch(7, 0, seq))
    p.make_follower(1, 1, 1, [0, 1], [0, 1])
    p.truncate_to(6)
    assert p.producers.producers[7].last_sequence == 5
    p.make_leader(2, 2, [0, 1], [0, 1])
    assert p.append_records(batch(7, 0, 6)).first_offset == 6   # written again, not taken for a resend


def test_a_follower_learns_producers_from_replicated_batches(tmp_path):
    leader = _partition(str(tmp_path / "leader"))
    for seq in range(0, 6, 2):
        leader.append_records(batch(7, 0, seq))
    follower = _partition(str(tmp_path / "follower"))
    follower.make_follower(0, 1, 1, [0, 1], [0, 1])
    follower.append_as_follower(leader.read(0, 1 << 20, up_to_high_watermark=False).records, 6, 0)
    follower.make_leader(2, 2, [0, 1], [0])
    assert follower.append_records(batch(7, 0, 4)).first_offset == 4   # a resend after failover
    with pytest.raises(OutOfOrderSequenceError):
        follower.append_records(batch(7, 0, 8))


def test_batches_of_one_request_may_wrap_the_sequence(tmp_path):
    p = _partition(str(tmp_path))
    p.producers.update(header(batch(7, 0, MAX_SEQUENCE - 3)), 0, 1)  # a long-lived producer
    info = p.append_records(batch(7, 0, MAX_SEQUENCE - 1) + batch(7, 0, 0))
    assert (info.first_offset, info.last_offset) == (0, 3)
    assert p.append_records(batch(7, 0, 2)).first_offset == 4


def test_a_resent_batch_must_come_alone(tmp_path):
    p = _partition(str(tmp_path))
    p.append_records(batch(7, 0, 0))
    with pytest.raises(OutOfOrderSequenceError):
        p.append_records(batch(7, 0, 0) + batch(7, 0, 2))
    info = p.append_records(batch(7, 0, 2) + batch(7, 0, 4))
    assert (info.first_offset, info.last_offset) == (2, 5)
