"""Values PostgreSQL holds at the edges of their types, read by the snapshot (a SELECT through
each type's output function) and streamed (pgoutput's text), against a real embedded PostgreSQL:
both paths give the same event values, as Debezium's connector would."""
from __future__ import annotations

import json

import pytest

from spark_source.postgres.capture import SNAPSHOT, Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from tests.postgres_fixture import stream_until

pytestmark = pytest.mark.integration

EDGES = ("'infinity'::interval, '-infinity'::interval, '1 year 1 mon 7 days 18:20:27.8'::interval, "
         "repeat('9', 5000)::numeric, ARRAY['infinity'::interval]")


def _after(record) -> dict:
    return json.loads(record.value)["payload"]["after"]


def test_edge_values_convert_alike_when_snapshotted_and_streamed(pg_db):
    pg_db.execute("CREATE TABLE edges (id int PRIMARY KEY, up interval, down interval, frac interval, big numeric, "
                  "ups interval[])")
    pg_db.execute(f"INSERT INTO edges VALUES (1, {EDGES})")
    capture = Capture(CdcOptions.parse(pg_db.options()))
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        snapshot = []
        while start.phase == SNAPSHOT:
            end = capture.next_offset(start, None)
            snapshot.extend(r for r, _ in capture.records(start, end))
            start = end
        pg_db.execute(f"INSERT INTO edges VALUES (2, {EDGES})")
        streamed, _ = stream_until(capture, start, 1)
    finally:
        capture.close()
    read, written = _after(snapshot[0]), _after(streamed[0])
    assert read.pop("id") == 1 and written.pop("id") == 2
    assert read == written
    assert (read["up"], read["down"], read["frac"]) == (2 ** 63 - 1, -(2 ** 63), 34858227799999)
    assert read["ups"] == [2 ** 63 - 1] and read["big"]["scale"] == 0
