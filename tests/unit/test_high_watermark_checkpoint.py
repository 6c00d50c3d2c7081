"""The high-watermark checkpoint (Kafka's ``replication-offset-checkpoint``): its file format, and a
broker's partitions starting from it after a restart, never past what the log holds."""
from __future__ import annotations

import os
import uuid

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG
from broker.errors import KafkaStorageError
from broker.metadata.image import MetadataImage
from broker.partition import restored_high_watermark
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import iter_headers
from broker.server.metadata_loader import MetadataLoader
from broker.server.replica_manager import ReplicaManager
from broker.storage.log_manager import LogManager
from broker.storage.offset_checkpoint import (REPLICATION_OFFSET_CHECKPOINT_FILE, format_offsets, parse_offsets,
                                              read_offset_checkpoint, write_offset_checkpoint)

pytestmark = pytest.mark.unit

NOW = ManualClock().time_ms()


# ------------------------------------------------------------------------------ file format
def test_the_file_is_kafkas_text_format_and_reads_back():
    offsets = {("orders", 1): 1488, ("orders", 0): 1500, ("__consumer_offsets", 7): 0}
    data = format_offsets(offsets)
    assert data == b"0\n3\n__consumer_offsets 7 0\norders 0 1500\norders 1 1488\n"
    assert parse_offsets(data) == offsets
    assert parse_offsets(b"0\r\n1\r\norders  0\t42\r\n") == {("orders", 0): 42}   # any whitespace, CRLF


def test_a_missing_or_empty_file_has_no_entries(tmp_path):
    path = str(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE)
    assert read_offset_checkpoint(path) == {}
    for data in (b"", b"0\n"):   # as Kafka's CheckpointReadBuffer: nothing after the version is empty
        with open(path, "wb") as f:
            f.write(data)
        assert read_offset_checkpoint(path) == {}


def test_writing_replaces_the_whole_file_and_leaves_no_temp_file(tmp_path):
    path = str(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE)
    write_offset_checkpoint(path, {("a", 0): 5, ("b", 0): 6})
    write_offset_checkpoint(path, {("a", 0): 9})
    assert read_offset_checkpoint(path) == {("a", 0): 9}
    assert os.listdir(tmp_path) == [REPLICATION_OFFSET_CHECKPOINT_FILE]


@pytest.mark.parametrize("data, says", [
    (b"1\n1\na 0 5\n", "version 1"),
    (b"0\n2\na 0 5\n", "declares 2 entries but holds 1"),     # a torn file: lines missing
    (b"0\n1\na 0 5\nb 0 6\n", "declares 1 entries but holds 2"),
    (b"0\n1\na 0\n", "line 3"),
    (b"0\n1\na x 5\n", "line 3"),
    (b"0\nzz\n", "line 2"),
    (b"\x00\x00\x00", "line 1"),
    (b"0\n1\n\xff\xfe 0 5\n", "not UTF-8"),
])
def test_a_damaged_file_raises_a_storage_error_naming_it(tmp_path, data, says):
    path = str(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE)
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(KafkaStorageError, match=says) as raised:
        read_offset_checkpoint(path)
    assert path in str(raised.value)


def test_a_topic_name_with_whitespace_is_refused_before_anything_is_written(tmp_path):
    path = str(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE)
    with pytest.raises(ValueError, match="whitespace"):
        write_offset_checkpoint(path, {("a b", 0): 1})
    assert not os.path.exists(path)


def test_a_restored_high_watermark_stays_within_the_log():
    assert restored_high_watermark(None, 3, 10) == 3      # no checkpoint: the log start
    assert restored_high_watermark(7, 3, 10) == 7
    assert restored_high_watermark(12, 3, 10) == 10       # the tail the ISR held was lost in a crash
    assert restored_high_watermark(1, 3, 10) == 3         # DeleteRecords after the last checkpoint


# ------------------------------------------------------------------------------ a broker's partitions
class NoFetchers:
    def add(self, *a): pass
    def remove(self, *a): pass
    def close(self): pass


def _manager(tmp_path) -> ReplicaManager:
    config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path)})
    return ReplicaManager(config, ManualClock(NOW), LogManager(str(tmp_path), ManualClock(NOW)),
                          NoFetchers(), lambda *a: None)


def _host(manager: ReplicaManager, topics: dict[str, str]) -> MetadataLoader:
    """Node 1 leads partition 0 of each topic (name -> topic id), node 2 follows, both in the ISR."""
    loader = MetadataLoader([("replicas", lambda image, first: manager.apply_image(image))])
    loader.load(1, [(n, [{"type": "topic", "name": name, "topic_id": topic_id, "replicas": [[1, 2]]}])
                    for n, (name, topic_id) in enumerate(topics.items(), start=1)])
    return loader


def _batch(n: int) -> bytes:
    return encode_batch(record_batch([None] * n, [b"v"] * n, [NOW] * n))


def _leader_with_uncommitted_tail(tmp_path, topic_id: str):
    """a-0 led here: 5 records, the follower holds 3 of them, so the high watermark is 3."""
    manager = _manager(tmp_path)
    _host(manager, {"a": topic_id})
    p = manager.partitions[("a", 0)]
    p.append_records(_batch(3))
    p.append_records(_batch(2))
    p.read_for_follower(2, 3, 1 << 20, p.leader_epoch)
    assert (p.high_watermark, p.log.log_end_offset) == (3, 5)
    return manager, p


def test_after_a_restart_a_leader_shows_what_its_isr_confirmed_and_not_its_unconfirmed_tail(tmp_path):
    topic_id = uuid.uuid4().hex
    manager, _ = _leader_with_uncommitted_tail(tmp_path, topic_id)
    manager.close()
    assert read_offset_checkpoint(str(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE)) == {("a", 0): 3}

    restarted = _manager(tmp_path)
    _host(restarted, {"a": topic_id})
    p = restarted.partitions[("a", 0)]
    # Before: 0 (the log start) until the follower fetched again: consumers read nothing.
    assert p.high_watermark == 3
    assert p.stable_offsets() == (3, 3)                      # read_committed reads up to it too
    shown = p.read(0, 1 << 20, read_committed=True)
    assert [h.last_offset for _, h in iter_headers(memoryview(shown.records))] == [2]   # not the tail
    # The follower confirms the rest: everything is shown, and "latest" is the log end.
    p.read_for_follower(2, 5, 1 << 20, p.leader_epoch)
    assert p.latest_offset()[0] == 5
    restarted.close()


def test_a_checkpoint_past_the_recovered_log_end_is_cut_to_it(tmp_path):
    topic_id = uuid.uuid4().hex
    manager, _ = _leader_with_uncommitted_tail(tmp_path, topic_id)
    manager.close()
    write_offset_checkpoint(str(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE), {("a", 0): 40})
    restarted = _manager(tmp_path)
    _host(restarted, {"a": topic_id})
    assert restarted.partitions[("a", 0)].high_watermark == 5
    restarted.close()


def test_a_damaged_checkpoint_starts_partitions_at_their_log_start_and_is_rewritten(tmp_path, caplog):
    topic_id = uuid.uuid4().hex
    manager, _ = _leader_with_uncommitted_tail(tmp_path, topic_id)
    manager.close()
    path = str(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE)
    with open(path, "wb") as f:
        f.write(b"0\n7\na 0 3\n")
    restarted = _manager(tmp_path)
    assert "declares 7 entries" in caplog.text
    _host(restarted, {"a": topic_id})
    assert restarted.partitions[("a", 0)].high_watermark == 0
    assert read_offset_checkpoint(path) == {("a", 0): 0}   # written again after the first metadata
    restarted.close()


def test_a_topic_created_again_under_the_same_name_never_starts_from_the_old_high_watermark(tmp_path):
    old_id, new_id = uuid.uuid4().hex, uuid.uuid4().hex
    manager, _ = _leader_with_uncommitted_tail(tmp_path, old_id)
    path = str(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE)
    manager.checkpoint_high_watermarks()
    assert read_offset_checkpoint(path) == {("a", 0): 3}
    # The topic goes and comes back with a new id: the old entry is gone from the file at once, so a
    # crash before the next interval cannot give the new partition's unconfirmed records its value.
    manager.apply_image(MetadataImage())
    assert read_offset_checkpoint(path) == {}
    _host(manager, {"a": new_id})
    p = manager.partitions[("a", 0)]
    p.append_records(_batch(4))
    assert p.high_watermark == 0
    crashed_at = read_offset_checkpoint(path)
    assert crashed_at.get(("a", 0), 0) == 0
    manager.close()


def test_a_follower_takes_a_lower_high_watermark_from_its_leader(tmp_path):
    topic_id = uuid.uuid4().hex
    manager = _manager(tmp_path)
    loader = MetadataLoader([("replicas", lambda image, first: manager.apply_image(image))])
    loader.load(1, [(1, [{"type": "topic", "name": "a", "topic_id": topic_id, "replicas": [[2, 1]]}])])
    p = manager.partitions[("a", 0)]
    p.append_as_follower(encode_batch(record_batch([None] * 6, [b"v"] * 6, [NOW] * 6), partition_leader_epoch=0),
                         leader_hw=5, leader_log_start=0)
    assert p.high_watermark == 5
    # A leader elected with an older checkpoint confirms less: as Kafka's follower, take its value.
    p.append_as_follower(b"", leader_hw=2, leader_log_start=0)
    assert p.high_watermark == 2
    p.append_as_follower(b"", leader_hw=9, leader_log_start=0)
    assert p.high_watermark == 6   # never past this replica's own log end
    manager.close()
