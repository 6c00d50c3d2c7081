"""One partition's storage (log, segments, loader, producer state, cleaner, retention) under random
histories of idempotent and transactional produce, markers, rolls, cleans, retention, follower
truncation, restarts and crashes, against a model of Kafka's rules (``log_sim.py`` has the model
and the invariants). The runs write real files, so the default runs a fiftieth of the seeds the
other simulations run.

    RIVERLOG_SIM_SEEDS=10000 pytest tests/simulation/test_log_simulation.py   # more seeds (default 1000/50)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation/test_log_simulation.py     # replay one seed, with its trace
"""
from __future__ import annotations

import dataclasses

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL, validate_batches
from broker.records.reader import decode_records
from broker.storage import cleaner
from broker.storage.log import Log
from tests.simulation.log_sim import SimConfig, Simulation, Stats, run_seed
from tests.simulation.seeds import ONE_SEED, SEEDS, replay_command

pytestmark = pytest.mark.simulation

THIS_TEST = "tests/simulation/test_log_simulation.py::test_the_log_keeps_kafka_s_rules_for_every_seed"
LOG_SEEDS = max(1, SEEDS // 50)


def test_the_log_keeps_kafka_s_rules_for_every_seed():
    config = SimConfig(trace_events=1_000) if ONE_SEED is not None else SimConfig()
    seeds = [int(ONE_SEED)] if ONE_SEED is not None else range(LOG_SEEDS)
    total = Stats()
    for seed in seeds:
        try:
            total.add(run_seed(seed, config))
        except AssertionError as failure:
            if not hasattr(failure, "trace"):
                raise
            pytest.fail(f"{failure}\nreplay: {replay_command(THIS_TEST, seed)}\n" + "\n".join(failure.trace),
                        pytrace=False)
    if ONE_SEED is None:
        unexercised = [name for name, value in dataclasses.asdict(total).items() if value == 0]
        assert not unexercised, f"no run exercised: {unexercised} ({total})"


def test_a_seed_replays_identically():
    first, second = Simulation(3), Simulation(3)
    assert first.run() == second.run()
    assert [(b.base, b.records) for b in first.batches] == [(b.base, b.records) for b in second.batches]


# ---------------------------------------------------------------------------------- pinned examples
def _compacted_log(tmp_path, clock) -> Log:
    return Log.open(str(tmp_path), TOPIC_CONFIG.parse({
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.0", "delete.retention.ms": "1000",
        "segment.bytes": "700"}), clock)


def test_a_clean_below_the_cleaner_checkpoint_keeps_it_and_drops_expired_tombstones(tmp_path):
    """Found by the simulation: a restarted broker's high watermark starts at the log start; a clean
    due for a delete horizon then ended there and moved the checkpoint back over cleaned segments
    (losing the horizon). Kafka cleans up to max(first dirty offset, first uncleanable offset)."""
    clock = ManualClock()
    log = _compacted_log(tmp_path, clock)
    for i, value in enumerate([b"1", b"2", b"3", None]):   # one batch per segment; k1's latest: a tombstone
        data = encode_batch(record_batch([b"k%d" % (i % 2)], [value], [clock.time_ms()]))
        log.append(data, validate_batches(data, max_batch_bytes=1 << 20))
        log.roll()
    assert cleaner.clean(log, high_watermark=4, now_ms=clock.time_ms()).swapped
    assert log.cleaner_checkpoint.first_dirty_offset == 4
    clock.advance(2_000)   # the tombstone's delete horizon passed
    assert cleaner.clean(log, high_watermark=1, now_ms=clock.time_ms()).swapped
    assert log.cleaner_checkpoint.first_dirty_offset == 4
    rows = [(b.base_offset + i, k) for b in decode_records(log.read(0, 1 << 20), 0)
            for i, k in enumerate(b.records.column(0).to_pylist())]
    assert rows == [(2, b"k0")], "the expired tombstone of k1 stayed"
    log.close()


def _txn(key: bytes, sequence: int) -> bytes:
    return encode_batch(record_batch([key], [b"v%d" % sequence], [1]), attributes=TRANSACTIONAL,
                        producer_id=7, producer_epoch=0, base_sequence=sequence)


def _leader(tmp_path, clock, epoch: int) -> Partition:
    partition = Partition("t", 0, "id", _compacted_log(tmp_path, clock), AppendNotifier(), clock=clock)
    partition.make_leader(epoch, 0, [0, 1], [0, 1])
    return partition


def test_a_truncation_below_the_shutdown_snapshot_keeps_a_transactional_producer_s_sequence(tmp_path):
    """Found by the simulation: the snapshot taken at shutdown (the log end) was past a follower
    truncation after the restart, so the state was rebuilt from the log start over cleaned
    segments, which had lost the producer's batch (not its last when cleaned): its next
    transaction's resend was refused OutOfOrderSequence. Kafka loads the latest snapshot at or
    below the offset (it keeps one per segment)."""
    clock = ManualClock()
    p = _leader(tmp_path, clock, 1)
    p.append_records(_txn(b"a", 0))                                          # 0
    p.write_marker(7, 0, True, 0)                                            # 1: commit
    p.append_records(encode_batch(record_batch([b"a"], [b"plain"], [1])))    # 2: supersedes 0
    p.log.roll()
    p.snapshot_producers()                                                   # as a roll does: at 3
    resent = _txn(b"b", 1)
    p.append_records(resent)                                                 # 3: not replicated yet
    p.read_for_follower(1, 3, 1 << 20, 1)                                    # high watermark 3
    assert p.clean(clock.time_ms()).swapped                                  # 0 goes: 3 is the last
    p.close()                                                                # snapshot at 4
    p = _leader(tmp_path, clock, 2)
    p.make_follower(1, 3, 0, [0, 1], [0, 1])
    assert p.truncate_to(3, 3)                                               # the new leader lacks 3
    p.make_leader(4, 0, [0, 1], [0, 1])
    assert p.append_records(resent).first_offset == 3
    assert p.append_records(resent).first_offset == 3                        # and a resend is known
    p.close()


def _idempotent(epoch: int, sequence: int) -> bytes:
    return encode_batch(record_batch([b"k"], [b"v"], [1]), producer_id=9, producer_epoch=epoch,
                        base_sequence=sequence)


def test_a_snapshot_past_a_truncation_is_not_loaded_once_the_log_grows_past_it_again(tmp_path):
    """Found by the simulation: a truncation below the producer-state snapshot rebuilt the state
    but left the file; once the log grew past its offset, the next truncation loaded it, with the
    producer of records long cut off (epoch 0, sequence 1) in place of the one the log holds
    (epoch 1, sequence 0)."""
    clock = ManualClock()
    p = _leader(tmp_path, clock, 1)
    p.set_config(TOPIC_CONFIG.parse({}))
    p.append_records(_idempotent(0, 0))
    p.append_records(_idempotent(0, 1))
    p.log.roll()
    p.snapshot_producers()                                  # at 2: producer 9, epoch 0, sequence 1
    p.make_follower(1, 2, 0, [0, 1], [0, 1])
    assert p.truncate_to(0, 2)
    p.make_leader(3, 0, [0, 1], [0, 1])
    p.append_records(_idempotent(1, 0))                     # 0: a new epoch
    for _ in range(3):
        p.append_records(encode_batch(record_batch([b"k"], [b"plain"], [1])))   # 1..3
    p.make_follower(1, 4, 0, [0, 1], [0, 1])
    assert p.truncate_to(3, 4)
    p.make_leader(5, 0, [0, 1], [0, 1])
    assert p.producers.active()[0][:3] == (9, 1, 0)
    assert p.append_records(_idempotent(1, 1)).first_offset == 3
    p.close()


def test_older_snapshots_are_kept_up_to_a_bound_and_dropped_past_a_truncation(tmp_path):
    from broker.storage.producer_snapshots import KEPT, _history
    clock = ManualClock()
    p = _leader(tmp_path, clock, 1)
    for sequence in range(KEPT + 4):
        p.append_records(_idempotent(0, sequence))
        p.log.roll()
        p.snapshot_producers()
    assert sorted(_history(str(tmp_path))) == list(range(4, KEPT + 4))
    p.make_follower(1, 2, 0, [0, 1], [0, 1])
    assert p.truncate_to(10, 2)
    assert sorted(_history(str(tmp_path))) == list(range(4, 10))   # the one at 10 is current now
    assert p.producers.active()[0][:3] == (9, 0, 9)
    p.close()


def test_a_truncation_never_restores_a_snapshot_below_the_log_start(tmp_path):
    """A snapshot below the log start misses the batches DeleteRecords removed since: loaded, the
    producer would come back with an old sequence and its next batch be refused OutOfOrderSequence
    (fatal to an idempotent producer) instead of UnknownProducerId (it takes a new epoch)."""
    from broker.errors import UnknownProducerIdError
    clock = ManualClock()
    p = _leader(tmp_path, clock, 1)
    p.set_config(TOPIC_CONFIG.parse({"cleanup.policy": "delete"}))
    for sequence in range(7):                                   # 0..6; snapshots at 1..5 and 7
        p.append_records(_idempotent(0, sequence))
        if sequence != 5:
            p.log.roll()
            p.snapshot_producers()
    p.read_for_follower(1, 7, 1 << 20, 1)
    assert p.delete_records(6) == 6
    p.make_follower(1, 2, 0, [0, 1], [0, 1])
    assert p.truncate_to(6, 2)          # sequence 6 is gone, 5 below the start; no snapshot at 6
    p.make_leader(3, 0, [0, 1], [0, 1])
    with pytest.raises(UnknownProducerIdError):
        p.append_records(_idempotent(0, 6))
    p.close()
