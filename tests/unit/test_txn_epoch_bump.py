"""Only the coordinator hands out epochs: a producer's own bump (KIP-360) is granted only to the
current producer id and epoch, so a fenced producer can never reach its successor's epoch."""
from __future__ import annotations

import itertools

import pytest

from broker.errors import ConcurrentTransactionsError, ProducerFencedError
from broker.transaction.coordinator import (EMPTY, MAX_EPOCH, PREPARE_ABORT, TransactionMetadata, TransactionShard,
                                            next_idempotent_epoch)

ids = itertools.count(1000)


def init(shard, expected=None, now=0):
    return shard.init_producer_id("app", 10_000, now, lambda: next(ids), expected)


def test_the_current_producer_gets_the_next_epoch_and_a_lost_answer_can_be_asked_again():
    shard = TransactionShard(0)
    meta, _, _ = init(shard)
    pid = meta.producer_id
    meta, records, abort_first = init(shard, (pid, 0))
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (pid, 1, EMPTY) and records and not abort_first
    meta, records, _ = init(shard, (pid, 0))          # the same request again: same answer, nothing written
    assert (meta.producer_id, meta.producer_epoch, records) == (pid, 1, [])
    assert init(shard, (pid, 1))[0].producer_epoch == 2


def test_a_fenced_producer_cannot_bump_itself_to_its_successor_s_epoch():
    shard = TransactionShard(0)
    pid = init(shard)[0].producer_id
    assert init(shard)[0].producer_epoch == 1               # a new instance fences epoch 0
    with pytest.raises(ProducerFencedError, match="epoch 0 was fenced"):
        init(shard, (pid, 0))
    with pytest.raises(ProducerFencedError):
        init(shard, (pid + 1, 1))                           # not this transactional.id's producer id
    assert shard.txns["app"].producer_epoch == 1


def test_after_a_bump_a_new_instance_or_a_coordinator_abort_ends_the_retry_of_the_old_epoch():
    shard = TransactionShard(0)
    pid = init(shard)[0].producer_id
    init(shard, (pid, 0))                                   # epoch 1, remembering 0 for retries
    init(shard)                                             # a new instance: epoch 2
    with pytest.raises(ProducerFencedError):
        init(shard, (pid, 0))
    init(shard, (pid, 2))                                   # epoch 3, remembering 2
    shard.add_partitions("app", pid, 3, [("t", 0)], 1)
    meta, _ = shard.abort("app", 2)                         # timeout: epoch 4 fences epoch 3
    assert meta.state == PREPARE_ABORT and meta.producer_epoch == 4
    for pair in ((pid, 2), (pid, 3), (pid, 4)):             # every epoch waits for the abort (Kafka's
        with pytest.raises(ConcurrentTransactionsError):    # order: the state before the epoch)
            init(shard, pair)
    shard.complete("app", 3)
    for stale in ((pid, 2), (pid, 3)):
        with pytest.raises(ProducerFencedError):
            init(shard, stale)
    assert init(shard, (pid, 4))[0].producer_epoch == 5


def test_a_bump_of_an_open_transaction_aborts_it_first_and_the_memory_survives_replay():
    shard = TransactionShard(0)
    pid = init(shard)[0].producer_id
    shard.add_partitions("app", pid, 0, [("t", 0)], 1)
    meta, records, abort_first = init(shard, (pid, 0))
    assert abort_first and meta.state == PREPARE_ABORT and meta.producer_epoch == 1
    again = TransactionMetadata.from_value("app", records[0][1])
    assert (again.last_producer_id, again.last_epoch) == (pid, 0)


def test_an_idempotent_producer_s_next_epoch_is_decided_by_the_broker():
    new = lambda: 77  # noqa: E731
    assert next_idempotent_epoch(5, 0, new) == (5, 1)
    assert next_idempotent_epoch(5, MAX_EPOCH, new) == (77, 0)
    assert next_idempotent_epoch(-1, 0, new) == (77, 0)
