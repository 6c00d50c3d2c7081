"""The Delta sink against another writer committing between its read and its MERGE (delta-rs
refuses such a commit: ``CommitFailedError``, "a concurrent transaction added new data"): an
``optimize()`` run while the query streams. Real delta-rs tables; the other writer's commit is
made at the point where the sink has read the table (a wrapper of the real read)."""
from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_sink.delta import CommitConflictError, delta_append, delta_apply, optimize
from spark_sink.delta.table import SinkTable
from tests.delta_cdc import Events, batch

pytestmark = pytest.mark.unit


def _interleave(monkeypatch, other_writer, times):
    """Runs ``other_writer`` right after the sink read the table's marks, ``times`` times."""
    real, calls = SinkTable.watermarks, []

    def watermarks(self):
        marks = real(self)
        if len(calls) < times:
            calls.append(self.path)
            other_writer(self.path)
        return marks
    monkeypatch.setattr(SinkTable, "watermarks", watermarks)
    return calls


def _fed(tmp_path, scd_type=1):
    path, events = str(tmp_path / "customers"), Events()
    fn = delta_apply(table_path=path, scd_type=scd_type, app_id="q")
    for i in range(3):   # three commits, three files: something for OPTIMIZE to compact
        fn(batch([events.change("c", after={"id": i, "name": f"n{i}", "note": None}, lsn=10 + i)]), i)
    return path, events, fn


@pytest.mark.parametrize("scd_type", [1, 2])
def test_an_optimize_committed_during_a_batch_does_not_fail_it(tmp_path, monkeypatch, scd_type):
    path, events, fn = _fed(tmp_path, scd_type)
    calls = _interleave(monkeypatch, lambda p: optimize(p), times=1)
    result = fn(batch([events.change("u", before={"id": 1, "name": "n1", "note": None},
                                     after={"id": 1, "name": "m1", "note": None}, lsn=20),
                       events.change("c", after={"id": 7, "name": "n7", "note": None}, lsn=21)]), 3)
    assert calls == [path]
    table = DeltaTable(path)
    assert table.transaction_version("q") == 3 and result.tables[path].version == table.version()
    rows = table.to_pyarrow_table().to_pylist()
    if scd_type == 2:
        rows = [r for r in rows if r["__is_current"]]
    assert sorted((r["id"], r["name"]) for r in rows) == [(0, "n0"), (1, "m1"), (2, "n2"), (7, "n7")]
    assert fn(batch([events.change("d", before={"id": 0, "name": None, "note": None}, lsn=22)]), 3) \
        .tables[path].skipped == "replayed"


def test_a_table_that_keeps_changing_under_the_batch_fails_it_typed_and_retriable(tmp_path, monkeypatch):
    path, events, fn = _fed(tmp_path)
    other = pa.table({"id": pa.array([99], pa.int32()), "name": ["other"], "note": pa.array([None], pa.string())})
    _interleave(monkeypatch, lambda p: write_deltalake(p, other, mode="append"), times=100)
    with pytest.raises(CommitConflictError) as e:
        fn(batch([events.change("c", after={"id": 8, "name": "n8", "note": None}, lsn=30)]), 3)
    assert e.value.retriable and e.value.name == "DELTA_COMMIT_CONFLICT"
    table = DeltaTable(path)
    assert table.transaction_version("q") == 2 and 8 not in table.to_pyarrow_table().column("id").to_pylist()


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_widening_rewrite_overtaken_by_an_optimize_duplicates_no_row(tmp_path, monkeypatch, scd_type):
    """The rewrite a widened column needs (int32 -> int64) reads the table, then overwrites it: an
    OPTIMIZE committed in between must not leave its compacted copy of the rows next to the rewrite."""
    path, events, fn = _fed(tmp_path, scd_type)
    _interleave(monkeypatch, lambda p: optimize(p), times=1)
    wide = [dict(f, type="int64") if f["field"] == "id" else f for f in events.fields]
    fn(batch([events.change("u", before={"id": 1, "name": "n1", "note": None},
                            after={"id": 1, "name": "m1", "note": None}, lsn=20, fields=wide)]), 3)
    table = DeltaTable(path)
    rows = table.to_pyarrow_table()
    assert rows.schema.field("id").type == pa.int64() and table.transaction_version("q") == 3
    current = [r for r in rows.to_pylist() if scd_type == 1 or r["__is_current"]]
    assert sorted((r["id"], r["name"]) for r in current) == [(0, "n0"), (1, "m1"), (2, "n2")]
    assert rows.num_rows == (3 if scd_type == 1 else 4)


def test_delta_append_widening_overtaken_by_an_optimize_duplicates_no_record(tmp_path, monkeypatch):
    import json
    path, fn = str(tmp_path / "t"), delta_append(str(tmp_path / "t"), value_format="json", app_id="q")

    def record(offset, type_, value):
        doc = {"schema": {"type": "struct", "fields": [{"field": "n", "type": type_, "optional": True}]},
               "payload": {"n": value}}
        return {"key": None, "value": json.dumps(doc).encode(), "topic": "t", "partition": 0, "offset": offset}
    for i in range(3):
        fn(pa.Table.from_pylist([record(i, "int32", i)]), i)
    _interleave(monkeypatch, lambda p: optimize(p), times=1)
    fn(pa.Table.from_pylist([record(3, "int64", 2 ** 40)]), 3)
    table = DeltaTable(path)
    assert sorted(table.to_pyarrow_table().column("n").to_pylist()) == [0, 1, 2, 2 ** 40]
    assert table.transaction_version("q") == 3


def test_a_retried_batch_returns_each_dead_letter_once(tmp_path, monkeypatch):
    """A record the table cannot hold is found again by the retry: returned once, not per attempt."""
    path, events, _ = _fed(tmp_path)
    fn = delta_apply(table_path=path, app_id="q", errors_tolerance="all")
    _interleave(monkeypatch, lambda p: optimize(p), times=1)
    schemaless = Events(with_schema=False)
    schemaless.offset = events.offset
    result = fn(batch([schemaless.change("c", after={"id": 5, "name": {"not": "text"}, "note": None}, lsn=40),
                       schemaless.change("c", after={"id": 6, "name": "n6", "note": None}, lsn=41)]), 3)
    assert [d.record.offset for d in result.dead_letters] == [events.offset]
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 6]
