"""``spark.read.format("postgres-cdc")`` against a real embedded PostgreSQL: the snapshot equals
the tables (values checked against a SELECT, not through the project's own type mapping), no slot
or publication is made, a keyless table is refused; the peek read gives exactly the changes
committed after the slot's position and leaves the slot where it was."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.conftest import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration]
EPOCH = dt.datetime(1970, 1, 1)


def _read(spark, db, **options):
    from spark_source.postgres.cdc_source import register
    register(spark)
    return spark.read.format("postgres-cdc").options(**db.options(**options)).load()


def _records(df) -> list:
    return [(bytes(r.key), None if r.value is None else bytes(r.value), [(h.key, bytes(h.value)) for h in r.headers],
             r.topic, r.offset) for r in df.collect()]


def _header(record, name) -> int:
    return int(dict(record[2])[name])


def test_the_snapshot_read_equals_the_tables_and_creates_nothing(spark, pg_db):
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, price numeric(10,2), seen timestamp)")
    pg_db.execute("INSERT INTO customers SELECT g, 'c' || g, g * 1.25, '2024-01-01'::timestamp + g * interval '1 h' "
                  "FROM generate_series(1, 23) g")
    pg_db.execute("INSERT INTO customers VALUES (24, NULL, NULL, NULL)")
    pg_db.execute("CREATE TABLE orders (customer int, n int, note text, PRIMARY KEY (customer, n))")
    pg_db.execute("INSERT INTO orders SELECT g % 5, g, 'o' || g FROM generate_series(1, 17) g")
    pg_db.execute("CREATE TABLE logs (line text)")   # no key: left out by the include list

    df = _read(spark, pg_db, table_include_list="public\\.customers,public\\.orders", snapshot_fetch_size=7,
               snapshot_max_threads=2, decimal_handling_mode="double")
    assert df.rdd.getNumPartitions() == 2                      # one task per table
    records = _records(df)

    values = [json.loads(r[1])["payload"] for r in records]
    assert {v["op"] for v in values} == {"r"}
    assert [v["source"]["snapshot"] for v in values].count("last") == 1
    assert all(r[4] == _header(r, "riverlog.cdc.commit_lsn") for r in records)
    by_topic = {}
    for r, v in zip(records, values):
        by_topic.setdefault(r[3], []).append((json.loads(r[0])["payload"], v["after"]))
    expected_customers = [({"id": i}, {"id": i, "name": n, "price": None if p is None else float(p),
                                       "seen": None if s is None else (s - EPOCH) // dt.timedelta(microseconds=1)})
                          for i, n, p, s in pg_db.execute("SELECT id, name, price, seen FROM customers")]
    expected_orders = [({"customer": c, "n": n}, {"customer": c, "n": n, "note": t})
                       for c, n, t in pg_db.execute("SELECT customer, n, note FROM orders")]
    key = lambda pair: json.dumps(pair[0], sort_keys=True)  # noqa: E731
    assert sorted(by_topic["shop.public.customers"], key=key) == sorted(expected_customers, key=key)
    assert sorted(by_topic["shop.public.orders"], key=key) == sorted(expected_orders, key=key)
    # each table read in key order, in one snapshot, with one running order per task
    orders = [_header(r, "riverlog.cdc.order") for r in records if r[3] == "shop.public.customers"]
    assert orders == sorted(orders) and len(set(orders)) == 24
    assert pg_db.execute("SELECT count(*) FROM pg_replication_slots")[0][0] == 0
    assert pg_db.execute("SELECT count(*) FROM pg_publication")[0][0] == 0

    pg_db.execute("INSERT INTO logs VALUES ('x')")
    (keyless,) = _read(spark, pg_db, table_include_list="public\\.logs").collect()   # Debezium's null key
    assert keyless.key is None and json.loads(bytes(keyless.value))["payload"]["after"] == {"line": "x"}


@pytest.mark.parametrize("threads", [1, 2])
def test_the_snapshot_reads_markers_are_debeziums_in_one_task_or_spread(spark, pg_db, threads):
    """As the stream's snapshot (RelationalSnapshotChangeEventSource.setSnapshotMarker): "first"
    on the first table's first row, a table's first and last rows marked, "last" on the very last
    row, "true" between; with the tables spread over tasks, "first" and "last" once each."""
    pg_db.execute("CREATE TABLE a (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO a SELECT generate_series(1, 3)")
    pg_db.execute("CREATE TABLE b (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO b SELECT generate_series(1, 4)")
    df = _read(spark, pg_db, table_include_list="public\\.a,public\\.b", snapshot_fetch_size=2,
               snapshot_max_threads=threads)
    by_topic: dict[str, list] = {}
    for key, value, _, topic, _ in _records(df):
        by_topic.setdefault(topic, []).append((json.loads(key)["payload"]["id"],
                                               json.loads(value)["payload"]["source"]["snapshot"]))
    assert by_topic == {
        "shop.public.a": [(1, "first"), (2, "true"), (3, "last_in_data_collection")],
        "shop.public.b": [(1, "first_in_data_collection"), (2, "true"), (3, "true"), (4, "last")]}


def test_a_nullable_unique_index_key_keeps_its_nulls(spark, pg_db):
    """A table keyed by a unique index on a nullable column: NULL stays null in the key and the row,
    its field optional in both schemas (Debezium's ``TableSchemaBuilder.addField``); it was a
    required field whose fallback, 0, stood in for every NULL."""
    pg_db.execute("CREATE TABLE u (a int, b text)")
    pg_db.execute("CREATE UNIQUE INDEX u_a ON u (a)")
    pg_db.execute("INSERT INTO u VALUES (1, 'x'), (NULL, 'y'), (NULL, 'z')")
    rows = []
    for key, value, _, _, _ in _records(_read(spark, pg_db, table_include_list="public\\.u")):
        k, v = json.loads(key), json.loads(value)
        assert [f["optional"] for f in k["schema"]["fields"]] == [True]
        assert [f["optional"] for f in v["schema"]["fields"][1]["fields"]] == [True, True]
        rows.append((k["payload"]["a"], v["payload"]["after"]["a"], v["payload"]["after"]["b"]))
    assert sorted(rows, key=str) == sorted([(1, 1, "x"), (None, None, "y"), (None, None, "z")], key=str)


def test_the_peek_read_gives_the_pending_changes_and_leaves_the_slot_alone(spark, pg_db):
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, qty int NOT NULL)")
    pg_db.execute("INSERT INTO items SELECT g, g FROM generate_series(1, 5) g")   # before the slot: not pending
    pg_db.execute("CREATE PUBLICATION riverlog_publication FOR ALL TABLES")
    pg_db.execute("SELECT pg_create_logical_replication_slot('pending', 'pgoutput')")
    pg_db.execute("INSERT INTO items VALUES (6, 60), (7, 70)")
    pg_db.execute("UPDATE items SET qty = 0 WHERE id = 2")
    pg_db.execute("DELETE FROM items WHERE id = 3")
    before = pg_db.slot("pending")

    with pytest.raises(Exception) as missing:
        _read(spark, pg_db, slot_name="absent", snapshot_mode="no_data").collect()
    assert "CDC_SLOT_NOT_FOUND" in str(missing.value) or "SlotNotFoundError" in str(missing.value)

    records = _records(_read(spark, pg_db, slot_name="pending", snapshot_mode="no_data"))
    ops = [None if r[1] is None else json.loads(r[1])["payload"]["op"] for r in records]
    assert ops == ["c", "c", "u", "d", None]                    # the delete's tombstone last
    table = {i: {"id": i, "qty": i} for i in (1, 2, 3, 4, 5)}   # what a sink held before the slot
    for key, value, _h, _t, _o in records:
        payload = json.loads(value)["payload"] if value is not None else None
        if payload is not None:
            table.pop(json.loads(key)["payload"]["id"]) if payload["op"] == "d" else \
                table.__setitem__(payload["after"]["id"], payload["after"])
    assert table == {i: {"id": i, "qty": q} for i, q in pg_db.execute("SELECT id, qty FROM items")}
    assert pg_db.slot("pending") == before                      # peeked, not consumed

    # offsets bound the read: endingOffsets at the first commit, startingOffsets after the last
    first = records[0][4]
    assert [r[4] for r in _records(_read(spark, pg_db, slot_name="pending", snapshot_mode="no_data",
                                         endingOffsets=str(first)))] == [first, first]
    # committed but not yet flushed (synchronous_commit=off, the WAL writer slowed to 1 s): PostgreSQL
    # decodes only flushed WAL, so the read waits for the flush instead of leaving the change out
    pg_db.execute("ALTER SYSTEM SET wal_writer_delay = '1s'")
    pg_db.execute("SELECT pg_reload_conf()")
    try:
        wait_until(lambda: pg_db.execute("SHOW wal_writer_delay") == [("1s",)], timeout=10, message="the reload")
        # a first write wakes a hibernating WAL writer (which flushes at once); its next flush is ~1 s on
        pg_db.execute("UPDATE items SET qty = 40 WHERE id = 4")
        wait_until(lambda: pg_db.execute("SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()")[0][0],
                   timeout=10, message="the first write flushed")
        pg_db.execute("UPDATE items SET qty = 99 WHERE id = 1")
        unflushed = pg_db.execute("SELECT pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()")[0][0]
        later = _records(_read(spark, pg_db, slot_name="pending", snapshot_mode="no_data",
                               startingOffsets=str(records[-1][4])))
    finally:
        pg_db.execute("ALTER SYSTEM RESET wal_writer_delay")
        pg_db.execute("SELECT pg_reload_conf()")
    assert [json.loads(r[1])["payload"]["after"] for r in later] == [{"id": 4, "qty": 40}, {"id": 1, "qty": 99}]
    assert unflushed        # the case the read waited for did happen
    assert pg_db.slot("pending") == before
