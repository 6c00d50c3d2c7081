"""A follower fetch long-polling at the leader's log end re-reads only when a partition it asks for
has something new or changed hands (every append or high-watermark move on the broker wakes it,
and most have nothing for it); a follower's own appends wake nothing, and a partition that turns
follower or goes away wakes its waiters at once."""
from __future__ import annotations

import uuid

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG
from broker.partition import FOLLOWER
from broker.proto import riverlog_pb2 as pb
from broker.records.arrow_body import encode_batch, record_batch
from broker.server.metadata_loader import MetadataLoader
from broker.server.replica_manager import ReplicaManager
from broker.storage.log_manager import LogManager

pytestmark = pytest.mark.unit

NOW = ManualClock().time_ms()


class NoFetchers:
    def add(self, *a): pass
    def remove(self, *a): pass
    def close(self): pass


def _hosting(tmp_path, topic_id: str, replicas: list[int]):
    """Node 1 hosting partition a-0 with ``replicas`` (the first one leads)."""
    config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path)})
    manager = ReplicaManager(config, ManualClock(NOW), LogManager(str(tmp_path), ManualClock(NOW)),
                             NoFetchers(), lambda *a: None)
    loader = MetadataLoader([("replicas", lambda image, first: manager.apply_image(image))])
    loader.load(1, [(1, [{"type": "topic", "name": "a", "topic_id": topic_id, "replicas": [replicas]}])])
    return manager, loader


def _fetch(offset: int, epoch: int | None = None, topic: str = "a") -> pb.FetchRequest:
    request = pb.FetchRequest(replica_id=2, max_wait_ms=500, min_bytes=1)
    p = request.topics.add(name=topic).partitions.add(partition=0, fetch_offset=offset)
    if epoch is not None:
        p.current_leader_epoch = epoch
    return request


def _batch(n: int) -> bytes:
    return encode_batch(record_batch([None] * n, [b"v"] * n, [NOW] * n))


def test_a_follower_at_the_log_end_waits_until_an_append_or_a_new_epoch(tmp_path):
    manager, _ = _hosting(tmp_path, uuid.uuid4().hex, [1, 2])
    p = manager.partitions[("a", 0)]
    assert manager.follower_fetch_waits(_fetch(0, p.leader_epoch))
    assert manager.follower_fetch_waits(_fetch(0))                       # no epoch named: not checked
    assert not manager.follower_fetch_waits(_fetch(0, p.leader_epoch + 1))  # the read answers the epoch error
    assert not manager.follower_fetch_waits(_fetch(0, topic="unknown"))  # ... or that it is not hosted
    p.append_records(_batch(3))
    assert not manager.follower_fetch_waits(_fetch(0, p.leader_epoch))  # data past its offset: read
    assert manager.follower_fetch_waits(_fetch(3, p.leader_epoch))
    assert not manager.follower_fetch_waits(_fetch(5, p.leader_epoch))  # past the end: the read refuses it
    manager.close()


def test_turning_follower_wakes_waiters_and_follower_appends_wake_nothing(tmp_path):
    topic_id = uuid.uuid4().hex
    manager, loader = _hosting(tmp_path / "leader", topic_id, [1, 2])
    p = manager.partitions[("a", 0)]
    p.append_records(_batch(2))
    data = p.read(0, 1 << 20, up_to_high_watermark=False).records
    before = manager.notifier.sequence
    loader.load(2, [(2, [{"type": "partition_change", "topic_id": topic_id, "partition": 0, "leader": 2}])])
    assert p.role is FOLLOWER and manager.notifier.sequence > before
    assert not manager.follower_fetch_waits(_fetch(2))                   # the read answers NotLeaderOrFollower
    manager.close()

    follower, _ = _hosting(tmp_path / "follower", topic_id, [2, 1])
    f = follower.partitions[("a", 0)]
    assert f.role is FOLLOWER
    sequence = follower.notifier.sequence
    assert f.append_as_follower(bytes(data), 2, 0) == 2
    assert follower.notifier.sequence == sequence
    follower.close()
