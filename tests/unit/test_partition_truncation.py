"""A follower truncating below its producer-state snapshot rebuilds producers *and* aborted
transactions from the log: no range listed twice, none whose marker was cut off."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL
from broker.storage.log import Log
from broker.storage.producer_state import AbortedTxn

pytestmark = pytest.mark.unit

PID = 1000


def _partition(tmp_path) -> Partition:
    clock = ManualClock()
    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    return partition


def test_truncating_below_the_snapshot_lists_each_surviving_abort_once_and_no_cut_one(tmp_path):
    p = _partition(tmp_path)
    p.append_records(encode_batch(record_batch([b"k"] * 3, [b"v"] * 3, [1] * 3), attributes=TRANSACTIONAL,
                                  producer_id=PID, producer_epoch=0, base_sequence=0))   # 0-2
    p.write_marker(PID, 0, False, 0)                                                     # 3: abort
    p.append_records(encode_batch(record_batch([b"k"], [b"plain"], [2])))               # 4
    p.log.roll()
    p.producers.snapshot(p.log.log_end_offset)                                           # valid to 5
    p.make_follower(1, 1, 1, [0, 1], [0, 1])

    p.truncate_to(4)
    assert p.producers.aborted == [AbortedTxn(PID, 0, 3)]

    p.truncate_to(3)  # the abort marker is gone: its transaction is open again, not aborted
    assert p.producers.aborted == []
    assert p.producers.producers[PID].txn_first_offset == 0
