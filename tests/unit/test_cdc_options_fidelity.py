"""The envelope options as Debezium's PostgreSQL connector (2.7) reads and applies them:
``skipped.operations`` filters a primary-key change's delete and create by their own operations
(``EventDispatcher``), a delete's tombstone keeps its headers, enumerated modes are read in any case
(``…HandlingMode.parse``), ``none`` stands alone and ``topic.prefix`` holds topic characters only
(``CommonConnectorConfig.validateSkippedOperation`` / ``validateTopicName``)."""
from __future__ import annotations

import json

import pytest

from broker.errors import InvalidConfigError
from spark_source.postgres.envelope import CdcConfig, EnvelopeBuilder
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.pgoutput import Begin, Column, Commit, Relation, Update
from spark_source.postgres.transactions import TransactionAssembler

pytestmark = pytest.mark.unit

T = Relation(16390, "public", "t", "d", (Column(True, "id", 23, -1), Column(False, "v", 23, -1)))


def _key_change(**options) -> list:
    """``UPDATE t SET id = 2 WHERE id = 1`` under REPLICA IDENTITY DEFAULT, as records."""
    builder = EnvelopeBuilder(CdcConfig.from_options({"topic.prefix": "shop", **options}), now_us=lambda: 0)
    builder.table(T, not_null=("id",))
    a = TransactionAssembler()
    a.feed(T, 1)
    a.feed(Begin(200, 0, 7), 100)
    a.feed(Update(T.oid, (b"1", None), "K", (b"2", b"5")), 120)
    (txn,) = a.feed(Commit(0, 192, 200, 0), 192)
    return builder.transaction_records(txn)


def _shape(records) -> list:
    return [(json.loads(r.key)["payload"]["id"], None if r.value is None else json.loads(r.value)["payload"]["op"])
            for r in records]


@pytest.mark.parametrize("skipped, expected", [
    # RelationalChangeRecordEmitter.emitUpdateAsPrimaryKeyChangeRecord emits DELETE then CREATE, and
    # EventDispatcher's streaming receiver drops a record whose own operation is skipped.
    ("u", [(1, "d"), (1, None), (2, "c")]),
    ("d", [(2, "c")]),
    ("c", [(1, "d"), (1, None)]),
    ("none", [(1, "d"), (1, None), (2, "c")]),
    ("c,d", []),
])
def test_a_primary_key_change_is_skipped_as_the_delete_and_create_it_is(skipped, expected):
    assert _shape(_key_change(**{"skipped.operations": skipped})) == expected


def test_the_tombstone_of_a_key_change_carries_the_deletes_newkey_header():
    # EventDispatcher builds the tombstone with record.newRecord(..., record.headers()).
    delete, tombstone, _create = _key_change()
    assert tombstone.value is None
    assert dict(tombstone.headers)["__debezium.newkey"] == dict(delete.headers)["__debezium.newkey"]
    assert json.loads(dict(tombstone.headers)["__debezium.newkey"])["payload"] == {"id": 2}


@pytest.mark.parametrize("option, value, parsed", [
    ("binary.handling.mode", "HEX", "hex"),
    ("binary.handling.mode", " Base64-URL-Safe ", "base64-url-safe"),
    ("interval.handling.mode", "String", "string"),
    ("hstore.handling.mode", "MAP", "map"),
    ("decimal.handling.mode", "DOUBLE", "double"),
    ("time.precision.mode", "Connect", "connect"),
])
def test_modes_are_read_in_any_case_as_debeziums_parse(option, value, parsed):
    modes = CdcOptions.parse({option: value}).envelope.modes
    assert getattr(modes, option.replace(".", "_")) == parsed


@pytest.mark.parametrize("options, said", [
    ({"skipped.operations": "none,c"}, "'none' cannot be specified with other"),
    ({"skipped.operations": "c,x"}, "allowed: r, c, u, d, t, none"),
    ({"topic.prefix": "my shop"}, "only the underscore, hyphen, dot and alphanumeric"),
    ({"topic.prefix": "shop/eu"}, "invalid format"),
])
def test_values_debezium_refuses_are_refused_naming_the_option(options, said):
    with pytest.raises(InvalidConfigError) as e:
        CdcOptions.parse(options)
    assert said in str(e.value) and next(iter(options)) in str(e.value)


def test_skipped_none_alone_skips_nothing_and_a_valid_prefix_is_kept():
    o = CdcOptions.parse({"skipped.operations": " none ", "topic.prefix": "eu-1.shop_v2"})
    assert o.envelope.skipped_operations == frozenset() and o.envelope.topic_prefix == "eu-1.shop_v2"


@pytest.mark.parametrize("option, pattern, table, captured", [
    # java.util.regex with CASE_INSENSITIVE alone: ASCII case folding, ASCII \w \d \s.
    ("table.include.list", r"public\.\w+", "café", False),
    ("table.exclude.list", r"public\.\w+", "café", True),
    ("table.exclude.list", r"public\.café", "CAFÉ", True),
    ("table.include.list", r"public\.t\d", "t١", False),
    ("table.include.list", r"PUBLIC\.Orders_\d+", "orders_2024", True),
    ("table.exclude.list", r"PUBLIC\.CAFÉ", "cafÉ", False),
])
def test_table_lists_match_as_javas_regexes_do(option, pattern, table, captured):
    assert CdcOptions.parse({option: pattern}).includes("public", table) is captured


def test_skipped_read_operations_are_accepted_and_skip_no_snapshot_row():
    # CommonConnectorConfig.validateSkippedOperation takes r (reads) as well as c, u, d, t; only
    # EventDispatcher.dispatchDataChangeEvent filters, and snapshot rows are dispatched unfiltered.
    o = CdcOptions.parse({"skipped.operations": "r,u", "topic.prefix": "shop"})
    assert o.envelope.skipped_operations == frozenset({"r", "u"})
    builder = EnvelopeBuilder(o.envelope, now_us=lambda: 0)
    builder.table(T, not_null=("id",))
    record = builder.snapshot_record(T, (b"1", b"5"), 100, 0)
    assert json.loads(record.value)["payload"]["op"] == "r"
    assert _shape(_key_change(**{"skipped.operations": "r"})) == [(1, "d"), (1, None), (2, "c")]
