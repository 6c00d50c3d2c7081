"""The layering rules of STYLE.md, enforced by the import-linter contracts in pyproject.toml."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_import_contracts_hold():
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
