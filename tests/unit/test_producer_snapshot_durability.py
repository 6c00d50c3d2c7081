"""The producer-state snapshot is taken at every segment roll (a transaction marker's included) and
only at a log end already fsynced, as Kafka snapshots behind the fsynced segment at a roll. A
snapshot that is missing, or past what a kill -9 leaves, makes a restart rebuild the state from the
log start, over segments the cleaner has rewritten since: a producer's last sequence goes back and
its next batch is refused."""
from __future__ import annotations

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import stamp_producer
from broker.storage.log import Log
from broker.storage.producer_state import ProducerStateManager

CONFIG = TOPIC_CONFIG.parse({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.0", "segment.ms": "1000"})


def _partition(directory, clock, clean=True) -> Partition:
    p = Partition("t", 0, "id", Log.open(str(directory), CONFIG, clock, clean_shutdown=clean), AppendNotifier(),
                  clock=clock)
    p.make_leader(0, 0, [0], [0])
    return p


def _batch(clock, keys, pid=-1, seq=-1, txn=False):
    data = encode_batch(record_batch(keys, [b"v"] * len(keys), [clock.time_ms()] * len(keys)))
    return stamp_producer(data, pid, 0, seq, txn) if pid >= 0 else data


def test_a_marker_that_rolls_the_segment_snapshots_so_a_restart_keeps_the_last_sequence(tmp_path):
    clock = ManualClock()
    p = _partition(tmp_path, clock)
    p.append_records(_batch(clock, [b"x"], 7, 0))            # idempotent producer 7: seq 0
    p.append_records(_batch(clock, [b"a", b"b"], 7, 1))      # seq 1..2
    p.append_records(_batch(clock, [b"b"]))                  # a plain write supersedes 7's last record
    p.append_records(_batch(clock, [b"t"], 9, 0, txn=True))  # transactional producer 9
    clock.advance(1001)
    p.write_marker(9, 0, True, 0)                            # the marker rolls the segment (segment.ms)
    assert [s.base_offset for s in p.log.segments] == [0, 5]
    assert p.clean(clock.time_ms()).swapped                  # 7's batch 1..2 keeps only its record "a"
    p.log.close_without_flush()                              # kill -9
    p = _partition(tmp_path, clock, clean=False)
    assert p.append_records(_batch(clock, [b"c"], 7, 3)).first_offset == 6   # seq 3 follows 2


def test_a_roll_snapshot_lies_at_a_durable_log_end(tmp_path):
    clock = ManualClock()
    p = _partition(tmp_path, clock)
    p.append_records(_batch(clock, [b"x"], 7, 0))
    clock.advance(1001)
    p.append_records(_batch(clock, [b"y"], 7, 1))            # rolls: the snapshot is taken
    snapshot_end = ProducerStateManager(str(tmp_path)).load()
    assert snapshot_end == p.log.log_end_offset == 2
    assert p.log.recovery_point >= snapshot_end              # what a kill -9 keeps reaches the snapshot
