"""Publication and slot management and the checks made before a row is read, against a real
embedded PostgreSQL: each refusal names its fix."""
from __future__ import annotations

import pytest

from spark_source.postgres import slot as slots
from spark_source.postgres.capture import Capture
from spark_source.postgres.errors import (PublicationError, ReplicationPrivilegeError,
                                          SlotInUseError, WalLevelError)
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.replication import ReplicationStream
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


def _capture(db, **extra) -> Capture:
    return Capture(CdcOptions.parse(db.options(**extra)))


def _published(db, name: str) -> tuple:
    all_tables = db.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
    tables = db.execute("SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s "
                        "ORDER BY 1", (name,))
    return (all_tables[0][0] if all_tables else None), [t[0] for t in tables]


def test_publication_autocreate_modes(pg_db):
    pg_db.execute("CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY)")
    c = _capture(pg_db, publication_name="every", publication_autocreate_mode="all_tables")
    c.sql
    c.close()
    assert _published(pg_db, "every") == (True, ["public.a", "public.b"])

    c = _capture(pg_db, publication_name="some", publication_autocreate_mode="filtered", table_include_list="public.a")
    c.sql
    c.close()
    assert _published(pg_db, "some") == (False, ["public.a"])
    c = _capture(pg_db, publication_name="some", publication_autocreate_mode="filtered", table_include_list="public.b")
    c.sql      # the include list changed: the publication follows it
    c.close()
    assert _published(pg_db, "some") == (False, ["public.b"])

    with pytest.raises(PublicationError, match='CREATE PUBLICATION "missing" FOR TABLE "public"."a"'):
        _capture(pg_db, publication_name="missing", publication_autocreate_mode="disabled",
                 table_include_list="public.a").sql


def test_a_table_without_a_key_is_captured_with_a_null_key(pg_db, caplog):
    # Debezium captures it (null key); PostgreSQL refuses its updates and deletes while it is
    # published under REPLICA IDENTITY DEFAULT, so the capture says how to fix that.
    pg_db.execute("CREATE TABLE logs (at timestamptz, line text)")
    c = _capture(pg_db)
    try:
        assert [(t.name, t.key) for t in c.tables or (c.sql and c.tables)] == [("public.logs", ())]
    finally:
        c.close()
    assert "REPLICA IDENTITY FULL" in caplog.text and "public.logs" in caplog.text


def test_a_role_without_replication_is_refused(pg_db):
    pg_db.execute("DROP ROLE IF EXISTS plain; CREATE ROLE plain LOGIN")
    options = CdcOptions.parse({**pg_db.options(), "dsn": pg_db.server.dsn_for(pg_db.dbname, user="plain")})
    with pytest.raises(ReplicationPrivilegeError, match='ALTER ROLE "plain" REPLICATION'):
        slots.check_server(slots.connect(options), options)


def test_wal_level_must_be_logical():
    from spark_source.postgres.embedded import EmbeddedPostgres
    with EmbeddedPostgres(settings={"wal_level": "replica"}) as server:
        options = CdcOptions.parse({"dsn": server.dsn})
        conn = slots.connect(options)
        with pytest.raises(WalLevelError, match="ALTER SYSTEM SET wal_level = logical"):
            slots.check_server(conn, options)
        conn.close()


def test_slot_in_use_and_slot_drop_on_stop(pg_db):
    pg_db.execute("CREATE TABLE a (id int PRIMARY KEY)")
    c = _capture(pg_db, slot_name="lake", snapshot_mode="no_data", slot_drop_on_stop="true")
    start = c.initial_offset()
    c.next_offset(start, None)          # streaming now
    assert pg_db.slot("lake")["active"]
    other = ReplicationStream(c.options, start.lsn)
    with pytest.raises(SlotInUseError, match="one reader per slot"):
        other.open(in_use_timeout_s=0.3)
    c.close()
    assert pg_db.slot("lake") is None   # slot.drop.on.stop

    kept = _capture(pg_db, slot_name="kept", snapshot_mode="no_data")
    kept.initial_offset()
    kept.close()
    assert pg_db.slot("kept") is not None


def test_snapshot_modes(pg_db):
    from spark_source.postgres.capture import DONE, SNAPSHOT, STREAM
    from spark_source.postgres.errors import SlotLostError
    pg_db.execute("CREATE TABLE a (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO a SELECT generate_series(1, 5)")

    only = _capture(pg_db, slot_name="only", snapshot_mode="initial_only")
    start = only.initial_offset()
    end = only.next_offset(start, None)
    assert (start.phase, end.phase, len(only.records(start, end))) == (SNAPSHOT, DONE, 5)
    assert only.next_offset(end, None) == end                                   # nothing streams after it
    wait_until(lambda: pg_db.slot("only") is None, timeout=10, message="the temporary slot gone")
    only.close()

    none = _capture(pg_db, slot_name="none", snapshot_mode="no_data")
    start = none.initial_offset()
    assert start.phase == STREAM and none.next_offset(start, None) == start     # no snapshot rows
    none.close()

    resumed = _capture(pg_db, slot_name="none", snapshot_mode="when_needed")
    assert resumed.next_offset(start, None) == start                            # the slot is there: resume
    resumed.close()
    pg_db.drop_slot("none")
    again = _capture(pg_db, slot_name="none", snapshot_mode="when_needed")
    fresh = again.next_offset(start, None)                                      # slot lost: a new snapshot
    assert fresh.phase == SNAPSHOT and fresh.lsn > start.lsn and pg_db.slot("none") is not None
    again.close()
    pg_db.drop_slot("none")
    with pytest.raises(SlotLostError, match="slot 'none' does not exist.*snapshot.mode=when_needed"):
        _capture(pg_db, slot_name="none", snapshot_mode="initial").next_offset(start, None)
