"""A batch whose MERGE changes no row (a row inserted — or snapshotted — and deleted inside the
batch; a delete of a key the table does not hold) still records its application transaction and
high-water marks: delta-rs makes no commit for such a MERGE, and a batch that left no record is
applied again after a restart, resurrecting what it deleted. Real delta-rs tables (found by
tests/simulation/test_delta_apply_simulation.py)."""
from __future__ import annotations

import pytest
from deltalake import DeltaTable

from spark_sink.delta import delta_apply
from tests.delta_cdc import Events, batch

pytestmark = pytest.mark.unit

ROW = {"id": 1, "name": "a", "note": None}


def test_a_snapshot_row_deleted_in_the_same_batch_stays_deleted_when_a_new_query_reads_it_again(tmp_path):
    path, events = str(tmp_path / "t"), Events()
    read = events.change("r", after=ROW, lsn=100, order=0)
    deleted = events.change("d", before=ROW, lsn=110)
    delta_apply(table_path=path, app_id="q1")(batch([read, deleted]), 0)
    # The checkpoint is lost: a new query (new app id) starts over and reads the snapshot row alone.
    result = delta_apply(table_path=path, app_id="q2")(batch([read]), 0)
    assert DeltaTable(path).to_pyarrow_table().num_rows == 0
    assert result.tables[path].held == 1


def test_a_batch_that_deletes_a_key_the_table_lacks_records_its_transaction(tmp_path):
    path, events = str(tmp_path / "t"), Events()
    fn = delta_apply(table_path=path, app_id="q")
    fn(batch([events.change("c", after=ROW, lsn=100)]), 0)
    gone = events.change("d", before=dict(ROW, id=5), lsn=110)
    fn(batch([gone]), 1)
    assert DeltaTable(path).transaction_version("q") == 1
    assert fn(batch([gone]), 1).tables[path].skipped == "replayed"
    assert DeltaTable(path).to_pyarrow_table().column("id").to_pylist() == [1]
