"""ListTransactions while a ``__transaction_state`` partition this broker leads is not loaded yet:
``COORDINATOR_LOAD_IN_PROGRESS`` (Kafka's ``TransactionStateManager.listTransactionStates``), not a
listing that silently lacks that partition's transactions. Served by the real handler and runtime
over a real ``__transaction_state`` partition behind a stand-in for the broker."""
from __future__ import annotations

import threading
from types import SimpleNamespace as NS

import pytest

from broker.errors import CoordinatorLoadInProgressError
from broker.proto import riverlog_pb2 as pb
from tests.unit.test_txn_add_partitions import _handlers

pytestmark = pytest.mark.unit


def test_a_led_partition_not_loaded_yet_is_load_in_progress_and_others_leaders_do_not_count(tmp_path):
    handlers, shard = _handlers(tmp_path)
    shard.init_producer_id("app", 10_000, 0, lambda: 7)
    broker = handlers.broker
    # partition 0 loaded here, partition 1 another broker's, partition 2 led here but not loaded
    broker.image = NS(topics={"__transaction_state": NS(
        num_partitions=3, partitions=[NS(leader=0), NS(leader=1), NS(leader=0)])})
    with pytest.raises(CoordinatorLoadInProgressError, match=r"partition\(s\) \[2\]"):
        handlers.list_transactions(pb.ListTransactionsRequest())

    broker.image.topics["__transaction_state"].partitions[2] = NS(leader=1)   # it moved away
    listed = handlers.list_transactions(pb.ListTransactionsRequest())
    assert [(t.transactional_id, t.producer_id, t.state) for t in listed.transactions] == [("app", 7, "Empty")]


def test_once_every_led_partition_is_loaded_all_are_listed(tmp_path):
    from broker.server.coordinator_runtime import _Loaded
    handlers, shard = _handlers(tmp_path)
    shard.init_producer_id("app", 10_000, 0, lambda: 7)
    broker = handlers.broker
    broker.image = NS(topics={"__transaction_state": NS(num_partitions=2, partitions=[NS(leader=0), NS(leader=0)])})
    with pytest.raises(CoordinatorLoadInProgressError):
        handlers.list_transactions(pb.ListTransactionsRequest())
    other = handlers.runtime.new_shard(1)
    other.init_producer_id("billing", 10_000, 0, lambda: 8)
    handlers.runtime._shards[1] = _Loaded(other, broker.state, 0, threading.Lock())
    listed = handlers.list_transactions(pb.ListTransactionsRequest())
    assert sorted((t.transactional_id, t.producer_id) for t in listed.transactions) == [("app", 7), ("billing", 8)]
