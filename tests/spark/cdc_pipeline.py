"""The CDC-to-Delta pipeline the tests run, its writers and its oracles.

The pipeline: ``format("postgres-cdc")`` on ``public.items`` → ``foreachBatch`` applying each batch
to an SCD-1 mirror and an SCD-2 history with ``delta_apply``, with the crash points
``before_write`` (nothing of the batch in Delta) and ``before_spark_commit`` (Delta committed,
Spark's commit log and so the slot's acknowledgement not yet) of :mod:`spark_sink.crash_points`.

The oracle for the history is an audit table filled by a trigger in the writers' own transactions:
every row version per key in the order PostgreSQL serialised them (a key's changes hold its row
or index entry lock, so their audit ``seq`` order is their commit order). A primary-key change is
audited as Debezium emits it: delete of the old key, create of the new one.

As a process (``python cdc_pipeline.py DSN LAKE CHECKPOINT SNAPSHOT_MODE``), run with
``start_new_session=True``: it reads everything available (``availableNow``), prints
``processed`` and exits 0, unless ``RIVERLOG_CRASH_AT`` kills it.
"""
from __future__ import annotations

import os
import random
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_CHANGES = 30
SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
CREATE TABLE audit (seq bigserial PRIMARY KEY, id int NOT NULL, op text NOT NULL, row jsonb);
CREATE FUNCTION audit_items() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.id <> NEW.id) THEN
    INSERT INTO audit (id, op, row) VALUES (OLD.id, 'd', NULL);
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND OLD.id <> NEW.id) THEN
    INSERT INTO audit (id, op, row) VALUES (NEW.id, 'c', to_jsonb(NEW));
  ELSIF TG_OP = 'UPDATE' THEN
    INSERT INTO audit (id, op, row) VALUES (NEW.id, 'u', to_jsonb(NEW));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER audit_items AFTER INSERT OR UPDATE OR DELETE ON items FOR EACH ROW EXECUTE FUNCTION audit_items();
"""


def options(dsn: str, **extra) -> dict:
    return {"dsn": dsn, "topic.prefix": "shop", "table.include.list": "public\\.items", "slot.name": "lake",
            "publication.autocreate.mode": "filtered", "heartbeat.interval.ms": "0",
            "maxChangesPerTrigger": str(MAX_CHANGES), **extra}


def pipeline(lake: str):
    """The foreachBatch function: SCD-1 mirror and SCD-2 history, with the crash points."""
    from spark_sink.crash_points import crash_at
    from spark_sink.delta import delta_apply
    mirror = delta_apply(table_path=f"{lake}/mirror", keys=["id"], scd_type=1)
    history = delta_apply(table_path=f"{lake}/history", keys=["id"], scd_type=2)

    trace = os.environ.get("CDC_PIPELINE_TRACE")

    def apply(batch, batch_id):
        if trace:   # each attempt's records, to compare a batch with its replay
            import json
            rows = batch.select("topic", "offset", "headers", (batch.value.isNull()).alias("tomb")).collect()
            with open(trace, "a") as f:
                f.write(json.dumps({"batch": batch_id, "records": sorted(
                    [r.offset, int(dict((h.key, h.value) for h in r.headers)["riverlog.cdc.order"]), r.tomb]
                    for r in rows)}) + "\n")
        crash_at("before_write", batch_id)
        mirror(batch, batch_id)
        history(batch, batch_id)
        crash_at("before_spark_commit", batch_id)
    return apply


# ------------------------------------------------------------------------------ writers
def write(dsn: str, seed: int, transactions: int, writers: int = 2, below: int | None = None) -> None:
    """``writers`` concurrent connections, ``transactions`` each of 1-3 random changes (insert,
    update, delete, primary-key change) to keys of their own residue class modulo ``writers``.
    With ``below``, only keys up to it are touched and new keys are negative."""
    import psycopg2

    def one(w: int) -> None:
        rng = random.Random(seed * 100 + w)
        conn = psycopg2.connect(dsn)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT id FROM items WHERE id %% %s = %s AND id <= %s", (writers, w, below or 2**31 - 1))
                ids = [r[0] for r in cur.fetchall()]
                cur.execute("SELECT coalesce(max(id), 0), coalesce(min(id), 0) FROM items")
                top, bottom = cur.fetchone()
                top += 1000 * (seed + 1)
                fresh = iter(range(top - top % writers + w + writers * 10, 10**9, writers) if below is None else
                             range(min(bottom, 0) - min(bottom, 0) % writers + w - writers * 10, -10**9, -writers))
                for _ in range(transactions):
                    for _ in range(rng.randint(1, 3)):
                        kind = "insert" if len(ids) < 5 else rng.choices(
                            ("insert", "update", "delete", "key"), (3, 5, 1, 1))[0]
                        if kind == "insert":
                            ids.append(next(fresh))
                            cur.execute("INSERT INTO items VALUES (%s, %s, %s)", (ids[-1], f"n{rng.random():.6f}", 1))
                        elif kind == "update":
                            cur.execute("UPDATE items SET qty = qty + 1, name = %s WHERE id = %s",
                                        (f"u{rng.random():.6f}", rng.choice(ids)))
                        elif kind == "delete":
                            cur.execute("DELETE FROM items WHERE id = %s", (ids.pop(rng.randrange(len(ids))),))
                        else:
                            i = rng.randrange(len(ids))
                            new = next(fresh)
                            cur.execute("UPDATE items SET id = %s WHERE id = %s", (new, ids[i]))
                            ids[i] = new
                    conn.commit()
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# ------------------------------------------------------------------------------ oracles
def _data(row: dict | None) -> dict | None:
    if row is None:
        return None
    return {k: v for k, v in row.items() if not k.startswith("__") and v is not None}


def pg_rows(db) -> dict:
    import psycopg2.extras
    conn = db.connect()
    try:
        with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
            cur.execute("SELECT * FROM items")
            return {r["id"]: _data(dict(r)) for r in cur.fetchall()}
    finally:
        conn.close()


def delta_mirror(lake: str) -> dict:
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(f"{lake}/mirror"):
        return {}
    return {r["id"]: _data(r) for r in DeltaTable(f"{lake}/mirror").to_pyarrow_table().to_pylist()}


def history_problems(db, lake: str) -> list[str]:
    """Where the SCD-2 history differs from the audit: per key, its versions in (__lsn, __order)
    order must be the audited versions — all of them for a key born after the snapshot, or from
    the snapshot's ``r`` row on — with exactly the last one current unless it is a delete."""
    from deltalake import DeltaTable
    audit: dict[int, list] = {}
    for key, op, row in db.execute("SELECT id, op, row FROM audit ORDER BY seq"):
        audit.setdefault(key, []).append((op, _data(row)))
    versions: dict[int, list] = {}
    rows = DeltaTable(f"{lake}/history").to_pyarrow_table().to_pylist()
    for r in sorted(rows, key=lambda r: (r["__lsn"], r["__order"])):
        versions.setdefault(r["id"], []).append(r)
    problems = []
    for key, vs in versions.items():
        got = [(v["__op"], None if v["__op"] == "d" else _data(v)) for v in vs]
        want = audit.get(key, [])
        if got[0][0] == "r":
            starts = [i for i, (op, row) in enumerate(want) if op != "d" and row == got[0][1]]
            if not any(want[i + 1:] == got[1:] for i in starts):
                problems.append(f"key {key}: history {got} is no suffix of the audit {want} after a snapshot row")
        elif want != got:
            problems.append(f"key {key}: history {got} != audit {want}")
        current = [v["__is_current"] for v in vs]
        if current[:-1] != [False] * (len(vs) - 1) or current[-1] != (vs[-1]["__op"] != "d"):
            problems.append(f"key {key}: __is_current {current}")
    for key, want in audit.items():
        if key not in versions and want[-1][0] != "d":
            problems.append(f"key {key}: audited {want}, no history")
    return problems


# ------------------------------------------------------------------------------ the process
def run(spark, dsn: str, lake: str, checkpoint: str, snapshot_mode: str = "initial") -> None:
    """The pipeline over everything available now (``availableNow``), in ``spark``."""
    query = (spark.readStream.format("postgres-cdc").options(**options(dsn, **{"snapshot.mode": snapshot_mode}))
             .load().writeStream.foreachBatch(pipeline(lake)).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()


def main(dsn: str, lake: str, checkpoint: str, snapshot_mode: str) -> None:
    from tests.spark.child_process import child_spark
    spark = child_spark("riverlog-cdc-pipeline")
    run(spark, dsn, lake, checkpoint, snapshot_mode)
    print("processed", flush=True)
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    main(*sys.argv[1:5])
