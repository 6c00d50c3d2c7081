"""The pure transaction coordinator against Kafka's ``TransactionCoordinator`` rules
(``TransactionCoordinatorTest``): fencing an open transaction of an exhausted epoch, EndTxn while
a transaction is being completed, and the answers a retry gets."""
from __future__ import annotations

import itertools

import pytest

from broker.errors import (ConcurrentTransactionsError, InvalidProducerIdMappingError, InvalidTxnStateError,
                           ProducerFencedError)
from broker.transaction.coordinator import (COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, MAX_EPOCH, PREPARE_ABORT,
                                            PREPARE_COMMIT, TransactionShard)

pytestmark = pytest.mark.unit


def _shard_at_epoch(epoch: int):
    """A transactional id whose producer has epoch ``epoch`` and an open transaction on t-0."""
    ids = itertools.count(1000)
    shard = TransactionShard(0)
    meta, _, _ = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))
    meta.producer_epoch = epoch
    shard.add_partitions("app", meta.producer_id, epoch, [("t", 0)], 1)
    return shard, meta.producer_id, ids


def _init_as_the_runtime_does(shard, ids, expected=None, now=5):
    """TransactionRuntime.init_producer_id: abort what is open (markers, Complete), and when that
    fence used the producer id's last epoch, ask once more for the epoch to hand out."""
    meta, _, abort_first = shard.init_producer_id("app", 10_000, now, lambda: next(ids), expected)
    fence = (meta.producer_id, meta.producer_epoch, meta.state, set(meta.partitions)) if abort_first else None
    if abort_first:
        shard.complete("app", now)
        if meta.producer_epoch > MAX_EPOCH:
            meta, _, _ = shard.init_producer_id("app", 10_000, now, lambda: next(ids), expected)
    return fence, (meta.producer_id, meta.producer_epoch)


def test_a_new_instance_aborts_an_exhausted_epoch_s_transaction_under_its_own_producer_id():
    """Kafka's ``prepareFenceProducerEpoch`` bumps the same producer id (up to Short.MaxValue) for
    the abort; only the retry gets a new producer id. Markers under a new producer id would not end
    the open transaction of the old one: its partitions' last stable offset would stay stuck."""
    shard, pid, ids = _shard_at_epoch(MAX_EPOCH)
    fence, answer = _init_as_the_runtime_does(shard, ids)
    assert fence == (pid, MAX_EPOCH + 1, PREPARE_ABORT, {("t", 0)})   # the markers' producer id and epoch
    assert answer[0] != pid and answer[1] == 0                         # never the overflowing epoch
    meta = shard.txns["app"]
    assert meta.state == EMPTY and not meta.partitions
    with pytest.raises(InvalidProducerIdMappingError):                 # the fenced producer's id is gone
        shard.end("app", pid, MAX_EPOCH, True, 6)


def test_a_kip_360_bump_of_an_exhausted_epoch_with_an_open_transaction_and_its_retry():
    shard, pid, ids = _shard_at_epoch(MAX_EPOCH)
    fence, answer = _init_as_the_runtime_does(shard, ids, expected=(pid, MAX_EPOCH))
    assert fence[:2] == (pid, MAX_EPOCH + 1)
    assert answer[0] != pid and answer[1] == 0
    # The same request again (its answer was lost): the same answer, nothing changes.
    meta, records, abort_first = shard.init_producer_id("app", 10_000, 7, lambda: next(ids), (pid, MAX_EPOCH))
    assert ((meta.producer_id, meta.producer_epoch), records, abort_first) == (answer, [], False)


def test_one_epoch_below_exhaustion_the_fence_and_the_answer_stay_on_the_producer_id():
    shard, pid, ids = _shard_at_epoch(MAX_EPOCH - 1)
    fence, answer = _init_as_the_runtime_does(shard, ids)
    assert fence[:2] == (pid, MAX_EPOCH) and answer == (pid, MAX_EPOCH)


def test_a_timed_out_transaction_at_an_exhausted_epoch_is_aborted_under_its_producer_id():
    """guard (already matched): the coordinator's own abort bumps to Short.MaxValue; the next
    instance gets a new producer id."""
    shard, pid, ids = _shard_at_epoch(MAX_EPOCH)
    meta, _ = shard.abort("app", 20_000)
    assert (meta.producer_id, meta.producer_epoch) == (pid, MAX_EPOCH + 1)
    shard.complete("app", 20_001)
    meta, _, _ = shard.init_producer_id("app", 10_000, 20_002, lambda: next(ids))
    assert meta.producer_id != pid and meta.producer_epoch == 0


def _prepared(commit: bool):
    ids = itertools.count(1000)
    shard = TransactionShard(0)
    meta, _, _ = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))
    shard.add_partitions("app", meta.producer_id, 0, [("t", 0)], 1)
    shard.end("app", meta.producer_id, 0, commit, 2)
    return shard, meta.producer_id


@pytest.mark.parametrize("commit", [True, False])
def test_ending_a_transaction_the_other_way_while_it_completes_is_an_invalid_state(commit):
    """Kafka's ``endTransaction``: PrepareCommit + abort (PrepareAbort + commit) is INVALID_TXN_STATE
    at once; the same outcome again is CONCURRENT_TRANSACTIONS (retriable, answered OK once complete)."""
    shard, pid = _prepared(commit)
    with pytest.raises(InvalidTxnStateError, match="PrepareCommit" if commit else "PrepareAbort"):
        shard.end("app", pid, 0, not commit, 3)
    with pytest.raises(ConcurrentTransactionsError):
        shard.end("app", pid, 0, commit, 3)
    assert shard.txns["app"].state == (PREPARE_COMMIT if commit else PREPARE_ABORT)
    shard.complete("app", 4)
    assert shard.end("app", pid, 0, commit, 5)[1:] == ([], False)       # the retry is answered OK
    with pytest.raises(InvalidTxnStateError):
        shard.end("app", pid, 0, not commit, 5)
    assert shard.txns["app"].state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT)


def test_a_fenced_producer_ending_a_prepared_transaction_hears_it_is_fenced():
    """guard (already matched): the producer's identity is checked before the state."""
    shard, pid = _prepared(True)
    shard.txns["app"].producer_epoch = 1
    with pytest.raises(ProducerFencedError):
        shard.end("app", pid, 0, False, 3)


def test_ending_an_empty_transaction_by_its_current_producer_succeeds_without_a_change():
    """A deliberate difference (Kafka answers INVALID_TXN_STATE): a handle of a transaction that
    registered nothing (a task that wrote no records) is committed by its committer."""
    ids = itertools.count(1000)
    shard = TransactionShard(0)
    meta, _, _ = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))
    for commit in (True, False):
        assert shard.end("app", meta.producer_id, 0, commit, 1)[1:] == ([], False)
    assert shard.txns["app"].state == EMPTY


def test_a_kip_360_bump_of_an_exhausted_epoch_rotates_and_its_retry_gets_the_same_answer():
    """guard (already matched): Kafka's testRetryInitProducerIdAfterProducerIdRotation and
    testInitProducerIdWithInvalidEpochAfterProducerIdRotation."""
    ids = itertools.count(1000)
    shard = TransactionShard(0)
    meta, _, _ = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))
    pid = meta.producer_id
    meta.producer_epoch = MAX_EPOCH
    meta, records, _ = shard.init_producer_id("app", 10_000, 1, lambda: next(ids), (pid, MAX_EPOCH))
    answer = (meta.producer_id, meta.producer_epoch)
    assert answer[0] != pid and answer[1] == 0 and records
    meta, records, _ = shard.init_producer_id("app", 10_000, 2, lambda: next(ids), (pid, MAX_EPOCH))
    assert ((meta.producer_id, meta.producer_epoch), records) == (answer, [])
    with pytest.raises(ProducerFencedError):
        shard.init_producer_id("app", 10_000, 3, lambda: next(ids), (pid, MAX_EPOCH - 1))
