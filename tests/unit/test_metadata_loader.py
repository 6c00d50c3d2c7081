"""The metadata loader keeps following the log when a record or a publisher fails, and counts it."""
from __future__ import annotations

import logging
import uuid

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG
from broker.server.metadata_loader import MetadataLoader
from broker.server.replica_manager import ReplicaManager
from broker.storage.log_manager import LogManager, partition_dir_name

pytestmark = pytest.mark.unit


def _topic_records(name: str, partitions: int, replicas: list[int]) -> dict:
    return {"type": "topic", "name": name, "topic_id": uuid.uuid4().hex, "replicas": [replicas] * partitions}


def _remove(record: dict) -> dict:
    return {"type": "remove_topic", "name": record["name"], "topic_id": record["topic_id"]}


def test_a_record_that_fails_to_replay_is_counted_and_later_records_apply(caplog):
    published = []
    loader = MetadataLoader([("test", lambda image, first: published.append((image, first)))])
    good_a, good_b = _topic_records("a", 1, [1]), _topic_records("b", 1, [1])
    broken = {"type": "no-such-record"}
    with caplog.at_level(logging.ERROR):
        image = loader.load(3, [(1, [good_a]), (2, [broken]), (3, [good_b])])
    assert set(image.topics) == {"a", "b"}
    assert loader.load_faults.count == 1
    assert "no-such-record" in loader.load_faults.last.message
    assert "offset 2" in loader.load_faults.last.message
    assert any("no-such-record" in r.getMessage() for r in caplog.records)
    # The thread keeps going: the next batch applies and publishes too.
    image = loader.load(4, [(4, [_remove(good_a)])])
    assert set(image.topics) == {"b"} and [first for _, first in published] == [True, False]


def test_a_failing_publisher_is_counted_and_the_next_one_still_runs():
    seen = []

    def failing(image, first):
        raise OSError(36, "File name too long")

    loader = MetadataLoader([("replicas", failing), ("handlers", lambda image, first: seen.append(image.offset))])
    loader.load(1, [(1, [_topic_records("a", 1, [1])])])
    loader.load(2, [(2, [_topic_records("b", 1, [1])])])
    assert seen == [1, 2]
    assert loader.apply_faults.count == 2
    assert "File name too long" in loader.apply_faults.last.error
    assert "'name': 'b'" in loader.apply_faults.last.message  # the record that led to it


def test_replica_manager_reports_a_partition_it_cannot_remove_and_applies_the_rest(tmp_path):
    """A delete whose directory cannot be renamed: reported, and later topics are still hosted."""
    config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path)})
    logs = LogManager(str(tmp_path), ManualClock(1_000))

    class NoFetchers:
        def add(self, *a): pass
        def remove(self, *a): pass
        def close(self): pass

    replicas = ReplicaManager(config, ManualClock(1_000), logs, NoFetchers(), lambda *a: None)
    loader = MetadataLoader([("the replica manager", lambda image, first: replicas.apply_image(image))])
    replicas.on_fault = loader.publish_fault
    doomed = _topic_records("doomed", 1, [1])
    loader.load(1, [(1, [doomed])])
    assert ("doomed", 0) in replicas.partitions

    real = logs.remove_dir

    def unrenameable(topic, partition, topic_id):
        if topic == "doomed":
            raise OSError(36, "File name too long", partition_dir_name(topic, partition))
        return real(topic, partition, topic_id)

    logs.remove_dir = unrenameable
    loader.load(3, [(2, [_remove(doomed)]), (3, [_topic_records("next", 2, [1])])])
    assert loader.apply_faults.count == 1
    assert "doomed-0" in loader.apply_faults.last.message
    assert "remove_topic" in loader.apply_faults.last.message
    assert {k for k in replicas.partitions} == {("next", 0), ("next", 1)}
    assert all(p.role == "leader" for p in replicas.partitions.values())
    replicas.close()


def test_an_answer_from_a_lagging_voter_neither_moves_the_offset_back_nor_replays_records():
    """Any voter answers a broker's metadata fetch; one behind the broker must not move its offset
    back, or the next answer replays partition changes and bumps their epochs a second time."""
    loader = MetadataLoader([])
    topic = {"type": "topic", "name": "t", "topic_id": "T", "replicas": [[1, 2]]}
    moves = [(4, [{"type": "partition_change", "topic_id": "T", "partition": 0, "leader": 2, "isr": [2]}]),
             (5, [{"type": "partition_change", "topic_id": "T", "partition": 0, "leader": 1, "isr": [1, 2]}])]
    image = loader.load(5, [(3, [topic]), *moves])
    before = image.topics["t"].partitions[0]
    epochs = (before.leader_epoch, before.partition_epoch)
    assert loader.load(3, []) is None                  # the lagging voter: nothing moves
    assert loader.offset == 5
    assert loader.load(5, moves) is None               # the leader again, from where the broker was
    after = loader.working.topics["t"].partitions[0]
    assert (after.leader_epoch, after.partition_epoch) == epochs
