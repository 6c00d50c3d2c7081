"""The pure transaction coordinator: states, fencing, prepare/complete, timeouts, replay."""
from __future__ import annotations

import itertools

import pytest

from broker.errors import (ConcurrentTransactionsError, InvalidProducerIdMappingError, InvalidTxnStateError,
                           InvalidTxnTimeoutError, ProducerFencedError)
from broker.transaction.coordinator import (COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT,
                                            PREPARE_COMMIT, TransactionShard)


class Log:
    """Records as the runtime would append them, for replay checks."""

    def __init__(self):
        self.records = []
        self.ids = itertools.count(1000)

    def take(self, records):
        self.records += records
        return records


def started(shard: TransactionShard, log: Log, txn="app", now=0):
    meta, records, abort_first = shard.init_producer_id(txn, 10_000, now, lambda: next(log.ids))
    log.take(records)
    assert not abort_first
    return meta.producer_id, meta.producer_epoch


def test_a_transaction_goes_ongoing_prepared_complete():
    shard, log = TransactionShard(0), Log()
    pid, epoch = started(shard, log)
    assert shard.txns["app"].state == EMPTY
    log.take(shard.add_partitions("app", pid, epoch, [("t", 0), ("t", 1)], 5))
    log.take(shard.add_group("app", pid, epoch, "g", 6))
    meta = shard.txns["app"]
    assert (meta.state, meta.start_ms, meta.partitions, meta.groups) == (ONGOING, 5, {("t", 0), ("t", 1)}, {"g"})
    meta, records, markers = shard.end("app", pid, epoch, True, 7)
    log.take(records)
    assert markers and meta.state == PREPARE_COMMIT
    with pytest.raises(ConcurrentTransactionsError):
        shard.add_partitions("app", pid, epoch, [("t", 2)], 8)
    log.take(shard.complete("app", 9))
    assert shard.txns["app"].state == COMPLETE_COMMIT and not shard.txns["app"].partitions
    # A retried EndTxn of the same outcome succeeds; the other outcome is refused.
    assert shard.end("app", pid, epoch, True, 10)[2] is False
    with pytest.raises(InvalidTxnStateError):
        shard.end("app", pid, epoch, False, 10)


def test_init_fences_older_epochs_and_aborts_what_they_left_open():
    shard, log = TransactionShard(0), Log()
    pid, epoch = started(shard, log)
    log.take(shard.add_partitions("app", pid, epoch, [("t", 0)], 1))
    meta, records, abort_first = shard.init_producer_id("app", 10_000, 2, lambda: next(log.ids))
    assert abort_first and meta.state == PREPARE_ABORT and meta.producer_epoch == epoch + 1
    assert meta.producer_id == pid and meta.partitions == {("t", 0)}
    with pytest.raises(ConcurrentTransactionsError):
        shard.init_producer_id("app", 10_000, 3, lambda: next(log.ids))
    shard.complete("app", 3)
    with pytest.raises(ProducerFencedError):
        shard.add_partitions("app", pid, epoch, [("t", 0)], 4)
    with pytest.raises(ProducerFencedError):            # a newer epoch too, as Kafka's coordinator
        shard.add_partitions("app", pid, epoch + 5, [("t", 0)], 4)
    with pytest.raises(InvalidProducerIdMappingError):
        shard.add_partitions("app", pid + 1, epoch + 1, [("t", 0)], 4)
    with pytest.raises(InvalidProducerIdMappingError):  # an unknown transactional.id
        shard.add_partitions("other", pid, epoch, [("t", 0)], 4)


def test_an_empty_transaction_completes_without_markers():
    shard, log = TransactionShard(0), Log()
    pid, epoch = started(shard, log)
    shard.add_group("app", pid, epoch, "g", 1)
    shard.txns["app"].groups.clear()
    meta, _, markers = shard.end("app", pid, epoch, False, 2)
    assert not markers and meta.state == COMPLETE_ABORT


def test_timed_out_transactions_are_found_and_aborted_with_a_new_epoch():
    shard, log = TransactionShard(0), Log()
    pid, epoch = started(shard, log)
    shard.add_partitions("app", pid, epoch, [("t", 0)], 1_000)
    assert shard.timed_out(5_000) == [] and shard.timed_out(11_001) == ["app"]
    meta, _ = shard.abort("app", 11_001)
    assert meta.state == PREPARE_ABORT and meta.producer_epoch == epoch + 1
    assert shard.prepared() == [meta]
    assert shard.abort("app", 11_002) == (meta, [])   # asked again while its markers are written
    shard.complete("app", 11_003)
    with pytest.raises(InvalidTxnStateError):
        shard.abort("app", 11_004)


def test_timeouts_beyond_the_broker_maximum_are_refused():
    shard = TransactionShard(0, max_timeout_ms=1000)
    with pytest.raises(InvalidTxnTimeoutError):
        shard.init_producer_id("app", 5000, 0, lambda: 1)


def test_replaying_the_records_rebuilds_every_transaction():
    shard, log = TransactionShard(0), Log()
    pid, epoch = started(shard, log, "a")
    log.take(shard.add_partitions("a", pid, epoch, [("t", 0)], 1))
    log.take(shard.end("a", pid, epoch, True, 2)[1])          # prepared, markers not written yet
    pid2, epoch2 = started(shard, log, "b")
    log.take(shard.add_partitions("b", pid2, epoch2, [("u", 3)], 4))
    replayed = TransactionShard(0)
    replayed.load(log.records, 100)
    assert replayed.txns == shard.txns
    assert [m.transactional_id for m in replayed.prepared()] == ["a"]
    assert replayed.txns["b"].state == ONGOING and replayed.txns["b"].partitions == {("u", 3)}


def test_idle_transactional_ids_expire_with_a_tombstone_and_open_ones_stay():
    shard, log = TransactionShard(0, expiration_ms=1_000), Log()
    done_pid, done_epoch = started(shard, log, "done", now=0)
    log.take(shard.add_partitions("done", done_pid, done_epoch, [("t", 0)], 10))
    log.take(shard.end("done", done_pid, done_epoch, True, 20)[1])
    log.take(shard.complete("done", 30))
    open_pid, open_epoch = started(shard, log, "open", now=0)
    log.take(shard.add_partitions("open", open_pid, open_epoch, [("t", 1)], 10))
    started(shard, log, "fresh", now=900)

    assert log.take(shard.expire(1_029)) == []                 # 'done' changed last at 30
    tombstones = log.take(shard.expire(1_030))
    assert [(json_id(k), v) for k, v in tombstones] == [("done", None)]
    assert set(shard.txns) == {"open", "fresh"}                # an open transaction never expires
    assert log.take(shard.expire(5_000)) and set(shard.txns) == {"open"}

    replayed = TransactionShard(0)
    replayed.load(log.records, 5_000)
    assert set(replayed.txns) == {"open"}


def json_id(key: bytes) -> str:
    import json
    return json.loads(key)["id"]
