"""Debezium's envelope, byte for byte where Debezium documents it (the PostgreSQL connector's
``customers`` examples), and the records around it: tombstones, primary-key changes, TOAST,
snapshot rows, transaction metadata and the riverlog.cdc headers."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_source.postgres.envelope import (COMMIT_LSN_HEADER, ORDER_HEADER, CdcConfig, EnvelopeBuilder,
                                            ReplicaIdentityError, topic_name)
from spark_source.postgres.pgoutput import UNCHANGED_TOAST, Begin, Column, Commit, Delete, Insert, Relation, Truncate, Update
from spark_source.postgres.transactions import TransactionAssembler
from spark_source.postgres.types import CdcConfigError

pytestmark = pytest.mark.unit

NOW_US = 1465584025523514
COMMIT_TS_US = 1559033904863123
CUSTOMERS = Relation(16385, "public", "customers", "d", (
    Column(True, "id", 23, -1), Column(False, "first_name", 1043, 259), Column(False, "last_name", 1043, 259),
    Column(False, "email", 1043, 259)))
NOT_NULL = ("first_name", "last_name", "email")
ANNE = (b"1", b"Anne", b"Kretchmar", b"annek@noanswer.org")


def builder(**options) -> EnvelopeBuilder:
    config = CdcConfig.from_options({"topic.prefix": "PostgreSQL_server", "database.dbname": "postgres", **options})
    b = EnvelopeBuilder(config, now_us=lambda: NOW_US)
    b.table(CUSTOMERS, not_null=NOT_NULL)
    return b


def txn(*changes, xid=555, end_lsn=24023200, relations=(CUSTOMERS,)):
    a = TransactionAssembler()
    for r in relations:
        a.feed(r, 1)
    a.feed(Begin(end_lsn, COMMIT_TS_US, xid), 24023100)
    for i, change in enumerate(changes):
        a.feed(change, 24023128 + i)
    (t,) = a.feed(Commit(0, end_lsn - 8, end_lsn, COMMIT_TS_US), end_lsn - 8)
    return t


def value(record):
    return None if record.value is None else json.loads(record.value)


def key(record):
    return json.loads(record.key)


def ops(records):
    return [(value(r) or {"payload": {"op": None}})["payload"]["op"] for r in records]


# Debezium's documented create event for `customers` (topic.prefix PostgreSQL_server), the parts
# its documentation states: the row schema, the schema names, and the payload.
DOCUMENTED_ROW_FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": False, "field": "first_name"},
    {"type": "string", "optional": False, "field": "last_name"},
    {"type": "string", "optional": False, "field": "email"},
]
DOCUMENTED_SOURCE_KEYS = ["version", "connector", "name", "ts_ms", "ts_us", "ts_ns", "snapshot", "db", "sequence",
                          "schema", "table", "txId", "lsn", "xmin"]


def test_create_event_matches_debeziums_documented_example():
    (record,) = builder().transaction_records(txn(Insert(CUSTOMERS.oid, ANNE)))
    assert record.topic == "PostgreSQL_server.public.customers"
    doc = value(record)
    schema, payload = doc["schema"], doc["payload"]
    assert schema["type"] == "struct" and schema["optional"] is False
    assert schema["name"] == "PostgreSQL_server.public.customers.Envelope"
    assert [f["field"] for f in schema["fields"]] == ["before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns",
                                                      "transaction"]
    for side in schema["fields"][:2]:
        assert side == {"type": "struct", "fields": DOCUMENTED_ROW_FIELDS, "optional": True,
                        "name": "PostgreSQL_server.public.customers.Value", "field": side["field"]}
    source_schema = schema["fields"][2]
    assert source_schema["name"] == "io.debezium.connector.postgresql.Source" and source_schema["optional"] is False
    assert [f["field"] for f in source_schema["fields"]] == DOCUMENTED_SOURCE_KEYS
    assert schema["fields"][3] == {"type": "string", "optional": False, "field": "op"}
    assert schema["fields"][4] == {"type": "int64", "optional": True, "field": "ts_ms"}
    assert payload == {
        "before": None,
        "after": {"id": 1, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"},
        "source": {"version": "riverlog-0.1.0", "connector": "postgresql", "name": "PostgreSQL_server",
                   "ts_ms": 1559033904863, "ts_us": 1559033904863123, "ts_ns": 1559033904863123000,
                   "snapshot": "false", "db": "postgres", "sequence": "[null,\"24023128\"]", "schema": "public",
                   "table": "customers", "txId": 555, "lsn": 24023128, "xmin": None},
        "op": "c", "ts_ms": 1465584025523, "ts_us": 1465584025523514, "ts_ns": 1465584025523514000,
        "transaction": None}
    assert key(record) == {"schema": {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}],
                                      "optional": False, "name": "PostgreSQL_server.public.customers.Key"},
                           "payload": {"id": 1}}
    # JsonConverter's compact form, UTF-8
    assert record.value.startswith(b'{"schema":{"type":"struct","fields":[{"type":"struct"')


def test_update_under_replica_identity_default_and_full():
    (record,) = builder().transaction_records(txn(Update(CUSTOMERS.oid, None, None,
                                                         (b"1", b"Anne Marie", b"Kretchmar", b"annek@noanswer.org"))))
    payload = value(record)["payload"]
    assert payload["op"] == "u" and payload["before"] is None
    assert payload["after"]["first_name"] == "Anne Marie" and key(record)["payload"] == {"id": 1}
    full = Relation(CUSTOMERS.oid, "public", "customers", "f", tuple(
        Column(True, c.name, c.type_oid, c.type_modifier) for c in CUSTOMERS.columns))
    b = builder()
    b.table(full, primary_key=["id"], not_null=NOT_NULL)
    (record,) = b.transaction_records(txn(Update(full.oid, ANNE, "O", (b"1", b"Anne Marie", b"K", b"a@b")),
                                          relations=(full,)))
    payload = value(record)["payload"]
    assert payload["before"] == {"id": 1, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"}
    assert key(record)["payload"] == {"id": 1} and payload["op"] == "u"


def test_delete_is_followed_by_a_tombstone_with_the_same_key():
    records = builder().transaction_records(txn(Delete(CUSTOMERS.oid, (b"1", None, None, None), "K")))
    assert ops(records) == ["d", None]
    delete, tombstone = records
    # REPLICA IDENTITY DEFAULT sends the key alone: NOT NULL columns get Debezium's fallback (the
    # type's zero, so the struct is valid under its schema), nullable ones null
    assert value(delete)["payload"]["before"] == {"id": 1, "first_name": "", "last_name": "", "email": ""}
    people = Relation(16391, "public", "people", "d", (Column(True, "id", 23, -1), Column(False, "bio", 25, -1),
                                                       Column(False, "n", 1700, -1), Column(False, "at", 1184, -1)))
    b = builder()
    b.table(people, not_null=["n"])
    (gone, _) = b.transaction_records(txn(Delete(people.oid, (b"9", None, None, None), "K"), relations=(people,)))
    assert value(gone)["payload"]["before"] == {"id": 9, "bio": None, "n": {"scale": 0, "value": "AA=="}, "at": None}
    assert value(delete)["payload"]["after"] is None
    assert tombstone.value is None and tombstone.key == delete.key and tombstone.topic == delete.topic
    assert ops(builder(**{"tombstones.on.delete": "false"}).transaction_records(
        txn(Delete(CUSTOMERS.oid, (b"1", None, None, None), "K")))) == ["d"]


def test_primary_key_change_is_delete_tombstone_create_with_debeziums_key_headers():
    records = builder().transaction_records(txn(Update(CUSTOMERS.oid, (b"1", None, None, None), "K",
                                                       (b"2", b"Anne", b"Kretchmar", b"annek@noanswer.org"))))
    assert ops(records) == ["d", None, "c"]
    delete, tombstone, create = records
    assert key(delete)["payload"] == {"id": 1} == key(tombstone)["payload"]
    assert key(create)["payload"] == {"id": 2}
    assert value(create)["payload"]["after"]["id"] == 2 and value(create)["payload"]["before"] is None
    assert json.loads(dict(delete.headers)["__debezium.newkey"])["payload"] == {"id": 2}
    assert json.loads(dict(create.headers)["__debezium.oldkey"])["payload"] == {"id": 1}


def test_unchanged_toast_columns_carry_the_placeholder():
    bio = Relation(16390, "public", "people", "d", (Column(True, "id", 23, -1), Column(False, "bio", 25, -1),
                                                    Column(False, "photo", 17, -1), Column(False, "n", 23, -1)))
    change = Update(bio.oid, None, None, (b"1", UNCHANGED_TOAST, UNCHANGED_TOAST, b"3"))
    (record,) = builder().transaction_records(txn(change, relations=(bio,)))
    after = value(record)["payload"]["after"]
    assert after["bio"] == "__debezium_unavailable_value" and after["n"] == 3
    assert after["photo"] == "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="   # the placeholder's bytes, base64
    (record,) = builder(**{"unavailable.value.placeholder": "<toast>"}).transaction_records(txn(change, relations=(bio,)))
    assert value(record)["payload"]["after"]["bio"] == "<toast>"


def test_snapshot_rows_are_reads_marked_true_then_last():
    b = builder()
    first = b.snapshot_record(CUSTOMERS, ANNE, consistent_lsn=24000000, order=0, ts_us=COMMIT_TS_US, xid=554)
    last = b.snapshot_record(CUSTOMERS, (b"2", b"B", b"C", b"d@e"), 24000000, 1, snapshot="last", ts_us=COMMIT_TS_US)
    for record, mark, order in ((first, "true", b"0"), (last, "last", b"1")):
        payload = value(record)["payload"]
        assert payload["op"] == "r" and payload["before"] is None and payload["source"]["snapshot"] == mark
        assert payload["source"]["lsn"] == 24000000
        assert dict(record.headers) == {COMMIT_LSN_HEADER: b"24000000", ORDER_HEADER: order}
    assert value(first)["payload"]["source"]["txId"] == 554 and key(last)["payload"] == {"id": 2}


def test_every_record_carries_the_commit_lsn_and_a_strictly_increasing_order():
    records = builder().transaction_records(txn(
        Insert(CUSTOMERS.oid, ANNE), Delete(CUSTOMERS.oid, (b"1", None, None, None), "K"),
        Update(CUSTOMERS.oid, (b"3", None, None, None), "K", (b"4", b"a", b"b", b"c")), end_lsn=99000))
    assert ops(records) == ["c", "d", None, "d", None, "c"]
    assert [dict(r.headers)[COMMIT_LSN_HEADER] for r in records] == [b"99000"] * 6
    assert [int(dict(r.headers)[ORDER_HEADER]) for r in records] == list(range(6)) == [r.order for r in records]


def test_source_sequence_names_the_previous_commit():
    b = builder()
    b.transaction_records(txn(Insert(CUSTOMERS.oid, ANNE), end_lsn=500))
    (record,) = b.transaction_records(txn(Insert(CUSTOMERS.oid, ANNE), end_lsn=900))
    assert json.loads(value(record)["payload"]["source"]["sequence"]) == ["500", "24023128"]


def test_transaction_metadata_frames_the_changes_with_begin_and_end():
    orders = Relation(16400, "public", "orders", "d", (Column(True, "id", 20, -1),))
    b = builder(**{"provide.transaction.metadata": "true"})
    records = b.transaction_records(txn(Insert(CUSTOMERS.oid, ANNE), Insert(orders.oid, (b"7",)),
                                        Insert(CUSTOMERS.oid, (b"2", b"B", b"C", b"d")), xid=571, end_lsn=53195832,
                                        relations=(CUSTOMERS, orders)))
    assert [r.topic for r in records] == ["PostgreSQL_server.transaction", "PostgreSQL_server.public.customers",
                                          "PostgreSQL_server.public.orders", "PostgreSQL_server.public.customers",
                                          "PostgreSQL_server.transaction"]
    begin, end = value(records[0])["payload"], value(records[-1])["payload"]
    assert begin == {"status": "BEGIN", "id": "571:53195832", "event_count": None, "data_collections": None,
                     "ts_ms": 1559033904863}
    assert end == {"status": "END", "id": "571:53195832", "event_count": 3, "ts_ms": 1559033904863,
                   "data_collections": [{"data_collection": "public.customers", "event_count": 2},
                                        {"data_collection": "public.orders", "event_count": 1}]}
    blocks = [value(r)["payload"]["transaction"] for r in records[1:-1]]
    assert blocks == [{"id": "571:53195832", "total_order": 1, "data_collection_order": 1},
                      {"id": "571:53195832", "total_order": 2, "data_collection_order": 1},
                      {"id": "571:53195832", "total_order": 3, "data_collection_order": 2}]
    assert [r.order for r in records] == [0, 1, 2, 3, 4]
    assert key(records[0])["payload"] == {"id": "571:53195832"}


def test_a_table_without_a_key_has_null_keys_and_is_not_refused():
    # Debezium emits a keyless table's events with a null key (TableSchemaBuilder.create), under
    # any replica identity; refusing them stalled every other table's events too.
    keyless = Relation(16500, "shop", "events", "d", (Column(False, "payload", 25, -1),))
    assert builder().table(keyless).key_schema is None
    (record,) = builder().transaction_records(txn(Insert(keyless.oid, (b"x",)), relations=(keyless,)))
    assert record.key is None and json.loads(record.value)["payload"]["after"] == {"payload": "x"}
    nothing = Relation(16501, "shop", "events2", "n", keyless.columns)
    assert builder().table(nothing).key_columns == ()


def test_a_new_catalog_key_for_the_same_relation_rebuilds_the_key():
    # REPLICA IDENTITY FULL flags every column, so a primary key added later leaves the Relation
    # as it was; the catalog's key (PgOutputMessageDecoder re-reads it) must still take effect.
    full = Relation(16503, "shop", "k", "f", (Column(True, "id", 23, -1), Column(True, "v", 23, -1)))
    b = builder()
    assert b.table(full, primary_key=()).key_columns == ()
    assert b.table(full, primary_key=("id",)).key_columns == ("id",)


def test_replica_identity_full_without_a_primary_key_has_a_null_key_and_keeps_nulls():
    # Debezium (TableSchemaBuilder.create, TablesWithoutPrimaryKeyIT): no primary key, no key
    # schema and a null key; nullable columns stay optional, so (NULL, 'y') is not (0, 'y').
    full = Relation(16502, "shop", "events", "f", (Column(True, "a", 23, -1), Column(True, "b", 25, -1)))
    b = builder()
    b.table(full, primary_key=())
    records = b.transaction_records(txn(Insert(full.oid, (None, b"y")), Update(full.oid, (None, b"y"), "O", (b"0", b"y")),
                                        Delete(full.oid, (b"0", b"y"), "O"), relations=(full,)))
    assert ops(records) == ["c", "u", "d", None]
    assert all(r.key is None for r in records)
    created, updated, deleted, _ = (value(r) for r in records)
    assert created["payload"]["after"] == {"a": None, "b": "y"}
    assert updated["payload"]["before"] == {"a": None, "b": "y"} and updated["payload"]["after"] == {"a": 0, "b": "y"}
    assert deleted["payload"]["before"] == {"a": 0, "b": "y"}
    assert [(f["field"], f["optional"]) for f in created["schema"]["fields"][1]["fields"]] == [("a", True), ("b", True)]
    index = Relation(16503, "shop", "events3", "i", (Column(True, "a", 23, -1), Column(False, "b", 25, -1)))
    assert builder().table(index).key_columns == ("a",)


def test_replica_identity_full_fills_unchanged_toast_from_the_old_tuple():
    # Debezium's PostgresChangeRecordEmitter.columnValues (DBZ-7193): under FULL the old tuple has
    # the value pgoutput did not resend, and `after` carries it; a null old value leaves the placeholder.
    doc = Relation(16801, "public", "docs", "f", (Column(True, "id", 23, -1), Column(True, "n", 23, -1),
                                                  Column(True, "body", 25, -1), Column(True, "tags", 1009, -1)))
    b = builder()
    b.table(doc, primary_key=["id"])
    change = Update(doc.oid, (b"1", b"10", b"big", None), "O", (b"1", b"20", UNCHANGED_TOAST, UNCHANGED_TOAST))
    (record,) = b.transaction_records(txn(change, relations=(doc,)))
    after = value(record)["payload"]["after"]
    assert after == {"id": 1, "n": 20, "body": "big", "tags": ["__debezium_unavailable_value"]}


def test_schemas_disabled_gives_the_payload_alone():
    (record,) = builder(**{"schemas.enable": "false"}).transaction_records(txn(Insert(CUSTOMERS.oid, ANNE)))
    assert json.loads(record.key) == {"id": 1}
    assert set(value(record)) == {"before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns", "transaction"}


def test_truncate_is_skipped_by_default_and_emitted_as_op_t_when_asked():
    change = Truncate(0, (CUSTOMERS.oid,))
    assert builder().transaction_records(txn(change)) == []
    (record,) = builder(**{"skipped.operations": "none"}).transaction_records(txn(change))
    assert record.key is None and value(record)["payload"]["op"] == "t"
    assert ops(builder(**{"skipped.operations": "c"}).transaction_records(txn(Insert(CUSTOMERS.oid, ANNE)))) == []


def test_include_filters_tables_and_order_counts_only_what_is_emitted():
    other = Relation(16600, "audit", "log", "d", (Column(True, "id", 23, -1),))
    records = builder().transaction_records(txn(Insert(other.oid, (b"1",)), Insert(CUSTOMERS.oid, ANNE),
                                                relations=(CUSTOMERS, other)),
                                            include=lambda rel: rel.namespace == "public")
    assert [(r.topic, r.order) for r in records] == [("PostgreSQL_server.public.customers", 0)]


def test_a_new_relation_after_ddl_changes_the_schema():
    b = builder()
    wider = Relation(CUSTOMERS.oid, "public", "customers", "d", CUSTOMERS.columns + (Column(False, "vip", 16, -1),))
    (record,) = b.transaction_records(txn(Insert(wider.oid, ANNE + (b"t",)), relations=(wider,)))
    doc = value(record)
    assert doc["payload"]["after"]["vip"] is True
    assert doc["schema"]["fields"][1]["fields"][-1] == {"type": "boolean", "optional": True, "field": "vip"}
    assert doc["schema"]["fields"][1]["fields"][1]["optional"] is False   # not-null hints kept across DDL


def test_topic_and_schema_names_are_sanitised_as_debezium_does():
    assert topic_name("shop", "public", "customers") == "shop.public.customers"
    assert topic_name("shop", "my schema", "t$1") == "shop.my_schema.t_1"
    odd = Relation(16700, "my-schema", "1st", "d", (Column(True, "id", 23, -1),))
    (record,) = builder().transaction_records(txn(Insert(odd.oid, (b"1",)), relations=(odd,)))
    assert record.topic == "PostgreSQL_server.my-schema.1st"
    # Debezium 2.x's schema.name.adjustment.mode=none: the topic name and the suffix, unchanged
    assert value(record)["schema"]["name"] == "PostgreSQL_server.my-schema.1st.Envelope"


@pytest.mark.parametrize("options, words", [
    ({}, "topic.prefix is required"),
    ({"topic.prefix": "p", "decimal.handling.mode": "exact"}, "decimal.handling.mode"),
    ({"topic.prefix": "p", "tombstones.on.delete": "yes"}, "tombstones.on.delete"),
    ({"topic.prefix": "p", "skipped.operations": "x"}, "skipped.operations"),
])
def test_bad_options_are_refused_naming_the_option(options, words):
    with pytest.raises(CdcConfigError) as info:
        CdcConfig.from_options(options)
    assert words in str(info.value)


def test_a_captured_postgresql_update_becomes_debeziums_row():
    from spark_source.postgres.pgoutput import decode
    from tests.unit.test_pgoutput import CAPTURED
    relation, update = decode(bytes.fromhex(CAPTURED["relation"])), decode(bytes.fromhex(CAPTURED["update"]))
    (record,) = builder().transaction_records(txn(update, relations=(relation,)))
    after = value(record)["payload"]["after"]
    assert after == {
        "id": 1, "name": "Anne Marie", "bio": "__debezium_unavailable_value",
        "price": "BNI=",                                   # 12.34 at scale 2: unscaled 1234
        "amount": {"scale": 2, "value": "MDk="},           # 123.4500: trailing zeros stripped, unscaled 12345
        "ts": 1529507596945104, "tstz": "2018-06-20T13:13:16.945100Z", "d": 18263, "t": 36000500,
        "tt": "04:45:30Z", "iv": 37091106780000, "b": "3q2+7w==", "j": '{"a": [1, 2]}',
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "tags": ["a b", 'c"d', None], "nums": [1, 2, 3],
        "flag": True, "f": "NaN", "m": "/h3A"}            # money -1234.56: unscaled -123456
    fields = {f["field"]: f for f in value(record)["schema"]["fields"][1]["fields"]}
    assert fields["t"]["name"] == "io.debezium.time.Time" and fields["ts"]["name"] == "io.debezium.time.MicroTimestamp"
    assert fields["price"]["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}


def test_logical_messages_are_debeziums_message_events():
    from spark_source.postgres.pgoutput import LogicalMessage
    b = builder()
    a = TransactionAssembler()
    (loose,) = a.feed(LogicalMessage(0, 46523128, "foo", b"bar"), 46523128)
    (record,) = b.transaction_records(loose)
    assert record.topic == "PostgreSQL_server.message" and key(record)["payload"] == {"prefix": "foo"}
    doc = value(record)
    assert doc["schema"]["name"] == "io.debezium.connector.postgresql.MessageValue"
    payload = doc["payload"]
    assert payload["op"] == "m" and payload["message"] == {"prefix": "foo", "content": "YmFy"}
    assert payload["source"]["txId"] is None and payload["source"]["lsn"] == 46523128
    assert (payload["source"]["schema"], payload["source"]["table"]) == ("", "")
    assert payload["source"]["ts_ms"] == NOW_US // 1000          # no commit time: the connector's clock
    inside = txn(Insert(CUSTOMERS.oid, ANNE), LogicalMessage(1, 24023129, "app", b"x"), xid=556)
    records = b.transaction_records(inside)
    assert ops(records) == ["c", "m"] and [r.order for r in records] == [0, 1]
    assert value(records[1])["payload"]["source"]["txId"] == 556
    assert value(records[1])["payload"]["source"]["ts_ms"] == COMMIT_TS_US // 1000
    # Riverlog's own heartbeats never become events; the prefix lists choose the others
    (beat,) = a.feed(LogicalMessage(0, 9, "riverlog.heartbeat", b""), 9)
    assert b.transaction_records(beat) == []
    only_app = builder(**{"message.prefix.include.list": "app.*"})
    assert only_app.transaction_records(loose) == []
    assert len(builder(**{"message.prefix.exclude.list": "f.o"}).transaction_records(loose)) == 0
    with pytest.raises(CdcConfigError):
        CdcConfig.from_options({"topic.prefix": "p", "message.prefix.include.list": "a",
                                "message.prefix.exclude.list": "b"})


def test_an_unchanged_toasted_key_column_is_not_a_key_change():
    doc = Relation(16800, "public", "docs", "f", (Column(True, "path", 25, -1), Column(True, "body", 25, -1)))
    b = builder()
    b.table(doc, primary_key=["path"])
    change = Update(doc.oid, (b"/a", b"old"), "O", (UNCHANGED_TOAST, b"new"))
    (record,) = b.transaction_records(txn(change, relations=(doc,)))
    assert value(record)["payload"]["op"] == "u" and key(record)["payload"] == {"path": "/a"}
    assert value(record)["payload"]["after"] == {"path": "/a", "body": "new"}


def test_a_transaction_without_change_events_is_framed_with_event_count_zero():
    # PostgresStreamingChangeEventSource dispatches BEGIN and COMMIT for every transaction pgoutput
    # sends, so Debezium's transaction topic has BEGIN and END (event_count 0) for one whose changes
    # are all filtered out.
    other = Relation(16601, "audit", "log", "d", (Column(True, "id", 23, -1),))
    b = builder(**{"provide.transaction.metadata": "true"})
    begin, end = b.transaction_records(txn(Insert(other.oid, (b"1",)), relations=(other,)),
                                       include=lambda rel: rel.namespace == "public")
    assert [value(begin)["payload"]["status"], value(end)["payload"]["status"]] == ["BEGIN", "END"]
    assert value(end)["payload"]["event_count"] == 0 and value(end)["payload"]["data_collections"] == []


# -- property: replaying the records by (commit_lsn, order) rebuilds the table ---------------------
ITEMS = Relation(16900, "public", "items", "d", (Column(True, "id", 23, -1), Column(False, "qty", 23, -1)))
OPS = st.lists(st.lists(st.tuples(st.sampled_from(["insert", "update", "rekey", "delete"]), st.integers(0, 7),
                                  st.integers(0, 7), st.integers(0, 99)), min_size=1, max_size=6),
               min_size=1, max_size=8)


@settings(max_examples=100, deadline=None, database=None)
@given(OPS, st.booleans())
def test_replaying_records_in_commit_lsn_and_order_rebuilds_the_table(transactions, metadata):
    table: dict[int, int] = {}
    messages = [ITEMS]
    lsn = 100
    for number, ops in enumerate(transactions):
        messages.append(Begin(0, COMMIT_TS_US, 900 + number))
        for op, k, k2, qty in ops:
            if op == "insert" and k not in table:
                table[k] = qty
                messages.append(Insert(ITEMS.oid, (str(k).encode(), str(qty).encode())))
            elif op == "update" and k in table:
                table[k] = qty
                messages.append(Update(ITEMS.oid, None, None, (str(k).encode(), str(qty).encode())))
            elif op == "rekey" and k in table and k2 not in table:
                table[k2] = table.pop(k)
                messages.append(Update(ITEMS.oid, (str(k).encode(), None), "K",
                                       (str(k2).encode(), str(table[k2]).encode())))
            elif op == "delete" and k in table:
                del table[k]
                messages.append(Delete(ITEMS.oid, (str(k).encode(), None), "K"))
        lsn += 100
        messages.append(Commit(0, lsn - 8, lsn, COMMIT_TS_US))
    assembler, b = TransactionAssembler(), builder(**{"provide.transaction.metadata": str(metadata).lower()})
    records = []
    for i, m in enumerate(messages):
        for t in assembler.feed(m, i):
            records += b.transaction_records(t)
    records.reverse()   # arrival order must not matter: the headers order them
    records.sort(key=lambda r: (int(dict(r.headers)[COMMIT_LSN_HEADER]), int(dict(r.headers)[ORDER_HEADER])))
    replica: dict[int, int] = {}
    for r in records:
        if not r.topic.endswith(".items"):
            continue
        k = key(r)["payload"]["id"]
        doc = value(r)
        if doc is None or doc["payload"]["op"] == "d":
            replica.pop(k, None)
        else:
            replica[k] = doc["payload"]["after"]["qty"]
    assert replica == table
