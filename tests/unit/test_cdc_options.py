"""The postgres-cdc source's options (parsed once, a bad one named) and its offsets (JSON that
round-trips exactly, so Spark's checkpoint resumes where it stopped)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.errors import InvalidConfigError
from spark_source.postgres.capture import DONE, SNAPSHOT, STREAM, CdcOffset
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.snapshot import Position

pytestmark = pytest.mark.unit


def test_defaults_are_debeziums_where_it_has_one():
    o = CdcOptions.parse({})
    assert (o.hostname, o.port, o.user, o.dbname, o.topic_prefix) == ("localhost", 5432, "postgres", "postgres",
                                                                       "postgres")
    assert (o.slot_name, o.publication_name, o.publication_autocreate) == ("riverlog", "riverlog_publication",
                                                                           "all_tables")
    assert (o.snapshot_mode, o.slot_drop_on_stop, o.heartbeat_interval_ms) == ("initial", False, 10_000)
    assert (o.max_changes_per_trigger, o.snapshot_fetch_size) == (None, 10_000)
    assert o.envelope.modes.decimal_handling_mode == "precise" and o.envelope.schemas_enable


def test_the_dsn_names_the_database_and_the_topic_prefix_defaults_to_it():
    o = CdcOptions.parse({"dsn": "postgresql://app@db:5433/shop", "maxChangesPerTrigger": "500"})
    assert (o.dbname, o.topic_prefix, o.max_changes_per_trigger) == ("shop", "shop", 500)
    assert o.connect_kwargs() == {"dsn": "postgresql://app@db:5433/shop"}
    parts = CdcOptions.parse({"database.hostname": "h", "database.port": "6000", "database.user": "u",
                              "database.password": "p", "database.dbname": "d", "topic.prefix": "t"})
    assert parts.connect_kwargs() == {"host": "h", "port": 6000, "user": "u", "password": "p", "dbname": "d"}
    assert parts.envelope.topic_prefix == "t" and parts.envelope.database == "d"


@pytest.mark.parametrize("option, value, said", [
    ("snapshot.mode", "always", "initial, initial_only, no_data, when_needed"),
    ("publication.autocreate.mode", "some", "all_tables, filtered, disabled"),
    ("slot.name", "Has-Dash", "not a valid name"),
    ("heartbeat.interval.ms", "-1", "at least 0"),
    ("maxChangesPerTrigger", "lots", "must be an integer"),
    ("slot.drop.on.stop", "yes", "true or false"),
    ("table.include.list", "public.(", "not a regular expression"),
    ("decimal.handling.mode", "exact", "precise, double, string"),
    ("kafka.bootstrap.servers", "x", "unknown option"),
])
def test_a_bad_option_fails_naming_it(option, value, said):
    with pytest.raises(InvalidConfigError, match=said) as e:
        CdcOptions.parse({option: value})
    assert f"option '{option}'" in str(e.value)


def test_table_include_list_is_a_list_of_whole_match_regexes():
    o = CdcOptions.parse({"table.include.list": "public.orders, inventory\\..*"})
    assert o.includes("public", "orders") and o.includes("inventory", "stock")
    assert not o.includes("public", "orders_archive") and not o.includes("other", "orders")
    assert CdcOptions.parse({}).includes("any", "table")


def test_regex_lists_ignore_case_and_take_escaped_commas_as_debezium_does():
    # Debezium compiles them with CASE_INSENSITIVE and splits with RegExSplitter (\\, is a comma)
    o = CdcOptions.parse({"table.include.list": "Public.Customers"})
    assert o.includes("public", "customers") and o.includes("PUBLIC", "CUSTOMERS")
    o = CdcOptions.parse({"table.include.list": r"public\.t_\d{1\,2}, public\.x"})
    assert o.table_include == (r"public\.t_\d{1,2}", r"public\.x")
    assert o.includes("public", "t_12") and not o.includes("public", "t_123") and o.includes("public", "x")
    assert not CdcOptions.parse({"table.exclude.list": "PUBLIC.AUDIT"}).includes("public", "audit")
    from spark_source.postgres.cdc_config import CdcConfig
    from spark_source.postgres.logical_messages import wanted
    config = CdcConfig.from_options({"topic.prefix": "p", "message.prefix.include.list": r"App\.a{1\,3}"})
    assert wanted("app.aa", config.message_prefix_include_list, config.message_prefix_exclude_list)
    assert not wanted("app.aaaa", config.message_prefix_include_list, config.message_prefix_exclude_list)


_keys = st.none() | st.lists(st.text(max_size=5), min_size=1, max_size=3).map(tuple)


@given(st.sampled_from([SNAPSHOT, STREAM, DONE]), st.integers(0, 2**64 - 1), st.integers(0, 9), _keys,
       st.integers(0, 10**9), st.lists(st.text(min_size=1, max_size=8), max_size=4).map(tuple))
def test_offsets_round_trip_through_json(phase, lsn, table, after, rows, tables):
    offset = CdcOffset(phase, lsn, tables, Position(table, after), rows) if phase == SNAPSHOT else CdcOffset(phase, lsn)
    text = json.dumps(offset.to_json())
    assert CdcOffset.from_json(text) == offset
    assert CdcOffset.from_json(json.loads(text)).key == offset.key
