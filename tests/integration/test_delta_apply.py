"""delta_apply / delta_append against real Delta tables (delta-rs) on tmp_path, read back.

The input is what foreachBatch hands over, as Arrow or pandas: Kafka-shaped rows with Debezium
JSON and the riverlog.cdc headers (tests/delta_cdc.py builds them as the CDC source does).
"""
from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_sink.delta import (DeltaConfigError, PoisonRecordError, SchemaChangeError, StaleBatchError, delta_append,
                              delta_apply, from_config, held_positions, optimize, vacuum)
from tests.delta_cdc import (CUSTOMER_FIELDS, PLACEHOLDER, Events, batch, decimal_bytes, random_history,
                             records_of, reference_history)

pytestmark = pytest.mark.integration

UTC = dt.timezone.utc


def rows(path, order=("id",)):
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: tuple(r[c] for c in order))


def by_id(path):
    return {r["id"]: r for r in rows(path)}


def apply_in_batches(fn, records, rng, replay=True, start=0):
    """Random batches; some run twice under the same batch id (a crash before Spark's commit)."""
    i, b = 0, start
    while i < len(records):
        n = rng.randint(1, 12)
        chunk = records[i:i + n]
        fn(batch(chunk), b)
        if replay and rng.random() < 0.3:
            result = fn(batch(chunk), b)
            assert all(t.skipped == "replayed" for t in result.tables.values())
        i, b = i + n, b + 1
    return b


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scd1_table_equals_the_source_after_random_history_batches_and_replays(tmp_path, seed):
    rng = random.Random(seed)
    txns, final = random_history(rng, keys=6, steps=40, truncates=seed == 3)
    fn = delta_apply(table_path=str(tmp_path / "customers"), keys={"public.customers": ["id"]})
    apply_in_batches(fn, records_of(Events(), txns), rng)
    assert by_id(tmp_path / "customers") == final
    assert [f.name for f in DeltaTable(str(tmp_path / "customers")).schema().fields] == ["id", "name", "note"]


@pytest.mark.parametrize("moved_toast", [False, True])
def test_scd2_history_equals_the_reference_history_truncates_included(tmp_path, moved_toast):
    """With ``moved_toast``, primary-key changes whose TOASTed note is unchanged, cut anywhere."""
    rng = random.Random(7)
    txns, final = random_history(rng, keys=4, steps=30, truncates=True, moved_toast=moved_toast)
    assert any(op == "T" for _, changes in txns for op, *_ in changes)
    assert not moved_toast or any(op == "c" and keep for _, changes in txns for op, _, _, keep in changes)
    path = tmp_path / "customers"
    apply_in_batches(delta_apply(table_path=str(path), scd_type=2), records_of(Events(), txns), rng)
    got: dict[int, list] = {}
    for r in rows(path, order=("__lsn", "__order")):
        ms = lambda t: None if t is None else (t - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(milliseconds=1)  # noqa: E731
        got.setdefault(r["id"], []).append((r["__op"], {c: r[c] for c in ("id", "name", "note")}, r["__lsn"],
                                            r["__order"], ms(r["__valid_from"]), ms(r["__valid_to"]), r["__is_current"]))
    assert got == reference_history(txns)
    current = DeltaTable(str(path)).to_pyarrow_table(filters=[("__is_current", "=", True)]).to_pylist()
    assert {r["id"]: {c: r[c] for c in ("id", "name", "note")} for r in current} == final


def test_a_truncate_empties_the_mirror_and_ends_the_history(tmp_path):
    ev = Events()
    first = [ev.change("c", after={"id": i, "name": str(i), "note": None}, lsn=10 + i) for i in range(3)]
    second = [ev.change("u", after={"id": 1, "name": "x", "note": None}, lsn=20, order=0),
              ev.change("truncate", lsn=20, order=1),
              ev.change("c", after={"id": 2, "name": "y", "note": None}, lsn=30)]
    for kind in (1, 2):
        path = str(tmp_path / f"t{kind}")
        fn = delta_apply(table_path=path, scd_type=kind)
        fn(batch(first), 0)
        assert fn(batch(second), 1).tables[path].truncates == 1
        if kind == 1:
            assert rows(path) == [{"id": 2, "name": "y", "note": None}]
        else:
            got = [(r["id"], r["name"], r["__lsn"], r["__is_current"], r["__valid_to"] and r["__valid_to"].microsecond)
                   for r in rows(path, order=("__lsn", "id"))]
            assert got == [(0, "0", 10, False, 20000), (1, "1", 11, False, 20000), (2, "2", 12, False, 20000),
                           (1, "x", 20, False, 20000), (2, "y", 30, True, None)]


def test_a_replayed_batch_is_not_applied_twice_and_an_older_one_is_ignored_or_refused(tmp_path):
    path = str(tmp_path / "t")
    ev = Events()
    fn = delta_apply(table_path=path, scd_type=2)
    first = [ev.change("c", after={"id": 1, "name": "a", "note": "x"}, lsn=100)]
    second = [ev.change("u", after={"id": 1, "name": "b", "note": "x"}, lsn=200)]
    fn(batch(first), 4)
    v = fn(batch(second), 5).tables[path].version
    again = fn(batch(second), 5).tables[path]
    assert again.skipped == "replayed" and DeltaTable(path).version() == v
    older = fn(batch(first), 3).tables[path]
    assert older.skipped == "older" and DeltaTable(path).version() == v
    assert DeltaTable(path).transaction_version("riverlog.delta") == 5
    assert len(rows(path)) == 2
    later = [ev.change("u", after={"id": 1, "name": "c", "note": "x"}, lsn=300)]
    with pytest.raises(StaleBatchError, match="checkpoint was replaced") as e:
        fn(batch(later), 2)
    assert e.value.code == 1383 and DeltaTable(path).version() == v
    # The held id re-read with other changes (a snapshot chunk read again from a fresh snapshot) is a
    # replay: skipped, never a stuck query; those changes arrive again from the stream.
    replay = fn(batch(later), 5).tables[path]
    assert replay.skipped == "replayed" and DeltaTable(path).version() == v


def test_a_lost_checkpoint_replays_from_the_source_without_duplicates(tmp_path):
    """A new query (new app id, batch ids from 0) re-reads from an older source position: the
    table's commit metadata decides what it already holds."""
    rng = random.Random(11)
    txns, final = random_history(rng, keys=5, steps=40)
    records = records_of(Events(), txns)
    path = str(tmp_path / "t")
    scd2 = str(tmp_path / "h")
    cut = len(records) * 2 // 3
    for p, kind in ((path, 1), (scd2, 2)):
        apply_in_batches(delta_apply(table_path=p, scd_type=kind, app_id="query-1"), records[:cut], rng, replay=False)
        restarted = delta_apply(table_path=p, scd_type=kind, app_id="query-2")
        result = restarted(batch(records[cut // 2:cut + 3]), 0)
        assert result.tables[p].held == len(records[cut // 2:cut]) - sum(1 for r in records[cut // 2:cut]
                                                                           if r["value"] is None)
        apply_in_batches(restarted, records[cut + 3:], rng, start=1)
    assert by_id(path) == final
    assert sum(1 for r in rows(scd2) if r["__is_current"]) == len(final)
    assert len(rows(scd2)) == sum(1 for r in records if r["value"] is not None)


def test_commit_metadata_records_the_source_positions_it_holds(tmp_path):
    path = str(tmp_path / "t")
    a, b = Events(partition=0), Events(partition=1)
    a.offset = 10
    fn = delta_apply(table_path=path, app_id="app")
    fn(batch([a.change("c", after={"id": 1, "name": "x", "note": None}, lsn=500, order=2),
              b.change("c", after={"id": 2, "name": "y", "note": None}, lsn=450, order=0)]), 9)
    [commit] = DeltaTable(path).history(1)
    doc = json.loads(commit["riverlog.delta"])
    assert doc == {"app_id": "app", "batch_id": 9,
                   "watermarks": {"shop.public.customers/0": [500, 2], "shop.public.customers/1": [450, 0]},
                   "offsets": {"shop.public.customers/0": 10, "shop.public.customers/1": 0},
                   "table": "public.customers"}
    assert held_positions(path) == doc and held_positions(str(tmp_path / "none")) == {}
    assert DeltaTable(path).transaction_version("app") == 9
    optimize(path)   # a commit without the metadata in between
    fn(batch([b.change("u", after={"id": 2, "name": "z", "note": None}, lsn=600, order=0)]), 10)
    doc = json.loads(DeltaTable(path).history(1)[0]["riverlog.delta"])
    assert doc["watermarks"] == {"shop.public.customers/0": [500, 2], "shop.public.customers/1": [600, 0]}
    assert doc["offsets"] == {"shop.public.customers/0": 10, "shop.public.customers/1": 1}


def test_toast_placeholder_keeps_the_tables_value_in_scd1_and_scd2(tmp_path):
    for kind in (1, 2):
        path = str(tmp_path / f"t{kind}")
        ev = Events()
        fn = delta_apply(table_path=path, scd_type=kind)
        fn(batch([ev.change("c", after={"id": 1, "name": "a", "note": "long text"}, lsn=10)]), 0)
        fn(batch([ev.change("u", after={"id": 1, "name": "b", "note": PLACEHOLDER}, lsn=20)]), 1)
        fn(batch([ev.change("u", after={"id": 1, "name": "c", "note": PLACEHOLDER}, lsn=30),
                  ev.change("u", after={"id": 1, "name": "d", "note": PLACEHOLDER}, lsn=40)]), 2)
        got = rows(path, order=("__lsn",) if kind == 2 else ("id",))
        assert [(r["name"], r["note"]) for r in got] == (
            [("d", "long text")] if kind == 1 else [(n, "long text") for n in "abcd"])


def test_schema_evolution_adds_keeps_with_null_widens_and_refuses(tmp_path):
    path = str(tmp_path / "t")
    ev = Events()
    fn = delta_apply(table_path=path)
    fn(batch([ev.change("c", after={"id": 1, "name": "a", "note": "n"}, lsn=10)]), 0)
    wider = [{"type": "int64", "optional": False, "field": "id"}, {"type": "string", "field": "name"},
             {"type": "int32", "name": "io.debezium.time.Date", "field": "born"}]
    fn(batch([ev.change("c", after={"id": 2, "name": "b", "born": 19000}, lsn=20, fields=wider)]), 1)
    table = DeltaTable(path)
    assert pa.schema(table.schema().to_arrow()) == pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("note", pa.string()), ("born", pa.date32())])
    assert by_id(path) == {1: {"id": 1, "name": "a", "note": "n", "born": None},
                           2: {"id": 2, "name": "b", "note": None, "born": dt.date(2022, 1, 8)}}
    retyped = [{"type": "int64", "field": "id"}, {"type": "int32", "field": "name"}]
    with pytest.raises(SchemaChangeError, match="'name' changed from string to int32"):
        fn(batch([ev.change("u", after={"id": 1, "name": 5}, lsn=30, fields=retyped)]), 2)
    assert by_id(path)[1]["name"] == "a"


def test_debezium_logical_types_land_as_delta_types(tmp_path):
    fields = [{"type": "int32", "field": "id"},
              {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
               "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": "price"},
              {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "at"},
              {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "at_tz"},
              {"type": "bytes", "field": "blob"}]
    ev = Events(fields=fields)
    path = str(tmp_path / "t")
    delta_apply(table_path=path)(batch([ev.change("r", after={
        "id": 1, "price": decimal_bytes(199999), "at": 1_700_000_000_000_001, "at_tz": "2023-11-14T22:13:20Z",
        "blob": "AAE="}, lsn=5)]), 0)
    schema = pa.schema(DeltaTable(path).schema().to_arrow())
    assert schema.field("price").type == pa.decimal128(12, 2) and schema.field("at").type == pa.timestamp("us")
    assert rows(path) == [{"id": 1, "price": decimal.Decimal("1999.99"), "at": dt.datetime(2023, 11, 14, 22, 13, 20, 1),
                           "at_tz": dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), "blob": b"\x00\x01"}]


def test_poison_records_raise_naming_the_record_or_go_to_the_dead_letter_callback(tmp_path):
    ev = Events(with_schema=False)
    good = ev.change("c", after={"id": 1, "name": "a", "note": None}, lsn=10)
    broken = dict(ev.change("c", after={"id": 2, "name": "b", "note": None}, lsn=11), value=b"{oops")
    unfit = ev.change("c", after={"id": 3, "name": {"not": "a string"}, "note": None}, lsn=12)
    later = ev.change("c", after={"id": 4, "name": "d", "note": None}, lsn=13)
    with pytest.raises(PoisonRecordError, match="shop.public.customers/0@1"):
        delta_apply(table_path=str(tmp_path / "strict"))(batch([good, broken]), 0)
    path = str(tmp_path / "t")
    letters = []
    fn = delta_apply(table_path=path, errors_tolerance="all", dlq=letters.extend)
    fn(batch([good]), 0)
    result = fn(batch([broken, unfit, later]), 1)
    assert [d.record.offset for d in letters] == [1, 2] == [d.record.offset for d in result.dead_letters]
    headers = dict(letters[0].headers())
    assert headers["__connect.errors.offset"] == b"1" and headers["riverlog.cdc.commit_lsn"] == b"11"
    assert b"PoisonRecordError" in headers["__connect.errors.exception.class.name"]
    assert letters[0].to_row()["value"] == b"{oops" and letters[0].to_row()["key"] == broken["key"]
    assert sorted(by_id(path)) == [1, 4]


def test_a_dead_letter_is_the_one_record_when_offsets_repeat(tmp_path):
    """format("postgres-cdc") gives every record of a transaction the commit LSN as its offset."""
    ev = Events(with_schema=False)
    path = str(tmp_path / "t")
    letters = []
    fn = delta_apply(table_path=path, errors_tolerance="all", dlq=letters.extend)
    fn(batch([ev.change("c", after={"id": 1, "name": "a", "note": None}, lsn=10)]), 0)
    txn = [dict(ev.change("c", after={"id": i, "name": name, "note": None}, lsn=20, order=i), offset=20)
           for i, name in ((2, "b"), (3, ["not", "text"]), (4, "d"))]
    fn(batch(txn), 1)
    assert [(d.record.offset, dict(d.record.headers)["riverlog.cdc.order"]) for d in letters] == [(20, b"3")]
    assert sorted(by_id(path)) == [1, 2, 4]


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_batch_replayed_after_a_crash_before_its_dead_letters_returns_them_again(tmp_path, scd_type):
    """The Connect worker writes the dead letters after the Delta commit: killed in between, the
    replay is skipped (the table holds its batch id) and must still return the same rejects. A new
    column and a widening inside the batch reject nothing."""
    path = str(tmp_path / "t")
    ev = Events(with_schema=False)
    wider = [{"type": "int64", "optional": False, "field": "id"}] + CUSTOMER_FIELDS[1:]
    typed = Events(fields=wider)
    big = 2 ** 40
    records = [ev.change("c", after={"id": 3, "name": {"not": "a string"}, "note": None}, lsn=20),
               ev.change("c", after={"id": 4, "name": "d", "note": None}, lsn=21),
               ev.change("c", after={"id": 5, "name": "e", "note": None, "score": 7}, lsn=22),
               ev.change("c", after={"id": 6, "name": "f", "note": None, "score": "high"}, lsn=23),
               ev.change("c", after={"id": big + 1, "name": "g", "note": None}, lsn=24),
               typed.change("c", after={"id": big, "name": "h", "note": None}, lsn=25)]
    records = [dict(r, offset=i + 1) for i, r in enumerate(records)]
    delta_apply(table_path=path, scd_type=scd_type, app_id="q")(
        batch([Events().change("c", after={"id": 1, "name": "a", "note": None}, lsn=10)]), 0)
    first, written = [], []

    def killed_before_the_dead_letters(letters):
        first.extend(letters)
        raise RuntimeError("killed between the Delta commit and the dead letters' transaction")

    with pytest.raises(RuntimeError, match="killed"):
        delta_apply(table_path=path, scd_type=scd_type, app_id="q", errors_tolerance="all",
                    dlq=killed_before_the_dead_letters)(batch(records), 1)
    version = DeltaTable(path).version()
    assert DeltaTable(path).transaction_version("q") == 1
    assert sorted(by_id(path)) == [1, 4, 5, big, big + 1]
    assert by_id(path)[5]["score"] == 7
    assert pa.schema(DeltaTable(path).schema().to_arrow()).field("id").type == pa.int64()
    assert [d.record.offset for d in first] == [1, 4]
    for _ in range(2):   # restarted: Spark replays batch 1 (twice, as a second crash would)
        result = delta_apply(table_path=path, scd_type=scd_type, app_id="q", errors_tolerance="all",
                             dlq=written.extend)(batch(records), 1)
        assert result.tables[path].skipped == "replayed" and DeltaTable(path).version() == version
        assert [d.record.offset for d in result.dead_letters] == [1, 4]
        assert [d.error.message for d in result.dead_letters] == [d.error.message for d in first]
    assert [d.record.offset for d in written] == [1, 4, 1, 4]
    assert "'score' is int64" in written[1].error.message and written[0].to_row()["value"] == records[0]["value"]
    # The checkpoint lost too: a new app id reads the batch again from the group's offsets, with a
    # change after it; killed again before the dead letters, then replayed. The held rejects return.
    more = records + [dict(ev.change("c", after={"id": 7, "name": "i", "note": None}, lsn=30), offset=7)]
    for run in range(2):
        try:
            result = delta_apply(table_path=path, scd_type=scd_type, app_id="q-new", errors_tolerance="all",
                                 dlq=killed_before_the_dead_letters if run == 0 else None)(batch(more), 0)
        except RuntimeError:
            result = None
        assert run == 0 and result is None or result.tables[path].skipped == "replayed"
    assert [d.record.offset for d in first[2:]] == [1, 4] == [d.record.offset for d in result.dead_letters]
    assert 7 in by_id(path)


def test_several_tables_under_a_root_and_pandas_input(tmp_path):
    customers, orders = Events(), Events(table="public.orders", topic="shop.public.orders")
    data = batch([customers.change("c", after={"id": 1, "name": "a", "note": None}, lsn=10),
                  orders.change("c", after={"id": 7, "name": "o", "note": None}, lsn=10, order=1)]).to_pandas()
    result = delta_apply(str(tmp_path), keys={"public.orders": ["id", "name"]})(data, 0)
    assert sorted(result.tables) == [str(tmp_path / "public.customers"), str(tmp_path / "public.orders")]
    assert rows(tmp_path / "public.orders") == [{"id": 7, "name": "o", "note": None}]
    assert rows(tmp_path / "public.customers") == [{"id": 1, "name": "a", "note": None}]
    with pytest.raises(DeltaConfigError):
        delta_apply(str(tmp_path), scd_type=3)
    with pytest.raises(DeltaConfigError, match="engine='delta-spark' needs the Spark DataFrame"):
        delta_apply(str(tmp_path), engine="delta-spark")(data, 1)


def test_the_delta_sink_connector_config_names_build_the_same_sink(tmp_path):
    """``DeltaSink``'s Kafka Connect config: one topic into ``delta.table.path``, keys named."""
    path = str(tmp_path / "customers")
    letters = []
    fn = from_config({"connector.class": "DeltaSink", "topics": "shop.public.customers", "delta.table.path": path,
                      "primary.key.fields": "id", "scd.type": "2", "errors.tolerance": "all",
                      "errors.deadletterqueue.topic.name": "dlq.customers"}, dlq=letters.extend)
    ev = Events()
    fn(batch([ev.change("c", after={"id": 1, "name": "a", "note": None}, lsn=10),
              dict(ev.change("c", after={"id": 2, "name": "b", "note": None}, lsn=11), value=b"[]"),
              {**ev.change("c", after={"id": 3}, lsn=12), "topic": "__debezium-heartbeat.shop",
               "value": b'{"ts_ms": 1}'}]), 0)
    assert [(r["id"], r["__is_current"]) for r in rows(path)] == [(1, True)]
    assert [d.record.offset for d in letters] == [1]
    with pytest.raises(DeltaConfigError, match="exactly one of delta.table.path and delta.root.path"):
        from_config({"primary.key.fields": "id"})


def test_delta_append_raw_and_json_exactly_once(tmp_path):
    records = [{"key": None, "value": json.dumps({"n": i, "s": f"v{i}"}).encode(), "topic": "clicks",
                "partition": 0, "offset": i, "timestamp": dt.datetime(2024, 1, 1, tzinfo=UTC), "timestampType": 0,
                "headers": []} for i in range(6)]
    raw, js = str(tmp_path / "raw"), str(tmp_path / "json")
    for path, fmt in ((raw, "raw"), (js, "json")):
        fn = delta_append(path, value_format=fmt)
        fn(batch(records[:4]), 0)
        assert fn(batch(records[:4]), 0).tables[path].skipped == "replayed"
        fn(batch(records[2:]), 1)      # records 2, 3 again: dropped by the offset marks
    assert [r["offset"] for r in rows(raw, order=("offset",))] == list(range(6))
    assert [(r["n"], r["s"], r["__offset"]) for r in rows(js, order=("n",))] == [(i, f"v{i}", i) for i in range(6)]


def test_delta_append_json_returns_the_same_dead_letters_when_a_committed_batch_is_replayed(tmp_path):
    values = [b'{"n": 1, "s": "a"}', b"{oops", b'{"n": "two", "s": "b"}', b'{"n": 3, "s": "c", "x": 1.5}']
    records = [{"key": None, "value": v, "topic": "clicks", "partition": 0, "offset": i, "timestamp": None,
                "timestampType": 0, "headers": []} for i, v in enumerate(values)]
    path, first = str(tmp_path / "json"), []

    def killed_before_the_dead_letters(letters):
        first.extend(letters)
        raise RuntimeError("killed between the Delta commit and the dead letters' transaction")

    with pytest.raises(RuntimeError, match="killed"):
        delta_append(path, value_format="json", app_id="q", errors_tolerance="all",
                     dlq=killed_before_the_dead_letters)(batch(records), 0)
    assert [(r["n"], r["x"]) for r in rows(path, order=("__offset",))] == [(1, None), (3, 1.5)]
    for app_id in ("q", "q-new"):   # replayed; then with the checkpoint lost too (a new app id, records held)
        result = delta_append(path, value_format="json", app_id=app_id, errors_tolerance="all")(batch(records), 0)
        assert result.tables[path].version is None and len(rows(path, order=("__offset",))) == 2
        assert [d.record.offset for d in result.dead_letters] == [1, 2] == [d.record.offset for d in first]
        assert [d.error.message for d in result.dead_letters] == [d.error.message for d in first]


def test_optimize_z_orders_and_vacuum_deletes_unreferenced_files(tmp_path):
    path = str(tmp_path / "t")
    ev = Events()
    fn = delta_apply(table_path=path)
    for i in range(5):
        fn(batch([ev.change("c", after={"id": i, "name": str(i), "note": None}, lsn=10 + i)]), i)
    before = by_id(path)
    metrics = optimize(path, z_order_by=["id"])
    assert metrics["numFilesRemoved"] >= 2 and len(DeltaTable(path).file_uris()) == 1
    on_disk = lambda: sorted(f for f in os.listdir(path) if f.endswith(".parquet"))  # noqa: E731
    assert len(vacuum(path, dry_run=True, retention_hours=0, enforce_retention_duration=False)) == 5
    assert len(on_disk()) == 6
    deleted = vacuum(path, retention_hours=0, enforce_retention_duration=False)
    assert len(deleted) == 5 and len(on_disk()) == 1
    assert by_id(path) == before


def test_records_built_by_the_postgres_cdc_envelope_apply_as_the_source_table(tmp_path):
    """The contract end to end without a server: spark_source.postgres's EnvelopeBuilder turns
    decoded transactions (insert, update with an unchanged TOAST value, primary-key change, delete
    under REPLICA IDENTITY DEFAULT) into records, and the sink's tables equal the source's."""
    from spark_source.postgres.envelope import CdcConfig, EnvelopeBuilder
    from spark_source.postgres.messages import UNCHANGED_TOAST, Column, Delete, Insert, Relation, Update
    from spark_source.postgres.transactions import Change, Transaction

    cols = (Column(True, "id", 23, -1), Column(False, "name", 25, -1), Column(False, "note", 25, -1),
            Column(False, "price", 1700, ((10 << 16) | 2) + 4), Column(False, "at", 1184, -1))
    rel = Relation(16384, "public", "customers", "d", cols)
    builder = EnvelopeBuilder(CdcConfig.from_options({"topic.prefix": "shop", "database.dbname": "shop"}),
                              now_us=lambda: 1_700_000_000_000_000)
    builder.table(rel)

    def row(i, name, note=b"long note"):
        return str(i).encode(), name.encode(), note, b"12.34", b"2024-02-29 12:34:56.5+02"
    toasted = tuple(UNCHANGED_TOAST if c.name == "note" else v for c, v in zip(cols, row(1, "a2")))
    key_only = lambda i: (str(i).encode(), None, None, None, None)  # noqa: E731
    txns = [[Insert(16384, row(1, "a")), Insert(16384, row(2, "b"))], [Update(16384, None, None, toasted)],
            [Update(16384, key_only(2), "K", row(3, "b3", b"moved"))], [Delete(16384, key_only(1), "K")],
            [Insert(16384, row(4, "d"))]]
    records = []
    for n, messages in enumerate(txns):
        lsn = 1000 + 100 * n
        txn = Transaction(700 + n, lsn, lsn + 8, 1_700_000_000_000_000 + n,
                          [Change(rel, i, lsn + i, m) for i, m in enumerate(messages)])
        for r in builder.transaction_records(txn):
            records.append({"key": r.key, "value": r.value, "topic": r.topic, "partition": 0, "offset": len(records),
                            "timestamp": None, "timestampType": 0,
                            "headers": [{"key": k, "value": v} for k, v in r.headers]})
    at = dt.datetime(2024, 2, 29, 10, 34, 56, 500000, tzinfo=UTC)
    expect = {3: {"id": 3, "name": "b3", "note": "moved", "price": decimal.Decimal("12.34"), "at": at},
              4: {"id": 4, "name": "d", "note": "long note", "price": decimal.Decimal("12.34"), "at": at}}
    for kind in (1, 2):
        path = str(tmp_path / f"t{kind}")
        fn = delta_apply(table_path=path, scd_type=kind)
        for i in range(0, len(records), 3):
            fn(batch(records[i:i + 3]), i)
        got = rows(path, order=("id", "__lsn") if kind == 2 else ("id",))
        if kind == 1:
            assert {r["id"]: r for r in got} == expect
        else:
            assert [(r["id"], r["name"], r["note"], r["__op"], r["__is_current"]) for r in got] == [
                (1, "a", "long note", "c", False), (1, "a2", "long note", "u", False),
                (1, "a2", "long note", "d", False), (2, "b", "long note", "c", False),
                (2, "b", "long note", "d", False), (3, "b3", "moved", "c", True), (4, "d", "long note", "c", True)]


def _envelope_records(txns_of):
    """Records the postgres-cdc EnvelopeBuilder makes of ``txns_of(rel)``'s transactions."""
    from spark_source.postgres.envelope import CdcConfig, EnvelopeBuilder
    from spark_source.postgres.messages import Column, Relation
    from spark_source.postgres.transactions import Change, Transaction

    cols = (Column(True, "id", 23, -1), Column(False, "name", 25, -1), Column(False, "note", 25, -1))
    rel = Relation(16384, "public", "customers", "d", cols)
    builder = EnvelopeBuilder(CdcConfig.from_options({"topic.prefix": "shop", "database.dbname": "shop"}),
                              now_us=lambda: 1_700_000_000_000_000)
    builder.table(rel)
    out = []
    for n, messages in enumerate(txns_of()):
        lsn = 1000 + 100 * n
        txn = Transaction(700 + n, lsn, lsn + 8, 1_700_000_000_000_000 + n,
                          [Change(rel, i, lsn + i, m) for i, m in enumerate(messages)])
        out.append([{"key": r.key, "value": r.value, "topic": r.topic, "partition": 0, "offset": None,
                     "timestamp": None, "timestampType": 0, "headers": [{"key": k, "value": v} for k, v in r.headers]}
                    for r in builder.transaction_records(txn)])
    offset = 0
    for txn in out:
        for r in txn:
            r["offset"], offset = offset, offset + 1
    return out


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_primary_key_change_keeps_an_unchanged_toasted_value(tmp_path, scd_type):
    """UPDATE customers SET id = 5 WHERE id = 1 with the TOASTed note unchanged: the create of key 5
    carries Debezium's placeholder and the old key in ``__debezium.oldkey``; the value is key 1's,
    from the batch or from the table's row of key 1 (read before the MERGE deletes it)."""
    from spark_source.postgres.messages import UNCHANGED_TOAST, Insert, Update
    big = b"BIG" * 1000
    txns = _envelope_records(lambda: [
        [Insert(16384, (b"1", b"a", big)), Insert(16384, (b"2", b"b", b"small"))],
        [Update(16384, (b"1", None, None), "K", (b"5", b"a", UNCHANGED_TOAST))],
        [Update(16384, (b"5", None, None), "K", (b"6", b"a6", UNCHANGED_TOAST)),
         Update(16384, None, None, (b"2", b"b2", UNCHANGED_TOAST))]])
    for cut in ([3], [1], [1, 2], [2]):   # batches of whole transactions
        path = str(tmp_path / f"t{scd_type}-{cut}")
        fn = delta_apply(table_path=path, scd_type=scd_type)
        bounds = [0] + cut + [len(txns)]
        for b, (i, j) in enumerate(zip(bounds, bounds[1:])):
            fn(batch([r for t in txns[i:j] for r in t]), b)
        got = rows(path, order=("id", "__lsn") if scd_type == 2 else ("id",))
        if scd_type == 1:
            assert [(r["id"], r["name"], r["note"]) for r in got] == [(2, "b2", "small"), (6, "a6", "BIG" * 1000)]
        else:
            assert [(r["id"], r["__op"], r["__is_current"], r["note"]) for r in got] == [
                (1, "c", False, "BIG" * 1000), (1, "d", False, "BIG" * 1000), (2, "c", False, "small"),
                (2, "u", True, "small"), (5, "c", False, "BIG" * 1000), (5, "d", False, "BIG" * 1000),
                (6, "c", True, "BIG" * 1000)]


def test_scd2_a_key_change_split_between_batches_reads_the_old_keys_last_history_row(tmp_path):
    """Through topics a micro-batch may end between the delete of the old key and the create."""
    from spark_source.postgres.messages import UNCHANGED_TOAST, Insert, Update
    [[insert], [delete, tombstone, create]] = _envelope_records(lambda: [
        [Insert(16384, (b"1", b"a", b"long"))], [Update(16384, (b"1", None, None), "K", (b"5", b"a", UNCHANGED_TOAST))]])
    path = str(tmp_path / "t")
    fn = delta_apply(table_path=path, scd_type=2)
    for b, records in enumerate(([insert], [delete, tombstone], [create])):
        fn(batch(records), b)
    assert [(r["id"], r["__op"], r["note"]) for r in rows(path, order=("id", "__lsn")) if r["id"] == 5] == [
        (5, "c", "long")]


@pytest.mark.parametrize("split", [False, True])
def test_two_source_tables_into_one_table_path_are_refused_before_anything_is_written(tmp_path, split):
    customers = Events()
    orders = Events(table="public.orders", topic="shop.public.orders",
                    fields=[{"type": "int32", "optional": False, "field": "order_id"},
                            {"type": "string", "optional": True, "field": "item"}], key=("order_id",))
    path = str(tmp_path / "t")
    fn = from_config({"connector.class": "DeltaSink", "topics": "shop.public.customers,shop.public.orders",
                      "delta.table.path": path, "errors.tolerance": "all"})
    alice = customers.change("c", after={"id": 1, "name": "alice", "note": None}, lsn=10)
    book = orders.change("c", after={"order_id": 1, "item": "book"}, lsn=11)
    if split:
        fn(batch([alice]), 0)
    with pytest.raises(DeltaConfigError, match="'public.customers', 'public.orders'.*delta.root.path") as e:
        fn(batch([book] if split else [alice, book]), 1)
    assert e.value.code == 1384
    assert (rows(path) == [{"id": 1, "name": "alice", "note": None}]) if split else not os.path.exists(path)
    root = from_config({"delta.root.path": str(tmp_path / "lake")})   # the fix the message names
    root(batch([alice, book]), 0)
    assert rows(tmp_path / "lake" / "public.orders", order=("order_id",)) == [{"order_id": 1, "item": "book"}]


def test_debezium_topics_without_headers_apply_in_topic_order_and_without_source_lsn(tmp_path):
    """A snapshot read at LSN 500 then an update whose own LSN is lower (it committed later), in
    one batch; and a MySQL event, which has no source.lsn at all."""
    ev = Events()
    read = ev.change("r", after={"id": 1, "name": "old", "note": None}, lsn=500, headers=False)
    update = ev.change("u", after={"id": 1, "name": "new", "note": None}, lsn=480, headers=False)
    path = str(tmp_path / "t")
    delta_apply(table_path=path)(batch([read, update]), 0)
    assert rows(path) == [{"id": 1, "name": "new", "note": None}]
    value = {"before": None, "after": {"id": 1, "name": "a"}, "op": "c", "ts_ms": 1700000000000,
             "source": {"connector": "mysql", "db": "inventory", "table": "customers", "file": "mysql-bin.000003",
                        "pos": 154, "row": 0, "ts_ms": 1700000000000}, "transaction": None}
    mysql = {"key": json.dumps({"id": 1}).encode(), "value": json.dumps(value).encode(),
             "topic": "shop.inventory.customers", "partition": 0, "offset": 0, "timestamp": None,
             "timestampType": 0, "headers": []}
    delta_apply(table_path=str(tmp_path / "m"))(batch([mysql]), 0)
    assert rows(tmp_path / "m") == [{"id": 1, "name": "a"}]


def test_malformed_events_are_dead_letters_under_errors_tolerance_all(tmp_path):
    ev = Events()

    def mutated(record, change):
        doc = json.loads(record["value"])
        change(doc["payload"])
        return dict(record, value=json.dumps(doc).encode())
    good = ev.change("c", after={"id": 1, "name": "a", "note": None}, lsn=10)
    bad = [mutated(ev.change("c", after={"id": 2, "name": "b", "note": None}, lsn=11), lambda p: p.update(source="pg")),
           dict(mutated(ev.change("c", after={"id": 3, "name": "c", "note": None}, lsn=12),
                        lambda p: (p["source"].update(ts_ms="soon"), p.update(ts_ms="soon"))), headers=[]),
           dict(ev.change("c", after={"id": 4, "name": "d", "note": None}, lsn=13),
                headers=[{"key": "riverlog.cdc.commit_lsn", "value": b"0/16B3748"},
                         {"key": "riverlog.cdc.order", "value": b"0"}])]
    path = str(tmp_path / "t")
    result = delta_apply(table_path=path, errors_tolerance="all")(batch([good] + bad), 0)
    assert [d.record.offset for d in result.dead_letters] == [1, 2, 3]
    assert all(isinstance(d.error, PoisonRecordError) for d in result.dead_letters)
    assert rows(path) == [{"id": 1, "name": "a", "note": None}]
    with pytest.raises(PoisonRecordError, match="record shop.public.customers/0@1"):
        delta_apply(table_path=str(tmp_path / "u"))(batch([good] + bad), 0)


def test_decimals_delta_cannot_declare_land_exactly_or_name_decimal_handling_mode(tmp_path):
    def field(name, precision, scale):
        return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "optional": True, "field": name,
                "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)}}
    fields = [{"type": "int32", "optional": False, "field": "id"}, field("wide", 50, 2), field("neg", 3, -2),
              field("tiny", 3, 5),
              {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "optional": True, "field": "any",
               "fields": [{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}]}]
    ev = Events(fields=fields)
    path = str(tmp_path / "t")
    result = delta_apply(table_path=path, errors_tolerance="all")(batch([
        ev.change("c", after={"id": 1, "wide": decimal_bytes(123), "neg": decimal_bytes(123),
                              "tiny": decimal_bytes(123), "any": {"scale": 1, "value": decimal_bytes(5)}}, lsn=10),
        ev.change("c", after={"id": 2, "wide": decimal_bytes(10 ** 45)}, lsn=11),
        ev.change("c", after={"id": 3, "any": {"scale": 20, "value": decimal_bytes(33333333333333333333)}}, lsn=12),
        ev.change("c", after={"id": 4, "any": {"scale": 0, "value": decimal_bytes(10 ** 25)}}, lsn=13)]), 0)
    schema = pa.schema(DeltaTable(path).schema().to_arrow())
    assert [schema.field(n).type for n in ("wide", "neg", "tiny", "any")] == [
        pa.decimal128(38, 2), pa.decimal128(5, 0), pa.decimal128(5, 5), pa.decimal128(38, 18)]
    assert [(r["id"], r["wide"], r["neg"], r["tiny"], r["any"]) for r in rows(path)] == [
        (1, decimal.Decimal("1.23"), decimal.Decimal("12300"), decimal.Decimal("0.00123"), decimal.Decimal("0.5"))]
    assert [d.record.offset for d in result.dead_letters] == [1, 2, 3]
    assert all("decimal.handling.mode=string" in d.error.message for d in result.dead_letters)


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_column_added_with_a_default_gives_the_existing_rows_that_value(tmp_path, scd_type):
    """ALTER TABLE customers ADD COLUMN tier int NOT NULL DEFAULT 5: PostgreSQL's existing rows hold
    5, and Debezium's schema field carries "default": 5. SCD-2: the current rows hold it."""
    ev = Events()
    path = str(tmp_path / "t")
    fn = delta_apply(table_path=path, scd_type=scd_type)
    fn(batch([ev.change("c", after={"id": 1, "name": "a", "note": None}, lsn=10),
              ev.change("c", after={"id": 2, "name": "b", "note": None}, lsn=11)]), 0)
    fn(batch([ev.change("u", after={"id": 2, "name": "b2", "note": None}, lsn=12)]), 1)
    added = CUSTOMER_FIELDS + [{"type": "int32", "optional": False, "default": 5, "field": "tier"}]
    fn(batch([ev.change("c", after={"id": 3, "name": "c", "note": None, "tier": 7}, lsn=20, fields=added),
              ev.change("u", after={"id": 1, "name": "a2", "note": None, "tier": 6}, lsn=21, fields=added)]), 2)
    got = rows(path, order=("id", "__lsn") if scd_type == 2 else ("id",))
    if scd_type == 1:
        assert [(r["id"], r["tier"]) for r in got] == [(1, 6), (2, 5), (3, 7)]
    else:
        assert [(r["id"], r["__lsn"], r["tier"]) for r in got] == [
            (1, 10, 5), (1, 21, 6), (2, 11, None), (2, 12, 5), (3, 20, 7)]
    assert fn(batch([ev.change("c", after={"id": 3, "name": "c", "note": None, "tier": 7}, lsn=20, fields=added)]),
              2).tables[path].skipped == "replayed"


def test_an_update_after_a_column_was_dropped_keeps_the_tables_value(tmp_path):
    """ALTER TABLE customers DROP COLUMN note; UPDATE ...: the column stays in Delta, and as
    Debezium's JDBC sink (whose upsert sets the record's fields only) the row keeps its value."""
    ev = Events()
    path = str(tmp_path / "t")
    fn = delta_apply(table_path=path)
    fn(batch([ev.change("c", after={"id": 1, "name": "a", "note": "keep me"}, lsn=10)]), 0)
    dropped = CUSTOMER_FIELDS[:2]
    fn(batch([ev.change("u", after={"id": 1, "name": "a2"}, lsn=20, fields=dropped),
              ev.change("c", after={"id": 2, "name": "b"}, lsn=21, fields=dropped)]), 1)
    assert rows(path) == [{"id": 1, "name": "a2", "note": "keep me"}, {"id": 2, "name": "b", "note": None}]
