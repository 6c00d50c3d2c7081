"""The transaction coordinator's marker writing (:class:`TransactionRuntime`, Kafka's
``TransactionMarkerChannelManager`` and ``TransactionMarkerRequestCompletionHandler``), on real
partitions and a real ``__transaction_state`` log behind a stand-in for the broker: a retry goes
only to the partitions still without their marker (Kafka's ``txnMetadata.removePartition``), and
an open transaction at the last epoch of its producer id is aborted under that id."""
from __future__ import annotations

import itertools
import threading
from types import SimpleNamespace as NS

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import ConcurrentTransactionsError
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL
from broker.storage.log import Log
from broker.transaction.coordinator import MAX_EPOCH

pytestmark = pytest.mark.unit


class _Broker:
    """What TransactionRuntime uses of a broker: node 0 leads ``__transaction_state-0`` and the
    data partitions t-0 and t-1 (its metadata image says so, also while t-1 is briefly a follower)."""

    def __init__(self, tmp_path):
        self.node_id, self.clock = 0, ManualClock()
        self.config = BROKER_CONFIG.parse({"log.dirs": str(tmp_path)})
        self.parts = {("__transaction_state", 0): self._partition(tmp_path, "__transaction_state", 0, compact=True)}
        for i in range(2):
            self.parts[("t", i)] = self._partition(tmp_path, "t", i)
        led = lambda n: NS(num_partitions=n, partitions=[NS(leader=0)] * n)  # noqa: E731
        self.image = NS(topics={"__transaction_state": led(1), "t": led(2)})
        ids = itertools.count(5000)
        self.producer_ids = NS(next_id=lambda: next(ids))

    def _partition(self, tmp_path, topic, index, compact=False):
        config = TOPIC_CONFIG.parse({"cleanup.policy": "compact"} if compact else {})
        p = Partition(topic, index, "id", Log.open(str(tmp_path / f"{topic}-{index}"), config, self.clock),
                      AppendNotifier(), clock=self.clock)
        p.make_leader(0, 0, [0], [0])
        return p

    def partition(self, topic: str, index: int) -> Partition:
        return self.parts[(topic, index)]


def _runtime(tmp_path):
    from broker.server.coordinator_runtime import _Loaded
    from broker.server.txn_runtime import TransactionRuntime
    broker = _Broker(tmp_path)
    runtime = TransactionRuntime(broker, groups=None)
    loaded = _Loaded(runtime.new_shard(0), broker.partition("__transaction_state", 0), 0, threading.Lock())
    runtime._shards[0] = loaded
    return broker, runtime, loaded


def _produce(broker, pid: int, epoch: int, index: int, sequence: int = 0) -> None:
    broker.partition("t", index).append_records(encode_batch(
        record_batch([b"k"], [b"v"], [1]), attributes=TRANSACTIONAL, producer_id=pid, producer_epoch=epoch,
        base_sequence=sequence))


def _open_transaction(broker, runtime, loaded, epoch: int = 0) -> int:
    pid, _ = runtime.init_producer_id("app", 60_000)
    loaded.shard.txns["app"].producer_epoch = epoch
    loaded.shard.add_partitions("app", pid, epoch, [("t", 0), ("t", 1)], 0)
    for index in (0, 1):
        _produce(broker, pid, epoch, index)
    return pid


def test_a_retry_writes_markers_only_where_they_are_missing(tmp_path):
    broker, runtime, loaded = _runtime(tmp_path)
    pid = _open_transaction(broker, runtime, loaded)
    t0, t1 = broker.partition("t", 0), broker.partition("t", 1)
    t1.make_follower(1, 1, 1, [0, 1], [0, 1])          # t-1 cannot take its marker for now
    with pytest.raises(ConcurrentTransactionsError):
        runtime.end("app", pid, 0, True)
    assert t0.log.log_end_offset == 2                  # the record and its commit marker
    assert loaded.shard.txns["app"].state == "PrepareCommit"
    for _ in range(3):                                 # the coordinator's timer retries
        broker.clock.advance(100)
        runtime.tick(loaded, broker.clock.time_ms())
    assert t0.log.log_end_offset == 2                  # no second marker in t-0
    assert loaded.shard.txns["app"].partitions == {("t", 1)}

    t1.make_leader(2, 2, [0], [0])                     # t-1 is back
    runtime.tick(loaded, broker.clock.time_ms())
    assert loaded.shard.txns["app"].state == "CompleteCommit"
    assert (t0.log.log_end_offset, t1.log.log_end_offset) == (2, 2)
    assert not t0.producers.open_transactions() and not t1.producers.open_transactions()


def test_a_new_instance_ends_an_open_transaction_at_the_last_epoch_under_its_producer_id(tmp_path):
    """Kafka's shouldUseLastEpochToFenceWhenEpochsAreExhausted: the abort markers carry the open
    transaction's producer id (epoch 32767); the new instance gets a new producer id at epoch 0."""
    broker, runtime, loaded = _runtime(tmp_path)
    pid = _open_transaction(broker, runtime, loaded, epoch=MAX_EPOCH)
    t0 = broker.partition("t", 0)
    assert [o[0] for o in t0.producers.open_transactions()] == [pid]
    new_pid, epoch = runtime.init_producer_id("app", 60_000)
    assert new_pid != pid and epoch == 0
    for index in (0, 1):
        p = broker.partition("t", index)
        assert not p.producers.open_transactions()     # the last stable offset is not held back
        assert p.stable_offsets()[0] == p.log.log_end_offset
        assert p.producers.producers[pid].epoch == MAX_EPOCH + 1
    meta = loaded.shard.txns["app"]
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (new_pid, 0, "Empty")
    # What __transaction_state holds replays to the same state.
    from broker.transaction.coordinator import TransactionShard
    replayed = TransactionShard(0)
    replayed.load(runtime._replay(broker.partition("__transaction_state", 0)), 0)
    assert replayed.txns == loaded.shard.txns
