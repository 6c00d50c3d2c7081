"""Transforms give Kafka's results whatever the Spark session's time zone (Kafka's SimpleDateFormat
is set to UTC), and on schemaless values and tombstones as Kafka's ``applySchemaless`` and
``Requirements`` treat them. Expected strings are Java 17's SimpleDateFormat in UTC and Kafka's
transform tests. One small frame per case."""
import datetime as dt

import pytest
from pyspark.sql import functions as F

from connect import record_frame
from connect.transforms import transform
from tests.spark.test_connect_transform_fidelity import error, frame, rows

pytestmark = pytest.mark.spark
T = "org.apache.kafka.connect.transforms."


@pytest.fixture
def new_york(spark):
    """The shared session in a zone with daylight saving, put back after the test."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


def test_dates_are_written_in_utc_whatever_the_session_time_zone(new_york):
    """TimestampConverter/TimestampRouter format with SimpleDateFormat in UTC: zone letters are
    UTC's and a UTC time in the session zone's daylight-saving gap (2021-03-14 02:30) is kept;
    Cast writes a Date by Values.dateFormatFor of its UTC midnight; MaskField masks a timestamp
    without zone to the epoch."""
    spark = new_york
    fmt = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX zzz zzzz Z h:mm a k K"
    out = transform(T + "TimestampConverter$Value", {"target.type": "string", "format": fmt}).apply(
        frame(spark, "bigint", [1500000000005, 1615689000000]))
    assert [r["value"] for r in rows(out)] == [
        "2017-07-14T02:40:00.005Z UTC Coordinated Universal Time +0000 2:40 AM 2 2",
        "2021-03-14T02:30:00.000Z UTC Coordinated Universal Time +0000 2:30 AM 2 2"]
    routed = transform(T + "TimestampRouter", {"timestamp.format": "yyyyMMdd-HH"}).apply(
        frame(spark, "int", [1]).withColumn("timestamp", F.timestamp_millis(F.lit(1615689000000))))
    assert rows(routed)[0]["topic"] == "orders-20210314-02"
    cast = transform(T + "Cast$Value", {"spec": "d:string"}).apply(frame(spark, "struct<d:date>", [(dt.date(2017, 7, 14),)]))
    assert rows(cast)[0]["value"]["d"] == "2017-07-14"
    ntz = frame(spark, "struct<t:timestamp_ntz>", [(dt.datetime(2017, 1, 1, 5),)])
    masked = transform(T + "MaskField$Value", {"fields": "t"}).apply(ntz)
    assert rows(masked)[0]["value"]["t"] == dt.datetime(1970, 1, 1)


def test_a_format_simple_date_format_refuses_is_refused():
    """``new SimpleDateFormat("XXXX")`` throws "invalid ISO 8601 format: length=4"."""
    from connect.errors import ConfigError
    with pytest.raises(ConfigError, match="invalid ISO 8601 format: length=4"):
        transform(T + "TimestampConverter$Value", {"target.type": "string", "format": "yyyy XXXX"})


def test_tombstones_fail_with_kafkas_requirements_messages(spark):
    """MaskField, HeaderFrom and ValueToKey have no null guard: a tombstone has no schema, so
    ``requireMap`` fails it ("Only Map objects supported in absence of schema for [...], found:
    null"); a null with a schema reaches ``requireStruct``."""
    df = frame(spark, "struct<a:int>", [None, None])
    df = df.withColumn(record_frame.typed_null("value"), df["offset"] == 1)
    cases = [("MaskField$Value", {"fields": "a"}, "mask fields"),
             ("HeaderFrom$Value", {"fields": "a", "headers": "h", "operation": "move"}, "header move"),
             ("ValueToKey", {"fields": "a"}, "copying fields from value to key")]
    for cls, config, purpose in cases:
        got = [error(r) for r in rows(transform(T + cls, config).apply(df))]
        assert got == [f"Only Map objects supported in absence of schema for [{purpose}], found: null",
                       f"Only Struct objects supported for [{purpose}], found: null"], cls


def test_schemaless_cast_and_insert_field_follow_apply_schemaless(spark):
    """Cast.applySchemaless puts every spec field, a missing one as null (its JSON has
    ``"b":null``); InsertField.applySchemaless puts ``record.timestamp()``, a Long of epoch ms
    (InsertFieldTest.schemalessInsertConfiguredFields), and InsertionSpec strips one ``!``."""
    df = frame(spark, "struct<a:bigint>", [(7,)])
    cast = rows(transform(T + "Cast$Value", {"spec": "a:string,b:int32"}).apply(df))[0]
    assert (cast["value"].asDict(), error(cast)) == ({"a": "7", "b": None}, None)
    inserted = transform(T + "InsertField$Value", {"timestamp.field": "ts", "partition.field": "p!!"}).apply(df)
    assert rows(inserted)[0]["value"].asDict() == {"a": 7, "p!": 0, "ts": 1500000000000}
