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


# Run in the streams notebook's kernel before its "Stop" cell: what the application wrote and stored,
# and what the reference interpreter (TopologyTestDriver) computes from the same records.
_STREAMS_RESULTS = """
import json as _json
from streams.testing import TopologyTestDriver as _Driver
_d = _Driver(app.topology, {"application.id": "shop"})
_p = _d.createInputTopic("prices", Serdes.String(), Serdes.Double())
for _k, _v in prices.items():      # stamped before every order: the prices are known when orders join them
    _p.pipeInput(_k, _v, start)
_o = _d.createInputTopic("orders", Serdes.String(), Serdes.Json(ORDER))
for _k, _v, _ts in orders:
    _o.pipeInput(_k, _v, _ts)
def _windows(store):
    return sorted([w.key, w.start, v] for w, v in store.all())
def _sessions(store):
    return sorted([w.key, w.start, w.end, n] for w, n in store.all())
print("RESULTS " + _json.dumps({
    "orders": [[v["user"], v["qty"] * v["price"], ts] for _, v, ts in orders if v["qty"] > 0],
    "all_orders": [k for k, _, _ in orders], "prices": prices,
    "app": {"totals": totals[["user", "start", "end", "orders", "amount"]].values.tolist(),
            "sessions": sessions[["user", "start", "end", "orders"]].values.tolist(),
            "window_store": _windows(app.store("totals-per-minute")),
            "session_store": _sessions(app.store("sessions")),
            "prices": sorted(app.store("prices").all()),
            "priced": priced[["order_id", "product", "qty", "price", "amount"]].values.tolist(),
            "exceptions": [str(q.exception()) for q in app.queries]},
    "oracle": {"totals": [[v["user"], v["start"], v["end"], v["orders"], v["amount"]] for v in
                          _d.createOutputTopic("user-totals", Serdes.String(), Serdes.Json(TOTAL)).readValuesToList()],
               "sessions": [[v["user"], v["start"], v["end"], v["orders"]] for v in
                            _d.createOutputTopic("user-sessions", Serdes.String(), Serdes.Json(SESSION)).readValuesToList()],
               "window_store": _windows(_d.getWindowStore("totals-per-minute")),
               "session_store": _sessions(_d.getSessionStore("sessions")),
               "prices": sorted(_d.getKeyValueStore("prices").all()),
               "priced": [[v["order_id"], v["product"], v["qty"], v["price"], v["amount"]] for v in
                          _d.createOutputTopic("orders-priced", Serdes.String(), Serdes.Json(PRICED)).readValuesToList()]}},
                                default=float))
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
    checked_by = {"01-quickstart.ipynb": "test_the_quickstart_counts_every_click_once",
                  "02-streams.ipynb": "test_notebook_02_streams_equals_the_reference_interpreter",
                  "03-connect.ipynb": "test_notebook_connect.py",
                  "04-cdc-to-delta.ipynb": "test_notebook_cdc.py"}
    if os.path.basename(path) in checked_by:
        pytest.skip(f"run, and its results checked, by {checked_by[os.path.basename(path)]}")
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


def test_notebook_02_streams_equals_the_reference_interpreter():
    """The streams notebook's application on Spark writes and stores exactly what
    TopologyTestDriver computes from the same orders, and its per-minute totals are the plain sums
    of the orders in each window that has closed."""
    outputs = run(os.path.join(ROOT, "notebooks", "02-streams.ipynb"), _STREAMS_RESULTS)
    assert any("image/png" in o.get("data", {}) for o in outputs), "the plot is missing"
    [line] = [ln for o in outputs if o.get("output_type") == "stream" for ln in o.get("text", "").splitlines()
              if ln.startswith("RESULTS ")]
    got = json.loads(line[len("RESULTS "):])
    app, oracle = got["app"], got["oracle"]
    assert app["exceptions"] == ["None"] * len(app["exceptions"]), app["exceptions"]

    def per_user(rows):   # order across users is not defined; each user's own order is
        out: dict = {}
        for row in rows:
            out.setdefault(row[0], []).append(row)
        return out

    assert per_user(app["totals"]) == per_user(oracle["totals"])
    assert per_user(app["sessions"]) == per_user(oracle["sessions"])
    assert app["window_store"] == oracle["window_store"]
    assert app["session_store"] == oracle["session_store"]
    assert app["prices"] == oracle["prices"] == [["apple", 0.5], ["bread", 2.5], ["cheese", 7.0], ["wine", 12.0]]
    # the enrichment join: every order (quantity 0 too) with its product's price, as the interpreter joins it
    assert sorted(app["priced"]) == sorted(oracle["priced"])
    assert len(app["priced"]) == len(got["all_orders"]) == 150
    assert all(row[3] == got["prices"][row[1]] and row[4] == row[2] * row[3] for row in app["priced"])
    printed = [ln for o in outputs if o.get("output_type") == "stream" for ln in o.get("text", "").splitlines()]
    assert "wine: 12.0" in printed      # the store query app.store("prices").get("wine")

    # Independently of both engines: in-order orders, one partition, so a window is final once the
    # largest timestamp has passed its end + 10 s of grace, and then holds the plain sums.
    stream_time = max(ts for _, _, ts in got["orders"])
    expected: dict = {}
    for user, amount, ts in got["orders"]:
        w = ts // 60_000 * 60_000
        if w + 60_000 + 10_000 <= stream_time:
            n, total = expected.get((user, w), (0, 0.0))
            expected[(user, w)] = (n + 1, total + amount)
    written = {(u, s): (n, amount) for u, s, e, n, amount in app["totals"]}
    assert len(written) == len(app["totals"]) >= 20, "a window was written twice, or too few windows"
    assert written.keys() == expected.keys()
    assert all(written[k][0] == expected[k][0] and abs(written[k][1] - expected[k][1]) < 1e-9 for k in expected)
    # Sessions do not overlap: each accepted order is in one session, written (closed) or still in the store.
    sessions = {tuple(row[:3]): row[3] for row in app["sessions"] + app["session_store"]}
    assert sum(sessions.values()) == len(got["orders"])
