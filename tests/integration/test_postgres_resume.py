"""``startingOffsets`` (a Debezium source offset, as a Connect worker keeps it) against a real
embedded PostgreSQL: a slot left behind the stored offset replays nothing at or below it; an
unfinished snapshot is taken again; a missing slot fails, or snapshots again under when_needed."""
from __future__ import annotations

import json

import pytest

from spark_source.postgres.capture import DONE, SNAPSHOT, STREAM, Capture
from spark_source.postgres.errors import SlotLostError
from spark_source.postgres.options import CdcOptions
from tests.postgres_fixture import read_batches, record_ids

pytestmark = pytest.mark.integration


def _capture(db, **extra) -> Capture:
    return Capture(CdcOptions.parse(db.options(slot_name="resume", **extra)))


def _read_unacknowledged(capture, start, want: int) -> list:
    """``want`` records after ``start`` as one batch, asked for again from ``start`` until they all
    came: asking from a later offset acknowledges it (Spark asks from an offset only once it
    committed it), and the slot must stay behind here."""
    from tests.conftest import wait_until
    got: list = []

    def enough():
        end = capture.next_offset(start, None)
        got[:] = capture.records(start, end) if end != start else []
        return len(got) >= want
    wait_until(enough, timeout=30, interval=0.05, message=f"{want} records")
    return got


def test_a_slot_behind_the_stored_offset_resumes_after_it_and_replays_nothing(pg_db):
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text)")
    first = _capture(pg_db, snapshot_mode="no_data")
    try:
        start = first.initial_offset()
        for i in (1, 2, 3):
            pg_db.execute("INSERT INTO customers VALUES (%s, 'c')", (i,))
        records = _read_unacknowledged(first, start, 3)
    finally:
        first.close()
    assert record_ids(records) == [1, 2, 3]
    second_lsn = int(dict(records[1][0].headers)["riverlog.cdc.commit_lsn"])
    assert pg_db.slot("resume")["confirmed_flush_lsn"] < second_lsn, "nothing was acknowledged: the slot is behind"

    stored = {"lsn": second_lsn, "lsn_commit": second_lsn, "txId": 1, "ts_usec": 5}
    again = _capture(pg_db, snapshot_mode="initial", startingOffsets=json.dumps(stored))
    try:
        start = again.initial_offset()
        assert (start.phase, start.lsn, start.xid) == (STREAM, second_lsn, 1), "no new snapshot"
        pg_db.execute("INSERT INTO customers VALUES (4, 'c')")
        records, end = read_batches(again, start, 2)
        assert record_ids(records) == [3, 4]
        assert end.xid is not None and end.xid != 1 and end.ts_us > 5, "the offset carries the last txId"
    finally:
        again.close()


def test_an_unfinished_snapshot_is_taken_again_and_a_missing_slot_fails_or_snapshots(pg_db):
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text)")
    pg_db.execute("INSERT INTO customers VALUES (1, 'c')")
    mid_snapshot = json.dumps({"lsn": 1, "snapshot": True, "last_snapshot_record": False})
    c = _capture(pg_db, startingOffsets=mid_snapshot)
    try:
        assert c.initial_offset().phase == SNAPSHOT
    finally:
        c.close()
    pg_db.drop_slot("resume")

    streaming = json.dumps({"lsn": 123, "txId": 7})
    c = _capture(pg_db, startingOffsets=streaming)
    try:
        with pytest.raises(SlotLostError, match="does not exist"):
            c.initial_offset()
    finally:
        c.close()
    c = _capture(pg_db, startingOffsets=streaming, snapshot_mode="when_needed")
    try:
        assert c.initial_offset().phase == SNAPSHOT
    finally:
        c.close()
    done = json.dumps({"lsn": 9, "snapshot": True, "last_snapshot_record": True})
    c = _capture(pg_db, startingOffsets=done, snapshot_mode="initial_only")
    try:
        assert (c.initial_offset().phase, c.initial_offset().lsn) == (DONE, 9)
    finally:
        c.close()
