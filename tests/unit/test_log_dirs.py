"""Partition directory names: renamed (``-delete``) names fit 255 bytes for every legal topic name
and parse back; start-up recognises them, including full-length ones left by older versions."""
from __future__ import annotations

import os
import string
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import KafkaStorageError
from broker.metadata.image import MAX_TOPIC_NAME, validate_topic_name
from broker.storage.log_manager import (DELETE_SUFFIX, FUTURE_SUFFIX, MAX_FILE_NAME_BYTES, STRAY_SUFFIX,
                                        LogManager, parse_partition_dir, parse_renamed_dir, renamed_dir_name)

pytestmark = pytest.mark.unit

LEGAL = string.ascii_letters + string.digits + "._-"


@pytest.mark.parametrize("suffix", [DELETE_SUFFIX, FUTURE_SUFFIX, STRAY_SUFFIX])
@pytest.mark.parametrize("partition", [0, 7, 99_999, 2**31 - 1])
def test_renamed_name_fits_for_every_legal_length(suffix, partition):
    topic_id = uuid.uuid4().hex
    for length in range(1, MAX_TOPIC_NAME + 1):
        topic = "x" + ("ab-c." * 60)[:length - 1]
        validate_topic_name(topic)
        name = renamed_dir_name(topic, partition, topic_id, suffix)
        assert len(name.encode()) <= MAX_FILE_NAME_BYTES
        head, p, unique, s = parse_renamed_dir(name)
        assert (p, unique, s) == (partition, topic_id, suffix)
        assert topic.startswith(head) and head
        if len(name.encode()) < MAX_FILE_NAME_BYTES:
            assert head == topic  # only cut when it had to be
        assert parse_partition_dir(name) is None


@given(st.text(LEGAL, min_size=1, max_size=MAX_TOPIC_NAME), st.integers(0, 2**31 - 1))
def test_renamed_name_property(topic, partition):
    name = renamed_dir_name(topic, partition, "0" * 32, DELETE_SUFFIX)
    assert len(name.encode()) <= MAX_FILE_NAME_BYTES
    assert parse_renamed_dir(name)[1:] == (partition, "0" * 32, DELETE_SUFFIX)


@given(st.text(LEGAL, min_size=1, max_size=MAX_TOPIC_NAME), st.integers(0, 99_999))
def test_partition_dir_parses_back(topic, partition):
    assert parse_partition_dir(f"{topic}-{partition}") == (topic, partition)


def test_partition_dir_named_like_a_suffix_is_still_a_partition():
    assert parse_partition_dir("orders-delete-3") == ("orders-delete", 3)
    assert parse_renamed_dir("orders-delete-3") is None
    assert parse_partition_dir("__cluster_metadata-0") == ("__cluster_metadata", 0)
    assert parse_partition_dir(".clean-shutdown") is None


def _manager(tmp_path):
    return LogManager(str(tmp_path), ManualClock(1_000))


def _make_partition(tmp_path, topic: str, partition: int, topic_id: str) -> None:
    logs = _manager(tmp_path)
    logs.open_log(topic, partition, topic_id, TOPIC_CONFIG.parse({})).close()
    logs.mark_clean_shutdown()


def test_remove_dir_of_a_249_character_topic(tmp_path):
    topic, topic_id = "t" * MAX_TOPIC_NAME, uuid.uuid4().hex
    _make_partition(tmp_path, topic, 0, topic_id)
    logs = _manager(tmp_path)
    assert logs.existing() == {(topic, 0): topic_id}
    logs.remove_dir(topic, 0, topic_id)
    assert logs.existing() == {}
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == []


def test_start_up_removes_delete_dirs_of_old_and_new_names(tmp_path):
    topic_id = uuid.uuid4().hex
    _make_partition(tmp_path, "kept", 0, topic_id)
    old_style = f"orders-1.{topic_id}-delete"          # as older versions named them (no cut)
    cut = renamed_dir_name("o" * MAX_TOPIC_NAME, 2, topic_id, DELETE_SUFFIX)
    stray = renamed_dir_name("s" * MAX_TOPIC_NAME, 0, topic_id, STRAY_SUFFIX)
    for name in (old_style, cut, stray):
        os.makedirs(tmp_path / name)
        (tmp_path / name / "partition.metadata").write_text(topic_id)
    logs = _manager(tmp_path)
    left = set(os.listdir(tmp_path))
    assert old_style not in left and cut not in left
    assert stray in left                    # kept for an operator, never taken for a partition
    assert logs.existing() == {("kept", 0): topic_id}


def test_remove_dir_when_the_target_name_is_taken(tmp_path):
    topic_id = uuid.uuid4().hex
    _make_partition(tmp_path, "orders", 0, topic_id)
    logs = _manager(tmp_path)
    os.makedirs(tmp_path / renamed_dir_name("orders", 0, topic_id, DELETE_SUFFIX) / "leftover")
    logs.remove_dir("orders", 0, topic_id)
    assert ("orders", 0) not in logs.existing()


def test_open_refuses_a_directory_of_another_topic_id(tmp_path):
    _make_partition(tmp_path, "orders", 0, uuid.uuid4().hex)
    with pytest.raises(KafkaStorageError, match="not removed"):
        _manager(tmp_path).open_log("orders", 0, uuid.uuid4().hex, TOPIC_CONFIG.parse({}))
