"""The pure folds of connect-configs, connect-status and connect-offsets, on Kafka Connect's records."""
from __future__ import annotations

import pytest

from connect.errors import DataError
from connect.states import ConnectorState, TargetState
from connect.storage_format import (ConfigView, OffsetView, Status, StatusView, can_write_safely, commit_record,
                                    connector_config_record, connector_config_records, connector_removal_records,
                                    fold, offset_record, restart_request_record, status_record, target_state_record,
                                    task_config_record, task_config_records)

pytestmark = pytest.mark.unit
C = ConnectorState


def test_config_records_are_kafkas_keys_and_schemaless_json():
    assert connector_config_record("pg", {"a": "1"}) == (b"connector-pg", b'{"properties":{"a":"1"}}')
    assert target_state_record("pg", TargetState.STOPPED) == (b"target-state-pg", b'{"state":"PAUSED","state.v2":"STOPPED"}')
    assert target_state_record("pg", TargetState.STARTED) == (b"target-state-pg", b'{"state":"STARTED","state.v2":"STARTED"}')
    assert task_config_record("my-pg", 2, {"t": "2"}) == (b"task-my-pg-2", b'{"properties":{"t":"2"}}')
    assert commit_record("pg", 3) == (b"commit-pg", b'{"tasks":3}')
    assert restart_request_record("pg", True, False) == (b"restart-connector-pg", b'{"include-tasks":true,"only-failed":false}')
    assert connector_removal_records("pg") == [(b"connector-pg", None), (b"target-state-pg", None)]


def test_a_connector_config_starts_its_target_state_and_a_tombstone_deletes_it():
    view = fold(ConfigView(), [connector_config_record("pg", {"v": "1"}), connector_config_record("pg", {"v": "2"}),
                               connector_config_record("other", {})])
    assert view.connectors() == ["other", "pg"]
    assert view.connector_configs["pg"] == {"v": "2"}
    assert view.target_state("pg") == TargetState.STARTED
    fold(view, task_config_records("pg", [{"t": "0"}]) + connector_removal_records("pg"))
    assert view.connectors() == ["other"] and view.tasks("pg") == [] and view.target_state("pg") is None


def test_target_state_records_win_and_older_workers_state_field_is_read():
    view = fold(ConfigView(), [connector_config_record("pg", {}), target_state_record("pg", TargetState.PAUSED)])
    assert view.target_state("pg") == TargetState.PAUSED
    view.apply(b"target-state-pg", b'{"state":"PAUSED","state.v2":"STOPPED"}')
    assert view.target_state("pg") == TargetState.STOPPED
    view.apply(b"target-state-pg", b'{"state":"STARTED"}')  # written by a worker before KIP-875
    assert view.target_state("pg") == TargetState.STARTED
    view.apply(b"target-state-pg", None)  # a tombstone while the config lives: back to STARTED
    assert view.target_state("pg") == TargetState.STARTED


def test_an_initial_target_state_written_before_the_config_is_kept():
    view = fold(ConfigView(), [target_state_record("pg", TargetState.STOPPED), connector_config_record("pg", {})])
    assert view.target_state("pg") == TargetState.STOPPED


def test_task_configs_apply_only_at_a_complete_commit():
    view = fold(ConfigView(), [connector_config_record("pg", {}), task_config_record("pg", 0, {"t": "0"})])
    assert view.tasks("pg") == []  # deferred until commit-pg
    fold(view, [task_config_record("pg", 1, {"t": "1"}), commit_record("pg", 2)])
    assert view.tasks("pg") == [{"t": "0"}, {"t": "1"}]
    # compaction lost task 0 of the next generation: inconsistent until a complete commit
    fold(view, [task_config_record("pg", 1, {"t": "1b"}), commit_record("pg", 2)])
    assert "pg" in view.inconsistent and view.tasks("pg") == []
    fold(view, task_config_records("pg", [{"t": "0c"}]))
    assert "pg" not in view.inconsistent and view.tasks("pg") == [{"t": "0c"}]


def test_a_commit_for_a_deleted_connector_is_ignored():
    view = fold(ConfigView(), [task_config_record("gone", 0, {}), commit_record("gone", 1)])
    assert view.connectors() == [] and view.tasks("gone") == [] and view.task_counts == {}


def test_restart_requests_and_unreadable_records_are_handled():
    view = fold(ConfigView(), [restart_request_record("pg", include_tasks=True, only_failed=True),
                               (b"connector-bad", b"not json"), (b"connector-bad", b'["not","a","map"]'),
                               (b"unknown-key", b"{}")])
    assert view.restart_requests["pg"].include_tasks and view.restart_requests["pg"].only_failed
    assert view.connectors() == []


def test_status_records_are_kafkas_and_destroyed_is_a_tombstone():
    assert status_record(Status("pg", C.FAILED, "w1:8083", 4, trace="Traceback")) == (
        b"status-connector-pg", b'{"state":"FAILED","trace":"Traceback","worker_id":"w1:8083","generation":4}')
    assert status_record(Status("my-pg", C.RUNNING, "w", 1, task=3)) == (
        b"status-task-my-pg-3", b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}')
    assert status_record(Status("pg", C.DESTROYED, "w", 1, task=0)) == (b"status-task-pg-0", None)


def test_the_latest_status_wins_but_a_stale_unassigned_does_not_hide_running():
    view = fold(StatusView(), [status_record(Status("pg", C.RUNNING, "w1", 1)),
                               status_record(Status("pg", C.FAILED, "w1", 1, trace="boom")),
                               status_record(Status("my-pg", C.RUNNING, "w2", 5, task=0)),
                               status_record(Status("my-pg", C.UNASSIGNED, "w1", 5, task=0)),
                               status_record(Status("my-pg", C.UNASSIGNED, "w1", 4, task=0))])
    assert (view.connector("pg").state, view.connector("pg").trace) == (C.FAILED, "boom")
    assert view.tasks[("my-pg", 0)].state == C.RUNNING and view.tasks[("my-pg", 0)].worker_id == "w2"
    fold(view, [status_record(Status("my-pg", C.UNASSIGNED, "w1", 6, task=0))])  # a newer generation wins
    assert view.tasks[("my-pg", 0)].state == C.UNASSIGNED


def test_status_tombstones_remove_a_task_or_a_connector_with_its_tasks():
    view = fold(StatusView(), [status_record(Status("pg", C.RUNNING, "w", 1)),
                               status_record(Status("pg", C.RUNNING, "w", 1, task=0)),
                               status_record(Status("pg", C.RUNNING, "w", 1, task=1))])
    view.apply(b"status-task-pg-1", None)
    assert [s.task for s in view.task_statuses("pg")] == [0]
    view.apply(b"status-connector-pg", None)
    assert view.connector("pg") is None and view.task_statuses("pg") == []


def test_topic_statuses_are_folded():
    view = StatusView()
    view.apply(b"status-topic-orders:connector-pg", b'{"topic":{"name":"orders","connector":"pg","task":0,'
                                                   b'"discoverTimestamp":1}}')
    assert view.topics["pg"]["orders"]["task"] == 0
    view.apply(b"status-topic-orders:connector-pg", None)
    assert view.topics["pg"] == {}


def test_safe_writes_keep_a_newer_owners_status():
    mine = Status("pg", C.RUNNING, "w1", 3)
    assert can_write_safely(None, mine)
    assert can_write_safely(Status("pg", C.RUNNING, "w1", 9), mine)  # our own
    assert can_write_safely(Status("pg", C.RUNNING, "w2", 3), mine)  # same generation
    assert not can_write_safely(Status("pg", C.RUNNING, "w2", 4), mine)  # a newer owner


def test_offset_records_are_kafkas_json_key_and_value():
    assert offset_record("pg", {"slot": "s", "db": 1}, {"lsn": 42}) == (b'["pg",{"slot":"s","db":1}]', b'{"lsn":42}')
    assert offset_record("pg", {"slot": "s"}, None) == (b'["pg",{"slot":"s"}]', None)
    with pytest.raises(DataError, match="primitive"):
        offset_record("pg", {"slot": "s"}, {"lsn": [1, 2]})
    with pytest.raises(DataError, match="string keys"):
        offset_record("pg", {1: "s"}, {"lsn": 1})


def test_offsets_are_kept_per_source_partition_and_per_connector():
    view = fold(OffsetView(), [offset_record("pg", {"slot": "a"}, {"lsn": 1}),
                               offset_record("pg", {"slot": "b"}, {"lsn": 5}),
                               offset_record("pg", {"slot": "a"}, {"lsn": 2}),
                               offset_record("files", {"slot": "a"}, {"pos": 9})])
    assert view.get("pg", {"slot": "a"}) == {"lsn": 2}
    assert view.get("pg", {"slot": "b"}) == {"lsn": 5}
    assert view.get("files", {"slot": "a"}) == {"pos": 9}
    assert view.connector_offsets("pg") == [({"slot": "a"}, {"lsn": 2}), ({"slot": "b"}, {"lsn": 5})]


def test_partitions_compare_by_value_and_a_null_offset_deletes():
    view = fold(OffsetView(), [(b'["pg",{"db":1,"slot":"a"}]', b'{"lsn":1}')])
    assert view.get("pg", {"slot": "a", "db": 1}) == {"lsn": 1}
    view.apply(b'["pg",{"slot":"a","db":1}]', None)
    assert view.get("pg", {"slot": "a", "db": 1}) is None


@pytest.mark.parametrize("key", [None, b"not json", b'{"a":1}', b'["pg"]', b'[1,{"a":1}]', b'["pg",null]',
                                 b'["pg",{"a":1},3]'])
def test_offset_keys_of_other_shapes_are_ignored(key):
    view = OffsetView()
    view.apply(key, b'{"lsn":1}')
    assert view.offsets in ({}, {"pg": {}})


def _compacted(records):
    """Kafka's log cleaner over the whole log: the latest record of each key, in log order."""
    last = {key: i for i, (key, _) in enumerate(records)}
    return [r for i, r in enumerate(records) if last[r[0]] == i]


class _MemoryLog:
    """connect-configs in memory, for :class:`ConnectStorage`'s writes."""
    topic, partitions = "connect-configs", 1

    def __init__(self):
        self.records = []

    def send(self, records):
        self.records.extend(records)


def test_a_config_update_keeps_the_task_commit_after_the_config_through_compaction():
    """A paused connector's config is written again with its task configs unchanged; once
    compacted, its tasks must still be read back (a commit read before its connector's config
    counts as a deleted connector's, as in Kafka's ``processTasksCommitRecord``)."""
    from connect.config import WorkerConfig
    from connect.storage import ConnectStorage
    storage = ConnectStorage(WorkerConfig.parse({"bootstrap.servers": "unused:9092", "group.id": "g"}))
    storage.config_log = log = _MemoryLog()
    storage.put_connector_config("pg", {"v": "1"})
    storage.put_task_configs("pg", [{"t": "0"}, {"t": "1"}])
    storage.put_target_state("pg", TargetState.PAUSED)
    storage.put_connector_config("pg", {"v": "2"})
    reread = fold(ConfigView(), _compacted(log.records))
    assert reread.connector_configs["pg"] == {"v": "2"}
    assert reread.tasks("pg") == [{"t": "0"}, {"t": "1"}]
    assert reread.target_state("pg") == TargetState.PAUSED


def test_a_config_write_repeats_only_a_consistent_task_set():
    view = fold(ConfigView(), [connector_config_record("pg", {}), task_config_record("pg", 1, {}),
                               commit_record("pg", 2)])
    assert "pg" in view.inconsistent
    assert connector_config_records(view, "pg", {"v": "2"}, TargetState.STOPPED) == [
        target_state_record("pg", TargetState.STOPPED), connector_config_record("pg", {"v": "2"})]
    assert connector_config_records(ConfigView(), "new", {}) == [connector_config_record("new", {})]
