"""Kafka's converters as column expressions: round trips, the JSON envelope with and without
schemas (examples from Kafka's JsonConverter docs and tests), bad rows flagged, never failing."""
import base64
import json
from decimal import Context, Decimal

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from connect import record_frame
from connect.converters import JsonConverter, StringConverter, ByteArrayConverter, converter, decode, encode
from connect.errors import DataError

pytestmark = pytest.mark.spark
ENVELOPE = (b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},'
            b'{"type":"string","optional":true,"field":"name"},'
            b'{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp","field":"at"},'
            b'{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"},"field":"price"}'
            b']},"payload":{"id":1,"name":"a","at":1500000000000,"price":"AOg="}}')


def source(spark, values):
    rows = [("t", 0, i, None, None, v, []) for i, v in enumerate(values)]
    return record_frame.from_source(spark.createDataFrame(rows, "topic string, partition int, offset long, "
                                    "timestamp timestamp, key binary, value binary, "
                                    "headers array<struct<key string, value binary>>"))


def rows(df):
    return df.orderBy("offset").collect()


def test_json_envelope_round_trip_and_bad_rows(spark):
    f = source(spark, [ENVELOPE, b"{not json", b'{"id": 1}', ENVELOPE.replace(b'"id":1,', b'"id":"x",'),
                       b"\xff\xfe", None])
    conv = converter("org.apache.kafka.connect.json.JsonConverter", {}).bind(f)
    out = rows(decode(f, conv))
    v = out[0]["value"].asDict()
    assert (v["id"], v["name"], str(v["price"]), v["at"].timestamp()) == (1, "a", "2.32", 1500000000.0)
    errors = [r[record_frame.ERROR] for r in out]
    assert errors[0] is None and errors[5] is None and out[5]["value"] is None  # a tombstone stays one
    assert "serialization error" in errors[1]["message"] and "serialization error" in errors[4]["message"]
    assert "requires \"schema\" and \"payload\"" in errors[2]["message"]
    assert "does not match" in errors[3]["message"]
    ok, failed = record_frame.split_errors(decode(f, conv))
    assert failed.count() == 4 and rows(failed)[0][record_frame.ORIGINAL]["value"] == b"{not json"
    back = rows(encode(ok, conv))
    again = rows(decode(source(spark, [bytes(back[0]["value"])]), conv))
    assert again[0]["value"] == out[0]["value"] and again[0][record_frame.ERROR] is None


def test_json_without_schemas(spark):
    f = source(spark, [b'{"id": 7, "tags": ["x"], "nested": {"ok": true}}', b'{"id": "seven"}', b"[1"])
    typed = JsonConverter({"schemas.enable": "false"}, schema="id INT, tags ARRAY<STRING>, nested STRUCT<ok: BOOLEAN>")
    out = rows(decode(f, typed))
    assert out[0]["value"].asDict(recursive=True) == {"id": 7, "tags": ["x"], "nested": {"ok": True}}
    assert out[1][record_frame.ERROR] is not None and out[2][record_frame.ERROR] is not None
    inferred = JsonConverter({"schemas.enable": "false"}).bind(f.where("offset = 0"))
    assert inferred.data_type.simpleString() == "struct<id:bigint,nested:struct<ok:boolean>,tags:array<string>>"
    variant = rows(decode(f, JsonConverter({"schemas.enable": "false"})))
    assert variant[0][record_frame.ERROR] is None and variant[2][record_frame.ERROR] is not None
    written = rows(encode(decode(f, typed).where("offset = 0"), typed))
    assert bytes(written[0]["value"]) == b'{"id":7,"tags":["x"],"nested":{"ok":true}}'


def test_envelope_for_primitives_and_schema_literal(spark):
    df = spark.createDataFrame([(1, 42, "hé"), (2, None, None)], "offset long, n long, s string")
    conv = JsonConverter({})
    out = df.select("offset", conv.from_column(F.col("n"), df.schema["n"].dataType).value.cast("string").alias("n"),
                    conv.from_column(F.col("s"), df.schema["s"].dataType).value.cast("string").alias("s")).orderBy("offset").collect()
    assert out[0]["n"] == '{"schema":{"type":"int64","optional":true},"payload":42}'  # asJsonSchema's key order
    assert out[0]["s"] == '{"schema":{"type":"string","optional":true},"payload":"hé"}'
    assert out[1]["n"] is None


def test_string_and_bytes(spark):
    f = source(spark, ["héllo".encode(), b"\xc3\x28", None])
    out = rows(decode(f, StringConverter({})))
    assert [r["value"] for r in out] == ["héllo", None, None]
    assert out[1][record_frame.ERROR]["class"] == "org.apache.kafka.connect.storage.StringConverter"
    back = rows(encode(decode(f, StringConverter({})).where("offset = 0"), StringConverter({})))
    assert bytes(back[0]["value"]) == "héllo".encode()
    same = rows(encode(decode(f, ByteArrayConverter()), ByteArrayConverter()))
    assert [r["value"] and bytes(r["value"]) for r in same] == [b"h\xc3\xa9llo", b"\xc3\x28", None]


def test_unbound_json_envelope_converter_reads_null_keys_as_null_and_flags_schemaless_ones(spark):
    """Kafka's JsonConverter turns null bytes into a null value: a key column of null keys (no envelope
    to learn a type from) decodes to null, never failing the batch; a key without the envelope is flagged."""
    rows_ = [("t", 0, 0, None, None, ENVELOPE, []), ("t", 0, 1, None, b'{"id": 1}', ENVELOPE, [])]
    f = record_frame.from_source(spark.createDataFrame(rows_, "topic string, partition int, offset long, "
                                 "timestamp timestamp, key binary, value binary, "
                                 "headers array<struct<key string, value binary>>"))
    keys = JsonConverter({}, is_key=True)
    out = rows(decode(f.where("offset = 0"), keys, "key"))
    assert out[0]["key"] is None and out[0][record_frame.ERROR] is None
    flagged = rows(decode(f, keys, "key"))
    assert flagged[0][record_frame.ERROR] is None
    assert "requires \"schema\" and \"payload\"" in flagged[1][record_frame.ERROR]["message"]


def java_bytes(n: int) -> bytes:
    """Java's BigInteger.toByteArray, what Kafka's JsonConverter writes for a Decimal: minimal two's complement."""
    return n.to_bytes((n if n >= 0 else ~n).bit_length() // 8 + 1, "big", signed=True)


def decimal_envelope(scale: int, payload: bytes) -> bytes:
    schema = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
              "parameters": {"scale": str(scale)}, "optional": True}
    return json.dumps({"schema": schema, "payload": base64.b64encode(payload).decode()}).encode()


LIMIT = 10 ** 38 - 1     # decimal(38)'s largest unscaled value
EDGES = [0, 1, -1, 127, -128, 128, -129, 2 ** 63 - 1, -(2 ** 63), 2 ** 63, -(2 ** 63) - 1, 2 ** 64, LIMIT, -LIMIT]


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])
@given(st.integers(0, 38), st.lists(st.integers(-LIMIT, LIMIT), min_size=1, max_size=12))
@example(38, [-1])   # -1E-38: Spark's ``d < 0`` rounds it to 0 when it widens decimal(38, 38)
def test_decimals_are_kafkas_bytes_over_the_whole_decimal_38_range(spark, scale, drawn):
    """Against Java's BigInteger (Python's int as the oracle): every unscaled value decimal(38, s)
    holds is written as Kafka writes it and read back exactly, beyond 64 bits too; a value read
    with extra sign bytes is the same value; one too large for decimal(38) is a typed error."""
    values = EDGES + drawn
    t = DecimalType(38, scale)
    exact = [Decimal(n).scaleb(-scale, Context(prec=80)) for n in values]
    df = spark.createDataFrame([(i, d) for i, d in enumerate(exact)], f"offset long, d decimal(38,{scale})")
    conv = JsonConverter({})
    written = df.select("offset", conv.from_column(F.col("d"), t).value.cast("string").alias("j")).orderBy("offset")
    assert [base64.b64decode(json.loads(r["j"])["payload"]) for r in written.collect()] == \
        [java_bytes(n) for n in values]
    padded = [b"\xff" + java_bytes(n) if n < 0 else b"\x00" + java_bytes(n) for n in values]
    f = source(spark, [decimal_envelope(scale, b) for b in [java_bytes(n) for n in values] + padded]
               + [decimal_envelope(scale, java_bytes(10 ** 38)), decimal_envelope(scale, b"")])
    out = rows(decode(f, conv.bind(f)))
    assert [r["value"] for r in out[:-2]] == exact + exact
    assert all(r[record_frame.ERROR] is None for r in out[:-2])
    for r in out[-2:]:
        assert r["value"] is None and "does not match decimal(38," in r[record_frame.ERROR]["message"]


def test_kafkas_envelopes_of_every_name_bytes_floats_and_far_timestamps(spark):
    """Cases from Kafka's JsonConverterTest: field names any string may be (quoted in Spark's DDL),
    "float"/"double" schemas, bytes as base64; a Timestamp past Spark's range fails its record only."""
    struct = {"type": "struct", "optional": False, "fields": [
        {"field": "user-id", "type": "int32", "optional": True}, {"field": "a b", "type": "double", "optional": True},
        {"field": "raw", "type": "bytes", "optional": True}, {"field": "f", "type": "float", "optional": True}]}
    good = json.dumps({"schema": struct, "payload": {"user-id": 1, "a b": 2.5, "raw": "AQI=", "f": 1.5}}).encode()
    bad64 = json.dumps({"schema": struct, "payload": {"user-id": 2, "raw": "not base64!"}}).encode()
    far = json.dumps({"schema": {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"},
                      "payload": 10 ** 17}).encode()
    f = source(spark, [good, bad64])
    conv = JsonConverter({}).bind(f)
    out = rows(decode(f, conv))
    assert out[0]["value"].asDict() == {"user-id": 1, "a b": 2.5, "raw": b"\x01\x02", "f": 1.5}
    assert out[0][record_frame.ERROR] is None and "does not match" in out[1][record_frame.ERROR]["message"]
    back = json.loads(bytes(rows(encode(decode(f, conv).where("offset = 0"), conv))[0]["value"]))
    assert back["payload"]["raw"] == "AQI=" and [x["type"] for x in back["schema"]["fields"]] == \
        ["int32", "double", "bytes", "float"]
    plain = source(spark, [b'{"user-id": 1, "$oid": "5f1", "a b": {"c.d": [1]}}'])
    assert rows(decode(plain, JsonConverter({"schemas.enable": "false"}).bind(plain)))[0]["value"].asDict(
        recursive=True) == {"$oid": "5f1", "a b": {"c.d": [1]}, "user-id": 1}
    times = source(spark, [far, far.replace(b"100000000000000000", b"1500000000000")])
    out = rows(decode(times, JsonConverter({}).bind(times)))
    assert out[0]["value"] is None and "does not match timestamp" in out[0][record_frame.ERROR]["message"]
    assert out[1]["value"].timestamp() == 1_500_000_000.0 and out[1][record_frame.ERROR] is None


def test_a_schema_that_gains_a_field_mid_batch_reads_every_record_and_a_conflicting_one_is_flagged(spark):
    """Kafka reads each record under its own schema; one Spark column holds them all when the later
    schema only adds fields (the earlier records' new fields null), in the order records came."""
    def env(fields, payload):
        return json.dumps({"schema": {"type": "struct", "optional": False, "fields": [
            {"field": n, "type": t, "optional": True} for n, t in fields]}, "payload": payload}).encode()
    v1 = [("id", "int32")]
    v2 = v1 + [("name", "string")]
    clash = [("id", "string")]
    keys = {"schema": {"type": "map", "keys": {"type": "int32"}, "values": {"type": "int32"}}, "payload": [[1, 2]]}
    f = source(spark, [env(v2, {"id": 1, "name": "a"}), env(v1, {"id": 2}), env(clash, {"id": "x"}),
                       json.dumps(keys).encode(), env(v2, {"id": 3, "name": "c"})])
    conv = JsonConverter({}).bind(f)
    assert conv.data_type.simpleString() == "struct<id:int,name:string>"
    out = rows(decode(f, conv))
    assert [r["value"] and r["value"].asDict() for r in out] == \
        [{"id": 1, "name": "a"}, {"id": 2, "name": None}, None, None, {"id": 3, "name": "c"}]
    assert [r[record_frame.ERROR] is None for r in out] == [True, True, False, False, True]
    # the first record's schema leads: with the earlier schema first the type is the same
    g = source(spark, [env(v1, {"id": 2}), env(v2, {"id": 1, "name": "a"})])
    assert JsonConverter({}).bind(g).data_type.simpleString() == "struct<id:int,name:string>"


def test_fields_that_differ_only_in_case_need_a_case_sensitive_session(spark):
    """Connect's "id" and "ID" are two fields; Spark tells them apart only with
    spark.sql.caseSensitive=true (the standalone worker's setting). Otherwise that schema's records
    fail on their own, saying what to set, and the batch's other records convert."""
    both = {"type": "struct", "fields": [{"field": "id", "type": "int32"}, {"field": "ID", "type": "string"}]}
    one = {"type": "struct", "fields": [{"field": "id", "type": "int32"}]}
    f = source(spark, [json.dumps({"schema": one, "payload": {"id": 1}}).encode(),
                       json.dumps({"schema": both, "payload": {"id": 2, "ID": "x"}}).encode()])
    out = rows(decode(f, JsonConverter({}).bind(f)))
    assert out[0]["value"].asDict() == {"id": 1} and out[1][record_frame.ERROR] is not None
    with pytest.raises(DataError, match="spark.sql.caseSensitive=true"):
        JsonConverter({}).bind(f.where("offset = 1"))
    # the runtime keeps such a batch's converter unbound: its records fail saying why (the DLQ's)
    from connect.pipeline import _bind
    alone = f.where("offset = 1")
    flagged = rows(decode(alone, _bind(JsonConverter({}), alone, "value")))
    assert "spark.sql.caseSensitive=true" in flagged[0][record_frame.ERROR]["message"]
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        g = f.where("offset = 1")
        assert rows(decode(g, JsonConverter({}).bind(g)))[0]["value"].asDict() == {"id": 2, "ID": "x"}
    finally:
        spark.conf.unset("spark.sql.caseSensitive")


def test_a_null_envelope_and_empty_plain_bytes_are_null_values(spark):
    """Kafka's JsonConverterTest: nullSchemaPrimitiveToConnect and emptyBytesToConnect."""
    f = source(spark, [ENVELOPE, b'{"schema": null, "payload": null}'])
    out = rows(decode(f, JsonConverter({}).bind(f)))
    assert out[1]["value"] is None and out[1][record_frame.ERROR] is None and out[0]["value"] is not None
    unbound = rows(decode(source(spark, [b'{"schema": null, "payload": null}']), JsonConverter({})))
    assert unbound[0]["value"] is None and unbound[0][record_frame.ERROR] is None
    plain = source(spark, [b"", b'{"id": 1}'])
    for conv in (JsonConverter({"schemas.enable": "false"}), JsonConverter({"schemas.enable": "false"}).bind(plain)):
        got = rows(decode(plain, conv))
        assert got[0]["value"] is None and got[0][record_frame.ERROR] is None and got[1][record_frame.ERROR] is None
