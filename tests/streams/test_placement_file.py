"""A stateful query's placement beside its checkpoint: a fresh checkpoint gets one state partition
per task and the tasks' placement keys; a restart reads them back (extended for a grown topic); a
checkpoint made before placement keys keeps grouping by task number, so its state is found; a
checkpoint holds a finished batch only once Spark's commit log has one (else it is started afresh)."""
from __future__ import annotations

import json

from streams.app import _PLACEMENT, _placement
from streams.task_placement import identity, placement_keys


def test_a_fresh_checkpoint_gets_a_partition_per_task_and_placement_keys(tmp_path):
    assert _placement(str(tmp_path), 4, fresh=True) == (4, placement_keys(4))


def test_a_restart_reads_the_kept_keys_and_leaves_the_count_to_spark(tmp_path):
    (tmp_path / _PLACEMENT).write_text(json.dumps({"partitions": 2, "keys": [2, 0]}))
    assert _placement(str(tmp_path), 2, fresh=False) == (None, (2, 0))
    partitions, keys = _placement(str(tmp_path), 3, fresh=False)      # the input topic grew
    assert partitions is None and keys[:2] == (2, 0) and len(set(keys)) == 3


def test_a_checkpoint_from_before_placement_keys_groups_by_task_number(tmp_path):
    assert _placement(str(tmp_path), 3, fresh=False) == (None, identity(3))


def test_only_a_commit_log_with_a_batch_counts_as_a_finished_batch(tmp_path):
    from streams.app import _committed_a_batch
    assert not _committed_a_batch(str(tmp_path))                    # no commit log yet
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1")
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / ".0.crc.tmp").write_text("")
    assert not _committed_a_batch(str(tmp_path))                    # batch 0 planned, not finished
    (tmp_path / "commits" / "0").write_text("v1")
    assert _committed_a_batch(str(tmp_path))
