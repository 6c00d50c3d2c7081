"""The capture against a real embedded PostgreSQL: snapshot and stream meet exactly, TOAST under
both replica identities, DDL mid-stream, heartbeats, acknowledgement never ahead of a commit,
and a restart mid-snapshot that neither skips nor leaves a deleted row behind."""
from __future__ import annotations

import json
import pytest

from spark_source.postgres.capture import STREAM, Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from tests.conftest import wait_until
from tests.postgres_fixture import fold_changes

pytestmark = pytest.mark.integration


def _capture(db, **extra) -> Capture:
    return Capture(CdcOptions.parse(db.options(**extra)))


def _triples(records) -> list:
    return [(r.key, r.value, list(r.headers)) for r, _ in records]


def _drain(capture: Capture, start: CdcOffset, limit=None, commit=True) -> tuple[list, CdcOffset]:
    """Batches until nothing is new, each acknowledged as Spark would after committing it."""
    out = []
    while True:
        end = capture.next_offset(start, limit)
        if end == start:
            return out, start
        out.extend(capture.records(start, end))
        if commit:
            capture.acknowledge(end)
        start = end


def _until_table_matches(db, capture, start, query, records) -> CdcOffset:
    """Stream until the folded records equal ``query``'s rows (the writes are committed)."""
    expected = {json.dumps({"id": r[0]}): r for r in db.execute(query)}

    def caught_up():
        nonlocal start
        more, start = _drain(capture, start)
        records.extend(more)
        folded = fold_changes(_triples(records))
        return {k: tuple(v[c] for c in ("id", "name")) for k, v in folded.items()} == expected
    wait_until(caught_up, timeout=30, interval=0.05, message="the stream to reach the table")
    return start


def _payload(record):
    return None if record.value is None else json.loads(record.value)["payload"]


def test_a_writer_between_slot_creation_and_the_end_of_the_snapshot_leaves_no_gap_and_no_overlap(pg_db):
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text)")
    pg_db.execute("INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 300) g")
    capture = _capture(pg_db)
    start = capture.initial_offset()
    n = 0

    def write():   # a committed insert, update and delete between slot creation and snapshot end
        nonlocal n
        n += 1
        pg_db.execute("INSERT INTO customers VALUES (%s, 'new')", (1000 + n,))
        pg_db.execute("UPDATE customers SET name = 'changed' WHERE id = %s", (n,))
        pg_db.execute("DELETE FROM customers WHERE id = %s", (300 - n,))
    write()
    snapshot, position = [], start
    while position.phase != STREAM:           # small chunks, a write committed between any two
        end = capture.next_offset(position, 20)
        snapshot.extend(capture.records(position, end))
        position = end
        write()
    assert n == 16
    rows = {_payload(r)["after"]["id"]: _payload(r)["after"]["name"] for r, _ in snapshot}
    assert rows == {i: f"c{i}" for i in range(1, 301)}          # exactly the table at the consistent point
    assert [_payload(r)["source"]["snapshot"] for r, _ in snapshot][-1] == "last"
    records = list(snapshot)
    _until_table_matches(pg_db, capture, position, "SELECT id, name FROM customers", records)
    streamed = [r for r, _ in records[len(snapshot):]]
    assert streamed and min(r.commit_lsn for r in streamed) > start.lsn   # nothing before the snapshot again
    capture.close()


@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
def test_unchanged_toast_values(pg_db, identity):
    pg_db.execute("CREATE TABLE docs (id int PRIMARY KEY, name text, body text)")
    pg_db.execute("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")   # stored out of line, uncompressed
    pg_db.execute(f"ALTER TABLE docs REPLICA IDENTITY {identity}")
    big = "x" * 10_000
    pg_db.execute("INSERT INTO docs VALUES (1, 'a', %s)", (big,))
    capture = _capture(pg_db, snapshot_mode="no_data")
    start = capture.initial_offset()
    capture.next_offset(start, None)
    pg_db.execute("UPDATE docs SET name = 'b' WHERE id = 1")
    records: list = []

    def got_update():
        nonlocal start
        more, start = _drain(capture, start)
        records.extend(r for r, _ in more)
        return records
    wait_until(got_update, timeout=30, message="the update")
    change = _payload(records[0])
    assert change["op"] == "u" and change["after"]["name"] == "b"
    if identity == "FULL":
        # pgoutput does not resend it, but the old tuple has it: Debezium's after takes it (DBZ-7193)
        assert change["before"]["body"] == big and change["before"]["name"] == "a"
        assert change["after"]["body"] == big
    else:
        assert change["after"]["body"] == "__debezium_unavailable_value"   # pgoutput does not resend it
        assert change["before"] is None
    capture.close()


def _stream(pg_db, *statements, count: int, **extra) -> list:
    """The records of ``statements`` committed after a no_data capture started: ``count`` of them."""
    capture = _capture(pg_db, snapshot_mode="no_data", **extra)
    start = capture.initial_offset()
    capture.next_offset(start, None)
    for sql in statements:
        pg_db.execute(sql)
    records: list = []

    def got_all():
        nonlocal start
        more, start = _drain(capture, start)
        records.extend(r for r, _ in more)
        return len(records) >= count
    wait_until(got_all, timeout=30, message=f"{count} records")
    capture.close()
    return records


def test_a_table_without_a_primary_key_has_a_null_key_and_keeps_its_nulls(pg_db, tmp_path):
    # Debezium: no primary key, no key (TablesWithoutPrimaryKeyIT); NULL stays null, so the rows
    # (NULL, 'y') and (0, 'y') stay apart.
    pg_db.execute("CREATE TABLE nopk (x int, y text)")
    pg_db.execute("ALTER TABLE nopk REPLICA IDENTITY FULL")
    records = _stream(pg_db, "INSERT INTO nopk VALUES (NULL, 'y'), (0, 'y')", "DELETE FROM nopk WHERE x IS NULL",
                      count=4)
    assert [r.key for r in records] == [None] * 4
    (first, second, deleted), tombstone = [_payload(r) for r in records[:3]], records[3]
    assert first["after"] == {"x": None, "y": "y"} and second["after"] == {"x": 0, "y": "y"}
    assert deleted["op"] == "d" and deleted["before"] == {"x": None, "y": "y"} and tombstone.value is None
    fields = json.loads(records[0].value)["schema"]["fields"][1]["fields"]
    assert [(f["field"], f["optional"]) for f in fields] == [("x", True), ("y", True)]
    # A Delta mirror needs a key: the sink refuses the table's records until keys= names one.
    from spark_sink.delta import delta_apply
    from spark_sink.delta.errors import PoisonRecordError
    with pytest.raises(PoisonRecordError, match="has no key columns"):
        delta_apply(str(tmp_path), app_id="nopk")(_kafka_rows(records[1:2]), 0)


def test_key_fields_follow_the_primary_keys_column_order(pg_db):
    # Debezium orders the key by KEY_SEQ (the index's column order), not by the table's columns.
    pg_db.execute("CREATE TABLE t (a int, b int, v text, PRIMARY KEY (b, a))")
    (record,) = _stream(pg_db, "INSERT INTO t VALUES (1, 10, 'v')", count=1)
    key = json.loads(record.key)
    assert [f["field"] for f in key["schema"]["fields"]] == ["b", "a"]
    assert record.key.endswith(b'"payload":{"b":10,"a":1}}')


def test_not_null_columns_are_required_fields_and_a_deletes_before_fills_them(pg_db):
    # Debezium's schema marks a NOT NULL column required; a delete under REPLICA IDENTITY DEFAULT
    # sends the key alone, and its converters fill a required field with the type's zero.
    # A ZonedTimestamp's zero is the epoch (JdbcValueConverters' fallbackTimestampWithTimeZone): an
    # empty string is no timestamp, and the Delta sink refused the delete.
    pg_db.execute("CREATE TABLE nn (id int PRIMARY KEY, v text NOT NULL, n int NOT NULL, o int, "
                  "at timestamptz NOT NULL)")
    create, delete, _tombstone = _stream(pg_db, "INSERT INTO nn VALUES (1, 'x', 5, 6, now())",
                                         "DELETE FROM nn WHERE id = 1", count=3)
    row = next(f for f in json.loads(create.value)["schema"]["fields"] if f["field"] == "after")
    assert {f["field"]: f["optional"] for f in row["fields"]} == {"id": False, "v": False, "n": False, "o": True,
                                                                 "at": False}
    assert _payload(delete)["before"] == {"id": 1, "v": "", "n": 0, "o": None, "at": "1970-01-01T00:00:00Z"}


def test_a_table_created_after_the_capture_started_is_described_by_the_catalog(pg_db):
    # Debezium refreshes a table's schema from the catalog when the stream meets it: the Relation
    # message does not say NOT NULL, and under REPLICA IDENTITY FULL it flags every column, so a
    # table created later was read with every column optional and, under FULL, without its key.
    pg_db.execute("CREATE TABLE first (id int PRIMARY KEY)")
    records = _stream(pg_db, "CREATE TABLE later (id int PRIMARY KEY, v text NOT NULL, o int)",
                      "ALTER TABLE later REPLICA IDENTITY FULL",
                      "INSERT INTO later VALUES (7, 'x', NULL)",
                      "ALTER TABLE later ADD COLUMN n int NOT NULL DEFAULT 3",
                      "INSERT INTO later VALUES (8, 'y', 1)", count=2)
    created, added = records
    assert json.loads(created.key)["payload"] == {"id": 7}
    assert json.loads(added.key)["payload"] == {"id": 8}
    row = next(f for f in json.loads(created.value)["schema"]["fields"] if f["field"] == "after")
    assert {f["field"]: f["optional"] for f in row["fields"]} == {"id": False, "v": False, "o": True}
    row = next(f for f in json.loads(added.value)["schema"]["fields"] if f["field"] == "after")
    assert {f["field"]: f["optional"] for f in row["fields"]} == {"id": False, "v": False, "o": True, "n": False}


def _kafka_rows(records):
    import pyarrow as pa
    return pa.table({"topic": [r.topic for r in records], "partition": [0] * len(records),
                     "offset": list(range(len(records))), "key": [r.key for r in records],
                     "value": [r.value for r in records],
                     "headers": [[{"key": k, "value": v} for k, v in r.headers] for r in records]})


def test_unchanged_toasted_arrays_carry_debeziums_typed_placeholders_and_delta_keeps_them(pg_db, tmp_path):
    from deltalake import DeltaTable
    from spark_sink.delta import delta_apply
    arrays = {"ia": "int[]", "la": "bigint[]", "da": "date[]", "ua": "uuid[]", "ta": "text[]", "fa": "float8[]"}
    pg_db.execute("CREATE TABLE tt (id int PRIMARY KEY, n int, "
                  + ", ".join(f"{c} {t}" for c, t in arrays.items()) + ")")
    for column in arrays:
        pg_db.execute(f"ALTER TABLE tt ALTER COLUMN {column} SET STORAGE EXTERNAL")
    insert = ("INSERT INTO tt SELECT 1, 0, ARRAY(SELECT g FROM generate_series(1, 3000) g), "
              "ARRAY(SELECT g::bigint FROM generate_series(1, 3000) g), "
              "ARRAY(SELECT date '2020-01-01' + g FROM generate_series(1, 3000) g), "
              "ARRAY(SELECT md5(g::text)::uuid FROM generate_series(1, 500) g), "
              "ARRAY(SELECT repeat('a', 10) FROM generate_series(1, 1000)), "
              "ARRAY(SELECT g / 2.0 FROM generate_series(1, 3000) g)")
    inserted, updated = _stream(pg_db, insert, "UPDATE tt SET n = 1 WHERE id = 1", count=2)
    after = _payload(updated)["after"]
    placeholder = list(b"__debezium_unavailable_value")
    assert after["ia"] == after["la"] == after["da"] == placeholder
    assert after["fa"] == [float(b) for b in placeholder]
    assert after["ua"] == ["b68a35a7-17ad-35b3-af2a-ae46edb4545a"] and after["ta"] == ["__debezium_unavailable_value"]
    apply = delta_apply(str(tmp_path), app_id="toast")
    apply(_kafka_rows([inserted]), 0)
    apply(_kafka_rows([updated]), 1)
    (row,) = DeltaTable(str(tmp_path / "public.tt")).to_pyarrow_table().to_pylist()
    assert row["n"] == 1 and row["ia"] == list(range(1, 3001)) and row["la"] == list(range(1, 3001))
    assert len(row["da"]) == 3000 and len(row["ua"]) == 500 and len(row["ta"]) == 1000 and len(row["fa"]) == 3000


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_primary_key_change_keeps_the_unchanged_toasted_value_in_delta(pg_db, tmp_path, scd_type):
    """UPDATE ... SET id = 10 with the TOASTed note unchanged: the create of key 10 carries
    Debezium's placeholder and ``__debezium.oldkey``; Delta holds key 1's note under key 10."""
    from deltalake import DeltaTable
    from spark_sink.delta import delta_apply
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, note text)")
    pg_db.execute("ALTER TABLE customers ALTER COLUMN note SET STORAGE EXTERNAL")   # out of line, uncompressed
    records = _stream(pg_db, "INSERT INTO customers VALUES (1, 'a', repeat('x', 10000)), (2, 'b', repeat('y', 10000))",
                      "UPDATE customers SET id = 10 WHERE id = 1", "UPDATE customers SET name = 'b2' WHERE id = 2",
                      count=6)
    create = next(r for r in records if r.value is not None and _payload(r)["op"] == "c" and _payload(r)["after"]["id"] == 10)
    assert _payload(create)["after"]["note"] == "__debezium_unavailable_value"
    assert json.loads(dict(create.headers)["__debezium.oldkey"])["payload"] == {"id": 1}
    apply = delta_apply(str(tmp_path), scd_type=scd_type)
    apply(_kafka_rows(records[:2]), 0)
    apply(_kafka_rows(records[2:]), 1)
    got = DeltaTable(str(tmp_path / "public.customers")).to_pyarrow_table().to_pylist()
    got = {r["id"]: (r["name"], r["note"]) for r in got if scd_type == 1 or r["__is_current"]}
    assert got == {i: (n, note) for i, n, note in pg_db.execute("SELECT id, name, note FROM customers")}
    assert got[10] == ("a", "x" * 10000)


def test_a_new_column_is_picked_up_from_the_relation_message(pg_db):
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    capture = _capture(pg_db, snapshot_mode="no_data")
    start = capture.initial_offset()
    capture.next_offset(start, None)
    pg_db.execute("INSERT INTO items VALUES (1, 'before ddl')")
    pg_db.execute("ALTER TABLE items ADD COLUMN price numeric(10, 2)")
    pg_db.execute("INSERT INTO items VALUES (2, 'after ddl', 9.99)")
    records: list = []

    def both():
        nonlocal start
        more, start = _drain(capture, start)
        records.extend(r for r, _ in more)
        return len(records) >= 2
    wait_until(both, timeout=30, message="both inserts")
    first, second = (json.loads(r.value) for r in records)
    assert "price" not in first["payload"]["after"]
    after = second["payload"]["after"]
    assert (after["id"], after["name"]) == (2, "after ddl") and after["price"] is not None
    fields = {f["field"]: f for f in second["schema"]["fields"][1]["fields"]}
    assert list(fields) == ["id", "name", "price"] and fields["price"]["name"] == "org.apache.kafka.connect.data.Decimal"
    capture.close()


def test_heartbeats_keep_restart_lsn_moving_while_only_uncaptured_tables_change(pg_db):
    pg_db.execute("CREATE TABLE captured (id int PRIMARY KEY); CREATE TABLE noise (id serial PRIMARY KEY, x int)")
    capture = _capture(pg_db, slot_name="hb", table_include_list="public.captured",
                       publication_autocreate_mode="filtered", heartbeat_interval_ms="50", snapshot_mode="no_data")
    start = capture.initial_offset()
    before = pg_db.slot("hb")
    rows = []

    def moved():
        nonlocal start
        pg_db.execute("INSERT INTO noise (x) SELECT g FROM generate_series(1, 100) g")
        pg_db.execute("SELECT pg_log_standby_snapshot()")   # what the background writer logs every 15 s
        more, start = _drain(capture, start)
        rows.extend(more)
        now = pg_db.slot("hb")
        return now["restart_lsn"] > before["restart_lsn"] and now["confirmed_flush_lsn"] > before["confirmed_flush_lsn"]
    wait_until(moved, timeout=30, interval=0.1, message="restart_lsn to move")
    assert rows == []                      # heartbeats are positions, not records
    capture.close()


def test_acknowledgement_is_never_ahead_of_a_commit_and_a_restart_replays_the_batch(pg_db):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, name text)")
    options = pg_db.options(slot_name="acks", snapshot_mode="no_data")
    capture = Capture(CdcOptions.parse(options))
    start = capture.initial_offset()
    capture.next_offset(start, None)
    pg_db.execute("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 5) g")   # one transaction
    end = wait_until(lambda: (e := capture.next_offset(start, None)) != start and e.lsn and e, timeout=30)
    first = _triples(capture.records(start, end))
    pg_db.execute("SELECT pg_log_standby_snapshot()")
    capture.stream.poll(0.5)               # keepalives answered while the batch is not committed
    assert pg_db.slot("acks")["confirmed_flush_lsn"] <= start.lsn
    capture.close()                        # the query dies before Spark commits the batch

    again = Capture(CdcOptions.parse(options))
    replayed = _triples(again.records(start, end))
    assert [(k, h) for k, _, h in replayed] == [(k, h) for k, _, h in first] and len(first) == 5
    again.acknowledge(end)                 # Spark committed it
    assert wait_until(lambda: pg_db.slot("acks")["confirmed_flush_lsn"] >= end.lsn, timeout=10)
    again.close()


def test_a_restart_mid_snapshot_reads_on_in_a_fresh_snapshot_and_misses_no_delete(pg_db):
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text)")
    pg_db.execute("INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 60) g")
    options = pg_db.options(slot_name="mid")
    first = Capture(CdcOptions.parse(options))
    start = first.initial_offset()
    end = first.next_offset(start, 25)
    written = first.records(start, end)     # the sink stored the first chunk ...
    first.close()                           # ... and the query died before Spark committed it
    pg_db.execute("DELETE FROM customers WHERE id IN (3, 40)")       # one in the stored chunk, one after it
    pg_db.execute("UPDATE customers SET name = 'moved' WHERE id = 50")
    pg_db.execute("INSERT INTO customers VALUES (61, 'late')")

    second = Capture(CdcOptions.parse(options))
    records = list(written) + second.records(start, end)     # Spark replays the batch, then reads on
    position = end
    while position.phase != STREAM:
        nxt = second.next_offset(position, 25)
        records.extend(second.records(position, nxt))
        position = nxt
    _until_table_matches(pg_db, second, position, "SELECT id, name FROM customers", records)
    second.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_changes_with_restarts_fold_to_the_table(pg_db, seed):
    """Seeded inserts, updates, deletes and key changes in transactions of several sizes, read in
    small batches by captures that die now and then with their last batch uncommitted: the
    records fold to exactly the table."""
    import random

    from spark_source.postgres.demo_db import create_shop, random_changes
    rng = random.Random(seed)
    conn = pg_db.connect()
    create_shop(conn, customers=50, orders=0, seed=seed)
    options = CdcOptions.parse(pg_db.options(slot_name="random", table_include_list="public.customers"))
    capture = Capture(options)
    start = capture.initial_offset()
    records: list = []
    for round_ in range(4):
        random_changes(conn, 60, seed=seed * 10 + round_, per_transaction=rng.choice([1, 3, 7]))
        more, start = _drain(capture, start, limit=rng.choice([5, 17, None]))
        records.extend(more)
        end = capture.next_offset(start, 10)
        if end != start:                     # a batch planned and read, then the process dies
            records.extend(capture.records(start, end))
        capture.close()
        capture = Capture(options)           # restarted: Spark replays (start, end], then reads on
        if end != start:
            records.extend(capture.records(start, end))
            capture.acknowledge(end)
            start = end
    conn.close()
    expected = {json.dumps({"id": r[0]}): r for r in pg_db.execute("SELECT id, name, tier FROM customers")}

    def caught_up():
        nonlocal start
        more, start = _drain(capture, start)
        records.extend(more)
        folded = fold_changes(_triples(records))
        return {k: (v["id"], v["name"], v["tier"]) for k, v in folded.items()} == expected
    wait_until(caught_up, timeout=30, interval=0.05, message="the records to fold to the table")
    capture.close()
