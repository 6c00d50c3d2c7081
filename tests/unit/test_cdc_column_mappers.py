"""Debezium's column mappers: column.truncate.to.<N>.chars (TruncateColumn), column.mask.hash[.v2].
<algorithm>.with.salt.<salt> (MaskStrings with a hash) and their order with column.mask.with.<N>.chars
(ColumnMappers.create / mapperFor). Expected pseudonyms are derived here with hashlib from the rules
Debezium's MaskStrings states (salt, then ObjectOutputStream's bytes for V1 or the value's bytes for
V2, lower-case hex), and checked against the values Debezium's own tests assert."""
from __future__ import annotations

import base64
import hashlib
import json
import struct

import pytest

from spark_source.postgres.column_masks import java_serialized, pseudonym, truncate_text
from spark_source.postgres.envelope import CdcConfig, EnvelopeBuilder
from spark_source.postgres.pgoutput import UNCHANGED_TOAST, Begin, Column, Commit, Insert, Relation, Update
from spark_source.postgres.transactions import TransactionAssembler
from spark_source.postgres.type_modes import CdcConfigError

pytestmark = pytest.mark.unit

SALT = "CzQMA0cB5K"       # PostgresConnectorIT.shouldConsumeEventsWithMaskedHashedColumns
T = Relation(16390, "s2", "a", "d", (
    Column(True, "pk", 23, -1), Column(False, "bb", 1043, 24), Column(False, "cc", 25, -1),
    Column(False, "code", 1042, 7), Column(False, "n", 23, -1), Column(False, "blob", 17, -1),
    Column(False, "at", 1184, -1), Column(False, "short", 1043, 6)))
#   pk int4, bb varchar(20), cc text, code char(3), n int4, blob bytea, at timestamptz, short varchar(2)
ROW = (b"1", b"hello", "Grüße, 😀!".encode(), b"k1 ", b"12345", b"\\x0001020304", b"2024-01-02 03:04:05.123456+00",
       b"ab")


def _v1(value: str, salt: str, algorithm: str = "sha256") -> str:
    """MaskStrings V1 by hand: salt + ObjectOutputStream.writeObject(String) (header AC ED 00 05,
    TC_STRING 0x74, u2 length, modified UTF-8; ASCII here) as lower-case hex."""
    data = value.encode("ascii")
    return hashlib.new(algorithm, salt.encode() + b"\xac\xed\x00\x05\x74" + struct.pack(">H", len(data)) + data).hexdigest()


def _v2(value: str, salt: str, algorithm: str = "sha256") -> str:
    return hashlib.new(algorithm, (salt + value).encode("utf-8")).hexdigest()


def _builder(**options) -> EnvelopeBuilder:
    config = CdcConfig.from_options({"topic.prefix": "shop", "database.dbname": "shop", **options})
    return EnvelopeBuilder(config, now_us=lambda: 1_700_000_000_000_000)


def _txn(*changes):
    a = TransactionAssembler()
    a.feed(T, 1)
    a.feed(Begin(900, 1_700_000_000_000_000, 7), 100)
    for i, change in enumerate(changes):
        a.feed(change, 101 + i)
    (t,) = a.feed(Commit(0, 890, 900, 1_700_000_000_000_000), 890)
    return t


def _after(record, part="after") -> dict:
    return json.loads(record.value)["payload"][part]


def _fields(record) -> dict:
    return {f["field"]: f for f in json.loads(record.value)["schema"]["fields"][1]["fields"]}


def test_pseudonyms_equal_debeziums_for_v1_and_v2():
    # MaskStringsTest's vectors (salt "salt") and PostgresConnectorIT's (bb varchar(20) / varchar(255))
    assert pseudonym("hello", "SHA-256", b"salt", 1) == _v1("hello", "salt") == \
        "af5843a0f0e728ab0332c8888b6e1190bfb79e584f0d40538de8f10df6ef29c6"
    assert pseudonym("world", "MD5", b"salt", 1) == _v1("world", "salt", "md5") == "030f632140d9c9591b0d8c21098024b8"
    assert pseudonym("hello", "sha-256", b"salt", 2) == _v2("hello", "salt") == \
        "cd31b3b98ece60cb739c0bf770b2de892ae0ad133f645513c3d83f08757a843a"
    assert pseudonym("world", "md5", b"salt", 2) == _v2("world", "salt", "md5") == "172c8e95398cc72ab5358ead6981e7e5"
    assert pseudonym("test", "SHA-256", SALT.encode(), 1)[:20] == "8e68c68edbbac316dfe2"
    assert pseudonym("hello", "SHA256", SALT.encode(), 1) == \
        "b4d39ab0d198fb4cac8b2f023da74f670bcaf192dcc79b5d6361b7ae6b2fafdf"


def test_v1_hashes_javas_serialized_form_with_modified_utf8():
    # ObjectOutputStream: U+0000 is C0 80, é its UTF-8, an emoji two surrogates of 3 bytes each
    assert java_serialized("a\x00é😀").hex() == "aced0005" + "74" + "000b" + "61" + "c080" + "c3a9" + "eda0bd" + "edb880"
    long = "x" * 70_000      # past 65535 bytes: TC_LONGSTRING and an 8-byte length
    assert java_serialized(long)[:13] == b"\xac\xed\x00\x05\x7c" + struct.pack(">q", 70_000)
    assert pseudonym("é", "SHA-1", b"s", 2) == hashlib.sha1("sé".encode()).hexdigest()


def test_truncation_counts_utf16_units_as_javas_substring():
    assert truncate_text("a😀b", 3) == "a😀"
    assert truncate_text("a😀b", 2) == "a\ud83d"         # the high half stays, as substring(0, 2) leaves it
    assert truncate_text("hello", 3) == "hel"
    assert truncate_text("hé", 5) == "hé"


def test_truncate_cuts_strings_and_byte_arrays_and_marks_the_fields_it_may_cut():
    # PostgresConnectorIT.shouldConsumeEventsWithTruncatedColumns (truncate.to.3 on varchar): "hel";
    # TruncateColumn also cuts any String value (text, a timestamptz's ISO text) and a ByteBuffer
    # (bytea under binary.handling.mode=bytes), and marks every column whose length is above 3 —
    # an int4 (pgjdbc's 10) keeps its value but is marked, a varchar(2) is not touched.
    b = _builder(**{"column.truncate.to.3.chars": r"s2\.a\..*"})
    snap = b.snapshot_record(T, ROW, 500, 0)
    after = _after(snap)
    assert after == {"pk": 1, "bb": "hel", "cc": "Grü", "code": "k1 ", "n": 12345,
                     "blob": base64.b64encode(b"\x00\x01\x02").decode(), "at": "202", "short": "ab"}
    params = {n: f.get("parameters") for n, f in _fields(snap).items()}
    assert params == {"pk": {"truncateLength": "3"}, "bb": {"truncateLength": "3"}, "cc": {"truncateLength": "3"},
                      "code": None, "n": {"truncateLength": "3"}, "blob": {"truncateLength": "3"},
                      "at": {"truncateLength": "3"}, "short": None}
    assert json.loads(snap.key)["payload"] == {"pk": 1}        # the key is never mapped
    assert "parameters" not in json.loads(snap.key)["schema"]["fields"][0]
    hex_mode = _builder(**{"column.truncate.to.3.chars": r"s2\.a\.blob", "binary.handling.mode": "hex"})
    assert _after(hex_mode.snapshot_record(T, ROW, 500, 0))["blob"] == "000"     # a String there


def test_truncation_inside_a_surrogate_pair_is_written_as_jacksons_escape():
    b = _builder(**{"column.truncate.to.8.chars": r"s2\.a\.cc"})
    record = b.snapshot_record(T, ROW, 500, 0)
    assert b'"cc":"Gr\xc3\xbc\xc3\x9fe, \\uD83D"' in record.value
    assert _after(record)["cc"] == "Grüße, \ud83d"


def test_hash_masks_text_columns_cut_to_their_length_and_keeps_null():
    b = _builder(**{f"column.mask.hash.SHA-256.with.salt.{SALT}": r"s2\.a\.(bb|cc|code|n)"})
    insert = b.transaction_records(_txn(Insert(T.oid, ROW)))[0]
    after = _after(insert)
    assert after["bb"] == _v1("hello", SALT)[:20]           # varchar(20)
    assert after["cc"] == pseudonym("Grüße, 😀!", "SHA-256", SALT.encode(), 1)   # text: the whole digest
    assert after["code"] == _v1("k1 ", SALT)[:3]             # char(3), padded value hashed
    assert after["n"] == 12345                               # an int4 keeps its value, but is marked
    assert {n: f.get("parameters") for n, f in _fields(insert).items() if f.get("parameters")} == {
        "bb": {"masked": "true"}, "cc": {"masked": "true"}, "code": {"masked": "true"}, "n": {"masked": "true"}}
    nulls = (b"2", None, None, b"k2 ", None, None, None, None)
    toast = (b"2", b"new", UNCHANGED_TOAST, b"k2 ", b"1", None, None, None)
    update = b.transaction_records(_txn(Insert(T.oid, nulls), Update(T.oid, None, None, toast)))
    assert (_after(update[0])["bb"], _after(update[0])["cc"]) == (None, None)
    assert _after(update[1])["cc"] == _v1("__debezium_unavailable_value", SALT)     # the placeholder is hashed


def test_v2_hashes_the_values_utf8():
    b = _builder(**{"column.mask.hash.v2.SHA-512.with.salt.pepper": r"s2\.a\.cc"})
    assert _after(b.snapshot_record(T, ROW, 500, 0))["cc"] == hashlib.sha512(("pepper" + "Grüße, 😀!").encode()).hexdigest()


def test_one_mapper_per_column_truncations_then_masks_then_v1_then_v2_hashes():
    # ColumnMappers.create registers truncate, mask.with, hash, hash v2 rules in that order and
    # mapperFor takes the first that matches, whatever the option names say.
    b = _builder(**{"column.mask.hash.v2.MD5.with.salt.1": ".*", "column.mask.hash.MD5.with.salt.1": r".*\.(bb|cc|code)",
                    "column.mask.with.4.chars": r".*\.(bb|cc)", "column.truncate.to.2.chars": r".*\.bb"})
    after = _after(b.snapshot_record(T, ROW, 500, 0))
    assert (after["bb"], after["cc"], after["code"]) == ("he", "****", _v1("k1 ", "1", "md5")[:3])
    assert after["short"] == _v2("ab", "1", "md5")[:2]
    assert _fields(b.snapshot_record(T, ROW, 500, 1))["bb"]["parameters"] == {"truncateLength": "2"}


@pytest.mark.parametrize("key, value, why", [
    ("column.mask.hash.MD2.with.salt.x", ".*", "not a hash algorithm"),
    ("column.mask.hash.SHA-999.with.salt.x", ".*", "not a hash algorithm"),
    ("column.truncate.to.2147483648.chars", ".*", "larger than"),
    ("column.mask.with.99999999999.chars", ".*", "larger than"),
    ("column.truncate.to.3.chars", "s2.(a", "not a regular expression"),
    ("column.mask.hash.v2.SHA-256.with.salt.x", "s2.(a", "not a regular expression"),
])
def test_a_bad_mapper_option_is_refused_naming_it(key, value, why):
    with pytest.raises(CdcConfigError) as e:
        _builder(**{key: value})
    assert e.value.details["option"] == key
    assert why in str(e.value)


def test_spark_lowercases_option_names_so_a_salt_with_letters_is_refused_there():
    from broker.errors import InvalidConfigError
    from spark_source.postgres.options import CdcOptions
    base = {"dsn": "dbname=shop", "topic.prefix": "shop"}
    key = f"column.mask.hash.SHA-256.with.salt.{SALT}"
    with pytest.raises(InvalidConfigError) as e:
        CdcOptions.parse({**base, key.lower(): r"s2\.a\.bb"})
    assert e.value.details["config"] == key.lower()
    spark = CdcOptions.parse({**base, "column.mask.hash.sha-256.with.salt.0042#": r"s2\.a\.bb"})
    assert spark.envelope.columns.mappers[0].salt == b"0042#"
    connect = CdcOptions.parse({**base, key: r"s2\.a\.bb"}, names_keep_case=True)     # keys keep their case
    assert connect.envelope.columns.mappers[0].salt == SALT.encode()
    shouty = CdcOptions.parse({**base, "COLUMN.TRUNCATE.TO.3.CHARS": ".*"})     # names are read in any case
    assert [(m.kind, m.size) for m in shouty.envelope.columns.mappers] == [("truncate", 3)]
    with pytest.raises(InvalidConfigError) as e:     # an empty salt is no mapper option: unknown, named
        CdcOptions.parse({**base, "column.mask.hash.sha-256.with.salt.": r"s2\.a\.bb"})
    assert e.value.details["config"] == "column.mask.hash.sha-256.with.salt."


def test_the_connector_takes_the_mappers_and_keeps_the_salts_case():
    import connect.postgres_cdc_source  # noqa: F401  (registers the connector)
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext
    from connect.errors import ConfigError
    from connect.plugins import check_connector_config
    from connect.postgres_cdc_source import PostgresCdcSource
    key = f"column.mask.hash.SHA-256.with.salt.{SALT}"
    config = {"connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1", "database.dbname": "shop",
              "topic.prefix": "shop", "slot.name": "shop", key: r"s2\.a\.bb", "column.truncate.to.3.chars": ".*cc"}
    check_connector_config("shop-cdc", config)
    for bad in ({"column.mask.hash.MD2.with.salt.x": ".*"}, {"column.truncate.to.x.chars": ".*"}):
        with pytest.raises(ConfigError) as refused:
            check_connector_config("shop-cdc", {**config, **bad})
        assert list(bad) == [k for k in refused.value.details["errors"]]
    source = PostgresCdcSource(parse_connector_config({"name": "shop-cdc", **config}), ConnectorContext(None, "x:1"))
    assert source.source_options()[key] == r"s2\.a\.bb"
    assert [(m.kind, m.salt, m.size) for m in source.options.envelope.columns.mappers] == [
        ("truncate", b"", 3), ("hash", SALT.encode(), 0)]


def test_an_enum_column_is_masked_as_a_varchar():
    # Debezium's TypeRegistry.SqlTypeMapper maps an enum (typtype 'e') to Types.VARCHAR, so MaskStrings
    # masks it, with asterisks or a pseudonym; a domain over it too (its root type is the enum).
    from spark_source.postgres.type_registry import PgType, TypeRegistry
    registry = TypeRegistry((PgType(16500, "mood", "e", labels=("sad", "ok")), PgType(16510, "feeling", "d", base=16500)))
    moods = Relation(16520, "public", "moods", "d", (Column(True, "id", 23, -1), Column(False, "m", 16500, -1),
                                                      Column(False, "f", 16510, -1)))
    for options, expected in [({"column.mask.with.3.chars": r".*\.(m|f)"}, ("***", "***")),
                              ({"column.mask.hash.v2.SHA-1.with.salt.9": r".*\.(m|f)"},
                               (hashlib.sha1(b"9ok").hexdigest(), hashlib.sha1(b"9sad").hexdigest()))]:
        config = CdcConfig.from_options({"topic.prefix": "shop", "database.dbname": "shop", **options})
        record = EnvelopeBuilder(config, now_us=lambda: 0, types=registry).snapshot_record(moods, (b"1", b"ok", b"sad"), 5, 0)
        assert (_after(record)["m"], _after(record)["f"]) == expected
        schema = _fields(record)["m"]
        assert (schema["name"], schema["parameters"]) == ("io.debezium.data.Enum", {"allowed": "sad,ok", "masked": "true"})
