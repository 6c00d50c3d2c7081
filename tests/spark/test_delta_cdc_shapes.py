"""The shapes of change streams the Delta sink meets besides plain keyed tables, checked against
PostgreSQL itself (real embedded PostgreSQL → ``format("postgres-cdc")`` → ``delta_apply``, the
Delta tables read back and compared with ``SELECT``):

* a primary key dropped and added on other (text) columns while a query runs, the changes before
  and after it in one micro-batch: each run of one key's changes is its own MERGE, and only the
  last records the batch's application transaction, so a crash between them replays the batch and
  the table's marks drop what the first MERGE committed;
* a table without a key under ``REPLICA IDENTITY FULL`` with ``keys=`` naming a column an update
  changes: its ``before`` image says the row left its old key;
* a text key column read back for a delete (SCD-2) or an unchanged TOAST value (SCD-1).
"""
from __future__ import annotations

import pytest
from deltalake import DeltaTable

from spark_sink.delta import delta_apply
from tests.delta_cdc import PLACEHOLDER, Events, batch

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]


def _run(spark, db, sink, checkpoint: str) -> None:
    """Everything available now through ``sink``, one ``availableNow`` query."""
    from spark_source.postgres.cdc_source import register
    register(spark)
    query = (spark.readStream.format("postgres-cdc")
             .options(**db.options(slot_name="shapes", skipped_operations="none")).load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None


def _mirror(path: str, columns) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in DeltaTable(path).to_pyarrow_table().to_pylist())


def _current(path: str, columns) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in DeltaTable(path).to_pyarrow_table().to_pylist()
                  if r["__is_current"])


def _both(lake: str, batches: list):
    mirror = delta_apply(table_path=f"{lake}/mirror", scd_type=1)
    history = delta_apply(table_path=f"{lake}/history", scd_type=2)

    def apply(df, batch_id):
        batches.append((batch_id, df.count()))
        mirror(df, batch_id)
        history(df, batch_id)
    return apply


def test_a_primary_key_replaced_mid_batch_mirrors_postgres_in_both_scd_types(spark, pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int NOT NULL, code text NOT NULL, v text, CONSTRAINT t_pkey PRIMARY KEY (id))")
    pg_db.execute("INSERT INTO t VALUES (1, 'a', 'x'), (2, 'b', 'y'), (3, 'c', 'z'), (5, 'e', 'q')")
    lake, ck, batches = str(tmp_path / "lake"), str(tmp_path / "ck"), []
    _run(spark, pg_db, _both(lake, batches), ck)                 # the snapshot, keyed by id
    pg_db.execute("UPDATE t SET v = 'x1' WHERE id = 1")          # keyed by id
    pg_db.execute("ALTER TABLE t DROP CONSTRAINT t_pkey")
    pg_db.execute("ALTER TABLE t ADD PRIMARY KEY (code)")
    pg_db.execute("UPDATE t SET v = 'y2' WHERE code = 'b'")      # keyed by code from here on
    pg_db.execute("DELETE FROM t WHERE code = 'c'")
    pg_db.execute("UPDATE t SET id = 10 WHERE code = 'a'")
    pg_db.execute("UPDATE t SET code = 'f' WHERE code = 'e'")    # a key change under the new key
    pg_db.execute("INSERT INTO t VALUES (4, 'd', 'w')")
    seen = len(batches)
    _run(spark, pg_db, _both(lake, batches), ck)
    assert [n for _, n in batches[seen:] if n] and len([n for _, n in batches[seen:] if n]) == 1, \
        f"the changes before and after the DDL are meant to arrive in one micro-batch: {batches}"
    want = sorted(pg_db.execute("SELECT id, code, v FROM t"))
    assert _mirror(f"{lake}/mirror", ("id", "code", "v")) == want
    assert _current(f"{lake}/history", ("id", "code", "v")) == want
    history = DeltaTable(f"{lake}/history").to_pyarrow_table().to_pylist()
    assert [(r["id"], r["code"]) for r in history if r["__op"] == "d"] == [(3, "c"), (5, "e")]
    batch_id = max(b for b, n in batches if n)
    for name in ("mirror", "history"):   # the last of the batch's MERGEs holds its app transaction
        assert DeltaTable(f"{lake}/{name}").transaction_version("riverlog.delta." + _query_id(lake, name)) == batch_id


def _query_id(lake: str, name: str) -> str:
    from spark_sink.delta import held_positions
    return held_positions(f"{lake}/{name}")["app_id"].removeprefix("riverlog.delta.")


def test_an_update_moving_a_keyless_full_identity_row_to_another_key_deletes_the_old_key(spark, pg_db, tmp_path):
    pg_db.execute("CREATE TABLE nokey (a int NOT NULL, b text)")
    pg_db.execute("ALTER TABLE nokey REPLICA IDENTITY FULL")
    pg_db.execute("INSERT INTO nokey VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    lake, ck = str(tmp_path / "lake"), str(tmp_path / "ck")
    mirror = delta_apply(table_path=f"{lake}/mirror", keys=["a"], scd_type=1)
    history = delta_apply(table_path=f"{lake}/history", keys=["a"], scd_type=2)

    def both(df, batch_id):
        mirror(df, batch_id)
        history(df, batch_id)
    _run(spark, pg_db, both, ck)
    pg_db.execute("UPDATE nokey SET a = 10 WHERE a = 1")
    pg_db.execute("UPDATE nokey SET b = 'y2' WHERE a = 2")
    pg_db.execute("UPDATE nokey SET a = 20, b = 'y3' WHERE a = 2")
    pg_db.execute("DELETE FROM nokey WHERE a = 3")
    _run(spark, pg_db, both, ck)
    want = sorted(pg_db.execute("SELECT a, b FROM nokey"))
    assert want == [(10, "x"), (20, "y3")]
    assert _mirror(f"{lake}/mirror", ("a", "b")) == want
    assert _current(f"{lake}/history", ("a", "b")) == want
    rows = DeltaTable(f"{lake}/history").to_pyarrow_table().to_pylist()
    assert sorted((r["a"], r["b"]) for r in rows if r["__op"] == "d") == [(1, "x"), (2, "y2"), (3, "z")]


def test_a_crash_between_a_batchs_merges_replays_it_without_applying_anything_twice(tmp_path, monkeypatch):
    from spark_sink.delta import merge as merges
    fields = [{"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": False, "field": "code"},
              {"type": "string", "optional": True, "field": "v"}]
    by_id, by_code = Events(fields=fields, key=("id",)), Events(fields=fields, key=("code",))
    snapshot = [by_id.change("r", after={"id": i, "code": c, "v": "v0"}, lsn=100, order=i)
                for i, c in ((1, "a"), (2, "b"))]
    by_code.offset = by_id.offset
    records = [by_id.change("u", after={"id": 1, "code": "a", "v": "v1"}, lsn=200)] + [
        by_code.change("u", after={"id": 2, "code": "b", "v": "v2"}, lsn=300),
        by_code.change("c", after={"id": 3, "code": "c", "v": "v3"}, lsn=400)]
    for scd in (1, 2):
        path = str(tmp_path / f"scd{scd}")
        delta_apply(table_path=path, scd_type=scd, app_id="q")(batch(snapshot), 0)
        real, calls = merges.run_delta_rs, []

        def dies_after_the_first(*args):
            calls.append(1)
            if len(calls) == 2:
                raise SystemExit("killed between the batch's two MERGEs")
            return real(*args)
        monkeypatch.setattr(merges, "run_delta_rs", dies_after_the_first)
        with pytest.raises(SystemExit):
            delta_apply(table_path=path, scd_type=scd, app_id="q")(batch(records), 1)
        monkeypatch.setattr(merges, "run_delta_rs", real)
        assert DeltaTable(path).transaction_version("q") == 0    # the batch is not recorded as done
        for _ in range(2):   # the replay applies what the first MERGE did not commit; a second is skipped
            delta_apply(table_path=path, scd_type=scd, app_id="q")(batch(records), 1)
        rows = DeltaTable(path).to_pyarrow_table().to_pylist()
        want = [(1, "a", "v1"), (2, "b", "v2"), (3, "c", "v3")]
        assert sorted((r["id"], r["code"], r["v"]) for r in rows if scd == 1 or r["__is_current"]) == want
        assert len(rows) == (3 if scd == 1 else 5)   # SCD-2: 2 snapshot rows + 3 changes, none twice
        assert DeltaTable(path).transaction_version("q") == 1


@pytest.mark.parametrize("scd", [1, 2])
def test_a_text_key_column_is_read_back_for_a_delete_and_an_unchanged_toast_value(tmp_path, scd):
    ev = Events(fields=[{"type": "string", "optional": False, "field": "code"},
                        {"type": "string", "optional": True, "field": "note"}], key=("code",))
    path = str(tmp_path / "t")
    apply = delta_apply(table_path=path, scd_type=scd)
    apply(batch([ev.change("c", after={"code": "a", "note": "big-a"}, lsn=100),
                 ev.change("c", after={"code": "c", "note": "big-c"}, lsn=100, order=1)]), 0)
    apply(batch([ev.change("u", after={"code": "a", "note": PLACEHOLDER}, lsn=200),
                 ev.change("d", before={"code": "c", "note": None}, lsn=300)]), 1)
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted((r["code"], r["note"]) for r in rows if scd == 1 or r["__is_current"]) == [("a", "big-a")]
    if scd == 2:
        assert [(r["code"], r["note"]) for r in rows if r["__op"] == "d"] == [("c", "big-c")]


@pytest.mark.parametrize("scd", [1, 2])
def test_a_tombstone_whose_delete_was_compacted_away_deletes_its_key(tmp_path, scd):
    """A compacted topic keeps a key's tombstone and drops the delete before it: a sink that read
    the key's insert earlier sees only the tombstone (Debezium's JDBC sink deletes on it). Its own
    delete's tombstone, and one of a key the table never held, write nothing."""
    ev = Events()
    path = str(tmp_path / "t")

    def tombstone_of(delete):
        headers = [{"key": "riverlog.cdc.commit_lsn", "value": next(h["value"] for h in delete["headers"])},
                   {"key": "riverlog.cdc.order", "value": b"1"}]
        return dict(delete, value=None, offset=delete["offset"] + 1, headers=headers)
    first = [ev.change("c", after={"id": i, "name": f"n{i}", "note": None}, lsn=100 + i) for i in (1, 2, 3)]
    delete_1 = ev.change("d", before={"id": 1, "name": "n1", "note": None}, lsn=200)
    ev.offset += 1
    delete_2 = ev.change("d", before={"id": 2, "name": "n2", "note": None}, lsn=300)
    ev.offset += 1
    delete_9 = ev.change("d", before={"id": 9, "name": "n9", "note": None}, lsn=400)
    delta_apply(table_path=path, scd_type=scd)(batch(first), 0)
    # A restarted query (a new function, no topic seen yet): key 1's delete was compacted away.
    delta_apply(table_path=path, scd_type=scd)(batch([tombstone_of(delete_1)]), 1)
    delta_apply(table_path=path, scd_type=scd)(batch([delete_2, tombstone_of(delete_2), tombstone_of(delete_9)]), 2)
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted(r["id"] for r in rows if scd == 1 or r["__is_current"]) == [3]
    if scd == 2:
        assert sorted((r["id"], r["name"]) for r in rows if r["__op"] == "d") == [(1, "n1"), (2, "n2")]
        assert len(rows) == 5
    fresh = str(tmp_path / "never")
    delta_apply(table_path=fresh, scd_type=scd)(batch([tombstone_of(delete_9)]), 0)
    assert not DeltaTable.is_deltatable(fresh)
