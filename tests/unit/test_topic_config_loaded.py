"""A topic config from the metadata log that this broker's own defaults (or version) cannot accept
is loaded, not refused: the broker keeps hosting the topic's partitions and their data. Kafka's
``LogConfig.fromProps`` runs no rule across keys on load; the controller checked the config
against its own defaults when it accepted it."""
from __future__ import annotations

import uuid

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, loaded_topic_config, topic_defaults
from broker.records import arrow_body
from broker.server.metadata_loader import MetadataLoader
from broker.server.replica_manager import ReplicaManager
from broker.storage.log_manager import LogManager

pytestmark = pytest.mark.unit


class NoFetchers:
    def add(self, *a):
        pass

    def remove(self, *a):
        pass

    def close(self):
        pass


def test_a_config_over_this_brokers_compaction_lag_keeps_the_partition_and_its_data(tmp_path):
    """The controller (default ``log.cleaner.max.compaction.lag.ms``) accepted
    ``min.compaction.lag.ms`` of two hours; this broker's default max lag is one hour. Refusing the
    config made the broker take the topic's partitions for gone and delete their directories."""
    clock = ManualClock()
    config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path),
                                  "log.cleaner.max.compaction.lag.ms": 3_600_000})
    manager = ReplicaManager(config, clock, LogManager(str(tmp_path), clock), NoFetchers(), lambda *a: None)
    faults = []
    manager.on_fault = lambda message, e: faults.append(message)
    loader = MetadataLoader([("replicas", lambda image, first: manager.apply_image(image))])
    try:
        loader.load(1, [(1, [{"type": "topic", "name": "orders", "topic_id": uuid.uuid4().hex, "replicas": [[1]]}])])
        p = manager.partitions[("orders", 0)]
        if p.role != "leader":
            p.make_leader(0, 0, [1], [1])
        p.append_records(arrow_body.encode_batch(arrow_body.record_batch([b"k"], [b"v"], [clock.time_ms()])))
        loader.load(2, [(2, [{"type": "config", "resource": "topic", "name": "orders",
                              "key": "min.compaction.lag.ms", "value": "7200000"}])])
        assert ("orders", 0) in manager.partitions and (tmp_path / "orders-0").is_dir()
        assert manager.partitions[("orders", 0)].log.log_end_offset == 1
        assert manager.partitions[("orders", 0)].log.config["min.compaction.lag.ms"] == 7_200_000
        assert faults == []
    finally:
        manager.close()


def test_a_key_or_value_this_broker_cannot_read_falls_back_to_its_default():
    defaults = topic_defaults(BROKER_CONFIG.parse({"node.id": 1, "log.dirs": "/tmp/x"}))
    config, problems = loaded_topic_config({"retention.ms": "1000", "some.future.key": "1",
                                            "segment.bytes": "not-a-number"}, defaults)
    assert config["retention.ms"] == 1000 and config["segment.bytes"] == defaults.get("segment.bytes", 1 << 30)
    assert sorted(e.details["config"] for e in problems) == ["segment.bytes", "some.future.key"]
