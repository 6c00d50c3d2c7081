"""Transforms give Kafka's (and Debezium's) results on the cases their own tests and source pin:
RegexRouter's replaceFirst, TimestampConverter's source kinds and lenient SimpleDateFormat,
Connect's Time, applySchemaless on a missing field. One small frame per test, one Spark job each."""
import datetime as dt
import json

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from connect import record_frame, timestamp_formats
from connect.transform_base import TIME_METADATA
from connect.transforms import transform

pytestmark = pytest.mark.spark
T = "org.apache.kafka.connect.transforms."
TS = dt.datetime(2017, 7, 14, 2, 40, tzinfo=dt.timezone.utc)


def frame(spark, value_ddl, values, topics=None):
    rows = [(topics[i] if topics else "orders", 0, i, TS, None, v, []) for i, v in enumerate(values)]
    schema = (f"topic string, partition int, offset long, timestamp timestamp, key binary, value {value_ddl}, "
              "headers array<struct<key string, value binary>>")
    return record_frame.from_source(spark.createDataFrame(rows, schema), keep_original=False)


def typed_frame(spark, value_type, values):
    """A record frame whose value has a Spark type with field metadata (a Connect schema's)."""
    cols = [("topic", StringType()), ("partition", IntegerType()), ("offset", LongType()),
            ("timestamp", TimestampType()), ("key", BinaryType()), ("value", value_type), ("headers", record_frame.HEADERS_TYPE)]
    rows_ = [("orders", 0, i, TS, None, v, []) for i, v in enumerate(values)]
    return record_frame.from_source(spark.createDataFrame(rows_, StructType([StructField(n, t) for n, t in cols])),
                                    keep_original=False)


def rows(df):
    return df.orderBy("offset").collect()


def error(r):
    e = r[record_frame.ERROR]
    return None if e is None else e["message"]


def test_regex_router_replaces_the_first_match_as_replace_first(spark):
    """RegexRouter: matcher.matches() then replaceFirst(), which finds the leftmost match again;
    with alternation or a lazy quantifier that match is shorter than the topic (java/Rx.java)."""
    cases = [("a|ab", "X", "ab", "Xb"), ("(.+?)(-\\d+)?", "$1", "orders-2024", "orders-2024"),
             ("(.*)-(\\d\\d)", "$1_$2", "foo-12", "foo_12"), ("ab", "x", "abab", "abab")]
    out = []
    for regex, rep, topic, _ in cases:
        df = transform(T + "RegexRouter", {"regex": regex, "replacement": rep}).apply(
            frame(spark, "int", [1], topics=[topic]))
        out.append(df.select("topic"))
    got = [r["topic"] for r in out[0].unionAll(out[1]).unionAll(out[2]).unionAll(out[3]).collect()]
    assert got == [c[3] for c in cases]


def test_timestamp_converter_reads_time_by_its_logical_type_and_refuses_plain_int32(spark):
    """timestampTypeFromSchema: a Time (int32 ms of day, ``connect.name``) goes through the Time
    translator without unix.precision (TimestampConverterTest.testWithSchemaTimeToTimestamp); an
    untagged int32 is no timestamp kind and fails each record; target.type=Time gives a Time."""
    schema = StructType([StructField("t", IntegerType(), True, TIME_METADATA), StructField("n", IntegerType())])
    df = frame(spark, "struct<t:int,n:int>", [None]).withColumn(
        "value", F.struct(F.lit(1234).alias("t"), F.lit(86401234).alias("n")).cast(schema))
    df = df.withColumn("value", F.col("value").cast(schema))
    to_seconds = transform(T + "TimestampConverter$Value", {"field": "t", "target.type": "unix",
                                                             "unix.precision": "seconds"}).apply(df)
    assert rows(to_seconds)[0]["value"]["t"] == 1   # Kafka: 1234 ms → 1 s (old: 1234 read as seconds)
    plain = transform(T + "TimestampConverter$Value", {"field": "n", "target.type": "Timestamp"}).apply(df)
    assert error(rows(plain)[0]) == "Schema Schema{INT32} does not correspond to a known timestamp type format"
    ts = frame(spark, "struct<ts:timestamp>", [(dt.datetime(1970, 1, 2, 0, 0, 1, 234000, tzinfo=dt.timezone.utc),)])
    to_time = transform(T + "TimestampConverter$Value", {"field": "ts", "target.type": "Time"}).apply(ts)
    field = to_time.schema["value"].dataType["ts"]
    assert (field.dataType, field.metadata.get("connect.name")) == (IntegerType(), "org.apache.kafka.connect.data.Time")
    assert rows(to_time)[0]["value"]["ts"] == 1234
    as_string = transform(T + "Cast$Value", {"spec": "t:string"}).apply(df)   # CastTest.castLogicalToString
    assert rows(as_string)[0]["value"]["t"] == "00:00:01.234Z"


def test_string_timestamps_parse_as_lenient_simple_date_format(spark):
    """SimpleDateFormat.parse as Kafka calls it (lenient, a prefix is enough): each expected value
    is what Java 17's SimpleDateFormat in UTC returns (java/Sdf.java)."""
    cases = [("yyyy-MM-dd", "2017-13-01", 1514764800000), ("yyyy-MM-dd", "2017-07-14T02:40:00Z", 1499990400000),
             ("yyyy-MM-dd", "2017-7-4", 1499126400000), ("yyyy-MM-dd hh:mm", "2017-07-14 13:00", 1500037200000),
             ("yyyy-MM-dd'T'HH:mm:ss.SSS", "2017-07-14T02:40:00.5", 1500000000005),
             ("yyyy-MM-dd'T'HH:mm:ss.SSS", "2017-07-14T02:40:00.123456", 1500000123456),
             ("yyyyMMddHHmm", "201707140240", 1500000000000), ("EEE, dd MMM yyyy", "Fri, 14 jul 2017", 1499990400000),
             ("yyyy-MM-dd'T'HH:mm:ssXXX", "2017-07-14T04:40:00+02:00", 1500000000000),
             ("yyyy-MM-dd", "1500-03-01", -14825808000000), ("yyyy-MM-dd", "2017-07", None)]
    df = spark.range(1).select(*[timestamp_formats.parse_millis(F.lit(s), fmt).alias(f"c{i}")
                                 for i, (fmt, s, _) in enumerate(cases)])
    assert list(df.first()) == [c[2] for c in cases]
    formatted = spark.range(1).select(
        timestamp_formats.format_utc(F.timestamp_millis(F.lit(-62170156800000)), "yyyy-MM-dd G").alias("julian"),
        timestamp_formats.format_utc(F.timestamp_millis(F.lit(5)), "S SS SSS").alias("millis")).first()
    assert (formatted["julian"], formatted["millis"]) == ("0002-11-30 BC", "5 05 005")


def test_schemaless_records_without_the_field_follow_apply_schemaless(spark):
    """A schemaless value (an inferred struct, no ``connect.*`` metadata) lacking the field: Kafka's
    applySchemaless reads null from the map, so no record (and no query) fails."""
    df = frame(spark, "struct<a:bigint,topic_field:string,obj:struct<k:string>>", [(1, "old", ("v",))])

    def value(cls, config):
        r = rows(transform(T + cls, config).apply(df))[0]
        assert error(r) is None
        return r["value"] if cls != "ValueToKey" else r["key"]
    assert value("TimestampConverter$Value", {"field": "ts", "target.type": "string", "format": "yyyy"})["ts"] is None
    assert value("ExtractField$Value", {"field": "nope"}) is None
    assert value("ValueToKey", {"fields": "a,c"}).asDict() == {"a": 1, "c": None}
    assert value("MaskField$Value", {"fields": "zz"})["zz"] is None
    assert value("MaskField$Value", {"fields": "obj"})["obj"] == {}   # maskWithNullValue: a Map masks to {}
    assert value("InsertField$Value", {"topic.field": "topic_field"})["topic_field"] == "orders"   # Map.put


def test_insert_header_writes_values_parse_string(spark):
    """InsertHeader: Values.parseString then SimpleHeaderConverter (ValuesTest.shouldParseFloatAsFloat32,
    shouldParseIntegerAsInt8, shouldParseStringListWithMultipleElementTypes…)."""
    from connect.transforms import literal_header
    assert [literal_header(s) for s in ["1.0", "1.50", "007", " 42 ", "3.14159265358979", "[1, 2]", "true}",
                                        "null", "hello world"]] == \
        ["1", "1.5", "7", "42", "3.1415927", "[1,2]", "true}", None, "hello world"]
    df = transform(T + "InsertHeader", {"header": "h", "value.literal": "1.50"}).apply(frame(spark, "int", [1]))
    assert bytes(rows(df)[0]["headers"][0]["value"]) == b"1.5"


def test_debezium_add_fields_falls_back_to_the_envelope(spark):
    """FieldReference.getField: a bare name the source lacks is the envelope's own field
    (ExtractNewRecordStateTest.testNewNotDefaultField: ``__changed`` from the envelope)."""
    ddl = ("struct<before:struct<id:int>,after:struct<id:int>,source:struct<lsn:bigint>,op:string,ts_ms:bigint,"
           "changed:array<string>>")
    df = frame(spark, ddl, [(None, (1,), (5,), "c", 7, ["name"])]).withMetadata("value", {"connect.name": "a.Envelope"})
    out = transform("io.debezium.transforms.ExtractNewRecordState", {"add.fields": "changed,lsn"}).apply(df)
    assert rows(out)[0]["value"].asDict() == {"id": 1, "__changed": ["name"], "__lsn": 5}


def test_flatten_fails_each_record_with_a_map_field(spark):
    """Flatten.buildUpdatedSchema throws for a MAP field with schemas: each record fails, the query not."""
    out = transform(T + "Flatten$Value", {}).apply(frame(spark, "struct<m:map<string,int>,s:struct<a:int>>",
                                                         [({"k": 1}, (2,))]))
    assert error(rows(out)[0]) == "Flatten transformation does not support MAP for record with schemas (for field m)."


def test_headers_are_written_as_values_convert_to_string(spark):
    """HeaderFrom and ExtractNewRecordState's add.headers go through SimpleHeaderConverter, i.e.
    Values.convertToString / Values.append: dates by Values.dateFormatFor of their instant, nothing
    temporal quoted inside a struct, strings inside one escaped only for \\ and " (a newline stays
    raw), BigDecimal.toString, Double.toString, base64 on one line. Expected strings are the JDK's
    (/tmp/hunts/converters/ValuesAppend.java runs Kafka's append)."""
    meta = {"connect.name": "org.apache.kafka.connect.data.Time", "connect.version": 1}
    t = StructType.fromDDL("mid timestamp, early timestamp, ts timestamp, d date, t int, dec decimal(38,7), "
                           "dbl double, big binary, st struct<s string, ts timestamp, n int, b binary>, "
                           "m map<string,int>, arr array<string>")
    t = StructType([StructField(f.name, f.dataType, metadata=meta if f.name == "t" else {}) for f in t.fields])
    from decimal import Decimal
    utc = dt.timezone.utc
    row = (dt.datetime(2017, 7, 14, tzinfo=utc), dt.datetime(1970, 1, 1, 1, tzinfo=utc), TS.replace(microsecond=123000),
           dt.date(2017, 7, 14), 3_600_000, Decimal("0.0000001"), 1e10, b"x" * 100,
           ('a"b\\c\nd', dt.datetime(2024, 1, 1, 10, tzinfo=utc), None, b"hi"), {"k": 1}, ["x", 'y"'])
    df = typed_frame(spark, t, [row])
    names = [f.name for f in t.fields]
    out = transform(T + "HeaderFrom$Value", {"fields": ",".join(names), "headers": ",".join(names),
                                             "operation": "copy"}).apply(df)
    got = {h["key"]: bytes(h["value"]).decode() for h in rows(out)[0]["headers"]}
    assert got == {"mid": "2017-07-14", "early": "01:00:00.000Z", "ts": "2017-07-14T02:40:00.123Z",
                   "d": "2017-07-14", "t": "01:00:00.000Z", "dec": "1E-7", "dbl": "1.0E10", "big": "eHh4" * 33 + "eA==",
                   "st": '{"s":"a\\"b\\\\c\nd","ts":2024-01-01T10:00:00.000Z,"n":null,"b":"aGk="}',
                   "m": '{"k":1}', "arr": '["x","y\\""]'}
    cast = transform(T + "Cast$Value", {"spec": "big:string"}).apply(
        frame(spark, "struct<big binary>", [(b"x" * 100,)]))
    assert rows(cast)[0]["value"]["big"] == "eHh4" * 33 + "eA=="   # Cast too: Base64.getEncoder(), no CRLF
    env = "struct<before struct<id int>, after struct<id int>, source struct<ts timestamp>, op string>"
    dbz = frame(spark, env, [(None, (1,), (dt.datetime(2017, 7, 14, tzinfo=utc),), "c")]).withMetadata(
        "value", {"connect.name": "shop.public.customers.Envelope"})
    out = transform("io.debezium.transforms.ExtractNewRecordState", {"add.headers": "ts"}).apply(dbz)
    assert [(h["key"], bytes(h["value"])) for h in rows(out)[0]["headers"]] == [("__ts", b"2017-07-14")]


def test_header_from_a_field_a_schemaless_value_lacks_is_a_null_header(spark):
    """HeaderFrom.applySchemaless: ``value.get(field)`` of a missing key is null, so the header is
    null (a moved one is simply absent); with a schema the field must exist."""
    from connect.errors import DataError
    df = frame(spark, "struct<a int>", [(1,)])
    cfg = {"fields": "a,b", "headers": "ha,hb", "operation": "move"}
    out = rows(transform(T + "HeaderFrom$Value", cfg).apply(df))[0]
    assert [(h["key"], h["value"] and bytes(h["value"])) for h in out["headers"]] == [("ha", b"1"), ("hb", None)]
    assert out["value"].asDict() == {} and error(out) is None
    typed = df.withMetadata("value", {"connect.optional": True})
    with pytest.raises(DataError, match=r"\['b'\]"):
        transform(T + "HeaderFrom$Value", cfg).apply(typed)


def test_set_schema_metadata_names_the_schema_the_converter_writes(spark):
    """SetSchemaMetadata: the name and version land in the value column's metadata, which the
    JsonConverter writes in the envelope's schema; other schema metadata (optional, doc) is kept;
    ``replace.null.with.default`` fills a null field with its default as Struct.get does; a value
    without a schema fails (requireSchema), a null one passes; no predicate can gate it."""
    from connect import converters
    from connect.errors import DataError
    from connect.predicates import predicate
    from connect.transforms import Step, chain
    t = StructType([StructField("a", IntegerType()),
                    StructField("b", IntegerType(), metadata={"connect.default": "5", "connect.optional": True})])
    base = frame(spark, "struct<a int, b int>", [(1, None), None])
    df = typed_frame(spark, t, [(1, None), None]).withMetadata(
        "value", {"connect.name": "old", "connect.optional": True, "connect.doc": "orders"})
    S = T + "SetSchemaMetadata$Value"
    out = transform(S, {"schema.name": "com.example.Order", "schema.version": "2"}).apply(df)
    assert {k: out.schema["value"].metadata[k] for k in ("connect.name", "connect.version", "connect.doc")} == \
        {"connect.name": "com.example.Order", "connect.version": 2, "connect.doc": "orders"}
    written = converters.encode(out, converters.JsonConverter({"schemas.enable": "true"}), "value")
    text = bytes(rows(written)[0]["value"]).decode()
    assert '"optional":true,"name":"com.example.Order","version":2,"doc":"orders"}' in text
    assert text.endswith('"payload":{"a":1,"b":5}}')
    kept = transform(S, {"schema.version": "3", "replace.null.with.default": "false"}).apply(df)
    assert kept.schema["value"].metadata["connect.name"] == "old" and rows(kept)[0]["value"]["b"] is None
    schemaless = rows(transform(S, {"schema.name": "x"}).apply(base))
    assert [error(r) for r in schemaless] == ["Schema required for [updating schema metadata]", None]
    with pytest.raises(DataError, match="cannot be gated"):
        chain(df, [Step("s", transform(S, {"schema.name": "x"}), predicate(T + "predicates.RecordIsTombstone"))])


def test_debezium_unwraps_only_a_value_whose_schema_is_an_envelope(spark):
    """SmtManager.isValidEnvelope: a value schema not named ``….Envelope`` (or no schema at all,
    schemas.enable=false) passes unchanged; its tombstones are still handled first (dropped by
    default, kept with ``drop.tombstones=false``, with an ``op`` header ``d``)."""
    env = "struct<before struct<id int>, after struct<id int>, op string>"
    base = frame(spark, env, [(None, (1,), "c"), None])
    U = "io.debezium.transforms.ExtractNewRecordState"
    named = base.withMetadata("value", {"connect.name": "shop.public.customers.Envelope"})
    assert [r["value"].asDict() for r in rows(transform(U, {}).apply(named))] == [{"id": 1}]
    for df in (base, base.withMetadata("value", {"connect.name": "shop.public.customers.Value"})):
        out = rows(transform(U, {}).apply(df))
        assert [r["value"].asDict(recursive=True) for r in out] == [{"before": None, "after": {"id": 1}, "op": "c"}]
        out = rows(transform(U, {"drop.tombstones": "false", "add.headers": "op"}).apply(df))
        assert [r["value"] is None for r in out] == [False, True]
        assert [[(h["key"], bytes(h["value"])) for h in r["headers"]] for r in out] == [[], [("__op", b"d")]]
    text = frame(spark, "string", ["not an event", None])
    assert [r["value"] for r in rows(transform(U, {}).apply(text))] == ["not an event"]


_ROW = {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}], "optional": True,
        "name": "dummy.Value"}
_ENVELOPE = {"type": "struct", "optional": False, "name": "dummy.Envelope",
             "fields": [dict(_ROW, field="before"), dict(_ROW, field="after"),
                        {"type": "string", "optional": False, "field": "op"}]}


def _events(spark):
    """A create, a delete and the connector's tombstone, read by a JsonConverter (with schemas)."""
    import json
    from connect.converters import JsonConverter, decode
    payloads = [{"before": None, "after": {"id": 1}, "op": "c"}, {"before": {"id": 1}, "after": None, "op": "d"}]
    values = [json.dumps({"schema": _ENVELOPE, "payload": p}).encode() for p in payloads] + [None]
    f = frame(spark, "binary", values)
    return decode(f, JsonConverter({}).bind(f))


def _written(df, schemas):
    """(value bytes as text, headers' keys) per record, the value written by a JsonConverter."""
    from connect.converters import JsonConverter, encode
    out = rows(encode(df, JsonConverter({"schemas.enable": schemas})))
    assert [error(r) for r in out] == [None] * len(out)
    return [(None if r["value"] is None else bytes(r["value"]).decode(), [h["key"] for h in r["headers"]])
            for r in out]


def test_a_null_with_a_schema_from_a_transform_is_no_tombstone(spark):
    """ExtractField on a delete's null ``after`` gives newRecord(field.schema(), null), and
    Debezium's unwrap turns a delete into the same with delete.tombstone.handling.mode=tombstone
    (or delete.handling.mode=none): JsonConverter.fromConnectData writes it, as
    ``{"schema": …, "payload": null}`` or JSON ``null``; only a record whose schema is null too —
    the connector's own tombstone, passed through — is written as null bytes.
    RecordIsTombstone (value == null) holds for both."""
    from connect.predicates import predicate
    from connect.transforms import Step, chain
    is_tombstone = predicate(T + "predicates.RecordIsTombstone", {})
    mark = transform(T + "InsertHeader", {"header": "tombstone", "value.literal": "yes"})
    row_schema = json.dumps(_ROW, separators=(",", ":"))
    U = "io.debezium.transforms.ExtractNewRecordState"
    cases = [(T + "ExtractField$Value", {"field": "after"}),
             (U, {"delete.tombstone.handling.mode": "tombstone"}),
             (U, {"delete.handling.mode": "none", "drop.tombstones": "false"})]
    for cls, config in cases:
        out = chain(_events(spark), [Step("t", transform(cls, config)), Step("m", mark, is_tombstone)])
        if cls == U and "delete.handling.mode" not in config:   # its tombstone is dropped
            expected_true = [(f'{{"schema":{row_schema},"payload":{{"id":1}}}}', []),
                             (f'{{"schema":{row_schema},"payload":null}}', ["tombstone"])]
            expected_false = [('{"id":1}', []), ("null", ["tombstone"])]
        else:
            expected_true = [(f'{{"schema":{row_schema},"payload":{{"id":1}}}}', []),
                             (f'{{"schema":{row_schema},"payload":null}}', ["tombstone"]), (None, ["tombstone"])]
            expected_false = [('{"id":1}', []), ("null", ["tombstone"]), (None, ["tombstone"])]
        assert _written(out, "true") == expected_true, (cls, config)
        assert _written(out, "false") == expected_false, (cls, config)


def test_debezium_unwrap_keeps_the_row_schema_as_debezium_gives_it(spark):
    """The row's schema is ``after``'s (ExtractField: dummy.Value, optional); with fields added
    it is rebuilt by SchemaUtil.copySchemaBasics (name kept, required). Fields keep their schemas."""
    U = "io.debezium.transforms.ExtractNewRecordState"
    plain = transform(U, {}).apply(_events(spark))
    rewritten = transform(U, {"delete.tombstone.handling.mode": "rewrite"}).apply(_events(spark))
    for df, optional, fields in ((plain, True, ["id"]), (rewritten, False, ["id", "__deleted"])):
        schema = json.loads(_written(df, "true")[0][0])["schema"]
        assert (schema["name"], schema["optional"]) == ("dummy.Value", optional)
        assert [(f["field"], f["optional"]) for f in schema["fields"]] == list(zip(fields, [False, True]))
