"""A column added with a Connect ``default`` (``ALTER TABLE … ADD COLUMN tier int NOT NULL DEFAULT
5``) in the middle of a micro-batch: PostgreSQL gives every row the default, also the rows the
batch's earlier changes (sent under the old schema, without the column) inserted or updated.
Real delta-rs tables (found by tests/simulation/test_delta_apply_simulation.py)."""
from __future__ import annotations

import pytest
from deltalake import DeltaTable

from spark_sink.delta import delta_apply
from tests.delta_cdc import CUSTOMER_FIELDS, Events, batch

pytestmark = pytest.mark.unit

WITH_TIER = CUSTOMER_FIELDS + [{"type": "int32", "optional": False, "default": 5, "field": "tier"}]


def _rows(path, scd_type):
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    if scd_type == 2:
        rows = [r for r in rows if r["__is_current"]]
    return {r["id"]: r["tier"] for r in rows}


@pytest.mark.parametrize("scd_type", [1, 2])
@pytest.mark.parametrize("existing", [False, True])
def test_rows_a_batch_wrote_before_the_column_arrived_get_its_default(tmp_path, scd_type, existing):
    path, events = str(tmp_path / "t"), Events()
    fn = delta_apply(table_path=path, scd_type=scd_type, app_id="q")
    if existing:
        fn(batch([events.change("c", after={"id": 1, "name": "a", "note": None}, lsn=10)]), 0)
    fn(batch([events.change("u" if existing else "c", after={"id": 1, "name": "b", "note": None}, lsn=20),
              events.change("c", after={"id": 2, "name": "c", "note": None}, lsn=30),
              events.change("c", after={"id": 3, "name": "d", "note": None, "tier": 7}, lsn=40, fields=WITH_TIER)]), 1)
    assert _rows(path, scd_type) == {1: 5, 2: 5, 3: 7}


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_column_added_without_a_default_leaves_the_batch_s_earlier_rows_null(tmp_path, scd_type):
    plain = CUSTOMER_FIELDS + [{"type": "int32", "optional": True, "field": "tier"}]
    path, events = str(tmp_path / "t"), Events()
    fn = delta_apply(table_path=path, scd_type=scd_type, app_id="q")
    fn(batch([events.change("c", after={"id": 1, "name": "b", "note": None}, lsn=20),
              events.change("c", after={"id": 3, "name": "d", "note": None, "tier": 7}, lsn=40, fields=plain)]), 0)
    assert _rows(path, scd_type) == {1: None, 3: 7}


@pytest.mark.parametrize("scd_type", [1, 2])
@pytest.mark.parametrize("existing", [False, True])
def test_a_default_set_after_the_column_arrived_is_not_given_to_older_rows(tmp_path, scd_type, existing):
    """``ADD COLUMN tier int`` (no default: PostgreSQL leaves the rows null), then ``ALTER COLUMN
    tier SET DEFAULT 5`` (only rows inserted later get it): the rows the table held and the rows
    the batch wrote before the column arrived stay null, wherever the batches are cut."""
    plain = CUSTOMER_FIELDS + [{"type": "int32", "optional": True, "field": "tier"}]
    later = CUSTOMER_FIELDS + [{"type": "int32", "optional": True, "default": 5, "field": "tier"}]
    path, events = str(tmp_path / "t"), Events()
    fn = delta_apply(table_path=path, scd_type=scd_type, app_id="q")
    if existing:
        fn(batch([events.change("c", after={"id": 0, "name": "z", "note": None}, lsn=10)]), 0)
    fn(batch([events.change("c", after={"id": 1, "name": "b", "note": None}, lsn=20),
              events.change("c", after={"id": 2, "name": "c", "note": None, "tier": None}, lsn=30, fields=plain),
              events.change("c", after={"id": 3, "name": "d", "note": None, "tier": 5}, lsn=40, fields=later)]), 1)
    assert _rows(path, scd_type) == {**({0: None} if existing else {}), 1: None, 2: None, 3: 5}


class _Crash(Exception):
    pass


@pytest.mark.parametrize("scd_type", [1, 2])
@pytest.mark.parametrize("failure", ["conflict", "crash"])
def test_the_default_survives_a_retry_after_the_rewrite_committed(tmp_path, monkeypatch, scd_type, failure):
    """The table's rewrite (the column with its default) commits, then the MERGE fails: another
    writer's commit (the batch is retried at once) or a crash (the batch runs again). The retry
    finds the column in the table, yet the rows the batch wrote before it arrived get its default."""
    from deltalake.exceptions import CommitFailedError

    from spark_sink.delta import merge
    path, events = str(tmp_path / "t"), Events()
    fn = delta_apply(table_path=path, scd_type=scd_type, app_id="q")
    fn(batch([events.change("c", after={"id": 1, "name": "a", "note": None}, lsn=10)]), 0)
    real, failed = merge.run_delta_rs, []

    def run_delta_rs(*args, **kwargs):
        if not failed:
            failed.append(True)
            raise CommitFailedError("a concurrent transaction") if failure == "conflict" else _Crash()
        return real(*args, **kwargs)
    monkeypatch.setattr(merge, "run_delta_rs", run_delta_rs)
    changes = [events.change("u", after={"id": 1, "name": "b", "note": None}, lsn=20),
               events.change("c", after={"id": 2, "name": "c", "note": None}, lsn=30),
               events.change("c", after={"id": 3, "name": "d", "note": None, "tier": 7}, lsn=40, fields=WITH_TIER)]
    if failure == "crash":
        with pytest.raises(_Crash):
            fn(batch(changes), 1)
        fn = delta_apply(table_path=path, scd_type=scd_type, app_id="q")
    fn(batch(changes), 1)
    assert failed == [True]
    assert _rows(path, scd_type) == {1: 5, 2: 5, 3: 7}
