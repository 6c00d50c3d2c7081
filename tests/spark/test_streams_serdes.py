"""Serdes on the Spark side agree with the Python side: ``decode`` gives the values ``deserialize``
gives, ``encode`` writes the bytes ``serialize`` writes (JSON: the same values). Cases are batched
into a few wide DataFrames, one Spark job each."""
from __future__ import annotations

import json
import math
import random
import struct
import uuid
from itertools import zip_longest

import pytest

from streams.serdes import Serdes, SerializationError
from tests.streams.test_serdes import ORDER, same

pytestmark = pytest.mark.spark

rng = random.Random(20241123)
EXPONENTS = [2.0 ** e for e in range(-1074, 1024)]
RANDOM_DOUBLES = [struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0] for _ in range(500)]
RANDOM_FLOATS = [struct.unpack(">f", rng.getrandbits(32).to_bytes(4, "big"))[0] for _ in range(500)]
STRUCT = Serdes.Struct("id BIGINT, name STRING, raw BINARY, tags ARRAY<INT>, inner STRUCT<x: DOUBLE, ok: BOOLEAN>")

CASES = [
    (Serdes.Long(), [0, 1, -1, -2**63, 2**63 - 1, 255, -256] + [rng.randrange(-2**63, 2**63) for _ in range(200)]),
    (Serdes.Integer(), [0, 1, -1, -2**31, 2**31 - 1] + [rng.randrange(-2**31, 2**31) for _ in range(200)]),
    (Serdes.Short(), [0, 1, -1, -2**15, 2**15 - 1, 255, -256]),
    (Serdes.Double(), [0.0, -0.0, 1.0, -1.5, math.nan, math.inf, -math.inf, 5e-324, -5e-324, 2.2250738585072014e-308,
                       2.225073858507201e-308, 1.7976931348623157e308, 0.1, 1 / 3]
     + EXPONENTS + [x * 1.5 for x in EXPONENTS[1:-1]] + RANDOM_DOUBLES),
    (Serdes.Float(), [0.0, -0.0, 1.0, -2.5, math.nan, math.inf, -math.inf, 1.401298464324817e-45,
                      3.4028234663852886e38, 1.1754943508222875e-38, 1.1754942106924411e-38]
     + [2.0 ** e for e in range(-149, 128)] + RANDOM_FLOATS),
    (Serdes.Boolean(), [True, False]),
    (Serdes.String(), ["", "a", "héllo wörld", "日本語", "emoji 😀", "nul\x00byte", "x" * 1000]),
    (Serdes.UUID(), [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1), uuid.UUID("123e4567-e89b-12d3-a456-426614174000")]),
    (Serdes.Bytes(), [b"", b"\x00", b"\xff" * 20]),
    (Serdes.ByteArray(), [b"", b"\x01\x02"]),
    (Serdes.Void(), []),
    (Serdes.Json(), [{"a": [1, 2.5, None, True]}, [1, "é"], "text", 5, 1.5, False]),
    (ORDER, [{"user": "é", "amount": 120.0, "n": -3, "ok": True, "f": 0.5, "tags": [1, None, -2**63],
              "attrs": {"k": "v", "n": None}, "addr": {"city": "Zürich", "zip": 8000}},
             {"user": None, "amount": math.nan, "n": None, "ok": False, "f": math.inf, "tags": [], "attrs": {},
              "addr": None},
             {"user": "", "amount": 1e10, "n": 2**31 - 1, "ok": None, "f": 0.1, "tags": None, "attrs": None,
              "addr": {"city": None, "zip": None}},
             {"user": "quote \" backslash \\ tab \t", "amount": -0.0, "n": 0, "ok": None, "f": -math.inf,
              "tags": None, "attrs": None, "addr": None}]),
    (STRUCT, [{"id": 1, "name": "é", "raw": b"\x00\xff", "tags": [1, None], "inner": {"x": 1.5, "ok": True}},
              {"id": None, "name": None, "raw": None, "tags": None, "inner": None},
              {"id": -2**63, "name": "", "raw": b"", "tags": [], "inner": {"x": math.nan, "ok": None}}]),
]


def _python_value(serde, value):
    """A value as Spark holds it (UUIDs and schema-less JSON as text, struct values as dicts)."""
    if serde == Serdes.Json() and value is not None:
        return serde.serialize(value).decode()
    return str(value) if isinstance(value, uuid.UUID) else value


def _spark_value(v):
    """A collected value as Python's deserialize gives it (Rows as dicts, bytearrays as bytes)."""
    if hasattr(v, "asDict"):
        return {k: _spark_value(x) for k, x in v.asDict().items()}
    if isinstance(v, list):
        return [_spark_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _spark_value(x) for k, x in v.items()}
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def test_decode_and_encode_agree_with_python(spark):
    from pyspark.sql import types as T
    fields, columns = [], []
    for i, (serde, values) in enumerate(CASES):
        data = [serde.serialize(v) for v in values] + [None]
        fields += [T.StructField(f"b{i}", T.BinaryType()), T.StructField(f"v{i}", serde.spark_type())]
        columns += [data, [_python_value(serde, v) for v in values] + [None]]
    rows = list(zip_longest(*columns))
    df = spark.createDataFrame(rows, T.StructType(fields))
    out = df.select(*[c for i, (serde, _) in enumerate(CASES)
                      for c in (serde.decode(df[f"b{i}"]).alias(f"d{i}"), serde.encode(df[f"v{i}"]).alias(f"e{i}"))]
                    ).collect()
    for i, (serde, values) in enumerate(CASES):
        n = len(values) + 1
        decoded = [_spark_value(r[f"d{i}"]) for r in out][:n]
        encoded = [None if r[f"e{i}"] is None else bytes(r[f"e{i}"]) for r in out][:n]
        for b, v, d, e in zip(columns[2 * i], values + [None], decoded, encoded):
            expected = serde.deserialize(b)
            expected = expected if serde == Serdes.Json() else _python_value(serde, expected)
            if serde == Serdes.Json() and d is not None:   # schema-less JSON is its text in Spark
                d = json.loads(d)
            assert same(d, expected) or (d is None and expected is None), (serde.name, v, d, expected)
            if isinstance(serde.spark_type(), T.StructType) and serde.name.startswith("Json"):
                assert same(serde.deserialize(e), serde.deserialize(b)), (serde.name, v, e, b)
            else:
                assert e == b, (serde.name, v, e, b)


def test_json_bytes_from_spark_equal_pythons_for_ordinary_values(spark):
    from pyspark.sql import functions as F
    # One key per map: Spark does not keep a map's insertion order.
    values = [dict(v, attrs=None if v["attrs"] is None else dict(list(v["attrs"].items())[:1]))
              for v in (CASES[-2][1][0], CASES[-2][1][2])]
    df = spark.createDataFrame([(v,) for v in values], f"v {ORDER.schema.simpleString()}")
    got = [bytes(r[0]) for r in df.select(ORDER.encode(F.col("v"))).collect()]
    assert got == [ORDER.serialize(v) for v in values]


JSON_TEXTS = ['{"user":"a","amount":120}', '{"amount":"NaN"}', '{"amount":"-INF"}', '{"amount":"+Infinity"}',
              '{"amount":-Infinity}', '{"amount":1e400,"f":1e40}', '{"user":5}', '{"user":1e10}', '{"user":1.50}',
              '{"user":{"b":[1,2.5,true,null,"x"]}}', '{"n":1,"n":2,"other":3}', '{"attrs":{"k":1}}',
              '{"tags":[1,null],"attrs":{"k":"v"},"addr":{"city":"Zürich"}}', '{"n":1}garbage', '{"A":1}', '',
              '  ', '{"n":"5"}', '{"n":1.0}', '{"n":true}', '{"n":3000000000}', '{"ok":1}', '{"amount":"5"}',
              '{"amount":"INF"}', '{"amount":true}', '{"addr":5}', '{"tags":{}}', '{"tags":["1"]}', 'null', '5',
              '[{"n":1}]', '{"n":1', 'not json', "{'n':1}", '{"tags":[9223372036854775808]}', '{"f":3.4028235e38}']


def test_json_decode_matches_python_on_odd_records(spark):
    """Where Python raises, Spark's ``on_error="null"`` gives null; elsewhere the same values."""
    df = spark.createDataFrame([(t.encode(),) for t in JSON_TEXTS], "b binary")
    got = [_spark_value(r[0]) for r in df.select(ORDER.decode(df.b, on_error="null")).collect()]
    for text, value in zip(JSON_TEXTS, got):
        try:
            expected = ORDER.deserialize(text.encode())
        except SerializationError:
            expected = None
        assert same(value, expected) or value == expected, (text, value, expected)


BAD = [(Serdes.Long(), [b"\x00" * 7, b"\x00" * 9, b""]), (Serdes.Integer(), [b"\x00" * 3]),
       (Serdes.Short(), [b"\x00"]), (Serdes.Double(), [b"\x00" * 7]), (Serdes.Float(), [b"\x00" * 5]),
       (Serdes.Boolean(), [b"\x02", b"\x00\x00", b""]), (Serdes.UUID(), [b"not a uuid", b"{123e4567-e89b}"]),
       (Serdes.Void(), [b"x", b""]), (Serdes.Json(), [b"{", b"nul"]), (ORDER, [b"[1]", b'{"n":"x"}']),
       (STRUCT, [b"garbage", Serdes.Struct("id INT").serialize({"id": 1})])]


def test_bad_records_become_null_with_on_error_null(spark):
    from pyspark.sql import types as T
    columns = [data for _, data in BAD]
    df = spark.createDataFrame(list(zip_longest(*columns)),
                               T.StructType([T.StructField(f"b{i}", T.BinaryType()) for i in range(len(BAD))]))
    out = df.select(*[serde.decode(df[f"b{i}"], on_error="null").alias(f"d{i}") for i, (serde, _) in enumerate(BAD)])
    for row in out.collect():
        assert all(v is None for v in row), row
    for serde, data in BAD:
        for b in data:
            with pytest.raises(SerializationError):
                serde.deserialize(b)


@pytest.mark.parametrize("serde, data, message", [
    (Serdes.Long(), b"\x00" * 7,
     "Long serde: Size of data received by LongDeserializer is not 8 (got 7 bytes) (topic 'orders')"),
    (Serdes.Boolean(), b"\x07", "Boolean serde: Unexpected byte received by BooleanDeserializer: 7 (topic 'orders')"),
    (ORDER, b'{"n":"x"}', "MALFORMED_RECORD_IN_PARSING"),
    (STRUCT, b"garbage", "Struct<struct<id:bigint"),
])
def test_bad_records_fail_the_query_by_default_with_the_python_message(spark, serde, data, message):
    df = spark.createDataFrame([(data,)], "b binary")
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        df.select(serde.decode(df.b, topic="orders")).collect()
