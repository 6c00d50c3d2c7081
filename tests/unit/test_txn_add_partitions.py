"""AddPartitionsToTxn naming partitions the metadata does not have, as Kafka's
``KafkaApis.handleAddPartitionsToTxnRequest``: the unknown ones are ``UNKNOWN_TOPIC_OR_PARTITION``,
the rest are not attempted, and the transaction is left as it was. Served by the real handler and
runtime over a real ``__transaction_state`` partition behind a stand-in for the broker."""
from __future__ import annotations

import itertools
import threading
from types import SimpleNamespace as NS

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import UnknownTopicOrPartitionError
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.storage.log import Log
from broker.transaction.coordinator import EMPTY, ONGOING

pytestmark = pytest.mark.unit


class _Broker:
    """Node 0 leads ``__transaction_state-0``; the metadata has topic t with two partitions."""

    def __init__(self, tmp_path):
        self.node_id, self.clock = 0, ManualClock()
        self.config = BROKER_CONFIG.parse({"log.dirs": str(tmp_path)})
        log = Log.open(str(tmp_path / "__transaction_state-0"), TOPIC_CONFIG.parse({"cleanup.policy": "compact"}),
                       self.clock)
        self.state = Partition("__transaction_state", 0, "id", log, AppendNotifier(), clock=self.clock)
        self.state.make_leader(0, 0, [0], [0])
        led = lambda n: NS(num_partitions=n, partitions=[NS(leader=0)] * n)  # noqa: E731
        self.image = NS(topics={"__transaction_state": led(1), "t": led(2)})
        ids = itertools.count(5000)
        self.producer_ids = NS(next_id=lambda: next(ids))


def _handlers(tmp_path):
    from broker.server.coordinator_runtime import _Loaded
    from broker.server.txn_handlers import TransactionHandlers
    from broker.server.txn_runtime import TransactionRuntime
    broker = _Broker(tmp_path)
    runtime = TransactionRuntime(broker, groups=None)
    loaded = _Loaded(runtime.new_shard(0), broker.state, 0, threading.Lock())
    runtime._shards[0] = loaded
    return TransactionHandlers(runtime), loaded.shard


def _request(pid, epoch, partitions):
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return pb.AddPartitionsToTxnRequest(transactional_id="app", producer_id=pid, producer_epoch=epoch,
                                        partitions=[pb.GroupPartitions(topic=t, partitions=ps)
                                                    for t, ps in by_topic.items()])


def test_unknown_partitions_are_refused_and_none_of_the_request_is_added(tmp_path):
    handlers, shard = _handlers(tmp_path)
    init = handlers.init_producer_id(pb.InitProducerIdRequest(transactional_id="app", transaction_timeout_ms=60_000))
    pid, epoch = init.producer_id, init.producer_epoch
    with pytest.raises(UnknownTopicOrPartitionError) as raised:
        handlers.add_partitions(_request(pid, epoch, [("t", 0), ("t", 2), ("gone", 0)]))
    assert raised.value.retriable and "gone-0" in str(raised.value) and "t-2" in str(raised.value)
    assert "t-0" not in str(raised.value)
    meta = shard.txns["app"]
    assert (meta.state, meta.partitions) == (EMPTY, set())     # the known partition was not attempted either
    handlers.add_partitions(_request(pid, epoch, [("t", 0), ("t", 1)]))
    assert (meta.state, meta.partitions) == (ONGOING, {("t", 0), ("t", 1)})
