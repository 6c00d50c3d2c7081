"""Unit tests: what a test opened is closed after it."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _close_logs():
    yield
    from tests.unit._logkit import close_opened
    close_opened()
