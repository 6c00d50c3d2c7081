"""The notebooks run top to bottom, as a user would run them, and compute what they say."""
from __future__ import annotations

import glob
import json
import os

import nbformat
import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

# Run in the quickstart's kernel before its "Stop" cell: what the notebook computed, as JSON.
_QUICKSTART_RESULTS = """
import json as _json
from broker.client import Consumer as _Consumer, TopicPartition as _TP
_c = _Consumer({"bootstrap.servers": servers, "group.id": "clicks-dashboard"})
_group = [tp.offset for tp in _c.committed([_TP("clicks", p) for p in range(2)], 30)]
_c.close()
print("RESULTS " + _json.dumps({
    "table": {str(w): {u: int(n) for u, n in row.items()} for w, row in table.to_dict("index").items()},
    "batches": len(query.recentProgress), "max_batch": max(p["numInputRows"] for p in query.recentProgress),
    "exception": str(query.exception()), "rows_out": len(rows), "group": _group,
    "distinct_out": len({(r["window"]["start"], r["user"], r["count"]) for r in rows}),
    "updated": sum(o["numRowsUpdated"] for p in query.recentProgress for o in p["stateOperators"])}))
"""


def run(path: str, extra: str | None = None):
    from nbclient import NotebookClient
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    notebook = nbformat.read(path, as_version=4)
    if extra is not None:
        stop = max(i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and "spark.stop()" in c.source)
        notebook.cells.insert(stop, nbformat.v4.new_code_cell(extra))
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, errors[0].get("traceback")
    return outputs


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb"))),
                         ids=os.path.basename)
def test_the_notebook_runs_top_to_bottom(path):
    if os.path.basename(path) == "01-quickstart.ipynb":
        pytest.skip("run, and its results checked, by test_the_quickstart_counts_every_click_once")
    run(path)


def test_the_quickstart_counts_every_click_once():
    """600 clicks by four users over three whole minutes: 50 per user per minute, in at least three
    micro-batches of at most 200 records (maxOffsetsPerTrigger), every count written exactly once
    and the consumer group at the end of both partitions."""
    outputs = run(os.path.join(ROOT, "notebooks", "01-quickstart.ipynb"), _QUICKSTART_RESULTS)
    assert any("image/png" in o.get("data", {}) for o in outputs), "the plot is missing"
    [line] = [ln for o in outputs if o.get("output_type") == "stream" for ln in o.get("text", "").splitlines()
              if ln.startswith("RESULTS ")]
    got = json.loads(line[len("RESULTS "):])
    assert got["exception"] == "None"
    assert len(got["table"]) == 3, got["table"]
    assert all(row == {f"user-{u}": 50 for u in range(4)} for row in got["table"].values()), got["table"]
    assert got["batches"] >= 3 and got["max_batch"] <= 200, got
    assert got["rows_out"] >= 12, got            # at least one count per user and minute
    # Exactly once: each row the aggregation updated was written once, none twice (in update mode a
    # count only grows, so a repeated (window, user, count) is a duplicate write).
    assert got["rows_out"] == got["distinct_out"] == got["updated"], got
    assert got["group"] == [300, 300], got
