"""PostgreSQL → ``format("postgres-cdc")`` → ``delta_apply`` → Delta, end to end (real
PostgreSQL, real Spark, Delta tables read back): after every scenario the SCD-1 table equals the
PostgreSQL table and the SCD-2 table holds its full history (tests/spark/cdc_pipeline.py's audit
oracle) — concurrent writers over several seeds, writes between slot creation and the end of the
snapshot, a new column mid-stream, a deleted checkpoint (in one query's session), and in a
pipeline process SIGKILLed mid-snapshot, before a batch's Delta commit and between the Delta commit
and the slot's acknowledgement."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from tests.conftest import wait_until
from tests.spark import cdc_pipeline as cdc

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

SEEDS = (1, 2, 3)


def _equal(db, lake: str):
    pg, delta = cdc.pg_rows(db), cdc.delta_mirror(lake)
    return pg == delta and pg


def _caught_up(db, lake: str):
    """The mirror equals PostgreSQL and the history the audit (a running query writes the two
    tables one after the other, so both are waited for)."""
    rows = _equal(db, lake)
    return rows if rows and not cdc.history_problems(db, lake) else None


def _wait_caught_up(db, lake: str, what: str) -> dict:
    try:
        return wait_until(lambda: _caught_up(db, lake), timeout=120, interval=0.5, message=f"{what} in Delta")
    except AssertionError:
        assert cdc.pg_rows(db) == cdc.delta_mirror(lake), what
        assert cdc.history_problems(db, lake) == [], what
        raise


def _seed(db, rows: int) -> None:
    db.execute(cdc.SCHEMA)
    db.execute("INSERT INTO items SELECT g, 'seed ' || g, g FROM generate_series(1, %s) g", (rows,))


def test_concurrent_writers_during_the_snapshot_and_after_a_new_column_and_a_deleted_checkpoint(spark, pg_db, tmp_path):
    _seed(pg_db, 300)
    lake = str(tmp_path / "lake")
    query = (spark.readStream.format("postgres-cdc").options(**cdc.options(pg_db.dsn)).load()
             .writeStream.foreachBatch(cdc.pipeline(lake)).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        # A writer commits between the slot's creation and the end of the snapshot (10 chunks of 30).
        wait_until(lambda: pg_db.slot("lake"), timeout=120, interval=0.05, message="the slot created")
        during = 0

        def snapshot_unfinished() -> bool:
            progress = query.lastProgress
            end = progress["sources"][0]["endOffset"] if progress else None
            end = json.loads(end) if isinstance(end, str) else end
            # Spark may have read up to two chunks past the last finished batch.
            return end is None or (end.get("phase") == "snapshot" and end["rows"] + 3 * cdc.MAX_CHANGES < 300)

        while snapshot_unfinished() and during < 40:
            cdc.write(pg_db.dsn, seed=100 + during, transactions=2)
            during += snapshot_unfinished()
        assert during >= 1, "no write committed while the snapshot was being read"
        wait_until(lambda: _equal(pg_db, lake), timeout=240, interval=0.5, message="the snapshot and writes in Delta")
        for seed in SEEDS:
            cdc.write(pg_db.dsn, seed=seed, transactions=25)
            _wait_caught_up(pg_db, lake, f"seed {seed}")
        # DDL mid-stream: a new column, set by the next writes, arrives in both tables.
        pg_db.execute("ALTER TABLE items ADD COLUMN note text")
        pg_db.execute("UPDATE items SET note = 'n' || id WHERE id % 3 = 0")
        cdc.write(pg_db.dsn, seed=9, transactions=10)
        rows = _wait_caught_up(pg_db, lake, "the new column")
        assert any("note" in r for r in rows.values())
        assert query.exception() is None
    finally:
        query.stop()
    # The checkpoint is lost: a new query resumes from the slot (never confirmed past what Delta
    # holds) and the tables' own marks drop what they already hold.
    shutil.rmtree(tmp_path / "ck")
    cdc.write(pg_db.dsn, seed=5, transactions=15)
    query = (spark.readStream.format("postgres-cdc").options(**cdc.options(pg_db.dsn, **{"snapshot.mode": "no_data"}))
             .load().writeStream.foreachBatch(cdc.pipeline(lake)).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        cdc.write(pg_db.dsn, seed=6, transactions=15)
        _wait_caught_up(pg_db, lake, "the writes after the checkpoint was deleted")
        assert query.exception() is None
    finally:
        query.stop()


def _run(db, lake: str, checkpoint: str, crash_at: str | None = None, snapshot_mode: str = "initial") -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [cdc.ROOT, os.environ.get("PYTHONPATH")]))}
    env.pop("RIVERLOG_CRASH_AT", None)
    env["CDC_PIPELINE_TRACE"] = os.path.join(os.path.dirname(lake), "batches.jsonl")
    if crash_at:
        env["RIVERLOG_CRASH_AT"] = crash_at
    proc = subprocess.run([sys.executable, cdc.__file__, db.dsn, lake, checkpoint, snapshot_mode], env=env,
                          start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=600)
    with open(os.path.join(os.path.dirname(lake), "runs.log"), "a") as f:
        f.write(f"==== {crash_at} {snapshot_mode} rc={proc.returncode}\n{proc.stderr}\n")
    errors = [line for line in proc.stderr.splitlines() if "Error" in line and not line.startswith("\tat ")]
    assert (proc.returncode == -9) == bool(crash_at), (proc.returncode, errors[-12:] or proc.stderr[-3000:])
    return proc.returncode


def _batch_held(lake: str) -> int:
    from spark_sink.delta import held_positions
    return held_positions(f"{lake}/mirror")["batch_id"]


def _trace(lake: str) -> list[dict]:
    with open(os.path.join(os.path.dirname(lake), "batches.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_sigkill_mid_snapshot_before_and_after_the_delta_commit_loses_and_repeats_nothing(spark, pg_db, tmp_path):
    _seed(pg_db, 100)
    lake, checkpoint = str(tmp_path / "lake"), str(tmp_path / "ck")
    # 1. Killed mid-snapshot (batch 0 makes the slot and holds nothing; chunks of 30: batches
    #    1-4), before batch 2 reached Delta.
    _run(pg_db, lake, checkpoint, crash_at="before_write:2")
    assert _batch_held(lake) == 1
    # 2. Restarted: the snapshot's rest (batch 2 re-read in a fresh snapshot: the writes touch only
    #    keys of the committed chunk 1 and new negative keys, so it reads the same rows), then the
    #    changes; killed after batch 6's Delta commit, before Spark committed it (so before the slot
    #    was acknowledged past it).
    cdc.write(pg_db.dsn, seed=1, transactions=60, below=30)
    _run(pg_db, lake, checkpoint, crash_at="before_spark_commit:6")
    assert _batch_held(lake) == 6
    snapshot_lsn = next(t for t in _trace(lake) if t["records"])["records"][0][0]
    assert all(r[0] > snapshot_lsn for t in _trace(lake) if t["batch"] == 6 for r in t["records"])  # streamed
    # 3. Restarted: batch 6 is replayed (and skipped by Delta); killed before batch 8 reaches Delta.
    writer = threading.Thread(target=cdc.write, args=(pg_db.dsn, 2, 40))
    writer.start()
    _run(pg_db, lake, checkpoint, crash_at="before_write:8")
    writer.join()
    assert _batch_held(lake) == 7
    attempts = [t["records"] for t in _trace(lake) if t["batch"] == 6]
    assert len(attempts) == 2 and attempts[0] == attempts[1]
    # 4. Restarted without a crash, in the test's own session: everything arrives, once.
    cdc.run(spark, pg_db.dsn, lake, checkpoint)
    assert _equal(pg_db, lake)
    assert cdc.history_problems(pg_db, lake) == []
