"""WAL retention while the captured database is idle and another database is busy, against a real
embedded PostgreSQL: with heartbeats the slot's ``restart_lsn`` and ``confirmed_flush_lsn`` move
past the other database's WAL (Debezium's ``heartbeat.interval.ms`` with an action query does this),
and the heartbeats are positions, never records."""
from __future__ import annotations

import pytest

from spark_source.postgres.capture import Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


def test_heartbeats_release_wal_while_only_another_database_changes(pg_db, postgres):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    other = f"{pg_db.dbname}_other"
    postgres.execute(f'CREATE DATABASE "{other}"')
    try:
        postgres.execute("CREATE TABLE noise (x text)", dbname=other)
        capture = Capture(CdcOptions.parse(pg_db.options(slot_name="idle", snapshot_mode="no_data",
                                                         heartbeat_interval_ms="50")))
        try:
            start = capture.next_offset(CdcOffset("new", 0), None)
            before = pg_db.slot("idle")
            records = []

            def released():
                nonlocal start
                postgres.execute("INSERT INTO noise SELECT repeat('x', 100) FROM generate_series(1, 2000)",
                                 dbname=other)
                postgres.execute("SELECT pg_log_standby_snapshot()", dbname=other)
                end = capture.next_offset(start, None)
                if end != start:
                    records.extend(capture.records(start, end))
                    capture.acknowledge(end)     # Spark committed the (empty) batch
                    start = end
                now = pg_db.slot("idle")
                return (now["restart_lsn"] > before["restart_lsn"]
                        and now["confirmed_flush_lsn"] > before["confirmed_flush_lsn"])
            wait_until(released, timeout=30, interval=0.1, message="restart_lsn to move")
        finally:
            capture.close()
        assert records == []
    finally:
        postgres.execute(f'DROP DATABASE IF EXISTS "{other}" WITH (FORCE)')
