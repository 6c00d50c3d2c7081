"""TxnOffsetCommit as Kafka answers it (``GroupCoordinatorService.commitTransactionalOffsets``,
``OffsetMetadataManager.commitTransactionalOffset``), through :class:`TransactionHandlers` over a
real :class:`GroupRuntime` and :class:`TransactionRuntime` on real ``__consumer_offsets`` and
``__transaction_state`` partitions: the transaction is verified, then the caller (group, member,
epoch) is validated, and only then is each offset's metadata looked at. An error of the first two
is on every partition, also on those whose metadata is too large; a caller let in gets
``OFFSET_METADATA_TOO_LARGE`` only for the offsets too large."""
from __future__ import annotations

import itertools
from types import SimpleNamespace as NS

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import KafkaError
from broker.group.coordinator import OFFSETS_TOPIC
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.storage.log import Log
from broker.transaction.coordinator import TXN_TOPIC

pytestmark = pytest.mark.unit

G, TXN = "g", "app"
TOO_LARGE, SMALL = "toolarge", "small"   # offset.metadata.max.bytes=5


class _Broker:
    """What the group and transaction runtimes and handlers use of a broker: node 0 alone leads
    ``__consumer_offsets-0`` and ``__transaction_state-0`` (a write is acknowledged at once);
    topic ``t`` has 2 partitions."""

    def __init__(self, tmp_path):
        self.node_id, self.clock, self.serving = 0, ManualClock(), True
        self.config = BROKER_CONFIG.parse({"log.dirs": str(tmp_path), "offset.metadata.max.bytes": 5})
        self.parts = {name: self._partition(tmp_path, name) for name in (OFFSETS_TOPIC, TXN_TOPIC)}
        led = lambda n: NS(num_partitions=n, partitions=[NS(leader=0)] * n)  # noqa: E731
        self.image = NS(topics={OFFSETS_TOPIC: led(1), TXN_TOPIC: led(1), "t": led(2)},
                        brokers={0: NS(host="127.0.0.1", port=1, fenced=False)})
        self.topic_deletion_listeners = []
        ids = itertools.count(7000)
        self.producer_ids = NS(next_id=lambda: next(ids))

    def _partition(self, tmp_path, topic):
        p = Partition(topic, 0, "id", Log.open(str(tmp_path / topic), TOPIC_CONFIG.parse(
            {"cleanup.policy": "compact"}), self.clock), AppendNotifier(), clock=self.clock)
        p.make_leader(0, 0, [0], [0])
        return p

    def partition(self, topic: str, index: int) -> Partition:
        return self.parts[topic]


@pytest.fixture
def env(tmp_path):
    from broker.server.group_runtime import GroupRuntime
    from broker.server.txn_handlers import TransactionHandlers
    from broker.server.txn_runtime import TransactionRuntime
    broker = _Broker(tmp_path)
    groups = GroupRuntime(broker)
    groups._sync()
    txns = TransactionRuntime(broker, groups)
    txns._sync()
    assert groups.loaded_shards() and txns.loaded_shards()
    txns.groups = groups
    pid, epoch = txns.init_producer_id(TXN, 60_000)
    return NS(broker=broker, groups=groups, txns=txns, handlers=TransactionHandlers(txns), pid=pid, epoch=epoch)


def _add_group(env) -> None:
    env.txns.run(TXN, lambda shard: (None, shard.add_group(TXN, env.pid, env.epoch, G, env.broker.clock.time_ms())))


def _join(env) -> tuple[str, int]:
    """A member of ``G`` subscribed to ``t``: (member id, epoch)."""
    result = env.groups.run(G, lambda shard: shard.heartbeat(
        G, "", 0, topics=["t"], partitions={"t": 2}, now_ms=env.broker.clock.time_ms()))
    return result.member_id, result.member_epoch


def _txn_commit(env, member_id: str, epoch: int, metadata: dict[int, str], group_id: str = G) -> dict:
    request = pb.TxnOffsetCommitRequest(
        transactional_id=TXN, producer_id=env.pid, producer_epoch=env.epoch, group_id=group_id, member_id=member_id,
        member_epoch=epoch, topics=[pb.CommitTopic(name="t", partitions=[
            pb.CommitPartition(partition=p, offset=10 + p, metadata=m) for p, m in metadata.items()])])
    return {r.partition: r.error_code for r in env.handlers.txn_offset_commit(request).results}


def _pending(env) -> dict:
    group = env.groups.read(G, lambda shard: shard.groups.get(G))
    return {} if group is None else {tp: c.offset for tp, c in group.pending.get(env.pid, {}).items()}


def test_a_stale_member_epoch_fails_every_partition_before_metadata_is_looked_at(env):
    # validateTransactionalOffsetCommit runs before the per-partition isMetadataInvalid
    _add_group(env)
    member, epoch = _join(env)
    assert _txn_commit(env, member, epoch + 5, {0: TOO_LARGE, 1: SMALL}) == {
        0: KafkaError.ILLEGAL_GENERATION, 1: KafkaError.ILLEGAL_GENERATION}
    assert _txn_commit(env, member, epoch + 5, {0: TOO_LARGE, 1: TOO_LARGE}) == {
        0: KafkaError.ILLEGAL_GENERATION, 1: KafkaError.ILLEGAL_GENERATION}
    assert _pending(env) == {}


def test_a_caller_from_outside_a_group_with_members_is_refused_even_when_all_metadata_is_too_large(env):
    _add_group(env)
    _join(env)
    assert _txn_commit(env, "", -1, {0: TOO_LARGE, 1: TOO_LARGE}) == {
        0: KafkaError.UNKNOWN_MEMBER_ID, 1: KafkaError.UNKNOWN_MEMBER_ID}


def test_a_member_epoch_for_a_group_that_does_not_exist_is_illegal_generation_whatever_the_metadata(env):
    _add_group(env)
    assert _txn_commit(env, "m", 3, {0: TOO_LARGE}) == {0: KafkaError.ILLEGAL_GENERATION}
    assert env.groups.read(G, lambda shard: G in shard.groups) is False


def test_a_transaction_without_the_group_is_refused_before_metadata_is_looked_at(env):
    # KIP-890 verification (scheduleTransactionalWriteOperation) comes before the operation itself
    assert _txn_commit(env, "", -1, {0: TOO_LARGE, 1: SMALL}) == {
        0: KafkaError.INVALID_TXN_STATE, 1: KafkaError.INVALID_TXN_STATE}


def test_an_empty_group_id_is_invalid_before_the_transaction_is_verified(env):
    # GroupCoordinatorService.commitTransactionalOffsets: INVALID_GROUP_ID comes first
    assert _txn_commit(env, "", -1, {0: SMALL, 1: TOO_LARGE}, group_id="") == {
        0: KafkaError.INVALID_GROUP_ID, 1: KafkaError.INVALID_GROUP_ID}


def test_a_caller_let_in_gets_metadata_too_large_only_for_those_offsets(env):
    # guard (already matched): testConsumerGroupTransactionalOffsetCommitWithOffsetMetadataTooLarge
    _add_group(env)
    member, epoch = _join(env)
    assert _txn_commit(env, member, epoch, {0: TOO_LARGE, 1: TOO_LARGE}) == {
        0: KafkaError.OFFSET_METADATA_TOO_LARGE, 1: KafkaError.OFFSET_METADATA_TOO_LARGE}
    assert env.groups.read(G, lambda shard: env.pid in shard.groups[G].pending) is False
    assert _txn_commit(env, member, epoch, {0: TOO_LARGE, 1: SMALL}) == {
        0: KafkaError.OFFSET_METADATA_TOO_LARGE, 1: 0}
    assert _pending(env) == {("t", 1): 11}
