"""The Arrow tables ``produce_batch`` takes, as the one batch shape the accumulator keeps."""
from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from broker.client.producer_batch import normalise_table

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("unit", ["us", "ns"])
def test_timestamps_finer_than_milliseconds_are_cut_to_milliseconds(unit):
    """Kafka's timestamps are milliseconds; Spark's Kafka sink drops finer precision the same way
    (a change-data source stamps rows in microseconds)."""
    at = datetime.datetime(2026, 11, 24, 6, 0, 0, 123_456, tzinfo=datetime.timezone.utc)
    table = pa.table({"value": [b"v", b"w"], "timestamp": pa.array([at, None], pa.timestamp(unit, "UTC"))})
    batch = normalise_table(table, now_ms=7)
    stamps = batch.column(batch.schema.get_field_index("timestamp")).to_pylist()
    assert stamps == [int(at.timestamp() * 1000), 7]
