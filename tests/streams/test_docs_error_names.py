"""Every error class docs/streams.md names in backticks can be imported from ``streams`` (or, for the
broker's own errors, from ``broker.errors``), so a user can catch what the page says is raised."""
import re
from pathlib import Path

import broker.errors
import streams

DOC = Path(__file__).resolve().parents[2] / "docs" / "streams.md"
PYTHON_BUILTINS = {"TypeError", "ValueError", "KeyError"}


def _documented_errors() -> set[str]:
    return set(re.findall(r"`([A-Z][A-Za-z]*Error)`", DOC.read_text())) - PYTHON_BUILTINS


def test_every_documented_streams_error_is_importable():
    names = _documented_errors()
    assert {"SuppressionBufferFullError", "StreamsNotStartedError", "VectorizedResultError"} <= names
    missing = sorted(n for n in names if not hasattr(streams, n) and not hasattr(broker.errors, n))
    assert missing == [], f"named in docs/streams.md but not importable from streams: {missing}"


def test_exported_errors_are_the_raising_classes():
    from streams.suppress import SuppressionBufferFullError
    from streams.sql_values import ExpressionEvaluationError
    from streams.state_buckets import StateLayoutError
    assert streams.SuppressionBufferFullError is SuppressionBufferFullError
    assert streams.ExpressionEvaluationError is ExpressionEvaluationError
    assert streams.StateLayoutError is StateLayoutError
    assert issubclass(streams.StreamsNotStartedError, streams.InvalidStateStoreError)
    assert issubclass(streams.UnknownStateStoreError, streams.InvalidStateStoreError)
