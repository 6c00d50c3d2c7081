"""The capture while PostgreSQL restarts, crashes, or loses the slot under a live stream, against
a server of this module's own (restarting the session's server would disturb other tests).

A restart or a crash between batches, with a batch read ahead and not yet committed, loses and
repeats nothing: the replication stream and the catalog connection reconnect by themselves. A
slot dropped or invalidated while streaming fails with ``CDC_SLOT_LOST`` naming the fix."""
from __future__ import annotations

import json

import pytest

from spark_source.postgres.capture import Capture, CdcOffset
from spark_source.postgres.errors import SlotLostError
from spark_source.postgres.options import CdcOptions
from tests.conftest import wait_until
from tests.postgres_fixture import own_database, read_batches, record_ids

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server():
    from spark_source.postgres.embedded import EmbeddedPostgres
    srv = EmbeddedPostgres(settings={"max_slot_wal_keep_size": "1MB"}).start()
    yield srv
    srv.stop()


@pytest.fixture
def db(server):
    yield from own_database(server, "faults")


@pytest.mark.parametrize("restart", ["fast", "crash"])
def test_a_server_restart_under_the_stream_loses_and_repeats_nothing(db, server, restart):
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    capture = Capture(CdcOptions.parse(db.options(slot_name="restart", snapshot_mode="no_data")))
    try:
        start = capture.initial_offset()
        db.execute("INSERT INTO t VALUES (1)")
        first, start = read_batches(capture, start, 1, acknowledge=True, timeout=60)
        db.execute("INSERT INTO t VALUES (2)")
        ahead = wait_until(lambda: (e := capture.next_offset(start, None)) != start and e, timeout=30)
        # the batch (start, ahead] is planned but not committed when the server goes down
        conn = db.connect(autocommit=False)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (99)")     # open: the restart rolls it back
        server.restart(immediate=restart == "crash")
        conn.close()
        db.execute("INSERT INTO t VALUES (3)")
        replayed = capture.records(start, ahead)         # Spark replays the planned batch
        capture.acknowledge(ahead)
        rest, _ = read_batches(capture, ahead, 1, acknowledge=True, timeout=60)
    finally:
        capture.close()
    assert record_ids(first) + record_ids(replayed) + record_ids(rest) == [1, 2, 3]


def test_a_slot_dropped_while_streaming_fails_with_slot_lost(db):
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    capture = Capture(CdcOptions.parse(db.options(slot_name="dropped", snapshot_mode="no_data")))
    try:
        start = capture.initial_offset()
        db.execute("INSERT INTO t VALUES (1)")
        _, start = read_batches(capture, start, 1, acknowledge=True, timeout=60)

        def dropped():
            db.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                       "WHERE slot_name = 'dropped' AND active")
            db.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                       "WHERE slot_name = 'dropped' AND NOT active")
            return not db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'dropped'")
        wait_until(dropped, timeout=30, interval=0.1, message="the slot dropped")
        db.execute("INSERT INTO t VALUES (2)")
        with pytest.raises(SlotLostError, match="snapshot.mode=when_needed"):
            read_batches(capture, start, 1, acknowledge=True, timeout=60)
    finally:
        capture.close()


def test_a_slot_invalidated_while_streaming_fails_with_slot_lost(db):
    """``max_slot_wal_keep_size`` exceeded while a batch is read ahead and not committed: the
    server terminates the walsender and invalidates the slot; reconnecting cannot help."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY); CREATE TABLE noise (x text)")
    capture = Capture(CdcOptions.parse(db.options(slot_name="invalid", snapshot_mode="no_data",
                                                  table_include_list="public.t",
                                                  publication_autocreate_mode="filtered")))
    try:
        start = capture.initial_offset()
        db.execute("INSERT INTO t VALUES (1)")
        wait_until(lambda: capture.next_offset(start, None) != start, timeout=30)   # read, never committed

        def invalidated():
            db.execute("INSERT INTO noise SELECT repeat('x', 1000) FROM generate_series(1, 20000)")
            db.execute("SELECT pg_switch_wal()")
            db.execute("CHECKPOINT")
            return db.execute("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'invalid'")[0][0] == "lost"
        wait_until(invalidated, timeout=60, interval=0.1, message="the slot invalidated")
        db.execute("INSERT INTO t VALUES (2)")
        with pytest.raises(SlotLostError, match="new checkpoint"):
            wait_until(lambda: capture.next_offset(start, None).lsn > 10**15, timeout=30)
    finally:
        capture.close()


def test_a_server_restart_mid_snapshot_reads_on_in_a_fresh_snapshot(db, server):
    """The exported snapshot dies with its connection; the next chunks come from a fresh snapshot
    (as after a query restart mid-snapshot) and what changed since arrives through the stream."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("INSERT INTO t SELECT g, 'a' FROM generate_series(1, 30) g")
    capture = Capture(CdcOptions.parse(db.options(slot_name="midsnap")))
    try:
        position = capture.next_offset(CdcOffset("new", 0), None)
        end = capture.next_offset(position, 10)
        records = capture.records(position, end)
        capture.acknowledge(end)
        position = end
        server.restart()
        db.execute("DELETE FROM t WHERE id = 20")
        db.execute("UPDATE t SET v = 'b' WHERE id = 25")
        while position.phase == "snapshot":
            end = capture.next_offset(position, 10)
            records += capture.records(position, end)
            capture.acknowledge(end)
            position = end
        expected = {i: ("b" if i == 25 else "a") for i in range(1, 31) if i != 20}

        def folded():
            nonlocal position
            end = capture.next_offset(position, None)
            if end != position:
                records.extend(capture.records(position, end))
                capture.acknowledge(end)
                position = end
            table = {}
            for r, _ in records:
                if r.value is not None:
                    p = json.loads(r.value)["payload"]
                    if p["op"] == "d":
                        table.pop(p["before"]["id"], None)
                    else:
                        table[p["after"]["id"]] = p["after"]["v"]
            return table == expected
        wait_until(folded, timeout=60, interval=0.05, message="the records to fold to the table")
    finally:
        capture.close()


def test_a_reconnect_with_transactions_read_ahead_never_confirms_past_them(db):
    """The walsender terminated while two transactions are read and only the first is committed
    by Spark: the stream reconnects, the server's keepalives carry a WAL end past the second, and
    acknowledging the first must not confirm the second (psycopg2 reports a keepalive's WAL end as
    flushed once the last data message it saw was acknowledged); a crash then resumes with it."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    options = db.options(slot_name="ahead", snapshot_mode="no_data")
    capture = Capture(CdcOptions.parse(options))
    try:
        start = capture.initial_offset()
        db.execute("INSERT INTO t VALUES (1)")
        db.execute("INSERT INTO t VALUES (2)")
        first = wait_until(lambda: (e := capture.next_offset(start, 1)) != start and e, timeout=30)
        stream = capture.stream
        wait_until(lambda: stream.poll(0.1) >= 0 and stream.high > first.lsn, timeout=30, message="both read")
        read_ahead = stream.high
        wait_until(lambda: db.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                                      "WHERE slot_name = 'ahead' AND active"), timeout=30)
        # reconnected, and the server has said where its WAL ends
        wait_until(lambda: stream.poll(0.1) >= 0 and stream.is_open and stream._cursor.wal_end >= read_ahead
                   and db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'ahead' AND active"),
                   timeout=30, message="the stream reconnected")
        capture.next_offset(first, 1)        # Spark committed the first batch: it is acknowledged
        confirmed = wait_until(lambda: (s := db.slot("ahead")) and s["confirmed_flush_lsn"] >= first.lsn
                               and s["confirmed_flush_lsn"], timeout=30, message="the first batch confirmed")
    finally:
        capture.close()                      # the driver dies before the second batch commits
    assert confirmed < read_ahead
    resumed = Capture(CdcOptions.parse(options))
    try:
        rest, _ = read_batches(resumed, first, 1, acknowledge=True, timeout=30)
    finally:
        resumed.close()
    assert record_ids(rest) == [2]
