"""A backlog the stream meets after downtime, against a real embedded PostgreSQL: many small
transactions waiting in the slot are read in time linear in their number (the read-ahead limit
is checked per message), and a transaction larger than ``maxChangesPerTrigger`` is one batch of
its own that a restart replays whole."""
from __future__ import annotations

import pytest

from spark_source.postgres.capture import Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from tests.conftest import wait_until
from tests.postgres_fixture import read_batches, record_ids

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_backlog_of_many_small_transactions_is_read_without_stalling(pg_db):
    """40,000 one-row transactions wait in the slot (a query that was down); they come in one
    batch, in commit order. Checking the read-ahead limit by summing the buffer on every message
    made this quadratic: minutes of planning in a single latestOffset."""
    n = 40_000
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    capture = Capture(CdcOptions.parse(pg_db.options(slot_name="backlog", snapshot_mode="no_data")))
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute(f"DO $$ BEGIN FOR i IN 1..{n} LOOP INSERT INTO t VALUES (i); COMMIT; END LOOP; END $$")
        records, _ = read_batches(capture, start, n, acknowledge=True, timeout=100)
    finally:
        capture.close()
    assert record_ids(records) == list(range(1, n + 1))


def test_a_transaction_larger_than_the_batch_limit_is_one_batch_replayed_whole(pg_db):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    options = CdcOptions.parse(pg_db.options(slot_name="large", snapshot_mode="no_data"))
    capture = Capture(options)
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO t VALUES (0)")
        pg_db.execute("INSERT INTO t SELECT g FROM generate_series(1, 5000) g")     # one transaction
        pg_db.execute("INSERT INTO t VALUES (5001)")
        first = wait_until(lambda: (e := capture.next_offset(start, 100)) != start and e, timeout=30)
        assert record_ids(capture.records(start, first)) == [0]
        capture.acknowledge(first)
        large = wait_until(lambda: (e := capture.next_offset(first, 100)) != first and e, timeout=30)
        assert record_ids(capture.records(first, large)) == list(range(1, 5001)), "whole, though over the limit"
    finally:
        capture.close()                      # killed before Spark committed the large batch
    again = Capture(options)
    try:
        assert record_ids(again.records(first, large)) == list(range(1, 5001)), "the replay is the same batch"
        again.acknowledge(large)
        last = wait_until(lambda: (e := again.next_offset(large, 100)) != large and e, timeout=30)
        assert record_ids(again.records(large, last)) == [5001]
    finally:
        again.close()


def test_a_replayed_batch_reads_the_slot_only_as_far_as_its_end(pg_db):
    """Spark replays the batch a crash left uncommitted while a backlog waits behind it in the
    slot: the stream is read up to the batch's end, not through the backlog (which can be larger
    than the driver's memory); the backlog comes in the batches after it."""
    n = 20000
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    options = CdcOptions.parse(pg_db.options(slot_name="replay", snapshot_mode="no_data", heartbeat_interval_ms="0"))
    capture = Capture(options)
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO t VALUES (0)")
        first = wait_until(lambda: (e := capture.next_offset(start, 1)) != start and e, timeout=30)
    finally:
        capture.close()                      # killed before Spark committed the batch
    pg_db.execute(f"DO $$ BEGIN FOR i IN 1..{n} LOOP INSERT INTO t VALUES (i); COMMIT; END LOOP; END $$")
    again = Capture(options)
    try:
        replayed = record_ids(again.records(start, first))
        held = len(again.stream.buffer)
        again.acknowledge(first)
        rest, _ = read_batches(again, first, n, acknowledge=True, timeout=60)
    finally:
        again.close()
    assert replayed == [0]
    assert held < n // 10, f"{held} transactions read ahead for a batch of one"
    assert record_ids(rest) == list(range(1, n + 1))
