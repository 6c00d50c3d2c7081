"""A partition opened after a crash between moving its log start and trimming its leader-epoch
cache trims the cache itself, as Kafka's ``LogLoader.load`` (truncateFromStart and truncateFromEnd)."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import validate_batches
from broker.storage.leader_epoch_cache import LeaderEpochCache
from broker.storage.log import Log

pytestmark = pytest.mark.unit


def test_an_epoch_cache_left_below_the_log_start_is_trimmed_when_the_partition_opens(tmp_path):
    clock = ManualClock()
    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), clock)
    for i in range(12):
        data = encode_batch(record_batch([b"k"], [b"v%d" % i], [i]))
        log.append(data, validate_batches(data, max_batch_bytes=1 << 20))
    stale = LeaderEpochCache(str(tmp_path), [(0, 0), (1, 5), (2, 8)])
    stale._replace(stale.entries())                    # written to the checkpoint file
    assert log.advance_log_start_offset(7)             # then the crash: the cache was not trimmed
    log.close()

    log = Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    assert [(e.epoch, e.start_offset) for e in partition.epochs.entries()] == [(1, 7), (2, 8)]
    assert partition.epochs.earliest_entry().start_offset == log.log_start_offset == 7
    assert [(e.epoch, e.start_offset) for e in LeaderEpochCache.load(str(tmp_path)).entries()] == [(1, 7), (2, 8)]
