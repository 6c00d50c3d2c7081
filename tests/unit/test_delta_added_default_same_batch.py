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
