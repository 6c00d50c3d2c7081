"""The Delta sink's pure core: Debezium records -> changes -> per-key folds, against a reference model.

Random histories of inserts, updates (some with an unchanged TOAST column), deletes, primary-key
changes and truncates over a few keys are cut into random batches, with earlier records replayed in later
batches; the folds applied to an in-memory table must end equal to the source (SCD-1) and to its
full history (SCD-2). Also: Connect schemas and Debezium's logical types, the evolution policy,
positions and poison records.
"""
from __future__ import annotations

import datetime as dt
import decimal
import json
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from spark_sink.delta.errors import PoisonRecordError, SchemaChangeError
from spark_sink.delta.fold import (Delete, Watermarks, after_last_truncate, close_time, fold_scd1, fold_scd2,
                                   history_rows, resolve, split_truncates)
from spark_sink.delta.records import ChangeParser, SourceRecord, records_from_arrow
from spark_sink.delta.schema import UNAVAILABLE, arrow_type, converter, evolve, widens
from tests.delta_cdc import (PLACEHOLDER, Events, batch, decimal_bytes, random_history, records_of,
                             reference_history)

pytestmark = pytest.mark.unit


def split_with_replays(rng, records):
    """Random batches in order; some batches also carry records of earlier batches again."""
    batches, i = [], 0
    while i < len(records):
        n = rng.randint(1, 8)
        chunk = records[i:i + n]
        if i and rng.random() < 0.4:
            start = rng.randrange(i)
            chunk = records[start:start + rng.randint(1, 6)] + chunk
        batches.append(chunk)
        i += n
    return batches


def run_scd1(batches, parser=None):
    """One source table's mirror: {key: row}."""
    table = run_scd1_tables(batches, parser)
    assert len({t for t, _ in table}) <= 1
    return {k: v for (_, k), v in table.items()}


def run_scd1_tables(batches, parser=None):
    """The table per (source table, key); a primary-key change's old row is read before the batch."""
    parser = parser or ChangeParser()
    table: dict[tuple, dict] = {}
    marks = Watermarks()
    for records in batches:
        changes = [c for c in map(parser.parse, records_from_arrow(batch(records))) if c is not None]
        fresh, _ = marks.split(changes)
        row_changes, truncates = split_truncates(fresh)
        if truncates:
            table.clear()
        before = dict(table)
        for key, action in fold_scd1(after_last_truncate(row_changes, truncates)).items():
            if isinstance(action, Delete):
                table.pop(key, None)
            else:
                table[key] = resolve(action.row, before.get((key[0], action.fill) if action.fill else key))
        marks = marks.advanced(((c.record.topic, c.record.partition), c.stream_mark) for c in fresh)
    return table


def run_scd2(batches):
    parser = ChangeParser()
    rows: list[dict] = []
    marks = Watermarks()
    for records in batches:
        changes = [c for c in map(parser.parse, records_from_arrow(batch(records))) if c is not None]
        fresh, _ = marks.split(changes)
        row_changes, truncates = split_truncates(fresh)
        folded = fold_scd2(row_changes, ["id"])
        latest = {}
        for r in sorted(rows, key=lambda r: (r["__lsn"], r["__order"])):
            latest[(r["id"],)] = dict(r)
        for r in rows:   # the MERGE's "not matched by source" clause
            if truncates and r["__is_current"] and ("public.customers", (r["id"],)) not in folded:
                r.update(__is_current=False, __valid_to=truncates[0][1])
        for (_, key), versions in folded.items():
            current = next((r for r in rows if r["id"] == key[0] and r["__is_current"]), None)
            if current is not None:
                current.update(__is_current=False, __valid_to=close_time(versions, truncates))
            rows += history_rows(versions, current and dict(current), truncates, latest)
        marks = marks.advanced(((c.record.topic, c.record.partition), c.stream_mark) for c in fresh)
    return rows


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), keys=st.integers(1, 5), truncates=st.booleans())
def test_scd1_fold_equals_the_source_whatever_the_batches_and_replays(seed, keys, truncates):
    rng = random.Random(seed)
    txns, final = random_history(rng, keys=keys, steps=rng.randint(1, 40), truncates=truncates)
    records = records_of(Events(), txns)
    table = run_scd1(split_with_replays(rng, records))
    assert {k[0]: v for k, v in table.items()} == final


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), keys=st.integers(1, 5), truncates=st.booleans())
def test_scd2_history_equals_the_reference_history(seed, keys, truncates):
    rng = random.Random(seed)
    txns, final = random_history(rng, keys=keys, steps=rng.randint(1, 40), truncates=truncates, moved_toast=True)
    rows = run_scd2(split_with_replays(rng, records_of(Events(), txns)))
    got: dict[int, list] = {}
    for r in sorted(rows, key=lambda r: (r["__lsn"], r["__order"])):
        got.setdefault(r["id"], []).append((r["__op"], {c: r[c] for c in ("id", "name", "note")}, r["__lsn"],
                                            r["__order"], r["__valid_from"] // 1000,
                                            None if r["__valid_to"] is None else r["__valid_to"] // 1000,
                                            r["__is_current"]))
    assert got == reference_history(txns)
    assert {r["id"]: {c: r[c] for c in ("id", "name", "note")} for r in rows if r["__is_current"]} == final


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), keys=st.integers(1, 5), truncates=st.booleans())
def test_a_key_change_keeps_its_unchanged_toast_value_in_scd1(seed, keys, truncates):
    """A primary-key change (delete old + tombstone + create new with ``__debezium.oldkey``) whose
    TOASTed column is unchanged: the create carries the placeholder, the value is the old key's,
    from the batch or from the table's row of the old key (whole transactions per batch)."""
    rng = random.Random(seed)
    txns, final = random_history(rng, keys=keys, steps=rng.randint(1, 40), truncates=truncates, moved_toast=True)
    events, batches = Events(), []
    for txn in txns:
        records = records_of(events, [txn])
        if batches and rng.random() < 0.6:
            batches[-1] += records
        else:
            batches.append(records)
    replayed = [b + batches[i - 1] if i and rng.random() < 0.3 else b for i, b in enumerate(batches)]
    assert {k[0]: v for k, v in run_scd1(replayed).items()} == final


def test_a_key_change_takes_the_old_keys_value_before_its_delete_in_the_batch():
    ev = Events()
    ins = ev.change("c", after={"id": 1, "name": "a", "note": "big"}, lsn=100)
    upd = ev.change("u", after={"id": 1, "name": "b", "note": "bigger"}, lsn=150)
    gone = ev.change("d", before={"id": 1, "name": None, "note": None}, lsn=200, order=0)
    moved = ev.change("c", after={"id": 5, "name": "b", "note": PLACEHOLDER}, lsn=200, order=2, old_key={"id": 1})
    again = ev.change("c", after={"id": 1, "name": "new", "note": "other"}, lsn=300)
    for batches in ([[ins, upd, gone, moved, again]], [[ins], [upd, gone, moved]], [[ins, upd], [gone, moved, again]]):
        assert run_scd1(batches)[(5,)] == {"id": 5, "name": "b", "note": "bigger"}
    [change] = [ChangeParser().parse(r) for r in records_from_arrow(batch([moved]))]
    assert change.old_key == (1,) and change.row["note"] is UNAVAILABLE
    fold = fold_scd2([ChangeParser().parse(r) for r in records_from_arrow(batch([gone, moved]))], ["id"])
    assert fold[("public.customers", (5,))][0].fill == (1,)


def test_folds_are_keyed_by_source_table_and_key():
    customers, orders = Events(), Events(table="public.orders", topic="shop.public.orders")
    a = customers.change("c", after={"id": 1, "name": "alice", "note": None}, lsn=10)
    b = orders.change("c", after={"id": 1, "name": "book", "note": None}, lsn=11)
    gone = orders.change("d", before={"id": 1, "name": "book", "note": None}, lsn=12)
    assert run_scd1_tables([[a, b], [gone]]) == {("public.customers", (1,)): {"id": 1, "name": "alice", "note": None}}
    changes = [ChangeParser().parse(r) for r in records_from_arrow(batch([a, b]))]
    assert set(fold_scd2(changes, ["id"])) == {("public.customers", (1,)), ("public.orders", (1,))}


def test_an_older_change_never_moves_a_row_backwards():
    ev = Events()
    new = ev.change("u", after={"id": 1, "name": "new", "note": "x"}, lsn=200)
    old = ev.change("u", after={"id": 1, "name": "old", "note": "x"}, lsn=100)
    assert run_scd1([[new], [old]]) == {(1,): {"id": 1, "name": "new", "note": "x"}}
    # In one batch the position decides, not the arrival order.
    assert run_scd1([[new, old]]) == {(1,): {"id": 1, "name": "new", "note": "x"}}


def test_a_replayed_delete_does_not_resurrect_and_a_replayed_insert_does_not_return():
    ev = Events()
    ins = ev.change("c", after={"id": 1, "name": "a", "note": "x"}, lsn=100)
    dele = ev.change("d", before={"id": 1, "name": "a", "note": "x"}, lsn=200)
    assert run_scd1([[ins], [dele], [ins], [ins, dele]]) == {}


def test_toast_placeholder_keeps_the_previous_value_in_the_batch_and_else_asks_the_table():
    ev = Events()
    ins = ev.change("c", after={"id": 1, "name": "a", "note": "big"}, lsn=100)
    upd = ev.change("u", after={"id": 1, "name": "b", "note": PLACEHOLDER}, lsn=200)
    assert run_scd1([[ins, upd]]) == {(1,): {"id": 1, "name": "b", "note": "big"}}
    assert run_scd1([[ins], [upd]]) == {(1,): {"id": 1, "name": "b", "note": "big"}}
    [change] = [ChangeParser().parse(r) for r in records_from_arrow(batch([upd]))]
    assert change.row["note"] is UNAVAILABLE
    assert resolve(change.row, None) == {"id": 1, "name": "b", "note": None}


def test_without_headers_the_position_is_the_offset_not_source_lsn_or_the_transaction_block():
    """A topic written by Debezium: its order is commit order (the JDBC sink applies it so);
    source.lsn is the change's own LSN and Debezium 2's transaction id is the xid."""
    ev = Events()
    rec = ev.change("c", after={"id": 1, "name": "a", "note": None}, lsn=500, order=3)
    parser = ChangeParser()
    [r] = records_from_arrow(batch([rec]))
    assert parser.parse(r).position == (500, 3)
    value = json.loads(r.value)
    bare = SourceRecord(r.topic, 0, 42, r.key, json.dumps(value).encode())
    assert parser.parse(bare).position == (42, 0)
    value["payload"]["transaction"] = {"id": "771:900", "total_order": 7, "data_collection_order": 1}
    txn = SourceRecord(r.topic, 0, 42, r.key, json.dumps(value).encode())
    assert parser.parse(txn).position == (42, 0)
    assert parser.parse(SourceRecord(r.topic, 0, 43, r.key, None)) is None   # a tombstone
    # A snapshot read at LSN 500, then an update whose own LSN is lower: the topic's order decides.
    read = ev.change("r", after={"id": 1, "name": "old", "note": None}, lsn=500, headers=False)
    update = ev.change("u", after={"id": 1, "name": "new", "note": None}, lsn=480, headers=False)
    assert run_scd1([[read, update]]) == run_scd1([[read], [update]]) == {(1,): {"id": 1, "name": "new", "note": None}}


def test_a_change_event_without_any_lsn_is_ordered_by_its_offset():
    """Debezium's MySQL connector: source has file/pos/row, no lsn."""
    value = {"before": None, "after": {"id": 1, "name": "a"}, "op": "c", "ts_ms": 1700000000000,
             "source": {"connector": "mysql", "db": "inventory", "table": "customers", "file": "mysql-bin.000003",
                        "pos": 154, "row": 0}, "transaction": None}
    change = ChangeParser().parse(SourceRecord("shop.inventory.customers", 0, 9, b'{"id": 1}', json.dumps(value).encode()))
    assert (change.table, change.key, change.position) == ("inventory.customers", (1,), (9, 0))


def test_without_headers_the_high_water_mark_is_the_offset_not_the_change_lsn():
    """Debezium's own topics: a later transaction may hold a change with a lower LSN."""
    ev = Events()
    a = ev.change("c", after={"id": 1, "name": "a", "note": None}, lsn=500, headers=False)
    b = ev.change("c", after={"id": 2, "name": "b", "note": None}, lsn=400, headers=False)
    assert run_scd1([[a], [b], [a, b]]) == {(1,): {"id": 1, "name": "a", "note": None},
                                           (2,): {"id": 2, "name": "b", "note": None}}
    assert [c.stream_mark for c in map(ChangeParser().parse, records_from_arrow(batch([a, b])))] == [(0, 0), (1, 0)]


def test_each_partition_keeps_its_own_high_water_mark():
    """A key hashed to a partition read behind another is not mistaken for a replay."""
    p0, p1 = Events(partition=0), Events(partition=1)
    ahead = p0.change("c", after={"id": 1, "name": "a", "note": None}, lsn=900)
    behind = p1.change("c", after={"id": 2, "name": "b", "note": None}, lsn=300)
    assert run_scd1([[ahead], [behind]]) == {(1,): {"id": 1, "name": "a", "note": None},
                                             (2,): {"id": 2, "name": "b", "note": None}}


def test_payload_only_records_parse_like_enveloped_ones():
    with_schema = Events().change("c", after={"id": 7, "name": "a", "note": None}, lsn=10)
    without = Events(with_schema=False).change("c", after={"id": 7, "name": "a", "note": None}, lsn=10)
    p = ChangeParser()
    a, b = (p.parse(records_from_arrow(batch([r]))[0]) for r in (with_schema, without))
    assert (a.key, a.row, a.position) == (b.key, b.row, b.position) == ((7,), {"id": 7, "name": "a", "note": None}, (10, 0))
    assert a.schema.field("id").type == pa.int32() and b.schema is None


@pytest.mark.parametrize("value, why", [(b"{not json", "not JSON"), (b'{"op": "x"}', "not a Debezium change event"),
                                        (b'{"op": "c", "after": null}', "without a 'after'")])
def test_poison_records_name_topic_partition_and_offset(value, why):
    record = SourceRecord("shop.public.customers", 2, 17, b'{"id": 1}', value)
    with pytest.raises(PoisonRecordError, match=why) as e:
        ChangeParser().parse(record)
    assert (e.value.details["topic"], e.value.details["partition"], e.value.details["offset"]) == (
        "shop.public.customers", 2, 17)
    assert e.value.code == 1381


def _mutated(record, change):
    doc = json.loads(record["value"])
    change(doc["payload"])
    return dict(record, value=json.dumps(doc).encode())


@pytest.mark.parametrize("mutate, why", [
    (lambda r: _mutated(r, lambda p: p.update(source="pg")), "source is str, not an object"),
    (lambda r: _mutated(r, lambda p: (p["source"].update(ts_ms="soon"), p.update(ts_ms="soon"))), "not a number"),
    (lambda r: dict(r, headers=[{"key": "riverlog.cdc.commit_lsn", "value": b"0/16B3748"},
                                {"key": "riverlog.cdc.order", "value": b"0"}]), "not decimal integers"),
    (lambda r: _mutated(r, lambda p: p.update(op=["c"])), "malformed change event"),   # a list is unhashable
])
def test_a_malformed_event_is_a_poison_record_naming_it(mutate, why):
    rec = mutate(Events().change("c", after={"id": 1, "name": "a", "note": None}, lsn=1))
    rec["offset"] = 17
    with pytest.raises(PoisonRecordError, match=why) as e:
        ChangeParser().parse(records_from_arrow(batch([rec]))[0])
    assert e.value.details["offset"] == 17 and "record shop.public.customers/0@17" in e.value.message


def test_a_value_that_does_not_match_its_schema_is_poison():
    rec = Events().change("c", after={"id": "seven", "name": "a", "note": None}, lsn=1)
    with pytest.raises(PoisonRecordError, match="does not match its schema"):
        ChangeParser().parse(records_from_arrow(batch([rec]))[0])


DEBEZIUM_TYPES = [
    ({"type": "int32", "name": "io.debezium.time.Date"}, 19000, pa.date32(), dt.date(2022, 1, 8)),
    ({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, 1_600_000_000_123_456, pa.timestamp("us"),
     dt.datetime(2020, 9, 13, 12, 26, 40, 123456)),
    ({"type": "int64", "name": "io.debezium.time.Timestamp"}, 1_600_000_000_123, pa.timestamp("us"),
     dt.datetime(2020, 9, 13, 12, 26, 40, 123000)),
    ({"type": "int64", "name": "io.debezium.time.NanoTimestamp"}, 1_600_000_000_123_456_789, pa.timestamp("us"),
     dt.datetime(2020, 9, 13, 12, 26, 40, 123456)),
    ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "2020-09-13T12:26:40.5+02:00",
     pa.timestamp("us", tz="UTC"), dt.datetime(2020, 9, 13, 10, 26, 40, 500000, tzinfo=dt.timezone.utc)),
    ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
      "parameters": {"scale": "2", "connect.decimal.precision": "10"}}, decimal_bytes(-12345),
     pa.decimal128(10, 2), decimal.Decimal("-123.45")),
    ({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
      "fields": [{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}]},
     {"scale": 3, "value": decimal_bytes(1234567)}, pa.decimal128(38, 18), decimal.Decimal("1234.567")),
    ({"type": "int64", "name": "io.debezium.time.MicroTime"}, 3_600_000_000, pa.int64(), 3_600_000_000),
    ({"type": "string", "name": "io.debezium.data.Uuid"}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", pa.string(),
     "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ({"type": "bytes"}, "3q2+7w==", pa.binary(), b"\xde\xad\xbe\xef"),
    ({"type": "array", "items": {"type": "int16"}}, [1, None, 3], pa.list_(pa.int16()), [1, None, 3]),
]


@pytest.mark.parametrize("schema, json_value, arrow, python", DEBEZIUM_TYPES)
def test_connect_and_debezium_types_become_delta_types_and_values(schema, json_value, arrow, python):
    assert arrow_type(schema) == arrow
    value = converter(schema)(json_value)
    assert value == python
    assert pa.array([value], arrow).to_pylist() == [python]


def test_the_toast_placeholder_is_unavailable_in_text_bytes_and_arrays():
    assert converter({"type": "string"})(PLACEHOLDER) is UNAVAILABLE
    assert converter({"type": "bytes"})("X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==") is UNAVAILABLE
    assert converter({"type": "array", "items": {"type": "string"}})([PLACEHOLDER]) is UNAVAILABLE
    assert converter({"type": "string"}, placeholder="??")("??") is UNAVAILABLE


def test_debeziums_typed_toast_placeholders_are_unavailable_and_data_is_not():
    # UnchangedToastedPlaceholder: int[]/date[] the placeholder's bytes as ints, bigint[] as longs,
    # uuid[] [UUID.nameUUIDFromBytes(bytes)], hstore {placeholder: placeholder} (map or JSON string)
    ints = list(PLACEHOLDER.encode())
    date_array = {"type": "array", "items": {"type": "int32", "name": "io.debezium.time.Date"}}
    assert converter({"type": "array", "items": {"type": "int32"}})(ints) is UNAVAILABLE
    assert converter({"type": "array", "items": {"type": "int64"}})(ints) is UNAVAILABLE
    assert converter(date_array)(ints) is UNAVAILABLE
    assert converter({"type": "array", "items": {"type": "float64"}})([float(b) for b in ints]) is UNAVAILABLE
    uuid_array = {"type": "array", "items": {"type": "string", "name": "io.debezium.data.Uuid"}}
    assert converter(uuid_array)(["b68a35a7-17ad-35b3-af2a-ae46edb4545a"]) is UNAVAILABLE
    assert converter({"type": "map", "keys": {"type": "string"}, "values": {"type": "string"}})(
        {PLACEHOLDER: PLACEHOLDER}) is UNAVAILABLE
    assert converter({"type": "string"})(json.dumps({PLACEHOLDER: PLACEHOLDER}, separators=(",", ":"))) is UNAVAILABLE
    assert converter({"type": "array", "items": {"type": "int32"}})(ints[:-1]) == ints[:-1]
    assert converter({"type": "array", "items": {"type": "int32"}})([1, 2, 3]) == [1, 2, 3]
    assert converter(None)(ints) is UNAVAILABLE


def test_the_source_fills_every_array_with_a_placeholder_the_sink_recognises():
    from spark_source.postgres.types import ARRAY_ELEMENT, TypeModes, column_type
    for array_oid in ARRAY_ELEMENT:
        for modes in (TypeModes(), TypeModes(decimal_handling_mode="double", binary_handling_mode="hex")):
            ctype = column_type(array_oid, -1, modes)
            assert ctype.placeholder is not None, array_oid
            assert converter(ctype.schema("a"))(ctype.placeholder) is UNAVAILABLE, array_oid


def test_variable_scale_decimal_that_does_not_fit_is_refused():
    schema = {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}
    for value in ({"scale": 20, "value": decimal_bytes(1)}, {"scale": 20, "value": decimal_bytes(33333333333333333333)},
                  {"scale": 0, "value": decimal_bytes(10 ** 25)}):
        with pytest.raises(ValueError, match="decimal.handling.mode=string"):
            converter(schema)(value)


def _decimal(precision, scale):
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)}}


@pytest.mark.parametrize("precision, scale, unscaled, arrow, value", [
    (50, 2, 123, pa.decimal128(38, 2), decimal.Decimal("1.23")),            # numeric(50,2): capped at 38 digits
    (3, -2, 123, pa.decimal128(5, 0), decimal.Decimal("12300")),             # negative scale: Delta has none
    (3, 5, 123, pa.decimal128(5, 5), decimal.Decimal("0.00123")),            # scale above the precision
    (45, 40, 5, pa.decimal128(38, 38), decimal.Decimal("5E-40")),            # fits only if its digits allow
])
def test_decimals_delta_cannot_declare_get_the_nearest_exact_delta_decimal(precision, scale, unscaled, arrow, value):
    assert arrow_type(_decimal(precision, scale)) == arrow
    if arrow.scale < scale and value.as_tuple().exponent < -arrow.scale:
        with pytest.raises(ValueError, match="decimal.handling.mode=string"):
            converter(_decimal(precision, scale))(decimal_bytes(unscaled))
        return
    got = converter(_decimal(precision, scale))(decimal_bytes(unscaled))
    assert got == value and pa.array([got], arrow).to_pylist() == [value]


def test_a_value_beyond_38_digits_is_poison_naming_decimal_handling_mode():
    fields = [{"type": "int32", "optional": False, "field": "id"}, dict(_decimal(50, 2), field="v", optional=True)]
    ev = Events(fields=fields)
    ok = ev.change("c", after={"id": 1, "v": decimal_bytes(10 ** 37)}, lsn=1)
    big = ev.change("c", after={"id": 2, "v": decimal_bytes(10 ** 45)}, lsn=2)
    assert ChangeParser().parse(records_from_arrow(batch([ok]))[0]).row["v"] == decimal.Decimal(10 ** 35)
    with pytest.raises(PoisonRecordError, match="decimal.handling.mode=string"):
        ChangeParser().parse(records_from_arrow(batch([big]))[0])


def test_evolution_adds_keeps_widens_and_refuses():
    target = pa.schema([("id", pa.int32()), ("name", pa.string()), ("n", pa.int32()), ("gone", pa.string())])
    source = pa.schema([("id", pa.int16()), ("name", pa.string()), ("n", pa.int64()), ("new", pa.date32())])
    e = evolve("public.t", target, source)
    assert e.schema == pa.schema([("id", pa.int32()), ("name", pa.string()), ("n", pa.int64()),
                                  ("gone", pa.string()), ("new", pa.date32())])
    assert (e.added, e.missing, e.widened) == (["new"], ["gone"], ["n"])
    with pytest.raises(SchemaChangeError, match="'name' changed from string to int64") as err:
        evolve("public.t", target, pa.schema([("name", pa.int64())]))
    assert err.value.code == 1382


@pytest.mark.parametrize("old, new, ok", [
    (pa.int8(), pa.int64(), True), (pa.int64(), pa.int32(), False), (pa.float32(), pa.float64(), True),
    (pa.int32(), pa.float64(), True), (pa.int64(), pa.float64(), False), (pa.string(), pa.binary(), False),
    (pa.decimal128(10, 2), pa.decimal128(12, 3), True), (pa.decimal128(10, 2), pa.decimal128(10, 3), False),
    (pa.date32(), pa.timestamp("us"), True), (pa.timestamp("us"), pa.date32(), False)])
def test_widening_is_exactly_the_lossless_casts(old, new, ok):
    assert widens(old, new) is ok
    if ok and not pa.types.is_decimal(old):
        sample = pa.array([1 if not pa.types.is_date(old) else dt.date(2020, 1, 1)], old)
        assert sample.cast(new).cast(old) == sample


def test_watermarks_round_trip_through_the_commit_metadata():
    marks = Watermarks().advanced([(("a.b", 0), (10, 2)), (("a.b", 0), (9, 5)), (("a.b", 1), (3, 0))])
    assert marks.marks == {("a.b", 0): (10, 2), ("a.b", 1): (3, 0)}
    again = Watermarks.from_json(json.loads(json.dumps(marks.to_json())))
    assert again == marks and again.holds(("a.b", 0), (10, 2)) and not again.holds(("a.b", 0), (10, 3))
    assert not again.holds(("other", 0), (0, 0))
