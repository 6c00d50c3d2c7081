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


def test_a_null_payload_with_a_schema_is_written_back_not_as_a_tombstone(spark):
    """fromConnectData returns null bytes only when schema and value are both null:
    ``{"schema": {…}, "payload": null}`` is read as SchemaAndValue(schema, null) and written back
    as it came (convertToJson: an optional schema's null is JSON null, a default replaces it, a
    required one without a default fails); a consumed tombstone stays null bytes."""
    typed_null = '{"schema":{"type":"int32","optional":true},"payload":null}'
    f = source(spark, ['{"schema":{"type":"int32","optional":true},"payload":7}', typed_null, None])
    conv = JsonConverter({}).bind(f)
    decoded = decode(f, conv)
    out = [r["value"] for r in encode(decoded, conv).orderBy("offset").collect()]
    assert [None if v is None else bytes(v).decode() for v in out] == [
        '{"schema":{"type":"int32","optional":true},"payload":7}', typed_null, None]
    plain = [r["value"] for r in encode(decoded, JsonConverter({"schemas.enable": "false"})).orderBy("offset").collect()]
    assert [None if v is None else bytes(v) for v in plain] == [b"7", b"null", None]
    for meta, expected in (({"connect.optional": True, "connect.default": "5"}, (b"5", None)),
                           ({"connect.optional": False}, (None, "Conversion error: null value for field that is "
                                                                "required and has no default value"))):
        r = encode(decoded.withMetadata("value", meta), JsonConverter({"schemas.enable": "false"})) \
            .where("offset = 1").first()
        assert (r["value"] and bytes(r["value"]), r[record_frame.ERROR] and r[record_frame.ERROR]["message"]) == \
            expected


def test_string_and_byte_array_converters_give_an_optional_schema(spark):
    """StringConverter and ByteArrayConverter read with Schema.OPTIONAL_STRING_SCHEMA /
    OPTIONAL_BYTES_SCHEMA: transforms see a schema (SetSchemaMetadata names the value)."""
    from connect.converters import ByteArrayConverter
    from connect.transforms import transform
    f = source(spark, ["abc"])
    for conv, kind in ((StringConverter(), "string"), (ByteArrayConverter(), "bytes")):
        named = transform("org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
                          {"schema.name": "com.example.Text"}).apply(decode(f, conv))
        r = encode(named, JsonConverter({})).first()
        assert r[record_frame.ERROR] is None, kind
        assert json.loads(bytes(r["value"]))["schema"] == {"type": kind, "optional": True, "name": "com.example.Text"}


def test_schemaless_batches_keep_longs_exact(spark):
    """Kafka reads each schemaless record on its own: a long past 2^53 stays exact though another
    record gives the field a fraction (read as DECIMAL(38, s), which holds both); fractions alone
    are float64s."""
    wide = converted(spark, ['{"id": 9007199254740993}', '{"id": 0.5}'], {"schemas.enable": "false"})
    assert [(v["id"], e) for v, e in wide] == [(Decimal("9007199254740993"), None), (Decimal("0.5"), None)]
    assert [v["id"] for v, _ in converted(spark, ['{"id": 1.25}', '{"id": 3}'], {"schemas.enable": "false"})] == \
        [1.25, 3.0]


def test_schemaless_keys_equal_but_for_case_stay_apart(spark):
    """Keys equal but for case stay two maps' keys, as Kafka reads each record on its own (Spark's
    struct fields match without case, so one would hide the other: the batch is read as VARIANT)."""
    cased = converted(spark, ['{"ID": 7}', '{"id": 1}'], {"schemas.enable": "false"})
    assert [(json.loads(v.toJson()), e) for v, e in cased] == [({"ID": 7}, None), ({"id": 1}, None)]
