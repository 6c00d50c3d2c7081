"""PostgreSQL restarted, and crashed, under a running ``format("postgres-cdc")`` → ``delta_apply``
query (real Spark, real PostgreSQL of this module's own, Delta read back): the query rides through
both — its replication and catalog connections reconnect — and the Delta mirror ends equal to the
table, with the SCD-2 history matching the audit trail (nothing lost, nothing applied twice)."""
from __future__ import annotations

import pytest

from tests.conftest import wait_until
from tests.postgres_fixture import own_database
from tests.spark import cdc_pipeline as cdc

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server():
    from spark_source.postgres.embedded import EmbeddedPostgres
    srv = EmbeddedPostgres().start()
    yield srv
    srv.stop()


@pytest.fixture
def db(server):
    yield from own_database(server, "spark_faults")


def _caught_up(db, lake: str, query):
    if query.exception() is not None:
        raise AssertionError(f"the query failed: {query.exception()}")
    try:
        rows = cdc.pg_rows(db)
        return rows == cdc.delta_mirror(lake) and not cdc.history_problems(db, lake) and rows
    except Exception:  # noqa: BLE001 — the Delta tables do not exist yet
        return None


def test_a_running_query_rides_through_a_server_restart_and_a_crash(spark, db, server, tmp_path):
    db.execute(cdc.SCHEMA)
    db.execute("INSERT INTO items SELECT g, 'seed ' || g, g FROM generate_series(1, 50) g")
    lake = str(tmp_path / "lake")
    query = (spark.readStream.format("postgres-cdc").options(**cdc.options(db.dsn)).load()
             .writeStream.foreachBatch(cdc.pipeline(lake)).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: _caught_up(db, lake, query), timeout=180, interval=0.5, message="the snapshot")
        for round_, stop in enumerate((server.restart, lambda: server.restart(immediate=True))):
            db.execute("UPDATE items SET qty = qty + 100 WHERE id <= 10")
            db.execute("DELETE FROM items WHERE id = %s", (20 + round_,))
            stop()
            db.execute("INSERT INTO items VALUES (%s, 'after', 1)", (100 + round_,))
            db.execute("UPDATE items SET id = %s WHERE id = %s", (200 + round_, 30 + round_))   # key change
            wait_until(lambda: _caught_up(db, lake, query), timeout=180, interval=0.5,
                       message=f"the changes around restart {round_}")
        assert query.isActive
    finally:
        query.stop()
