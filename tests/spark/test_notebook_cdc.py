"""notebooks/04-cdc-to-delta.ipynb runs top to bottom and computes what it says: Delta equals
PostgreSQL after the snapshot and after the changes, the SCD-2 history's current rows are
PostgreSQL's customers with one snapshot row per seeded customer, time travel returns the
snapshot, and the change-rate plot is drawn."""
from __future__ import annotations

import json
import os

import pytest

from tests.conftest import ROOT
from tests.spark.test_notebook import run

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

# Run in the notebook's kernel before its "Stop" cell: what it computed, as JSON.
_RESULTS = """
import json as _json
_h = DeltaTable(history_path).to_pandas()
print("RESULTS " + _json.dumps({
    "customers_equal": same("customers"), "orders_equal": same("orders"),
    "pg_customers": sorted(pg_table(conn, "customers")),
    "current": sorted(int(i) for i in _h[_h["__is_current"]]["id"]),
    "snapshot_rows": int((_h["__op"] == "r").sum()),
    "current_per_key": int(_h[_h["__is_current"]].groupby("id").size().max()),
    "then": sorted(int(i) for i in then["id"]), "then_tiers": dict(zip(map(str, then["id"]), then["tier"])),
    "rows": sum(rows), "counts": counts, "exception": str(query.exception())}))
"""


def test_notebook_04_cdc_to_delta_mirrors_postgres_and_keeps_its_history():
    outputs = run(os.path.join(ROOT, "notebooks", "04-cdc-to-delta.ipynb"), _RESULTS)
    assert any("image/png" in o.get("data", {}) for o in outputs), "the plot is missing"
    [line] = [ln for o in outputs if o.get("output_type") == "stream" for ln in o.get("text", "").splitlines()
              if ln.startswith("RESULTS ")]
    got = json.loads(line[len("RESULTS "):])
    assert got["exception"] == "None"
    assert got["customers_equal"] and got["orders_equal"]
    assert got["current"] == got["pg_customers"]
    assert got["current_per_key"] == 1
    assert got["snapshot_rows"] == 50
    assert got["then"] == list(range(1, 51))          # the seeded customers, before any change
    assert sum(got["counts"].values()) == 300
    # Every snapshot row and change event (and tombstone) passed through the query.
    assert got["rows"] >= 50 + 80 + 300
