"""Resuming from a Debezium source offset stored at awkward points of a transaction, against a
real embedded PostgreSQL: the part of the transaction Debezium emitted is not emitted again, and
nothing it had not emitted completely is lost (``PostgresStreamingChangeEventSource`` resumes at
``lsn_proc``, ``WalPositionLocator`` skips what came before it)."""
from __future__ import annotations

import json

import pytest

from spark_source.postgres.capture import STREAM, Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from tests.postgres_fixture import read_batches

pytestmark = pytest.mark.integration


def _capture(db, **extra) -> Capture:
    return Capture(CdcOptions.parse(db.options(slot_name="dbz", snapshot_mode="no_data", **extra)))


def _events(records) -> list:
    out = []
    for r in records:
        if r.value is not None:
            payload = json.loads(r.value)["payload"]
            out.append((payload["op"], r.topic.rsplit(".", 1)[1], (payload["after"] or {}).get("id")))
    return out


def test_an_offset_stored_inside_a_truncate_of_several_tables_emits_the_truncate_again(pg_db):
    """Debezium emits one ``t`` event per table of a TRUNCATE, all at the TRUNCATE's LSN; an offset
    stored after the first has ``lsn`` at the TRUNCATE and ``lsn_proc`` at the change before it,
    so the TRUNCATE is emitted again for both tables, never lost for the second."""
    pg_db.execute("CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY)")
    first = _capture(pg_db, skipped_operations="none")
    try:
        start = first.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO a VALUES (1)")
        pg_db.execute("BEGIN; INSERT INTO b VALUES (2); TRUNCATE a, b; COMMIT")
        records = [r for r, _ in read_batches(first, start, 4)[0]]
    finally:
        first.close()
    assert _events(records) == [("c", "a", 1), ("c", "b", 2), ("t", "a", None), ("t", "b", None)]
    insert_b, truncate_a = (json.loads(r.value)["payload"]["source"] for r in records[1:3])
    assert insert_b["lsn"] < truncate_a["lsn"]
    stored = {"lsn": truncate_a["lsn"], "lsn_proc": insert_b["lsn"], "lsn_commit": records[0].commit_lsn,
              "txId": truncate_a["txId"], "ts_usec": truncate_a["ts_us"], "messageType": "TRUNCATE"}
    again = _capture(pg_db, skipped_operations="none", startingOffsets=json.dumps(stored))
    try:
        start = again.next_offset(CdcOffset("new", 0), None)
        assert (start.phase, start.lsn) == (STREAM, records[0].commit_lsn)
        pg_db.execute("INSERT INTO a VALUES (3)")
        resumed = [r for r, _ in read_batches(again, start, 3)[0]]
    finally:
        again.close()
    assert _events(resumed) == [("t", "a", None), ("t", "b", None), ("c", "a", 3)]
