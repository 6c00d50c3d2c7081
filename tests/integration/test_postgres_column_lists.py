"""Debezium 2.7's schema and column filters and custom message keys, against a real embedded PostgreSQL:
PostgresConnectorIT.shouldTakeExcludeListFiltersIntoAccount / shouldTakeColumnIncludeListFilterIntoAccount
/ shouldRewriteIdentityKey, and PostgresSkipMessagesWithoutChangeConfigIT with its column lists."""
from __future__ import annotations

import json

import pytest

from spark_source.postgres.capture import Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from tests.postgres_fixture import stream_records

pytestmark = pytest.mark.integration


def _read(capture: Capture, done) -> list:
    """Snapshot then stream, each batch acknowledged, until ``done(records)``."""
    return stream_records(capture, capture.next_offset(CdcOffset("new", 0), None), done)


def _payload(record):
    return None if record.value is None else json.loads(record.value)["payload"]


def _fields(record, part: str = "after") -> list:
    fields = json.loads(record.value)["schema"]["fields"]
    return [f["field"] for f in next(f for f in fields if f["field"] == part)["fields"]]


def _key(record):
    return None if record.key is None else json.loads(record.key)["payload"]


def _topic(records, topic):
    return [r for r in records if r.topic == topic]


_SETUP = ("CREATE SCHEMA s1; CREATE SCHEMA s2;"
          "CREATE TABLE s1.a (pk SERIAL PRIMARY KEY, aa integer, bb integer);"
          "CREATE TABLE s1.b (pk SERIAL PRIMARY KEY, aa integer, bb integer);"
          "CREATE TABLE s2.a (pk SERIAL PRIMARY KEY, aa integer, bb integer);"
          "CREATE TABLE mark (id int PRIMARY KEY);"
          "INSERT INTO s1.a (aa, bb) VALUES (1, 1), (2, 2); INSERT INTO s1.b (aa, bb) VALUES (4, 4);"
          "INSERT INTO s2.a (aa, bb) VALUES (5, 5);")


def _marked(records) -> bool:
    return any(r.topic == "shop.public.mark" for r in records)


def _all(pg_db, lists: dict, statements: str, **options) -> list:
    """The snapshot, then ``statements`` and the stream up to an insert into ``mark``."""
    capture = Capture(CdcOptions.parse({**pg_db.options(snapshot_mode="initial", table_exclude_list=r".+\.b",
                                                        **options), **lists}))
    try:
        ran = []

        def done(got):
            if not ran and got and _payload(got[-1])["source"]["snapshot"] == "last":
                ran.append(pg_db.execute(statements + "; INSERT INTO mark VALUES (1)"))
            return _marked(got)
        return _read(capture, done)
    finally:
        capture.close()


_CHANGES = "INSERT INTO s1.a (aa, bb) VALUES (3, 3); UPDATE s1.a SET bb = 9 WHERE pk = 1; DELETE FROM s1.a WHERE pk = 2"


@pytest.mark.parametrize("lists", [
    {"column.exclude.list": r".+\.bb"},                            # shouldTakeExcludeListFiltersIntoAccount
    {"column.include.list": r"s1\.a\.pk, .+aa, S2\.A\.PK, public\..*"},   # ...ColumnIncludeListFilterIntoAccount
])
def test_column_lists_leave_columns_out_of_the_snapshot_and_the_stream(pg_db, lists):
    pg_db.execute(_SETUP)
    records = _all(pg_db, lists, _CHANGES + "; INSERT INTO s1.b (aa, bb) VALUES (6, 6)")
    assert not _topic(records, "shop.s1.b")
    s1a = [r for r in _topic(records, "shop.s1.a") if r.value is not None]
    assert [(_payload(r)["op"], _payload(r)["before"], _payload(r)["after"]) for r in s1a] == [
        ("r", None, {"pk": 1, "aa": 1}), ("r", None, {"pk": 2, "aa": 2}),
        ("c", None, {"pk": 3, "aa": 3}), ("u", None, {"pk": 1, "aa": 1}), ("d", {"pk": 2, "aa": None}, None)]
    for r in s1a + _topic(records, "shop.s2.a"):
        assert _fields(r, "before") == _fields(r, "after") == ["pk", "aa"], r
    assert _payload(_topic(records, "shop.s2.a")[0])["after"] == {"pk": 1, "aa": 5}


@pytest.mark.parametrize("schemas", [{"schema.exclude.list": "S2"}, {"schema.include.list": r"s1, pub.*"}])
def test_schema_lists_combine_with_the_table_lists(pg_db, schemas):
    # shouldTakeExcludeListFiltersIntoAccount: schema.exclude.list=s2 with table.exclude.list=.+b;
    # neither snapshotted nor streamed.
    pg_db.execute(_SETUP)
    records = _all(pg_db, schemas, "INSERT INTO s2.a (aa) VALUES (7); INSERT INTO s1.b (aa) VALUES (6);"
                                   "INSERT INTO s1.a (aa) VALUES (8)")
    assert sorted({r.topic for r in records}) == ["shop.public.mark", "shop.s1.a"]
    assert [_payload(r)["after"]["aa"] for r in _topic(records, "shop.s1.a")] == [1, 2, 8]


def test_the_key_keeps_a_column_the_value_leaves_out(pg_db):
    # TableSchemaBuilder.create builds the key from the unfiltered table.
    pg_db.execute(_SETUP)
    records = _all(pg_db, {"column.exclude.list": r"s1\.a\.pk"}, "DELETE FROM s1.a WHERE pk = 1")
    s1a = _topic(records, "shop.s1.a")
    assert [(_key(r), _payload(r) and _payload(r)["op"]) for r in s1a] == [
        ({"pk": 1}, "r"), ({"pk": 2}, "r"), ({"pk": 1}, "d"), ({"pk": 1}, None)]
    assert _payload(s1a[2])["before"] == {"aa": None, "bb": None}
    assert _fields(s1a[0]) == ["aa", "bb"]


def test_message_key_columns_rewrite_the_key_and_a_change_of_it_is_delete_and_create(pg_db):
    # shouldRewriteIdentityKey: s1.a keyed by {pk, aa}, s2.a by its primary key. An update of aa
    # changes the key: RelationalChangeRecordEmitter emits delete + tombstone + create (the old
    # values under REPLICA IDENTITY FULL).
    pg_db.execute(_SETUP + "; ALTER TABLE s1.a REPLICA IDENTITY FULL; ALTER TABLE s1.a ALTER COLUMN aa SET NOT NULL")
    records = _all(pg_db, {"message.key.columns": "(.*)1.a:pk,aa"},
                   "UPDATE s1.a SET aa = 7 WHERE pk = 1; UPDATE s1.a SET bb = 8 WHERE pk = 2")
    s1a, s2a = _topic(records, "shop.s1.a"), _topic(records, "shop.s2.a")
    assert [_key(r) for r in s2a] == [{"pk": 1}]
    assert [(_key(r), _payload(r) and _payload(r)["op"]) for r in s1a] == [
        ({"pk": 1, "aa": 1}, "r"), ({"pk": 2, "aa": 2}, "r"),
        ({"pk": 1, "aa": 1}, "d"), ({"pk": 1, "aa": 1}, None), ({"pk": 1, "aa": 7}, "c"),
        ({"pk": 2, "aa": 2}, "u")]
    key_schema = json.loads(s1a[0].key)["schema"]
    assert [(f["field"], f["optional"]) for f in key_schema["fields"]] == [("pk", False), ("aa", False)]
    assert key_schema["name"] == "shop.s1.a.Key"
    assert dict(s1a[4].headers)["__debezium.oldkey"] is not None


@pytest.mark.parametrize("lists, whites", [
    # shouldSkipEventsWithNoChangeInIncludedColumnsWhenSkipEnabled (and its exclude-list twin): an
    # update of the left-out column alone is not emitted under REPLICA IDENTITY FULL.
    ({"column.include.list": "public.debezium_test.id, public.debezium_test.white"}, [1, 2, 3]),
    ({"column.exclude.list": "public.debezium_test.black"}, [1, 2, 3]),
])
def test_skip_messages_without_change_compares_the_columns_the_lists_keep(pg_db, lists, whites):
    pg_db.execute("CREATE TABLE debezium_test (id int4 NOT NULL, white int, black int, PRIMARY KEY(id));"
                  "ALTER TABLE debezium_test REPLICA IDENTITY FULL; CREATE TABLE mark (id int PRIMARY KEY)")
    capture = Capture(CdcOptions.parse({**pg_db.options(snapshot_mode="no_data", skip_messages_without_change="true"),
                                        **lists}))
    try:
        records = []

        def done(got):
            if not records:
                records.append(pg_db.execute(
                    "INSERT INTO debezium_test (id,white,black) VALUES (1,1,1); UPDATE debezium_test SET black=2 "
                    "WHERE id = 1; UPDATE debezium_test SET white=2 WHERE id = 1; UPDATE debezium_test SET "
                    "white=3, black=3 WHERE id = 1; INSERT INTO mark VALUES (1)"))
            return _marked(got)
        got = _read(capture, done)
    finally:
        capture.close()
    changes = [_payload(r) for r in _topic(got, "shop.public.debezium_test")]
    assert [c["after"]["white"] for c in changes] == whites
    assert all("black" not in c["after"] for c in changes)


def test_the_options_are_checked_when_the_query_starts():
    from broker.errors import InvalidConfigError
    base = {"dsn": "dbname=shop", "topic.prefix": "shop"}
    for bad, option in [({"message.key.columns": "public.t"}, "message.key.columns"),
                        ({"message.key.columns": ""}, "message.key.columns"),
                        ({"column.include.list": "a", "column.exclude.list": "b"}, "column.exclude.list"),
                        ({"column.exclude.list": "a("}, "column.exclude.list"),
                        ({"schema.include.list": "a", "schema.exclude.list": "b"}, "schema.exclude.list")]:
        with pytest.raises(InvalidConfigError) as e:
            CdcOptions.parse({**base, **bad})
        assert e.value.details["config"] == option


def test_the_connector_takes_the_column_lists_and_message_key_columns():
    import connect.postgres_cdc_source  # noqa: F401  (registers the connector)
    from connect.errors import ConfigError
    from connect.plugins import check_connector_config
    config = {"connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1", "database.dbname": "shop",
              "topic.prefix": "shop", "slot.name": "shop", "column.exclude.list": "public.users.ssn",
              "message.key.columns": "public.orders:customer_id"}
    check_connector_config("shop-cdc", config)
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", {**config, "column.include.list": "public.users.id"})
    assert "column.exclude.list" in bad.value.details["errors"]
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", {**config, "schema.include.list": "public", "schema.exclude.list": "x"})
    assert "schema.exclude.list" in bad.value.details["errors"]
    assert check_connector_config("shop-cdc", {**config, "schema.include.list": "public"})["schema.include.list"]
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", {**config, "message.key.columns": "public.orders"})
    assert "message.key.columns" in bad.value.details["errors"]


def test_a_table_renamed_out_of_the_include_list_stops_streaming_and_one_renamed_into_it_starts(pg_db):
    # guard: Debezium filters each change by the table's name at the time (the Relation message's).
    pg_db.execute("CREATE TABLE test_table (pk serial PRIMARY KEY, text text);"
                  "CREATE TABLE other (pk serial PRIMARY KEY, text text); CREATE TABLE mark (id int PRIMARY KEY)")
    capture = Capture(CdcOptions.parse(pg_db.options(snapshot_mode="no_data",
                                                     table_include_list=r"public\.test_table, public\.mark")))
    try:
        ran = []

        def done(got):
            if not ran:
                ran.append(pg_db.execute(
                    "INSERT INTO test_table (text) VALUES ('kept'); ALTER TABLE test_table RENAME TO gone;"
                    "INSERT INTO gone (text) VALUES ('dropped'); ALTER TABLE other RENAME TO test_table;"
                    "INSERT INTO test_table (text) VALUES ('picked up'); INSERT INTO mark VALUES (1)"))
            return _marked(got)
        records = _read(capture, done)
    finally:
        capture.close()
    assert [(r.topic, _payload(r)["after"]["text"]) for r in records if r.topic != "shop.public.mark"] == [
        ("shop.public.test_table", "kept"), ("shop.public.test_table", "picked up")]


def test_masked_columns_take_asterisks_in_the_value_and_never_in_the_key(pg_db):
    # shouldConsumeEventsWithMaskedColumns (column.mask.with.5.chars=s2.a.bb): the snapshot's NULL,
    # inserts and both images of an update under FULL are "*****"; the field is marked masked. A
    # matched integer column keeps its values (MaskStrings masks CHAR/VARCHAR only) but is marked, a
    # domain over text is masked, and a masked key column stays itself in the key.
    pg_db.execute("CREATE SCHEMA s2; CREATE DOMAIN email AS text;"
                  "CREATE TABLE s2.a (pk SERIAL, aa integer, bb varchar(20), cc email, code char(3), PRIMARY KEY(code));"
                  "ALTER TABLE s2.a REPLICA IDENTITY FULL; CREATE TABLE mark (id int PRIMARY KEY);"
                  "INSERT INTO s2.a (aa, code) VALUES (1, 'k1')")
    records = _all(pg_db, {"column.mask.with.5.chars": r"s2\.a\.(bb|aa), .+\.cc", "column.mask.with.2.chars": ".+code"},
                   "INSERT INTO s2.a (aa, bb, cc, code) VALUES (1, 'test', 'x@y', 'k2');"
                   "UPDATE s2.a SET aa = 2, bb = 'hello' WHERE code = 'k2'")
    s2a = _topic(records, "shop.s2.a")
    assert [(_key(r), _payload(r)["op"], _payload(r)["before"], _payload(r)["after"]) for r in s2a] == [
        ({"code": "k1 "}, "r", None, {"pk": 1, "aa": 1, "bb": "*****", "cc": "*****", "code": "**"}),
        ({"code": "k2 "}, "c", None, {"pk": 2, "aa": 1, "bb": "*****", "cc": "*****", "code": "**"}),
        ({"code": "k2 "}, "u", {"pk": 2, "aa": 1, "bb": "*****", "cc": "*****", "code": "**"},
         {"pk": 2, "aa": 2, "bb": "*****", "cc": "*****", "code": "**"})]
    fields = {f["field"]: f for f in json.loads(s2a[0].value)["schema"]["fields"][1]["fields"]}
    assert {n: f.get("parameters") for n, f in fields.items()} == {
        "pk": None, "aa": {"masked": "true"}, "bb": {"masked": "true"}, "cc": {"masked": "true"},
        "code": {"masked": "true"}}
    assert "parameters" not in json.loads(s2a[0].key)["schema"]["fields"][0]


def test_the_connector_takes_column_masks_and_checks_them():
    import connect.postgres_cdc_source  # noqa: F401  (registers the connector)
    from connect.errors import ConfigError
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext
    from connect.plugins import check_connector_config
    from connect.postgres_cdc_source import PostgresCdcSource
    config = {"connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1", "database.dbname": "shop",
              "topic.prefix": "shop", "slot.name": "shop", "column.mask.with.5.chars": r"public\.users\.ssn"}
    check_connector_config("shop-cdc", config)
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", {**config, "column.mask.with.5.chars": "public.users.(ssn"})
    assert "column.mask.with.5.chars" in bad.value.details["errors"]
    source = PostgresCdcSource(parse_connector_config({"name": "shop-cdc", **config}), ConnectorContext(None, "x:1"))
    assert source.source_options()["column.mask.with.5.chars"] == r"public\.users\.ssn"
    assert source.options.envelope.columns.mask("public", "users", "ssn") == "*****"


def test_hash_truncate_and_propagate_mappers_on_snapshot_and_stream_rows(pg_db):
    # PostgresConnectorIT.shouldConsumeEventsWithMaskedHashedColumns (column.mask.hash.SHA-256.with.salt.
    # CzQMA0cB5K on bb varchar(20): the snapshot's NULL stays null, 'test' and 'hello' are Debezium's
    # pseudonyms cut to 20) and ...WithTruncatedColumns (column.truncate.to.3.chars: 'hel'), both images
    # of an update under FULL mapped; the key is not. The salt keeps its case as a connector's key does.
    # datatype.propagate.source.type names int4 columns INT4 (Debezium's JDBC snapshot says SERIAL for pk).
    pg_db.execute("CREATE SCHEMA s2; CREATE TABLE s2.a (pk SERIAL PRIMARY KEY, aa integer, bb varchar(20), cc text);"
                  "ALTER TABLE s2.a REPLICA IDENTITY FULL; CREATE TABLE mark (id int PRIMARY KEY);"
                  "INSERT INTO s2.a (aa, cc) VALUES (1, 'snapshot')")
    mappers = {"column.mask.hash.SHA-256.with.salt.CzQMA0cB5K": r"s2\.a\.bb", "column.truncate.to.3.chars": r".+\.cc",
               "datatype.propagate.source.type": r".+\.int4"}
    capture = Capture(CdcOptions.parse({**pg_db.options(snapshot_mode="initial"), **mappers}, names_keep_case=True))
    try:
        ran = []

        def done(got):
            if not ran and got and _payload(got[-1])["source"]["snapshot"] == "last":
                ran.append(pg_db.execute("INSERT INTO s2.a (aa, bb, cc) VALUES (1, 'test', 'hello');"
                                         "UPDATE s2.a SET aa = 2, bb = 'hello' WHERE pk = 2; INSERT INTO mark VALUES (1)"))
            return _marked(got)
        s2a = _topic(_read(capture, done), "shop.s2.a")
    finally:
        capture.close()
    test, hello = "8e68c68edbbac316dfe2", "b4d39ab0d198fb4cac8b"
    assert [(_key(r), _payload(r)["op"], _payload(r)["before"], _payload(r)["after"]) for r in s2a] == [
        ({"pk": 1}, "r", None, {"pk": 1, "aa": 1, "bb": None, "cc": "sna"}),
        ({"pk": 2}, "c", None, {"pk": 2, "aa": 1, "bb": test, "cc": "hel"}),
        ({"pk": 2}, "u", {"pk": 2, "aa": 1, "bb": test, "cc": "hel"}, {"pk": 2, "aa": 2, "bb": hello, "cc": "hel"})]
    int4 = {"__debezium.source.column.type": "INT4", "__debezium.source.column.length": "10",
            "__debezium.source.column.scale": "0"}
    for record in (s2a[0], s2a[1]):     # the snapshot's schema and the stream's
        fields = {f["field"]: f.get("parameters") for f in json.loads(record.value)["schema"]["fields"][1]["fields"]}
        assert fields == {"pk": {**int4, "__debezium.source.column.name": "pk"},
                          "aa": {**int4, "__debezium.source.column.name": "aa"}, "bb": {"masked": "true"},
                          "cc": {"truncateLength": "3"}}
