"""A small shop database for demos, notebooks and benchmarks: two tables, seed rows, and seeded
random changes of every kind (insert, update, delete, primary-key change).

    from spark_source.postgres.embedded import EmbeddedPostgres
    from spark_source.postgres.demo_db import create_shop, random_changes
    with EmbeddedPostgres(dbname="shop") as pg:
        conn = pg.connect()
        create_shop(conn, customers=100)
        random_changes(conn, 500, seed=1)       # {"insert": ..., "update": ..., "delete": ..., "key": ...}

Works on any PostgreSQL connection (psycopg2, autocommit), embedded or not.
"""
from __future__ import annotations

import random

SCHEMA = """
CREATE TABLE IF NOT EXISTS customers (
    id int PRIMARY KEY, name text NOT NULL, email text, tier text NOT NULL DEFAULT 'bronze',
    balance numeric(12, 2) NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS orders (
    id bigint PRIMARY KEY, customer_id int NOT NULL, amount numeric(10, 2) NOT NULL,
    status text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
"""
TIERS = ("bronze", "silver", "gold")
STATUSES = ("new", "paid", "shipped", "cancelled")


def create_shop(conn, customers: int = 100, orders: int = 200, seed: int = 0) -> None:
    """Create the tables (if missing) and fill them with seeded rows."""
    rng = random.Random(seed)
    with conn.cursor() as cur:
        cur.execute(SCHEMA)
        cur.executemany("INSERT INTO customers (id, name, email, tier, balance) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT DO NOTHING",
                        [(i, f"customer {i}", f"c{i}@example.com", rng.choice(TIERS), rng.randint(0, 10_000) / 100)
                         for i in range(1, customers + 1)])
        cur.executemany("INSERT INTO orders (id, customer_id, amount, status) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT DO NOTHING",
                        [(i, rng.randint(1, customers), rng.randint(100, 100_000) / 100, rng.choice(STATUSES))
                         for i in range(1, orders + 1)])


def random_changes(conn, n: int, seed: int = 0, per_transaction: int = 1) -> dict[str, int]:
    """``n`` seeded changes to ``customers``, ``per_transaction`` to a transaction: inserts,
    updates (several columns), deletes and primary-key changes. Returns how many of each."""
    rng = random.Random(seed)
    counts = {"insert": 0, "update": 0, "delete": 0, "key": 0}
    autocommit = conn.autocommit
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM customers ORDER BY id")
            ids = [r[0] for r in cur.fetchall()]
            next_id = (ids[-1] if ids else 0) + 1
            for i in range(n):
                kind = "insert" if not ids else rng.choices(list(counts), weights=(4, 4, 1, 1))[0]
                victim = rng.randrange(len(ids)) if ids else None
                if kind == "insert":
                    cur.execute("INSERT INTO customers (id, name, tier) VALUES (%s, %s, %s)",
                                (next_id, f"customer {next_id}", rng.choice(TIERS)))
                    ids.append(next_id)
                    next_id += 1
                elif kind == "update":
                    cur.execute("UPDATE customers SET tier = %s, balance = balance + %s, updated_at = now() "
                                "WHERE id = %s", (rng.choice(TIERS), rng.randint(-500, 500) / 100, ids[victim]))
                elif kind == "delete":
                    cur.execute("DELETE FROM customers WHERE id = %s", (ids.pop(victim),))
                else:
                    cur.execute("UPDATE customers SET id = %s WHERE id = %s", (next_id, ids[victim]))
                    ids[victim] = next_id
                    next_id += 1
                counts[kind] += 1
                if (i + 1) % per_transaction == 0:
                    conn.commit()
        conn.commit()
    finally:
        conn.autocommit = autocommit
    return counts
