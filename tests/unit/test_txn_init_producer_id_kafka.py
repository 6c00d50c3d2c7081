"""InitProducerId with a producer id and epoch (KIP-360) and AddOffsetsToTxn against Kafka's
``TransactionCoordinator.prepareInitProducerIdTransit`` / ``handleAddPartitionsToTransaction`` and
``TransactionMetadata.prepareIncrementProducerEpoch`` / ``prepareComplete``, case by case: the
epoch given (current, the one a bump replaced, older, none) in each state."""
from __future__ import annotations

import itertools

import pytest

from broker.errors import ConcurrentTransactionsError, ProducerFencedError
from broker.transaction.coordinator import (COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, MAX_EPOCH, ONGOING,
                                            PREPARE_ABORT, PREPARE_COMMIT, TransactionMetadata, TransactionShard)

pytestmark = pytest.mark.unit


def _bumped():
    """An id at epoch 1 by a KIP-360 bump of (pid, 0): the pair (pid, 0) may be asked again."""
    ids = itertools.count(1000)
    shard = TransactionShard(0)
    pid = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))[0].producer_id
    meta, _, _ = shard.init_producer_id("app", 10_000, 1, lambda: next(ids), (pid, 0))
    assert (meta.producer_epoch, meta.last_epoch) == (1, 0)
    return shard, pid, ids


def _init(shard, ids, expected=None, now=10):
    return shard.init_producer_id("app", 10_000, now, lambda: next(ids), expected)


def test_a_late_copy_of_a_bump_after_the_new_epoch_opened_a_transaction_is_fenced():
    """Kafka: the retry's producer id is current and the state Ongoing, so the open transaction is
    fenced and aborted (``lastProducerEpoch`` cleared) and the asker, retrying after
    CONCURRENT_TRANSACTIONS, gets PRODUCER_FENCED. It used to get the current epoch: two instances
    that shared epoch 0 would both hold epoch 1."""
    shard, pid, ids = _bumped()
    shard.add_partitions("app", pid, 1, [("t", 0)], 2)
    with pytest.raises(ProducerFencedError, match="epoch 0 was fenced"):
        _init(shard, ids, (pid, 0))
    meta = shard.txns["app"]
    assert (meta.producer_epoch, meta.state, meta.partitions) == (1, ONGOING, {("t", 0)})
    assert (meta.last_producer_id, meta.last_epoch) == (-1, -1)      # forgotten in the record too
    shard.add_group("app", pid, 1, "g", 3)                           # the epoch's producer goes on


@pytest.mark.parametrize("commit", [True, False])
def test_a_late_copy_of_a_bump_after_the_new_epoch_s_transaction_ended_is_fenced(commit):
    """Kafka's ``prepareComplete`` makes the current epoch the last one: the replaced pair no
    longer matches (it used to get the current epoch)."""
    shard, pid, ids = _bumped()
    shard.add_partitions("app", pid, 1, [("t", 0)], 2)
    shard.end("app", pid, 1, commit, 3)
    shard.complete("app", 4)
    assert shard.txns["app"].state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT)
    with pytest.raises(ProducerFencedError):
        _init(shard, ids, (pid, 0))
    assert _init(shard, ids, (pid, 1))[0].producer_epoch == 2         # the current pair still bumps


def test_the_forgotten_pair_survives_replay():
    shard, pid, ids = _bumped()
    records = shard.add_partitions("app", pid, 1, [("t", 0)], 2)
    again = TransactionShard(0)
    again.load(records, 3)
    with pytest.raises(ProducerFencedError):
        _init(again, ids, (pid, 0))


def test_a_retry_before_the_new_epoch_is_used_gets_the_same_epoch():
    """guard (already matched): ``expectedEpoch == lastProducerEpoch`` in Empty: the current epoch,
    no bump."""
    shard, pid, ids = _bumped()
    meta, records, abort_first = _init(shard, ids, (pid, 0))
    assert (meta.producer_id, meta.producer_epoch, meta.state, records, abort_first) == (pid, 1, EMPTY, [], False)


@pytest.mark.parametrize("commit", [True, False])
def test_a_stale_epoch_waits_while_markers_are_written_then_is_fenced(commit):
    """Kafka looks at PrepareCommit/PrepareAbort before the epoch (the producer id is this id's):
    CONCURRENT_TRANSACTIONS, and PRODUCER_FENCED once the transaction is complete. It used to be
    PRODUCER_FENCED at once."""
    shard, pid, ids = _bumped()
    init_instance = _init(shard, ids)[0]                              # a new instance: epoch 2
    assert init_instance.producer_epoch == 2
    shard.add_partitions("app", pid, 2, [("t", 0)], 2)
    shard.end("app", pid, 2, commit, 3)
    assert shard.txns["app"].state == (PREPARE_COMMIT if commit else PREPARE_ABORT)
    for stale in ((pid, 0), (pid, 1), (pid, 2), (pid, 7)):
        with pytest.raises(ConcurrentTransactionsError):
            _init(shard, ids, stale)
    with pytest.raises(ProducerFencedError):                           # another producer id: fenced at once
        _init(shard, ids, (pid + 50, 2))
    shard.complete("app", 4)
    for stale in ((pid, 0), (pid, 1), (pid, 7)):
        with pytest.raises(ProducerFencedError):
            _init(shard, ids, stale)
    assert _init(shard, ids, (pid, 2))[0].producer_epoch == 3


def test_a_stale_epoch_while_a_transaction_is_open_is_fenced_and_the_transaction_kept():
    """guard (already matched, for the asker): Kafka fences and aborts the open transaction, then
    answers the asker's retry PRODUCER_FENCED; here the asker is fenced at once (the abort is not
    done: docs/transactions.md)."""
    shard, pid, ids = _bumped()
    _init(shard, ids)                                                 # epoch 2, no retry memory
    shard.add_partitions("app", pid, 2, [("t", 0)], 2)
    for stale in ((pid, 0), (pid, 1), (pid, 9)):
        with pytest.raises(ProducerFencedError):
            _init(shard, ids, stale)
    assert (shard.txns["app"].state, shard.txns["app"].producer_epoch) == (ONGOING, 2)


def test_epoch_exhaustion_rotates_and_a_retry_of_the_rotation_gets_the_same_answer():
    """Kafka's ``prepareProducerIdRotation`` with the expected epoch recorded, and
    ``isValidProducerId``'s previous producer id with an exhausted epoch (already matched); once
    the new producer id opened a transaction, the old pair is fenced (it used to be answered)."""
    ids = itertools.count(1000)
    shard = TransactionShard(0)
    meta, _, _ = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))
    pid = meta.producer_id
    meta.producer_epoch = MAX_EPOCH
    rotated, records, _ = _init(shard, ids, (pid, MAX_EPOCH))
    assert rotated.producer_id != pid and rotated.producer_epoch == 0 and records
    new_pid = rotated.producer_id
    assert _init(shard, ids, (pid, MAX_EPOCH))[0].producer_id == new_pid          # the retry
    shard.add_partitions("app", new_pid, 0, [("t", 0)], 20)
    with pytest.raises(ProducerFencedError):                                      # once the new id is used
        _init(shard, ids, (pid, MAX_EPOCH))


def test_add_offsets_writes_only_for_a_group_new_to_the_transaction():
    """Kafka's AddOffsetsToTxn adds the group's offsets partition through
    ``handleAddPartitionsToTransaction``, which answers at once, without a write, when the
    transaction is Ongoing and already has it. It used to write a record every time."""
    shard, pid, _ = _bumped()
    assert shard.add_group("app", pid, 1, "g", 2)                     # opens the transaction: written
    assert shard.add_group("app", pid, 1, "g", 3) == []                # again: nothing written
    records = shard.add_group("app", pid, 1, "h", 4)                   # another group: written
    assert TransactionMetadata.from_value("app", records[0][1]).groups == {"g", "h"}
    assert shard.txns["app"].last_update_ms == 4
    shard.end("app", pid, 1, True, 5)
    shard.complete("app", 6)
    records = shard.add_group("app", pid, 1, "g", 7)                   # a new transaction: written
    assert TransactionMetadata.from_value("app", records[0][1]).state == ONGOING
