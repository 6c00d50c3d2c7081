"""Scenarios of Debezium 2.7's own PostgreSQL integration tests, run through the capture against a
real embedded PostgreSQL: LogicalDecodingMessageIT, TablesWithoutPrimaryKeyIT (streamed),
TransactionMetadataIT (and the schemas' versions), DomainTypesIT and the domain snapshots of
RecordsSnapshotProducerIT, RecordsStreamProducerIT's required-field fallbacks, truncates, column
changes and table renames, PostgresSkipMessagesWithoutChangeConfigIT, SnapshotWithOverridesProducerIT
and PostgresMoneyIT's override, and snapshot.mode=never."""
from __future__ import annotations

import base64
import json

import pytest

from spark_source.postgres.capture import Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from tests.postgres_fixture import stream_records

pytestmark = pytest.mark.integration


def _capture(db, **extra) -> Capture:
    return Capture(CdcOptions.parse(db.options(snapshot_mode="no_data", **extra)))


def _value(record):
    return None if record.value is None else json.loads(record.value)


def _payload(record):
    value = _value(record)
    return None if value is None else value["payload"]


def _key(record):
    return None if record.key is None else json.loads(record.key)


def _stream(capture: Capture, start: CdcOffset, done) -> list:
    """Records until ``done(records)`` holds (or ``done`` records came), each batch acknowledged."""
    return stream_records(capture, start, done)


def _messages(records) -> list:
    return [r for r in records if r.topic == "shop.message"]


def _emit_then_mark(db, *statements) -> None:
    """The statements, then an insert into ``mark`` that tells the reader everything before came."""
    for s in statements:
        db.execute(s)
    db.execute("INSERT INTO mark VALUES (1)")


def _until_mark(records) -> bool:
    return any(r.topic == "shop.public.mark" for r in records)


def test_logical_decoding_messages_take_debeziums_message_value_shape(pg_db):
    # LogicalDecodingMessageIT.shouldConsumeNonTransactionalLogicalDecodingMessages and
    # ...TransactionalLogicalDecodingMessages; PostgresSchemaFactory.logicalDecodingMessageMonitorValueSchema:
    # op, ts_ms, source, message (no ts_us / ts_ns), key {prefix}.
    pg_db.execute("CREATE TABLE mark (id int)")
    capture = _capture(pg_db)
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        _emit_then_mark(pg_db, "SELECT pg_logical_emit_message(false, 'foo', 'bar')",
                        r"SELECT pg_logical_emit_message(false, 'foo', E'bar'::bytea)",
                        "SELECT pg_logical_emit_message(true, 'txn_foo', 'txn_bar')")
        records = _stream(capture, start, _until_mark)
    finally:
        capture.close()
    messages = _messages(records)
    assert [_key(r)["payload"] for r in messages] == [{"prefix": "foo"}, {"prefix": "foo"}, {"prefix": "txn_foo"}]
    assert _key(messages[0])["schema"]["name"] == "io.debezium.connector.postgresql.MessageKey"
    for record, content, transactional in zip(messages, (b"bar", b"bar", b"txn_bar"), (False, False, True)):
        value = _value(record)
        assert value["schema"]["name"] == "io.debezium.connector.postgresql.MessageValue"
        assert [f["field"] for f in value["schema"]["fields"]] == ["op", "ts_ms", "source", "message"]
        payload = value["payload"]
        assert set(payload) == {"op", "ts_ms", "source", "message"}
        assert payload["op"] == "m" and payload["ts_ms"] is not None
        source = payload["source"]
        assert (source["schema"], source["table"]) == ("", "")
        assert source["lsn"] is not None and source["ts_ms"] is not None
        assert (source["txId"] is not None) is transactional
        assert payload["message"] == {"prefix": record and _key(record)["payload"]["prefix"],
                                      "content": base64.b64encode(content).decode()}


@pytest.mark.parametrize("option, value, expected", [
    ("message_prefix_exclude_list", ".*", []),
    ("message_prefix_exclude_list", "excluded_prefix, prefix:excluded",
     ["included_prefix", "prefix:included", "another_included"]),
    ("message_prefix_include_list", "included_prefix, prefix:included, ano.*er_included",
     ["included_prefix", "prefix:included", "another_included"]),
])
def test_logical_decoding_message_prefixes_are_chosen_by_the_lists(pg_db, option, value, expected):
    # LogicalDecodingMessageIT: ...WhenAllPrefixesAreInTheExcludedList, ...WithExcludedPrefixes,
    # shouldOnlyConsumeLogicalDecodingMessagesWithIncludedPrefixes.
    pg_db.execute("CREATE TABLE mark (id int)")
    capture = _capture(pg_db, **{option: value})
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        _emit_then_mark(pg_db, *(f"SELECT pg_logical_emit_message(false, '{p}', 'content')" for p in (
            "included_prefix", "excluded_prefix", "prefix:excluded", "prefix:included", "another_included")))
        records = _stream(capture, start, _until_mark)
    finally:
        capture.close()
    assert [_payload(r)["message"]["prefix"] for r in _messages(records)] == expected


def test_logical_decoding_message_content_follows_binary_handling_mode(pg_db):
    # LogicalDecodingMessageIT.shouldApplyBinaryHandlingMode (and the other modes of convertContent).
    pg_db.execute("CREATE TABLE mark (id int)")
    contents = {}
    for mode in ("base64", "hex", "base64-url-safe"):
        capture = _capture(pg_db, binary_handling_mode=mode, slot_name=f"s_{mode.replace('-', '_')}")
        try:
            start = capture.next_offset(CdcOffset("new", 0), None)
            _emit_then_mark(pg_db, "SELECT pg_logical_emit_message(false, 'foo', decode('74786e5f626172fbff', 'hex'))")
            record = _messages(_stream(capture, start, _until_mark))[0]
        finally:
            capture.close()
        block = {f["field"]: f for f in _value(record)["schema"]["fields"]}["message"]
        content_field = block["fields"][1]
        assert content_field["type"] == "string"
        contents[mode] = _payload(record)["message"]["content"]
    raw = b"txn_bar\xfb\xff"
    assert contents == {"base64": base64.b64encode(raw).decode(), "hex": raw.hex(),
                        "base64-url-safe": base64.urlsafe_b64encode(raw).decode()}


def test_tables_without_a_primary_key_created_while_streaming_are_keyed_as_debezium_keys_them(pg_db):
    # TablesWithoutPrimaryKeyIT.shouldProcessFromStreaming: a unique column keys t1; t2 has two unique
    # indexes and the first by name (t2_pk_key) keys it; t3 has no key, and under REPLICA IDENTITY FULL
    # its update and delete carry before images.
    pg_db.execute("CREATE TABLE other (id int PRIMARY KEY)")   # the source refuses a database without tables
    capture = _capture(pg_db)
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("CREATE SCHEMA nopk; CREATE TABLE nopk.t1 (pk INT UNIQUE, val INT);"
                      "CREATE TABLE nopk.t2 (pk INT UNIQUE, val INT UNIQUE); CREATE TABLE nopk.t3 (pk INT, val INT);"
                      "INSERT INTO nopk.t1 VALUES (1,10); INSERT INTO nopk.t2 VALUES (2,20);"
                      "INSERT INTO nopk.t3 VALUES (3,30)")
        pg_db.execute("ALTER TABLE nopk.t3 REPLICA IDENTITY FULL")
        pg_db.execute("UPDATE nopk.t3 SET val = 300 WHERE pk = 3")
        pg_db.execute("DELETE FROM nopk.t3")
        records = _stream(capture, start, 6)   # 3 inserts, the update, the delete and its tombstone
    finally:
        capture.close()
    by_topic = {}
    for r in records:
        by_topic.setdefault(r.topic, []).append(r)
    for table, pk in (("t1", 1), ("t2", 2)):
        key = _key(by_topic[f"shop.nopk.{table}"][0])
        assert [f["field"] for f in key["schema"]["fields"]] == ["pk"] and key["payload"] == {"pk": pk}
        assert key["schema"]["fields"][0]["optional"] is True    # a unique column may be NULL
    insert, update, delete, tombstone = by_topic["shop.nopk.t3"]
    assert [r.key for r in (insert, update, delete, tombstone)] == [None] * 4
    assert (_payload(update)["op"], _payload(update)["before"], _payload(update)["after"]) == (
        "u", {"pk": 3, "val": 30}, {"pk": 3, "val": 300})
    assert (_payload(delete)["op"], _payload(delete)["before"]) == ("d", {"pk": 3, "val": 300})
    assert tombstone.value is None


def test_transaction_metadata_of_one_transaction_over_two_schemas(pg_db):
    # TransactionMetadataIT.transactionMetadata: BEGIN, s1.a, s2.a, END with per-collection counts.
    pg_db.execute("CREATE SCHEMA s1; CREATE SCHEMA s2; CREATE TABLE s1.a (pk SERIAL PRIMARY KEY, aa integer);"
                  "CREATE TABLE s2.a (pk SERIAL PRIMARY KEY, aa integer, bb varchar(20))")
    capture = _capture(pg_db, provide_transaction_metadata="true")
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO s1.a (aa) VALUES (11); INSERT INTO s2.a (aa) VALUES (22);")
        records = _stream(capture, start, lambda got: any((_payload(r) or {}).get("status") == "END" and
                                                          _payload(r)["event_count"] for r in got))
    finally:
        capture.close()
    records = records[[i for i, r in enumerate(records) if (_payload(r) or {}).get("status") == "END"][-1] - 3:]
    begin, first, second, end = records
    assert [r.topic for r in records] == ["shop.transaction", "shop.s1.a", "shop.s2.a", "shop.transaction"]
    tx = _payload(begin)
    assert (tx["status"], tx["event_count"], _key(begin)["payload"]["id"]) == ("BEGIN", None, tx["id"])
    xid = tx["id"].split(":")[0]
    assert [(b["id"].split(":")[0], b["total_order"], b["data_collection_order"])
            for b in (_payload(first)["transaction"], _payload(second)["transaction"])] == [(xid, 1, 1), (xid, 2, 1)]
    done = _payload(end)
    assert (done["status"], done["id"].split(":")[0], done["event_count"]) == ("END", xid, 2)
    # SchemaFactory: the transaction schemas are version 1, data_collections' items "event.collection"
    # (optional); the change event's Envelope is Envelope.SCHEMA_VERSION 2, its Key/Value unversioned.
    value_schema, key_schema = _value(end)["schema"], _key(end)["schema"]
    assert (value_schema["name"], value_schema["version"]) == ("io.debezium.connector.common.TransactionMetadataValue", 1)
    assert (key_schema["name"], key_schema["version"]) == ("io.debezium.connector.common.TransactionMetadataKey", 1)
    items = {f["field"]: f for f in value_schema["fields"]}["data_collections"]["items"]
    assert (items["name"], items["version"], items["optional"]) == ("event.collection", 1, True)
    envelope = _value(first)["schema"]
    assert (envelope["name"], envelope["version"]) == ("shop.s1.a.Envelope", 2)
    assert "version" not in envelope["fields"][0] and "version" not in _key(first)["schema"]
    assert {c["data_collection"]: c["event_count"] for c in done["data_collections"]} == {"s1.a": 1, "s2.a": 1}


def test_a_domain_array_column_is_captured(pg_db):
    # DomainTypesIT.shouldNotChokeOnDomainTypeInArray: the stream does not stall on a domain array.
    pg_db.execute(r"CREATE DOMAIN nmtoken AS text CHECK (VALUE ~* '^[A-Z0-9\.\_\-\:]+$')")
    pg_db.execute("CREATE TABLE t1 (id serial PRIMARY KEY, token nmtoken, tokens nmtoken[])")
    capture = _capture(pg_db)
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("""INSERT INTO t1 (id, token, tokens) VALUES (default, 'foo', '{"bar","baz"}')""")
        records = _stream(capture, start, 1)
    finally:
        capture.close()
    assert _payload(records[0])["after"] == {"id": 1, "token": "foo", "tokens": ["bar", "baz"]}


@pytest.mark.parametrize("mode, expected", [
    ("string", {"n": "0.00", "nu": "0", "n8": "0.00000000", "m": "0.00", "hs": "{}", "hm": None,
                "iv": "P0Y0M0DT0H0M0S", "v": "", "j": ""}),
    ("double", {"n": 0.0, "nu": 0.0, "n8": 0.0, "m": 0.0, "hs": "{}", "hm": None, "iv": "P0Y0M0DT0H0M0S",
                "v": "", "j": ""}),
])
def test_a_deletes_before_fills_required_columns_with_debeziums_fallbacks(pg_db, mode, expected):
    # RecordsStreamProducerIT.shouldProcessNotNullColumnsFallbacksReplicaIdentity: a required field
    # whose value was not sent gets its converter's fallback (JdbcValueConverters.convertValue):
    # PostgresValueConverter.convertMoney "0.00" under decimal.handling.mode=string, toBigDecimal's
    # zero at the column's scale, convertHstoreToJsonString "{}", convertInterval's ISO zero.
    pg_db.execute("CREATE EXTENSION hstore")
    pg_db.execute("CREATE TABLE nn (pk int PRIMARY KEY, n numeric(6,2) NOT NULL, nu numeric NOT NULL, "
                  "n8 numeric(20,8) NOT NULL, m money NOT NULL, hs hstore NOT NULL, hm hstore, "
                  "iv interval NOT NULL, v varchar(5) NOT NULL, j json NOT NULL)")
    capture = _capture(pg_db, decimal_handling_mode=mode, interval_handling_mode="string")
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("""INSERT INTO nn VALUES (1, 1.5, 2.25, 3, 4.5, 'a=>1', 'b=>2', '1 day', 'x', '{}')""")
        pg_db.execute("DELETE FROM nn WHERE pk = 1")
        records = _stream(capture, start, 3)
    finally:
        capture.close()
    delete = _payload(records[1])
    assert delete["op"] == "d"
    assert delete["before"] == {"pk": 1, **expected}


def test_truncate_events_of_several_tables_take_debeziums_shape(pg_db):
    # RecordsStreamProducerIT.shouldProcessTruncateMessagesForMultipleTableTruncateStatement and
    # VerifyRecord.isValidTruncate: one "t" event per table, null key, no before/after, counted in
    # the transaction's metadata like any emitted event.
    pg_db.execute("CREATE TABLE test_table (pk serial PRIMARY KEY, text text)")
    pg_db.execute("CREATE TABLE test_table_2 (pk serial PRIMARY KEY, text text)")
    capture = _capture(pg_db, skipped_operations="none", provide_transaction_metadata="true",
                       tombstones_on_delete="false")
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO test_table (text) VALUES ('TRUNCATE TEST')")
        pg_db.execute("INSERT INTO test_table_2 (text) VALUES ('TRUNCATE TEST 2')")
        pg_db.execute("TRUNCATE TABLE public.test_table, public.test_table_2")
        records = _stream(capture, start, lambda got: sum((_payload(r) or {}).get("status") == "END"
                                                          for r in got) >= 3)
    finally:
        capture.close()
    truncates = [r for r in records if (_payload(r) or {}).get("op") == "t"]
    assert [r.topic for r in truncates] == ["shop.public.test_table", "shop.public.test_table_2"]
    for r in truncates:
        payload = _payload(r)
        assert r.key is None and payload["before"] is None and payload["after"] is None
        assert payload["source"]["table"] == r.topic.rsplit(".", 1)[1]
    assert [(b["total_order"], b["data_collection_order"]) for b in
            (_payload(r)["transaction"] for r in truncates)] == [(1, 1), (2, 1)]
    end = [_payload(r) for r in records if (_payload(r) or {}).get("status") == "END"][-1]
    assert end["event_count"] == 2
    assert {c["data_collection"]: c["event_count"] for c in end["data_collections"]} == {
        "public.test_table": 1, "public.test_table_2": 1}


def test_column_changes_mid_stream_under_replica_identity_full(pg_db):
    # RecordsStreamProducerIT.shouldReceiveChangesForUpdatesWithColumnChanges: an added, renamed,
    # dropped and retyped column, each seen by the next event (before images under FULL).
    pg_db.execute("CREATE TABLE test_table (pk serial PRIMARY KEY, text text)")
    pg_db.execute("INSERT INTO test_table (text) VALUES ('insert')")
    capture = _capture(pg_db)
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("ALTER TABLE test_table ADD COLUMN uvc VARCHAR(2); ALTER TABLE test_table REPLICA IDENTITY FULL;"
                      "UPDATE test_table SET uvc ='aa' WHERE pk = 1;")
        pg_db.execute("ALTER TABLE test_table RENAME COLUMN uvc to xvc; UPDATE test_table SET xvc ='bb' WHERE pk = 1;")
        pg_db.execute("ALTER TABLE test_table DROP COLUMN xvc; UPDATE test_table SET text ='update' WHERE pk = 1;")
        pg_db.execute("ALTER TABLE test_table ADD COLUMN modtype INTEGER; INSERT INTO test_table (pk,modtype) VALUES (2,1);")
        pg_db.execute("ALTER TABLE test_table ALTER COLUMN modtype TYPE SMALLINT; UPDATE test_table SET modtype = 2 WHERE pk = 2;")
        records = _stream(capture, start, 5)
    finally:
        capture.close()
    shapes = [(_payload(r)["op"], _payload(r)["before"], _payload(r)["after"]) for r in records]
    assert shapes == [
        ("u", {"pk": 1, "text": "insert", "uvc": None}, {"pk": 1, "text": "insert", "uvc": "aa"}),
        ("u", {"pk": 1, "text": "insert", "xvc": "aa"}, {"pk": 1, "text": "insert", "xvc": "bb"}),
        ("u", {"pk": 1, "text": "insert"}, {"pk": 1, "text": "update"}),
        ("c", None, {"pk": 2, "text": None, "modtype": 1}),
        ("u", {"pk": 2, "text": None, "modtype": 1}, {"pk": 2, "text": None, "modtype": 2})]
    modtype = [f for f in json.loads(records[4].value)["schema"]["fields"][1]["fields"] if f["field"] == "modtype"]
    assert modtype[0]["type"] == "int16"


def test_a_table_renamed_mid_stream_streams_to_its_new_topic(pg_db):
    # RecordsStreamProducerIT.shouldReceiveChangesForRenamedTable.
    pg_db.execute("CREATE TABLE test_table (pk serial PRIMARY KEY, text text)")
    capture = _capture(pg_db)
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO test_table (text) VALUES ('before')")
        pg_db.execute("ALTER TABLE test_table RENAME TO renamed_test_table")
        pg_db.execute("INSERT INTO renamed_test_table (text) VALUES ('new')")
        records = _stream(capture, start, 2)
    finally:
        capture.close()
    assert [(r.topic, _payload(r)["after"]["text"]) for r in records] == [
        ("shop.public.test_table", "before"), ("shop.public.renamed_test_table", "new")]


def test_debeziums_deprecated_snapshot_mode_never_streams_only(pg_db):
    # PostgresConnectorConfig.SnapshotMode.NEVER (deprecated in 2.7, NeverSnapshotter): no data
    # snapshot, streaming only, as no_data for PostgreSQL.
    pg_db.execute("CREATE TABLE a (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO a VALUES (1)")
    capture = Capture(CdcOptions.parse(pg_db.options(snapshot_mode="never")))
    try:
        assert capture.options.snapshot_mode == "no_data"
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO a VALUES (2)")
        records = _stream(capture, start, 1)
    finally:
        capture.close()
    assert [(_key(r)["payload"], _payload(r)["op"]) for r in records] == [({"id": 2}, "c")]


_DOMAIN_BASES = {"bit2": "bit(3)", "smallint2": "smallint", "integer2": "integer", "bigint2": "bigint", "real2": "real",
                 "bool2": "bool", "float82": "float8", "numeric2": "numeric(6,2)", "string2": "varchar(25)",
                 "date2": "date", "time2": "time", "timetz2": "timetz", "timestamp2": "timestamp",
                 "timestamptz2": "timestamptz", "box2": "box", "circle2": "circle", "interval2": "interval",
                 "line2": "line", "lseg2": "lseg", "path2": "path", "point2": "point", "polygon2": "polygon",
                 "char2": "char", "text2": "text", "json2": "json", "uuid2": "uuid",
                 "varbit2": "varbit(3)", "inet2": "inet", "cidr2": "cidr", "macaddr2": "macaddr"}
_DOMAIN_VALUES = ["B'101'", "1", "1", "1000", "3.14", "true", "3.14", "1234.12", "'hello'", "'2019-10-02'", "'01:02:03'",
                  "'01:02:03.123789Z'", "'2019-10-02T01:02:03.123456'", "'2019-10-02T13:51:30.123456+02:00'",
                  "'(0,0),(1,1)'", "'10,4,10'", "'1 year 2 months 3 days 4 hours 5 minutes 6 seconds'", "'(0,0),(0,1)'",
                  "'((0,0),(0,1))'", "'((0,0),(0,1),(0,2))'", "'(1,1)'", "'((0,0),(0,1),(1,0),(0,0))'", "'a'",
                  "'Hello World'", """'{"key": "value"}'""",
                  "'40e6215d-b5c6-4896-987c-f30f3678f608'", "B'101'", "'192.168.0.1'", "'192.168/24'",
                  "'08:00:2b:01:02:03'"]


@pytest.mark.parametrize("mode", ["double", "precise"])
def test_domains_snapshot_and_stream_like_their_base_types(pg_db, mode):
    # RecordsSnapshotProducerIT.shouldSnapshotDomainTypesLikeBaseTypes (and the streamed row, as
    # RecordsStreamProducerIT.shouldStreamValuesForAliasLikeBaseTypes): each NOT NULL domain column
    # has its base column's schema and value (xml left out: the embedded server has no libxml).
    for domain, base in _DOMAIN_BASES.items():
        pg_db.execute(f"CREATE DOMAIN {domain} AS {base}")
    columns = ", ".join(f"b_{d} {b} NOT NULL, a_{d} {d} NOT NULL" for d, b in _DOMAIN_BASES.items())
    pg_db.execute(f"CREATE TABLE alias_table (pk serial PRIMARY KEY, {columns})")
    names = ", ".join(f"b_{d}, a_{d}" for d in _DOMAIN_BASES)
    values = ", ".join(f"{v}, {v}" for v in _DOMAIN_VALUES)
    pg_db.execute(f"INSERT INTO alias_table ({names}) VALUES ({values})")
    capture = Capture(CdcOptions.parse(pg_db.options(decimal_handling_mode=mode)))
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        end = capture.next_offset(start, None)
        snapshot = [r for r, _ in capture.records(start, end)]
        pg_db.execute(f"INSERT INTO alias_table ({names}) VALUES ({values})")
        streamed = _stream(capture, end, 1)
    finally:
        capture.close()
    for record in (snapshot[0], streamed[0]):
        value = _value(record)
        fields = {f["field"]: f for f in value["schema"]["fields"][1]["fields"]}
        after = value["payload"]["after"]
        for domain in _DOMAIN_BASES:
            base, alias = fields[f"b_{domain}"], fields[f"a_{domain}"]
            assert {**alias, "field": None} == {**base, "field": None}, domain
            assert after[f"a_{domain}"] == after[f"b_{domain}"], domain
    assert _payload(snapshot[0])["after"] == {**_payload(streamed[0])["after"], "pk": 1}


@pytest.mark.parametrize("identity, skip, whites", [
    ("FULL", "true", [1, 2, 3]),       # shouldSkipEventsWithNoChangeInIncludedColumnsWhenSkipEnabled
    ("DEFAULT", "true", [1, 1, 2, 3]),  # ...WhenSkipEnabledButTableReplicaIdentityNotFull
    ("FULL", "false", [1, 1, 2, 3]),    # ...WhenSkipDisabled
])
def test_skip_messages_without_change(pg_db, identity, skip, whites):
    # PostgresSkipMessagesWithoutChangeConfigIT, without column.include.list (not supported): an
    # update that changes nothing (SET black = black) is the one left out under REPLICA IDENTITY FULL.
    pg_db.execute("CREATE TABLE debezium_test (id int4 NOT NULL, white int, black int, PRIMARY KEY(id))")
    pg_db.execute(f"ALTER TABLE debezium_test REPLICA IDENTITY {identity}")
    capture = _capture(pg_db, skip_messages_without_change=skip, provide_transaction_metadata="true")
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO debezium_test (id,white,black) VALUES (1,1,1)")
        pg_db.execute("UPDATE debezium_test SET black=black where id = 1")
        pg_db.execute("UPDATE debezium_test SET white=2 where id = 1")
        pg_db.execute("UPDATE debezium_test SET white=3, black=3 where id = 1")
        records = _stream(capture, start, lambda got: sum((_payload(r) or {}).get("status") == "END"
                                                          for r in got) >= 4)
    finally:
        capture.close()
    changes = [_payload(r) for r in records if r.topic == "shop.public.debezium_test"]
    assert [c["after"]["white"] for c in changes] == whites
    ends = [_payload(r)["event_count"] for r in records if (_payload(r) or {}).get("status") == "END"]
    assert ends == ([1, 0, 1, 1] if len(whites) == 3 else [1, 1, 1, 1])


def test_the_connector_takes_skip_messages_without_change_and_snapshot_mode_never():
    import connect.postgres_cdc_source  # noqa: F401  (registers the connector)
    from connect.errors import ConfigError
    from connect.plugins import check_connector_config
    config = {"connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1", "database.dbname": "shop",
              "topic.prefix": "shop", "slot.name": "shop", "snapshot.mode": "never",
              "skip.messages.without.change": "true"}
    check_connector_config("shop-cdc", config)
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", {**config, "skip.messages.without.change": "maybe"})
    assert "skip.messages.without.change" in bad.value.details["errors"]


def _snapshot_only(db, **options) -> list:
    capture = Capture(CdcOptions.parse({**db.options(snapshot_mode="initial_only"), **options}))
    records, start = [], capture.next_offset(CdcOffset("new", 0), None)
    try:
        while start.phase == "snapshot":
            end = capture.next_offset(start, 2)    # two rows a chunk: the override is paged by key
            records.extend(r for r, _ in capture.records(start, end))
            start = end
    finally:
        capture.close()
    return records


def test_snapshot_select_statement_overrides_choose_the_snapshotted_rows(pg_db):
    # SnapshotWithOverridesProducerIT: over.t1 read through its SELECT, over.t2 whole; then
    # ...Multiple... with both overridden.
    pg_db.execute("CREATE SCHEMA over; CREATE TABLE over.t1 (pk INT, PRIMARY KEY(pk));"
                  "CREATE TABLE over.t2 (pk INT, PRIMARY KEY(pk));"
                  "INSERT INTO over.t1 VALUES (1), (2), (3), (101), (102), (103);"
                  "INSERT INTO over.t2 VALUES (1), (2), (3), (101), (102), (103)")
    one = _snapshot_only(pg_db, **{"snapshot.select.statement.overrides": "over.t1",
                                   "snapshot.select.statement.overrides.over.t1": "SELECT * FROM over.t1 WHERE pk > 100"})
    assert [(r.topic, _key(r)["payload"]["pk"]) for r in one] == [
        ("shop.over.t1", 101), ("shop.over.t1", 102), ("shop.over.t1", 103)] + [("shop.over.t2", k) for k in (1, 2, 3, 101, 102, 103)]
    assert _payload(one[-1])["source"]["snapshot"] == "last"
    both = _snapshot_only(pg_db, **{"snapshot.select.statement.overrides": "over.t1, Over.T2",
                                    "snapshot.select.statement.overrides.over.t1": "SELECT * FROM over.t1 WHERE pk > 101",
                                    "snapshot.select.statement.overrides.over.t2": "SELECT * FROM over.t2 WHERE pk > 100;"})
    assert [(r.topic, _key(r)["payload"]["pk"]) for r in both] == [
        ("shop.over.t1", 102), ("shop.over.t1", 103), ("shop.over.t2", 101), ("shop.over.t2", 102), ("shop.over.t2", 103)]


@pytest.mark.parametrize("mode, zero", [("string", "0.00"), ("double", 0.0)])
def test_an_override_leaving_a_required_money_null_gives_debeziums_fallback(pg_db, mode, zero):
    # PostgresMoneyIT.shouldReceiveCorrectDefaultValueForHandlingMode (DBZ-8027): "SELECT id, null AS m"
    # over a NOT NULL money column; and a column the SELECT leaves out is null the same way.
    pg_db.execute("CREATE TABLE debezium_test (id int PRIMARY KEY, m money NOT NULL, note text)")
    pg_db.execute("INSERT INTO debezium_test VALUES (10, '3.14'::money, 'x')")
    records = _snapshot_only(pg_db, **{"decimal.handling.mode": mode,
        "snapshot.select.statement.overrides": "public.debezium_test",
        "snapshot.select.statement.overrides.public.debezium_test": "SELECT id, null AS m FROM public.debezium_test"})
    assert [_payload(r)["after"] for r in records] == [{"id": 10, "m": zero, "note": None}]


def test_snapshot_select_statement_overrides_must_name_their_statements(pg_db):
    from broker.errors import InvalidConfigError
    with pytest.raises(InvalidConfigError, match=r"snapshot\.select\.statement\.overrides\.public\.a \(its SELECT\)"):
        CdcOptions.parse(pg_db.options(snapshot_select_statement_overrides="public.a"))
    with pytest.raises(InvalidConfigError, match="not listed"):
        CdcOptions.parse({**pg_db.options(), "snapshot.select.statement.overrides.public.a": "SELECT 1"})
