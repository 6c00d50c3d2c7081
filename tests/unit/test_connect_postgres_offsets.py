"""PostgresCdcSource's pure parts: the postgres-cdc offset of a batch as Debezium's source offset,
the stored offset found again and handed back as ``startingOffsets``, and a Debezium config
checked by the source's own option parsing (bad values refused per field at POST)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connect.postgres_cdc_source import debezium_offset, stored_offset
from spark_source.postgres.capture import STREAM, CdcOffset
from spark_source.postgres.options import _starting_offset

pytestmark = pytest.mark.unit


def test_each_phase_maps_to_debeziums_offset_shape():
    snap = {"phase": "snapshot", "lsn": 100, "tables": ["public.c"], "table": 0, "after": ["5"], "rows": 5}
    assert debezium_offset(snap) == {"lsn": 100, "snapshot": True, "last_snapshot_record": False}
    assert debezium_offset({"phase": "done", "lsn": 100}) == \
        {"lsn": 100, "snapshot": True, "last_snapshot_record": True}
    assert debezium_offset({"phase": "stream", "lsn": 900, "txId": 771, "ts_usec": 1_700_000_000_000_000}) == \
        {"lsn": 900, "lsn_commit": 900, "lsn_proc": 900, "txId": 771, "ts_usec": 1_700_000_000_000_000}
    assert debezium_offset({"phase": "stream", "lsn": 100}) == {"lsn": 100, "lsn_commit": 100, "lsn_proc": 100}


@given(lsn=st.integers(0, 2**63 - 1), xid=st.none() | st.integers(1, 2**32 - 1),
       ts=st.none() | st.integers(0, 2**62))
def test_a_stream_offset_survives_spark_connect_offsets_and_startingOffsets(lsn, xid, ts):
    spark_json = json.loads(json.dumps(CdcOffset(STREAM, lsn, xid=xid, ts_us=ts).to_json()))
    assert CdcOffset.from_json(spark_json) == CdcOffset(STREAM, lsn, xid=xid, ts_us=ts)
    stored = [({"server": "other"}, {"lsn": 1}), ({"server": "shop"}, debezium_offset(spark_json))]
    back = _starting_offset(json.dumps(stored_offset(stored, "shop")))
    assert back["lsn"] == lsn and back.get("txId") == xid and back.get("ts_usec") == ts


def test_stored_offset_takes_the_servers_latest_and_ignores_tombstones():
    assert stored_offset([], "shop") is None
    assert stored_offset([({"server": "shop"}, None)], "shop") is None
    assert stored_offset([({"server": "shop"}, {"lsn": 5}), ({"server": "x"}, {"lsn": 9})], "shop") == {"lsn": 5}


def test_startingOffsets_accepts_debeziums_lsn_spellings_and_refuses_others():
    from broker.errors import InvalidConfigError
    from spark_source.postgres.options import CdcOptions
    assert CdcOptions.parse({}).starting_offset is None
    assert CdcOptions.parse({"startingOffsets": "earliest"}).starting_offset is None
    assert CdcOptions.parse({"startingOffsets": '{"lsn": "24023128"}'}).starting_offset == {"lsn": 24023128}
    assert CdcOptions.parse({"startingOffsets": '{"lsn": "0/16B3748"}'}).starting_offset == {"lsn": 0x16B3748}
    for bad in ('{"txId": 1}', "latest", '{"lsn": "x"}'):
        with pytest.raises(InvalidConfigError, match="startingOffsets"):
            CdcOptions.parse({"startingOffsets": bad})


def test_table_exclude_list_leaves_tables_out_and_not_together_with_include():
    from broker.errors import InvalidConfigError
    from spark_source.postgres.options import CdcOptions
    o = CdcOptions.parse({"table.exclude.list": r"public\.audit.*"})
    assert o.includes("public", "customers") and not o.includes("public", "audit_log")
    with pytest.raises(InvalidConfigError, match="table.exclude.list"):
        CdcOptions.parse({"table.include.list": "public.a", "table.exclude.list": "public.b"})


def _shop(**extra) -> dict:
    return {"connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1", "database.dbname": "shop",
            "topic.prefix": "shop", "table.include.list": "public.customers", "slot.name": "shop",
            "publication.autocreate.mode": "filtered", "snapshot.mode": "initial", **extra}


def test_a_debezium_config_is_checked_per_field_by_the_sources_parser():
    import connect.postgres_cdc_source  # noqa: F401  (registers the connector)
    from connect.errors import ConfigError
    from connect.plugins import check_connector_config
    assert check_connector_config("shop-cdc", _shop())["connector.class"] == "PostgresCdcSource"
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", _shop(**{"snapshot.mode": "always", "plugin.name": "wal2json",
                                                    "slot.name": "Bad-Name", "database.port": "x",
                                                    "decimal.handling.mode": "float"}))
    errors = bad.value.details["errors"]
    assert {"snapshot.mode", "plugin.name", "slot.name", "database.port", "decimal.handling.mode"} <= set(errors)
    assert "initial" in errors["snapshot.mode"][0] and "pgoutput" in errors["plugin.name"][0]


def test_debezium_keys_the_connector_does_not_implement_are_refused_per_field():
    import connect.postgres_cdc_source  # noqa: F401  (registers the connector)
    from connect.config import validate
    from connect.errors import ConfigError
    from connect.plugins import check_connector_config
    refused = {"include.unknown.datatypes": "true", "database.include.list": "inventory",
               "heartbeat.topics.prefix": "hb", "schema.name.adjustment.mode": "avro",
               "database.sslmode": "require", "table.includ.list": "public.c", "dsn": "postgresql://x/shop",
               "maxChangesPerTrigger": "5", "errors.max.retries": "0", "sanitize.field.names": "true"}
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", _shop(**refused))
    errors = bad.value.details["errors"]
    assert set(refused) <= set(errors)
    assert "not supported" in errors["include.unknown.datatypes"][0]
    assert "max.batch.size" in errors["maxChangesPerTrigger"][0]
    infos = validate({"name": "shop-cdc", **_shop(**{"include.unknown.datatypes": "true"})})
    (column,) = [c for c in infos.configs if c.value.name == "include.unknown.datatypes"]
    assert column.value.errors and infos.error_count == 1
    # Connect's own keys stay the worker's
    own = {"key.converter": "JsonConverter", "key.converter.schemas.enable": "false", "transforms": "route",
           "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
           "transforms.route.regex": "(.*)", "transforms.route.replacement": "$1", "errors.tolerance": "none",
           "errors.log.enable": "true", "topic.creation.default.partitions": "1",
           "topic.creation.default.replication.factor": "-1", "producer.override.linger.ms": "5", "tasks.max": "1"}
    assert check_connector_config("shop-cdc", _shop(**own))["connector.class"] == "PostgresCdcSource"


def test_snapshot_select_statement_overrides_are_taken_and_checked_together():
    """Debezium's ``snapshot.select.statement.overrides`` and its per-table statements are passed
    to format("postgres-cdc"); a listed table without a statement, or a statement for a table not
    listed, is refused at validation, per field."""
    import connect.postgres_cdc_source  # noqa: F401  (registers the connector)
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext
    from connect.errors import ConfigError
    from connect.plugins import check_connector_config
    from connect.postgres_cdc_source import PostgresCdcSource
    key = "snapshot.select.statement.overrides"
    good = _shop(**{key: "public.customers", f"{key}.public.customers": "SELECT * FROM public.customers WHERE id > 1"})
    assert check_connector_config("shop-cdc", good)["connector.class"] == "PostgresCdcSource"
    source = PostgresCdcSource(parse_connector_config({"name": "shop-cdc", **good}), ConnectorContext(None, "127.0.0.1:1"))
    options = source.source_options()
    assert options[key] == "public.customers"
    assert options[f"{key}.public.customers"] == "SELECT * FROM public.customers WHERE id > 1"
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", _shop(**{key: "public.customers"}))
    assert "is listed but" in bad.value.details["errors"][key][0]
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", _shop(**{f"{key}.public.orders": "SELECT 1"}))
    assert "not listed" in bad.value.details["errors"][f"{key}.public.orders"][0]


def test_converters_schemas_enable_decide_the_envelope():
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext
    from connect.postgres_cdc_source import PostgresCdcSource

    def options(**extra):
        config = parse_connector_config({"name": "shop-cdc", **_shop(**extra)})
        return PostgresCdcSource(config, ConnectorContext(None, "127.0.0.1:1")).source_options()

    assert options()["schemas.enable"] == "true"
    off = {"key.converter": "JsonConverter", "value.converter": "org.apache.kafka.connect.json.JsonConverter",
           "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"}
    got = options(**off)
    assert got["schemas.enable"] == "false" and got["slot.name"] == "shop" and "plugin.name" not in got
    assert options(**{"value.converter": "ByteArrayConverter", "max.batch.size": "50"})["maxChangesPerTrigger"] == "50"
    assert PostgresCdcSource.class_name == "io.debezium.connector.postgresql.PostgresConnector"


def test_a_debezium_offset_inside_a_transaction_begun_before_the_previous_commit_repeats_nothing():
    """Concurrent writers: T2 wrote a row at 100, T1 committed at 150 (end 160), T2 wrote at 180
    and committed (end 210). Debezium emitted T1, then T2's row at 100, and stored that event with
    lsn_commit 160 > lsn_proc 100. WalPositionLocator skips T1 and T2's row at 100; resuming at the
    event's LSN instead would have the server send T1 again."""
    from spark_source.postgres.debezium_offset import resumed, stored_commit_and_event
    from spark_source.postgres.pgoutput import Column, Insert, Relation
    from spark_source.postgres.transactions import Change, Transaction
    stored = {"lsn": 100, "lsn_proc": 100, "lsn_commit": 160, "txId": 2, "ts_usec": 5, "messageType": "INSERT"}
    commit, event = stored_commit_and_event(stored, 100)
    assert (commit, event) == (160, 100)
    relation = Relation(16384, "public", "t", "d", (Column(True, "id", 23, -1),))
    t2 = Transaction(2, 200, 210, 5, [Change(relation, i, lsn, Insert(16384, (str(i).encode(),)), 2)
                                      for i, lsn in enumerate((100, 180))])
    left = resumed(CdcOffset(STREAM, commit, xid=2, ts_us=5, event_lsn=event), [t2])
    assert [[c.lsn for c in t.changes] for t in left] == [[180]]


def test_a_debezium_offset_stored_after_a_begin_before_the_previous_commit_skips_that_commit():
    """The same T1 and T2, stored after T2's BEGIN (transaction metadata): a BEGIN's LSN is its
    transaction's first record, 100. T2 is sent again whole, T1 (committed at 160) is not."""
    from spark_source.postgres.debezium_offset import stored_commit_and_event
    begun = {"lsn": 100, "lsn_proc": 100, "lsn_commit": 160, "txId": 2, "messageType": "BEGIN"}
    assert stored_commit_and_event(begun, 100) == (160, None)
    assert stored_commit_and_event({**begun, "lsn": 170, "lsn_proc": 170}, 170) == (170, None)


def test_the_spill_options_reach_the_source_and_a_bad_one_is_refused_at_create():
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext
    from connect.errors import ConfigError
    from connect.plugins import check_connector_config
    from connect.postgres_cdc_source import PostgresCdcSource
    given = _shop(**{"transaction.spill.threshold.bytes": "4096", "transaction.spill.dir": "/tmp/spill"})
    check_connector_config("shop-cdc", given)
    options = PostgresCdcSource(parse_connector_config({"name": "shop-cdc", **given}),
                                ConnectorContext(None, "127.0.0.1:1")).source_options()
    assert (options["transaction.spill.threshold.bytes"], options["transaction.spill.dir"]) == ("4096", "/tmp/spill")
    with pytest.raises(ConfigError) as bad:
        check_connector_config("shop-cdc", _shop(**{"transaction.spill.threshold.bytes": "lots"}))
    assert "transaction.spill.threshold.bytes" in bad.value.details["errors"]
