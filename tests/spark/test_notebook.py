"""The notebooks run top to bottom, as a user would run them."""
from __future__ import annotations

import glob
import os

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb"))),
                         ids=os.path.basename)
def test_the_notebook_runs_top_to_bottom(path):
    import nbformat
    from nbclient import NotebookClient
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": os.path.dirname(path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the plot is missing"
