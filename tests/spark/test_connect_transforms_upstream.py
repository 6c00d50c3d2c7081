"""Transforms on a value with a Connect schema, as Kafka's own unit tests pin them
(connect/transforms/src/test/.../*Test.java): the schema a transform gives the record — its name,
version, doc, optionality and its fields' schemas — is what the JsonConverter writes, so a
consumer reading with Kafka's converter sees Kafka's schema. One small frame, one job per case."""
import datetime as dt
import json

import pytest
from pyspark.sql.types import (BinaryType, DoubleType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from connect import record_frame
from connect.converters import JsonConverter, encode
from connect.predicates import predicate
from connect.transform_base import TIME_METADATA
from connect.transforms import Step, chain, transform

pytestmark = pytest.mark.spark
T = "org.apache.kafka.connect.transforms."
TS = dt.datetime(2017, 7, 14, 2, 40, tzinfo=dt.timezone.utc)
REQ, OPT = {"connect.optional": False}, {"connect.optional": True}
TIME = "org.apache.kafka.connect.data.Time"
VALUE = StructType([
    StructField("id", IntegerType(), metadata=REQ),
    StructField("t", IntegerType(), metadata={**TIME_METADATA, **REQ}),
    StructField("ts", TimestampType(), metadata=REQ),
    StructField("qty", DoubleType(), metadata={**OPT, "connect.default": "-1.125"}),
    StructField("addr", StructType([StructField("zip", IntegerType(), metadata=REQ)]), metadata=OPT)])
BASICS = {"connect.name": "com.example.Order", "connect.version": 1, "connect.doc": "an order",
          "connect.parameters": {"origin": "shop"}}


def frame(spark, meta=None):
    """Two records of ``VALUE``: one full, one with a null optional struct."""
    cols = [("topic", StringType()), ("partition", IntegerType()), ("offset", LongType()),
            ("timestamp", TimestampType()), ("key", BinaryType()), ("value", VALUE),
            ("headers", record_frame.HEADERS_TYPE)]
    rows = [("orders", 0, 0, TS, None, (7, 3_600_000, TS, 2.5, (75001,)), []),
            ("orders", 0, 1, TS, None, (8, 0, TS, None, None), [])]
    df = spark.createDataFrame(rows, StructType([StructField(n, t) for n, t in cols]))
    return record_frame.from_source(df, keep_original=False).withMetadata("value", {**BASICS, **(meta or REQ)})


def written(df):
    """The JsonConverter's envelopes (schemas.enable) of ``df``'s values, and each row's error."""
    out = encode(df, JsonConverter({"schemas.enable": "true"})).orderBy("offset").collect()
    return ([None if r["value"] is None else json.loads(bytes(r["value"])) for r in out],
            [None if r[record_frame.ERROR] is None else r[record_frame.ERROR]["message"] for r in out])


def fields(schema):
    return {f["field"]: f for f in schema["fields"]}


CASES = [("InsertField$Value", {"topic.field": "topic_field!", "partition.field": "p", "timestamp.field": "at?"}),
         ("ReplaceField$Value", {"renames": "id:order_id"}),
         ("MaskField$Value", {"fields": "id,t"}),
         ("Cast$Value", {"spec": "id:int64"}),
         ("Flatten$Value", {}),
         ("TimestampConverter$Value", {"field": "ts", "target.type": "unix"}),
         ("HeaderFrom$Value", {"fields": "id", "headers": "h", "operation": "move"})]


GATEABLE = ("InsertField$Value", "ReplaceField$Value", "MaskField$Value", "HeaderFrom$Value")


@pytest.mark.parametrize("optional", [False, True])
def test_a_rebuilt_value_keeps_its_schema_name_version_doc_and_parameters(spark, optional):
    """SchemaUtil.copySchemaBasics (InsertField, ReplaceField, Cast, Flatten, TimestampConverter,
    HeaderFrom's move), MaskField's ``new Struct(value.schema())``: InsertFieldTest's
    copySchemaAndInsertConfiguredFields asserts name, version and doc; Cast, Flatten and
    TimestampConverter keep optionality. Also under a predicate (the column holds one schema)."""
    base = frame(spark, OPT if optional else REQ)
    never = predicate(T + "predicates.HasHeaderKey", {"name": "absent"})
    for cls, config in CASES:
        for steps in ([Step("x", transform(T + cls, config))], [Step("x", transform(T + cls, config), never)]):
            if steps[0].predicate is not None and cls not in GATEABLE:
                continue   # changes a field's type: a Spark column cannot hold both (see gated)
            values, errors = written(chain(base, steps))
            assert errors == [None, None], (cls, errors)
            schema = values[0]["schema"]
            got = {k: schema.get(k) for k in ("name", "version", "doc", "parameters", "optional")}
            assert got == {"name": "com.example.Order", "version": 1, "doc": "an order",
                           "parameters": {"origin": "shop"}, "optional": optional}, (cls, steps[0].predicate)


def test_field_schemas_are_kafkas_after_each_transform(spark):
    """The fields' schemas Kafka's transforms build: InsertField's ``!`` is required, no suffix and
    ``?`` optional; MaskField keeps a masked field's schema (a Time stays a Time); Cast and
    TimestampConverter keep the converted field's optionality; HeaderFrom's move keeps the other
    fields' schemas; Flatten makes a field under an optional struct optional (FlattenTest's
    testOptionalAndDefaultValuesNested), so a null parent writes a null Kafka can read back."""
    base = frame(spark)

    def schema_of(cls, config):
        values, errors = written(transform(T + cls, config).apply(base))
        assert errors == [None, None], (cls, errors)
        return fields(values[0]["schema"]), values

    f, _ = schema_of("InsertField$Value", {"topic.field": "topic_field!", "partition.field": "p",
                                           "timestamp.field": "at?"})
    assert [(f[n]["type"], f[n]["optional"]) for n in ("topic_field", "p", "at")] == \
        [("string", False), ("int32", True), ("int64", True)]
    assert f["at"]["name"] == "org.apache.kafka.connect.data.Timestamp"
    f, values = schema_of("MaskField$Value", {"fields": "id,t"})
    assert (f["t"].get("name"), f["t"]["optional"], f["id"]["optional"]) == (TIME, False, False)
    assert (values[0]["payload"]["id"], values[0]["payload"]["t"]) == (0, 0)
    f, _ = schema_of("Cast$Value", {"spec": "id:int64,qty:boolean"})   # CastTest.castFieldsWithSchema
    assert (f["id"]["type"], f["id"]["optional"]) == ("int64", False)
    assert (f["qty"]["type"], f["qty"]["optional"], f["qty"]["default"]) == ("boolean", True, True)
    f, _ = schema_of("TimestampConverter$Value", {"field": "ts", "target.type": "unix"})
    assert (f["ts"]["type"], f["ts"]["optional"]) == ("int64", False)
    f, _ = schema_of("HeaderFrom$Value", {"fields": "id", "headers": "h", "operation": "move"})
    assert list(f) == ["t", "ts", "qty", "addr"] and (f["t"].get("name"), f["t"]["optional"]) == (TIME, False)
    _, values = schema_of("HoistField$Value", {"field": "order"})   # HoistFieldTest.withSchema
    hoisted = values[0]["schema"]
    assert ("name" in hoisted, hoisted["optional"]) == (False, False)
    assert {k: fields(hoisted)["order"].get(k) for k in ("name", "version", "optional")} == \
        {"name": "com.example.Order", "version": 1, "optional": False}
    key = encode(transform(T + "ValueToKey", {"fields": "t,id"}).apply(base),
                 JsonConverter({"schemas.enable": "true"}, True), "key").orderBy("offset").first()["key"]
    schema = json.loads(bytes(key))["schema"]   # ValueToKeyTest.withSchema: the fields' schemas, required
    assert (schema["optional"], [(f["field"], f.get("name"), f["optional"]) for f in schema["fields"]]) == \
        (False, [("t", TIME, False), ("id", None, False)])
    f, values = schema_of("Flatten$Value", {})
    assert [(n, f[n]["optional"]) for n in f] == [("id", False), ("t", False), ("ts", False), ("qty", True),
                                                  ("addr.zip", True)]
    assert values[1]["payload"]["addr.zip"] is None


def test_mask_field_refuses_a_custom_replacement_for_a_time(spark):
    """MaskField.maskWithCustomReplacement: a Connect Time is a java.util.Date, which has no
    replacement mapping ("Cannot mask value of type class java.util.Date with custom
    replacement."): the record fails; a number field takes the replacement."""
    base = frame(spark)
    out = transform(T + "MaskField$Value", {"fields": "t", "replacement": "42"}).apply(base).orderBy("offset")
    assert [r[record_frame.ERROR]["message"] for r in out.collect()] == [
        "MaskField: cannot mask field 't' of type Time (java.util.Date) with custom replacement"] * 2
    ok = transform(T + "MaskField$Value", {"fields": "id", "replacement": "42"}).apply(base).orderBy("offset")
    assert [(r["value"]["id"], r[record_frame.ERROR]) for r in ok.collect()] == [(42, None), (42, None)]


def test_insert_field_offset_fails_a_source_record(spark):
    """InsertField's offset.field calls requireSinkRecord: a source record (no Kafka offset yet)
    fails ("Only SinkRecord supported for [field insertion]"); its tombstone passes unchanged; a
    sink record gets its offset."""
    from pyspark.sql import functions as F
    sink = frame(spark)
    source = sink.withColumn("offset", F.lit(None).cast("long")).withColumn(
        "value", F.when(F.col("value.id") == 7, F.col("value")))
    insert = transform(T + "InsertField$Value", {"offset.field": "off"})
    out = insert.apply(source).orderBy("value.id").collect()
    assert [(r["value"] is None, r[record_frame.ERROR] and r[record_frame.ERROR]["message"]) for r in out] == [
        (True, None), (False, "Only SinkRecord supported for [field insertion], found: "
                              "org.apache.kafka.connect.source.SourceRecord")]
    assert [r["value"]["off"] for r in insert.apply(sink).orderBy("offset").collect()] == [0, 1]
