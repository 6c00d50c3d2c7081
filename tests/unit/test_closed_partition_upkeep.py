"""The retention, cleaner and flush threads may still hold a partition that was removed meanwhile
(its topic deleted: log closed, directory renamed away). Such a partition is skipped, not failed:
an error there aborted the whole retention round for the partitions after it."""
from __future__ import annotations

import os

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.storage.log import Log

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("policy", ["delete", "compact"])
def test_a_removed_partition_is_skipped_by_retention_cleaning_and_flushing(tmp_path, policy):
    clock = ManualClock()
    config = TOPIC_CONFIG.parse({"segment.bytes": "1024", "retention.ms": "1000", "cleanup.policy": policy,
                                 "min.cleanable.dirty.ratio": "0.01"})
    p = Partition("t", 0, "id", Log.open(str(tmp_path / "t-0"), config, clock), AppendNotifier(), node_id=1,
                  clock=clock)
    p.make_leader(1, 1, [1], [1])
    for i in range(30):
        p.append_records(arrow_body.encode_batch(arrow_body.record_batch([b"k%d" % (i % 3)], [b"x" * 100],
                                                                         [clock.time_ms()])))
    p.close_for_removal()
    os.rename(tmp_path / "t-0", tmp_path / "t-0.deleted")   # what removing the directory does first
    later = clock.time_ms() + 100_000
    assert p.apply_retention(later).segments == 0
    assert p.clean(later) is None
    p.maybe_flush()
    assert sorted(os.listdir(tmp_path)) == ["t-0.deleted"]


def test_a_partition_whose_retention_fails_does_not_stop_the_others(tmp_path):
    """One log failing with an I/O error (a bad disk sector, a file removed by hand) must not keep
    retention from every partition listed after it, round after round."""
    import uuid

    from broker.config import BROKER_CONFIG
    from broker.server.metadata_loader import MetadataLoader
    from broker.server.replica_manager import ReplicaManager
    from broker.storage.log_manager import LogManager

    class NoFetchers:
        def add(self, *a): pass
        def remove(self, *a): pass
        def close(self): pass

    clock = ManualClock()
    config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path)})
    manager = ReplicaManager(config, clock, LogManager(str(tmp_path), clock), NoFetchers(), lambda *a: None)
    loader = MetadataLoader([("replicas", lambda image, first: manager.apply_image(image))])
    records = []
    for name in ("a", "b"):
        records.append({"type": "topic", "name": name, "topic_id": uuid.uuid4().hex, "replicas": [[1]]})
        records += [{"type": "config", "resource": "topic", "name": name, "key": key, "value": value}
                    for key, value in (("retention.ms", "1000"), ("segment.bytes", "1024"))]
    loader.load(1, [(1, records)])
    broken, healthy = manager.partitions[("a", 0)], manager.partitions[("b", 0)]
    for _ in range(30):
        healthy.append_records(arrow_body.encode_batch(arrow_body.record_batch([None], [b"x" * 100],
                                                                               [clock.time_ms()])))

    def failing(now_ms):
        raise OSError(5, "Input/output error")

    broken.apply_retention = failing
    clock.advance(100_000)
    manager.apply_retention()
    assert healthy.offsets()[0] > 0
    manager.close()
