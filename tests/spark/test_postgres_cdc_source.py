"""``format("postgres-cdc")`` in Spark against a real embedded PostgreSQL: snapshot plus changes
fold to exactly what PostgreSQL holds, and a query that dies after its sink wrote a batch but
before Spark committed it — its first batch, or one of the stream — is restarted over the same
checkpoint and replays that batch whole."""
from __future__ import annotations

import json
import os

import pytest

from tests.postgres_fixture import fold_changes

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _pg_rows(db) -> dict:
    return {json.dumps({"id": i}): {"id": i, "name": n, "qty": q}
            for i, n, q in db.execute("SELECT id, name, qty FROM customers")}


def _written(spark, path) -> list:
    if not os.path.exists(path) or not os.listdir(path):
        return []
    rows = spark.read.parquet(path).select("key", "value", "headers").collect()
    return [(bytes(r.key), None if r.value is None else bytes(r.value), [(h.key, h.value) for h in r.headers])
            for r in rows]


def _change(row) -> tuple:
    """What must be equal when a batch is replayed (not the processing-time ``ts_ms``)."""
    value = json.loads(row.value)["payload"] if row.value is not None else None
    what = None if value is None else json.dumps([value["op"], value["before"], value["after"], value["source"]["txId"]])
    return bytes(row.key), what or "", tuple((h.key, bytes(h.value)) for h in row.headers)


def test_snapshot_and_changes_fold_to_the_table_and_a_killed_query_replays_its_batch(spark, pg_db, tmp_path):
    from spark_source.postgres.cdc_source import register
    register(spark)
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, qty int)")
    pg_db.execute("INSERT INTO customers SELECT g, 'c' || g, g FROM generate_series(1, 40) g")
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")
    attempts: dict[int, list] = {}

    def sink(fail_batch: int | None):
        def write(df, batch_id):
            rows = df.select("key", "value", "headers").collect()
            attempts.setdefault(batch_id, []).append(sorted(_change(r) for r in rows))
            df.write.mode("overwrite").parquet(f"{out}/batch={batch_id}")  # idempotent per batch id
            if batch_id == fail_batch:
                raise RuntimeError("killed after the sink wrote, before Spark committed the batch")
        return write

    def run(fail_batch=None):
        reader = (spark.readStream.format("postgres-cdc")
                  .options(**pg_db.options(slot_name="spark_cdc", table_include_list="public\\.customers"))
                  .option("maxChangesPerTrigger", "15").load())
        query = (reader.writeStream.foreachBatch(sink(fail_batch)).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination(120)
        except Exception as e:  # noqa: BLE001 — the injected failure
            assert fail_batch is not None, e
        finally:
            query.stop()

    # 1. a query that dies in its first batch, a change, then the restart: Spark asks for the
    # initial offset again and replays batch 0 with the end it recorded (that end must still mean
    # something: before, a second slot and snapshot were made and the query failed SLOT_LOST);
    # then the snapshot (40 rows in chunks of 15), nothing streamed yet
    run(fail_batch=0)
    pg_db.execute("UPDATE customers SET qty = -1 WHERE id = 2")
    run()
    assert fold_changes(_written(spark, out)) == _pg_rows(pg_db)
    # 2. changes of every kind, then a query that dies in its first batch after writing it
    pg_db.execute("UPDATE customers SET qty = qty * 10 WHERE id <= 5")
    pg_db.execute("DELETE FROM customers WHERE id IN (6, 7)")
    pg_db.execute("UPDATE customers SET id = 100 WHERE id = 8")       # a primary key change
    pg_db.execute("INSERT INTO customers VALUES (41, 'new', 1), (42, 'new', 2)")
    first_stream_batch = max(attempts) + 1
    run(fail_batch=first_stream_batch)
    assert first_stream_batch in attempts and len(attempts[first_stream_batch]) == 1
    # 3. the restarted query replays the failed batch whole and reads on to the end
    pg_db.execute("UPDATE customers SET name = 'late' WHERE id = 9")
    run()
    assert len(attempts[first_stream_batch]) == 2
    assert attempts[first_stream_batch][0] == attempts[first_stream_batch][1]
    written = _written(spark, out)
    assert fold_changes(written) == _pg_rows(pg_db)
    ops = {json.loads(v)["payload"]["op"] for _, v, _ in written if v is not None}
    assert ops == {"r", "c", "u", "d"}
