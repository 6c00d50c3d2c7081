"""A transaction larger than ``transaction.spill.threshold.bytes`` against a real embedded
PostgreSQL: it is held in a temporary file, not in the driver's memory, and still arrives whole,
once, in one batch, and again whole when the batch is replayed before it was committed."""
from __future__ import annotations

import pytest

from spark_source.postgres.capture import Capture
from spark_source.postgres.options import CdcOptions
from tests.postgres_fixture import record_ids

pytestmark = pytest.mark.integration

ROWS = 3000


def test_a_transaction_past_the_spill_threshold_arrives_whole_and_once(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, qty int)")
    pg_db.execute("INSERT INTO items SELECT g, 0 FROM generate_series(1, %s) g", (ROWS,))
    options = pg_db.options(slot_name="large", snapshot_mode="no_data", **{
        "transaction.spill.threshold.bytes": 4096, "transaction.spill.dir": str(tmp_path)})
    capture = Capture(CdcOptions.parse(options))
    try:
        start = capture.initial_offset()
        pg_db.execute("UPDATE items SET qty = qty + 1")
        pg_db.execute("INSERT INTO items VALUES (0, 7)")
        from tests.conftest import wait_until
        ends = []
        wait_until(lambda: ends.append(capture.next_offset(start, 10)) or ends[-1] != start, timeout=30,
                   message="the large transaction")
        end = ends[-1]
        (txn,) = capture.stream.take(start.lsn, end.lsn)
        assert len(txn.changes) == ROWS and txn.changes.buffer.spilled, "held in the spill file"
        first = capture.records(start, end)
        assert record_ids(first) == list(range(1, ROWS + 1)), "whole, in order, once, alone in its batch"
        replay = capture.records(start, end)
        assert [(r.key, r.headers) for r, _ in replay] == [(r.key, r.headers) for r, _ in first], \
            "a replayed batch is the same"
        capture.acknowledge(end)
        assert txn.changes.buffer._file.closed, "the file goes once the batch is committed"
        wait_until(lambda: ends.append(capture.next_offset(end, 10)) or ends[-1] != end, timeout=30,
                   message="the next transaction")
        assert record_ids(capture.records(end, ends[-1])) == [0]
    finally:
        capture.close()
