"""JsonConverter and StringConverter against Kafka's rules where a Spark column has less room than
Connect's data: decimals in either form, exact numeric decimals, schema defaults and required
fields, integral logical types, leading zeros, schema metadata written back, one-line base64,
unmappable characters, the converter's own config. Cases from Kafka's JsonConverterTest."""
import json
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from connect import record_frame
from connect.converters import JsonConverter, StringConverter, decode, encode
from connect.errors import ConfigError

pytestmark = pytest.mark.spark
DECIMAL = "org.apache.kafka.connect.data.Decimal"


def source(spark, values):
    rows = [("t", 0, i, None, None, v if v is None else v.encode() if isinstance(v, str) else v, [])
            for i, v in enumerate(values)]
    return record_frame.from_source(spark.createDataFrame(rows, "topic string, partition int, offset long, "
                                    "timestamp timestamp, key binary, value binary, "
                                    "headers array<struct<key string, value binary>>"))


def converted(spark, values, config=None):
    f = source(spark, values)
    out = decode(f, JsonConverter(config or {}).bind(f)).orderBy("offset").collect()
    return [(r["value"], r[record_frame.ERROR] and r[record_frame.ERROR]["message"]) for r in out]


def dec(payload, scale=2, **extra):
    return json.dumps({"schema": {"type": "bytes", "name": DECIMAL, "version": 1, "parameters": {"scale": str(scale)},
                                  "optional": True, **extra}, "payload": payload})


def test_decimals_read_as_kafka_reads_them_in_either_form_under_either_format(spark):
    """Decimal's toConnect: a JSON number is the value whatever decimal.format says, a string is
    base64; bad base64 fails its record alone; a number in exponent form is read exactly; one with
    more digits than the scale is flagged rather than rounded."""
    for config in ({}, {"decimal.format": "NUMERIC"}):
        got = converted(spark, [dec(1.56), dec("AJw="), dec("not base64!"), dec(2.5)], config)
        assert [str(v) if v is not None else None for v, _ in got] == ["1.56", "1.56", None, "2.50"], config
        assert [e is None for _, e in got] == [True, True, False, True]
    exponent = '{"schema":{"type":"bytes","name":"%s","version":1,"parameters":{"scale":"30"}},' \
               '"payload":1.23456789012345678901234E-7}' % DECIMAL
    assert converted(spark, [exponent], {"decimal.format": "NUMERIC"}) == \
        [(Decimal("1.23456789012345678901234E-7"), None)]
    got = converted(spark, [dec(1.234), dec(1.230)], {"decimal.format": "NUMERIC"})
    assert got[0][0] is None and "decimal(38,2)" in got[0][1]
    assert str(got[1][0]) == "1.23" and got[1][1] is None


def test_defaults_required_fields_integral_logical_types_and_leading_zeros(spark):
    """replace.null.with.default (true): a null or missing value reads as its schema's default;
    a null required value is "Invalid null value for required … field"; a Timestamp of 1.5 is not
    truncated; 0012 reads as 12 (JsonDeserializer's ALLOW_LEADING_ZEROS_FOR_NUMBERS)."""
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "flag", "type": "boolean", "optional": True, "default": False},
        {"field": "price", "type": "bytes", "name": DECIMAL, "parameters": {"scale": "2"}, "optional": True,
         "default": "AJw="},
        {"field": "id", "type": "int64", "optional": False},
        {"field": "at", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "optional": True}]}

    def env(payload):
        return json.dumps({"schema": schema, "payload": payload})
    got = converted(spark, [env({"flag": None, "id": 1}), env({"flag": True, "id": None}), env({"id": 2, "at": 1.5}),
                            env({"id": 3}).replace('"id": 3', '"id": 0012')])
    assert got[0] == (got[0][0], None) and got[0][0].asDict() == \
        {"flag": False, "price": Decimal("1.56"), "id": 1, "at": None}
    assert got[1] == (None, "Invalid null value for required INT64 field")
    assert got[2][0] is None and "does not match" in got[2][1]
    assert got[3][1] is None and got[3][0]["id"] == 12
    plain = converted(spark, [env({"id": 4})], {"replace.null.with.default": "false"})
    assert plain[0][0].asDict()["flag"] is None


def test_schema_metadata_is_written_back_as_kafka_writes_it(spark):
    """asJsonSchema: names, versions, docs, parameters, defaults and optional:false survive a
    pass-through, in Kafka's key order; Time stays an int32 named Time; bytes are one base64 line."""
    schema = {"type": "struct", "fields": [
        {"type": "int32", "optional": False, "name": "org.apache.kafka.connect.data.Time", "version": 1,
         "field": "t"},
        {"type": "string", "optional": True, "doc": "a doc", "default": "x", "field": "s"},
        {"type": "bytes", "optional": True, "name": DECIMAL, "version": 1,
         "parameters": {"scale": "2", "connect.decimal.precision": "5"}, "field": "d"},
        {"type": "bytes", "optional": True, "field": "b"}],
        "optional": False, "name": "server.db.table.Value", "version": 3}
    payload = {"t": 14400000, "s": "y", "d": "AJw=", "b": "eHh4" * 25}
    text = json.dumps({"schema": schema, "payload": payload}, separators=(",", ":"))
    f = source(spark, [text])
    conv = JsonConverter({}).bind(f)
    back = bytes(encode(decode(f, conv), conv).first()["value"]).decode()
    assert back == text


def test_string_converter_substitutes_what_the_charset_cannot_hold(spark):
    """StringConverter: Java's String(bytes, US-ASCII) reads 0xE9 as U+FFFD, getBytes writes '?'."""
    f = source(spark, [b"caf\xe9"])
    ascii_ = StringConverter({"converter.encoding": "US-ASCII"})
    assert decode(f, ascii_).first()["value"] == "caf\ufffd"
    df = spark.createDataFrame([("é😀a",)], "s string")
    for encoding, expected in (("US-ASCII", b"??a"), ("ISO-8859-1", b"\xe9?a")):
        r = StringConverter({"converter.encoding": encoding}).from_column(F.col("s"), df.schema["s"].dataType)
        assert bytes(df.select(r.value).first()[0]) == expected


def test_schemas_cache_size_must_be_an_int():
    """JsonConverterConfig defines schemas.cache.size as Type.INT."""
    with pytest.raises(ConfigError, match="schemas.cache.size"):
        JsonConverter({"schemas.cache.size": "abc"})
    JsonConverter({"schemas.cache.size": "10"})
