"""The errors the transaction coordinator answers a producer's AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn with, as Kafka's ``TransactionCoordinator`` (``TransactionCoordinatorTest``): an epoch other
than the current one, newer as well as older, is ``PRODUCER_FENCED``
(``shouldRespondWithProducerFencedOnAddPartitionsWhenEpochsAreDifferent``,
``shouldReturnInvalidEpochOnEndTxnWhenEpochIsLarger``); a transactional id the coordinator does not
know is ``INVALID_PRODUCER_ID_MAPPING``
(``shouldRespondWithInvalidPidMappingOnAddPartitionsToTransactionWhenTransactionalIdNotPresent``,
``shouldReplyWithInvalidPidMappingOnEndTxnWhenTxnIdDoesntExist``), which the clients treat as
abortable, not ``TRANSACTIONAL_ID_NOT_FOUND`` (DescribeTransactions' answer)."""
from __future__ import annotations

import itertools

import pytest

from broker.errors import (InvalidProducerIdMappingError, ProducerFencedError, TransactionalIdNotFoundError,
                           error_for_code)
from broker.transaction.coordinator import ONGOING, TransactionShard

pytestmark = pytest.mark.unit


def _shard():
    ids = itertools.count(1000)
    shard = TransactionShard(0)
    meta, _, _ = shard.init_producer_id("app", 10_000, 0, lambda: next(ids))
    meta.producer_epoch = 3
    return shard, meta.producer_id


_REQUESTS = {
    "AddPartitionsToTxn": lambda shard, txn, pid, epoch: shard.add_partitions(txn, pid, epoch, [("t", 0)], 1),
    "AddOffsetsToTxn": lambda shard, txn, pid, epoch: shard.add_group(txn, pid, epoch, "g", 1),
    "EndTxn": lambda shard, txn, pid, epoch: shard.end(txn, pid, epoch, True, 1),
}


@pytest.mark.parametrize("request_name", sorted(_REQUESTS))
def test_an_epoch_newer_than_the_coordinator_s_is_fenced(request_name):
    shard, pid = _shard()
    shard.add_partitions("app", pid, 3, [("t", 1)], 0)
    with pytest.raises(ProducerFencedError) as raised:
        _REQUESTS[request_name](shard, "app", pid, 4)
    assert raised.value.code == 90 and "newer" in str(raised.value)
    assert shard.txns["app"].state == ONGOING and shard.txns["app"].partitions == {("t", 1)}


@pytest.mark.parametrize("request_name", sorted(_REQUESTS))
def test_an_older_epoch_is_fenced(request_name):
    shard, pid = _shard()
    with pytest.raises(ProducerFencedError):
        _REQUESTS[request_name](shard, "app", pid, 2)


@pytest.mark.parametrize("request_name", sorted(_REQUESTS))
def test_an_unknown_transactional_id_is_an_invalid_producer_id_mapping(request_name):
    shard, pid = _shard()
    with pytest.raises(InvalidProducerIdMappingError) as raised:
        _REQUESTS[request_name](shard, "never-initialised", pid, 3)
    assert raised.value.code == 49 and error_for_code(raised.value.code) is InvalidProducerIdMappingError
    assert "never-initialised" not in shard.txns


def test_a_forgotten_transactional_id_is_an_invalid_producer_id_mapping():
    # transactional.id.expiration.ms: the id is tombstoned; its producer's next request is answered
    # as Kafka's coordinator answers an id without metadata.
    shard, pid = _shard()
    shard.expiration_ms = 10
    assert shard.expire(100)
    with pytest.raises(InvalidProducerIdMappingError):
        shard.add_partitions("app", pid, 3, [("t", 0)], 101)
    with pytest.raises(InvalidProducerIdMappingError):
        shard.end("app", pid, 3, False, 101)


def test_another_producer_id_is_an_invalid_producer_id_mapping():
    shard, pid = _shard()
    with pytest.raises(InvalidProducerIdMappingError):
        shard.add_partitions("app", pid + 1, 3, [("t", 0)], 1)


def test_an_operator_abort_of_an_unknown_id_stays_transactional_id_not_found():
    # Not a producer's request: AbortTransaction by id answers as DescribeTransactions does.
    shard, _ = _shard()
    with pytest.raises(TransactionalIdNotFoundError):
        shard.abort("never-initialised", 1)
