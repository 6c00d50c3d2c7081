"""Serdes on the Python side: Kafka's exact bytes, round trips, malformed input, lookup by name."""
from __future__ import annotations

import datetime
import math
import pickle
import struct
import uuid

import pytest
from hypothesis import given, strategies as st

from broker.errors import InvalidConfigError
from streams.serdes import Serdes, SerializationError, serde_of
from streams.serdes_json import _java_double

pytestmark = pytest.mark.unit

ALL = [Serdes.Bytes(), Serdes.ByteArray(), Serdes.String(), Serdes.Long(), Serdes.Integer(), Serdes.Short(),
       Serdes.Double(), Serdes.Float(), Serdes.Boolean(), Serdes.UUID(), Serdes.Void(), Serdes.Json(),
       Serdes.Json("a INT, b STRING"), Serdes.Struct("a INT, b STRING")]


@pytest.mark.parametrize("serde, value, hex_bytes", [
    (Serdes.Long(), 1, "0000000000000001"),
    (Serdes.Long(), -1, "ffffffffffffffff"),
    (Serdes.Long(), -2**63, "8000000000000000"),
    (Serdes.Long(), 2**63 - 1, "7fffffffffffffff"),
    (Serdes.Integer(), 1, "00000001"),
    (Serdes.Integer(), -2, "fffffffe"),
    (Serdes.Integer(), -2**31, "80000000"),
    (Serdes.Short(), 258, "0102"),
    (Serdes.Short(), -1, "ffff"),
    (Serdes.Double(), 1.0, "3ff0000000000000"),
    (Serdes.Double(), -0.0, "8000000000000000"),
    (Serdes.Double(), math.inf, "7ff0000000000000"),
    (Serdes.Double(), 5e-324, "0000000000000001"),
    (Serdes.Float(), 1.0, "3f800000"),
    (Serdes.Float(), -2.5, "c0200000"),
    (Serdes.Boolean(), True, "01"),
    (Serdes.Boolean(), False, "00"),
    (Serdes.String(), "héllo", "68c3a96c6c6f"),
    (Serdes.UUID(), uuid.UUID("123e4567-e89b-12d3-a456-426614174000"),
     b"123e4567-e89b-12d3-a456-426614174000".hex()),
    (Serdes.Bytes(), b"\x00\xff", "00ff"),
])
def test_kafka_bytes(serde, value, hex_bytes):
    assert serde.serialize(value).hex() == hex_bytes
    assert serde.deserialize(bytes.fromhex(hex_bytes)) == value


def test_nan_is_written_as_javas_canonical_nan_and_read_back():
    payload_nan = struct.unpack(">d", bytes.fromhex("7ff8000000000123"))[0]
    assert Serdes.Double().serialize(payload_nan).hex() == "7ff8000000000000"
    assert Serdes.Float().serialize(math.nan).hex() == "7fc00000"
    assert math.isnan(Serdes.Double().deserialize(bytes.fromhex("fff8000000000001")))


def test_float_rounds_to_nearest_float_and_overflows_to_infinity_as_java_casts():
    assert Serdes.Float().deserialize(Serdes.Float().serialize(0.1)) == struct.unpack(">f", struct.pack(">f", 0.1))[0]
    assert Serdes.Float().serialize(1e40).hex() == "7f800000"


@pytest.mark.parametrize("serde", ALL, ids=lambda s: s.name)
def test_null_stays_null(serde):
    assert serde.serialize(None) is None
    assert serde.deserialize(None) is None


@pytest.mark.parametrize("serde", ALL, ids=lambda s: s.name)
def test_serdes_are_values(serde):
    assert pickle.loads(pickle.dumps(serde)) == serde
    assert hash(pickle.loads(pickle.dumps(serde))) == hash(serde)
    assert serde.name and serde.spark_type() is not None


def test_names_for_describe():
    assert Serdes.Json("user STRING, amount DOUBLE").name == "Json<struct<user:string,amount:double>>"
    assert Serdes.Struct("a INT").name == "Struct<struct<a:int>>"
    assert Serdes.Json("a INT") != Serdes.Json("a BIGINT")
    assert Serdes.Bytes() != Serdes.ByteArray()


@pytest.mark.parametrize("serde, data, expected", [
    (Serdes.Long(), b"\x00" * 7,
     "Long serde: Size of data received by LongDeserializer is not 8 (got 7 bytes) (topic 'orders')"),
    (Serdes.Integer(), b"\x00" * 5,
     "Integer serde: Size of data received by IntegerDeserializer is not 4 (got 5 bytes) (topic 'orders')"),
    (Serdes.Short(), b"",
     "Short serde: Size of data received by ShortDeserializer is not 2 (got 0 bytes) (topic 'orders')"),
    (Serdes.Double(), b"\x00" * 4,
     "Double serde: Size of data received by Deserializer is not 8 (got 4 bytes) (topic 'orders')"),
    (Serdes.Float(), b"\x00" * 8,
     "Float serde: Size of data received by Deserializer is not 4 (got 8 bytes) (topic 'orders')"),
    (Serdes.Boolean(), b"\x02", "Boolean serde: Unexpected byte received by BooleanDeserializer: 2 (topic 'orders')"),
    (Serdes.Boolean(), b"\x00\x01",
     "Boolean serde: Size of data received by BooleanDeserializer is not 1 (got 2 bytes) (topic 'orders')"),
    (Serdes.UUID(), b"not-a-uuid", "UUID serde: 'not-a-uuid' is not a UUID (8-4-4-4-12 hex digits) (topic 'orders')"),
    (Serdes.Void(), b"x", "Void serde: expected null, got 1 bytes (topic 'orders')"),
])
def test_malformed_bytes_raise_a_typed_error_naming_serde_topic_and_length(serde, data, expected):
    with pytest.raises(SerializationError) as e:
        serde.deserialize(data, topic="orders")
    assert str(e.value) == expected
    assert e.value.code == 1210 and not e.value.retriable
    assert e.value.details["serde"] == serde.name and e.value.details["topic"] == "orders"


@pytest.mark.parametrize("serde, value", [
    (Serdes.Long(), 2**63), (Serdes.Integer(), 2**31), (Serdes.Short(), -2**15 - 1), (Serdes.Long(), "1"),
    (Serdes.Long(), True), (Serdes.Double(), "1.0"), (Serdes.Boolean(), 1), (Serdes.String(), b"x"),
    (Serdes.String(), "\ud800"), (Serdes.UUID(), "xyz"), (Serdes.Void(), 0), (Serdes.Bytes(), "x"),
    (Serdes.Json(), math.nan), (Serdes.Json(), {1, 2}), (Serdes.Json("a INT"), {"a": "1"}),
    (Serdes.Json("a INT"), {"a": 2**31}), (Serdes.Json("a INT"), [1]), (Serdes.Struct("a INT"), {"a": "x"}),
    (Serdes.Struct("a INT"), 5),
])
def test_values_of_the_wrong_type_raise(serde, value):
    with pytest.raises(SerializationError, match=f"^{serde.name}"):
        serde.serialize(value)


def test_string_decodes_malformed_utf8_to_replacement_characters_as_java_does():
    assert Serdes.String().deserialize(b"a\xffb\xe2\x82") == "a\ufffdb\ufffd"


def test_uuid_accepts_strings_and_upper_case_and_writes_lower_case():
    u = "123E4567-E89B-12D3-A456-426614174000"
    assert Serdes.UUID().serialize(u) == u.lower().encode()
    assert Serdes.UUID().deserialize(u.encode()) == uuid.UUID(u)


# ---------------------------------------------------------------------------------------- JSON
ORDER = Serdes.Json("user STRING, amount DOUBLE, n INT, ok BOOLEAN, f FLOAT, tags ARRAY<BIGINT>, "
                    "attrs MAP<STRING, STRING>, addr STRUCT<city: STRING, zip: INT>")


@pytest.mark.parametrize("text, expected", [
    ('{"user":"a","amount":120}', {"user": "a", "amount": 120.0}),
    ('{"amount":"NaN"}', {"amount": math.nan}),
    ('{"amount":"-INF"}', {"amount": -math.inf}),
    ('{"amount":-Infinity}', {"amount": -math.inf}),
    ('{"amount":1e400,"f":1e40}', {"amount": math.inf, "f": math.inf}),
    ('{"user":5}', {"user": "5"}),
    ('{"user":1e10}', {"user": "1.0E10"}),
    ('{"user":{"b":[1,2.5,true,null,"x"]}}', {"user": '{"b":[1,2.5,true,null,"x"]}'}),
    ('{"n":1,"n":2,"other":3}', {"n": 2}),
    ('{"tags":[1,null],"attrs":{"k":"v"},"addr":{"city":"Zürich"}}',
     {"tags": [1, None], "attrs": {"k": "v"}, "addr": {"city": "Zürich", "zip": None}}),
    ('{"n":1}garbage', {"n": 1}),
    ('{"A":1}', {}),
])
def test_json_with_a_schema_reads_as_sparks_from_json(text, expected):
    full = {f: None for f in ORDER.schema.fieldNames()} | expected
    got = ORDER.deserialize(text.encode())
    assert got.keys() == full.keys()
    for k in full:
        assert got[k] == full[k] or (isinstance(full[k], float) and math.isnan(full[k]) and math.isnan(got[k]))


@pytest.mark.parametrize("text", ['{"n":"5"}', '{"n":1.0}', '{"n":true}', '{"n":3000000000}', '{"ok":1}',
                                  '{"amount":"5"}', '{"amount":"INF"}', '{"amount":true}', '{"addr":5}',
                                  '{"tags":{}}', '{"tags":["1"]}', 'null', '5', '[{"n":1}]', '{"n":1',
                                  'not json', "{'n':1}"])
def test_json_records_spark_fails_on_in_failfast_mode_raise(text):
    with pytest.raises(SerializationError, match="^Json<"):
        ORDER.deserialize(text.encode(), topic="t")


def test_json_blank_text_is_null_as_in_spark():
    assert ORDER.deserialize(b"") is None and ORDER.deserialize(b"  ") is None


def test_json_writes_fields_in_schema_order_with_nulls_and_java_number_text():
    data = ORDER.serialize({"amount": 1e10, "user": "é", "f": 0.1, "n": 3, "extra": 1,
                            "addr": {"city": "x", "zip": 1}})
    assert data == ('{"user":"é","amount":1.0E10,"n":3,"ok":null,"f":0.1,"tags":null,"attrs":null,'
                    '"addr":{"city":"x","zip":1}}').encode()
    assert ORDER.serialize({"amount": math.nan}).startswith(b'{"user":null,"amount":"NaN"')


def test_json_without_a_schema_is_any_json_value():
    j = Serdes.Json()
    assert j.serialize({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert j.deserialize(b" [1, 2.5] ") == [1, 2.5]
    with pytest.raises(SerializationError):
        j.deserialize(b"{")


def test_json_schema_errors_name_the_problem():
    with pytest.raises(InvalidConfigError, match="ts: type timestamp is not supported"):
        Serdes.Json("ts TIMESTAMP")
    with pytest.raises(InvalidConfigError, match="map keys must be STRING"):
        Serdes.Json("m MAP<INT, STRING>")
    with pytest.raises(InvalidConfigError, match="not a valid Spark DDL schema"):
        Serdes.Json("a INT,, b")


def test_ddl_parser():
    from pyspark.sql import types as T
    schema = Serdes.Struct("`my field` INT NOT NULL COMMENT 'x', d DECIMAL(10, 2), "
                           "s STRUCT<a: ARRAY<MAP<STRING, BIGINT>>, `b`: TIMESTAMP>").schema
    assert schema == T.StructType([
        T.StructField("my field", T.IntegerType(), False), T.StructField("d", T.DecimalType(10, 2)),
        T.StructField("s", T.StructType([T.StructField("a", T.ArrayType(T.MapType(T.StringType(), T.LongType()))),
                                         T.StructField("b", T.TimestampType())]))])


@pytest.mark.parametrize("x, text", [(1.0, "1.0"), (1e10, "1.0E10"), (1e7, "1.0E7"), (9999999.0, "9999999.0"),
                                     (0.001, "0.001"), (1e-4, "1.0E-4"), (-0.0, "-0.0"), (123.456, "123.456"),
                                     (1.7976931348623157e308, "1.7976931348623157E308")])
def test_java_double_text(x, text):
    assert _java_double(x) == text


# -------------------------------------------------------------------------------------- Struct
def test_struct_is_an_arrow_stream_of_one_row():
    import pyarrow as pa
    serde = Serdes.Struct("id BIGINT, name STRING, at TIMESTAMP, raw BINARY")
    value = {"id": 7, "name": "é", "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),
             "raw": b"\x00"}
    data = serde.serialize(value)
    table = pa.ipc.open_stream(data).read_all()
    assert table.num_rows == 1 and table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert serde.deserialize(data) == value


def test_struct_refuses_another_schema_or_garbage():
    data = Serdes.Struct("id BIGINT").serialize({"id": 1})
    with pytest.raises(SerializationError, match="its schema is"):
        Serdes.Struct("id INT").deserialize(data, topic="t")
    with pytest.raises(SerializationError, match="not an Arrow stream"):
        Serdes.Struct("id INT").deserialize(b"garbage")


# --------------------------------------------------------------------------------- round trips
ROUND_TRIPS = [
    (Serdes.Long(), st.integers(-2**63, 2**63 - 1)),
    (Serdes.Integer(), st.integers(-2**31, 2**31 - 1)),
    (Serdes.Short(), st.integers(-2**15, 2**15 - 1)),
    (Serdes.Double(), st.floats()),
    (Serdes.Float(), st.floats(width=32)),
    (Serdes.Boolean(), st.booleans()),
    (Serdes.String(), st.text()),
    (Serdes.UUID(), st.uuids()),
    (Serdes.Bytes(), st.binary()),
    (Serdes.ByteArray(), st.binary()),
    (Serdes.Void(), st.none()),
    (Serdes.Json(), st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
                                 lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(), kids, max_size=3),
                                 max_leaves=10)),
    (ORDER, st.fixed_dictionaries({
        "user": st.none() | st.text(), "amount": st.none() | st.floats(), "n": st.none() | st.integers(-2**31, 2**31 - 1),
        "ok": st.none() | st.booleans(), "f": st.none() | st.floats(width=32),
        "tags": st.none() | st.lists(st.none() | st.integers(-2**63, 2**63 - 1), max_size=3),
        "attrs": st.none() | st.dictionaries(st.text(), st.none() | st.text(), max_size=3),
        "addr": st.none() | st.fixed_dictionaries({"city": st.none() | st.text(),
                                                   "zip": st.none() | st.integers(-2**31, 2**31 - 1)})})),
    (Serdes.Struct("a BIGINT, b STRING, c DOUBLE, d ARRAY<INT>, e BINARY"), st.fixed_dictionaries({
        "a": st.none() | st.integers(-2**63, 2**63 - 1), "b": st.none() | st.text(), "c": st.none() | st.floats(),
        "d": st.none() | st.lists(st.none() | st.integers(-2**31, 2**31 - 1), max_size=3),
        "e": st.none() | st.binary()})),
]


def same(a, b) -> bool:
    """Equality where NaN equals NaN (and -0.0 is told from 0.0), through dicts and lists."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("serde, values", ROUND_TRIPS, ids=[s.name for s, _ in ROUND_TRIPS])
@given(data=st.data())
def test_round_trip(serde, values, data):
    value = data.draw(values)
    assert same(serde.deserialize(serde.serialize(value)), value)


@pytest.mark.parametrize("serde", [s for s in ALL if s.name not in ("Void",)], ids=lambda s: s.name)
@given(data=st.binary(max_size=12))
def test_arbitrary_bytes_decode_or_raise_serialization_error(serde, data):
    try:
        value = serde.deserialize(data)
    except SerializationError as e:
        assert e.details.get("serde"), "the error names the serde"
        return
    assert same(serde.deserialize(serde.serialize(value)), value)


# --------------------------------------------------------------------------------------- lookup
@pytest.mark.parametrize("name, expected", [
    ("org.apache.kafka.common.serialization.Serdes$StringSerde", Serdes.String()),
    ("org.apache.kafka.common.serialization.Serdes$LongSerde", Serdes.Long()),
    ("org.apache.kafka.common.serialization.Serdes.ByteArraySerde", Serdes.ByteArray()),
    ("UUIDSerde", Serdes.UUID()), ("Integer", Serdes.Integer()), ("Json", Serdes.Json()),
])
def test_serde_of_kafka_names(name, expected):
    assert serde_of(name) == expected


def test_serde_of_instances_and_factories():
    j = Serdes.Json("a INT")
    assert serde_of(j) is j and serde_of(Serdes.Double) == Serdes.Double()


def test_serde_of_unknown_names_the_choices():
    with pytest.raises(InvalidConfigError, match="default.value.serde 'com.example.AvroSerde' is not a known serde.*Long"):
        serde_of("com.example.AvroSerde", "default.value.serde")
