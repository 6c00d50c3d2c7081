"""Kafka's transforms against tables of inputs and outputs from Kafka's documentation examples
(kafka.apache.org/documentation/#connect_transforms and each SMT's docs), one frame per table."""
import datetime as dt

import pytest
from pyspark.sql import functions as F

from connect import record_frame
from connect.errors import DataError
from connect.predicates import predicate
from connect.transforms import Step, chain, transform

pytestmark = pytest.mark.spark
T = "org.apache.kafka.connect.transforms."
TS = dt.datetime(2017, 7, 14, 2, 40, tzinfo=dt.timezone.utc)
ENVELOPE = {"connect.name": "customers.public.customers.Envelope"}   # the value schema's name, as the converter sets it


def frame(spark, value_ddl, values, topics=None, headers=None, ts=TS):
    rows = [(topics[i] if topics else "orders", 0, i, ts, None, v, headers[i] if headers else [])
            for i, v in enumerate(values)]
    schema = (f"topic string, partition int, offset long, timestamp timestamp, key binary, value {value_ddl}, "
              "headers array<struct<key string, value binary>>")
    return record_frame.from_source(spark.createDataFrame(rows, schema), keep_original=False)


def values(df, col="value"):
    return [r[col] for r in df.orderBy("offset").collect()]


def as_dict(v):
    return None if v is None else v.asDict(recursive=True)


def test_field_transforms(spark):
    f = frame(spark, "struct<id int, name string, ssn string, salary double, address struct<city string, zip int>>",
              [(1, "Alice", "123-45-6789", 1000.5, ("Paris", 75001)), None])
    cases = {
        (T + "InsertField$Value", (("topic.field", "t"), ("partition.field", "p!"), ("offset.field", "o?"),
                                   ("static.field", "dc"), ("static.value", "east"))):
            [{"id": 1, "name": "Alice", "ssn": "123-45-6789", "salary": 1000.5,
              "address": {"city": "Paris", "zip": 75001}, "t": "orders", "p": 0, "o": 0, "dc": "east"}, None],
        (T + "ReplaceField$Value", (("exclude", "ssn,salary,address"), ("renames", "name:full_name"))):
            [{"id": 1, "full_name": "Alice"}, None],
        (T + "ReplaceField$Value", (("include", "id,name"),)): [{"id": 1, "name": "Alice"}, None],
        (T + "MaskField$Value", (("fields", "ssn,salary,id"),)):
            [{"id": 0, "name": "Alice", "ssn": "", "salary": 0.0, "address": {"city": "Paris", "zip": 75001}}, None],
        (T + "MaskField$Value", (("fields", "ssn"), ("replacement", "<redacted>"))):
            [{"id": 1, "name": "Alice", "ssn": "<redacted>", "salary": 1000.5,
              "address": {"city": "Paris", "zip": 75001}}, None],
        (T + "Flatten$Value", (("delimiter", "_"),)):
            [{"id": 1, "name": "Alice", "ssn": "123-45-6789", "salary": 1000.5, "address_city": "Paris",
              "address_zip": 75001}, None],
        (T + "ExtractField$Value", (("field", "address.city"), ("field.syntax.version", "V2"))): ["Paris", None],
        (T + "ExtractField$Value", (("field", "name"),)): ["Alice", None],
        (T + "HoistField$Value", (("field", "line"),)): [None, None],  # checked below
        (T + "Cast$Value", (("spec", "id:string,salary:int32"),)):
            [{"id": "1", "name": "Alice", "ssn": "123-45-6789", "salary": 1000,
              "address": {"city": "Paris", "zip": 75001}}, None],
    }
    for (cls, cfg), expected in cases.items():
        out = transform(cls, dict(cfg)).apply(f)
        got = values(out)
        if cls.endswith("HoistField$Value"):
            assert got[0]["line"]["name"] == "Alice" and got[1]["line"] is None, cls
            continue
        assert [as_dict(g) if hasattr(g, "asDict") else g for g in got] == expected, cls


def test_value_to_key_and_header_from(spark):
    f = frame(spark, "struct<userId int, name string>", [(42, "Bob"), None])
    out = transform(T + "ValueToKey", {"fields": "userId"}).apply(f)
    rows = out.orderBy("offset").collect()
    assert rows[0]["key"].asDict() == {"userId": 42} and rows[0][record_frame.ERROR] is None
    assert rows[1][record_frame.ERROR]["class"] == T + "ValueToKey"  # Kafka fails a tombstone here
    out = transform(T + "HeaderFrom$Value", {"fields": "userId,name", "headers": "uid,who",
                                             "operation": "move"}).apply(f)
    r = out.orderBy("offset").first()
    assert r["value"].asDict() == {} and [(h["key"], bytes(h["value"])) for h in r["headers"]] == \
        [("uid", b"42"), ("who", b"Bob")]


def test_cast(spark):
    # Kafka's CastTest: narrowing wraps, strings parse or fail per row, booleans, bytes to base64.
    f = frame(spark, "struct<big long, d double, s string, b boolean, raw binary>",
              [(300, 1e20, "127", True, bytearray(b"\x01\x02")), (-129, -2.5, "12x", False, bytearray(b""))])
    out = transform(T + "Cast$Value", {"spec": "big:int8,d:int32,s:int8,b:int32,raw:string"}).apply(f)
    rows = out.orderBy("offset").collect()
    assert rows[0]["value"].asDict() == {"big": 44, "d": 2147483647, "s": 127, "b": 1, "raw": "AQI="}
    assert rows[0][record_frame.ERROR] is None
    assert rows[1][record_frame.ERROR]["message"] == "Cast: field s (12x) cannot be cast to int8"
    whole = transform(T + "Cast$Value", {"spec": "string"}).apply(frame(spark, "long", [42, None]))
    assert values(whole) == ["42", None]
    bools = transform(T + "Cast$Value", {"spec": "boolean"}).apply(frame(spark, "string", ["true", "TRUE", "yes"]))
    assert values(bools) == [True, True, False]
    floats = transform(T + "Cast$Value", {"spec": "float64"}).apply(frame(spark, "string", ["Infinity", "inf", "1.5f"]))
    assert values(floats) == [float("inf"), None, 1.5] and errors(floats)[1] is not None   # Double.parseDouble
    # a Timestamp or Date as a string is Values.dateFormatFor's: a time below one day after the
    # epoch, a date at midnight, else the timestamp (Kafka's Cast, in UTC)
    utc = dt.timezone.utc
    times = frame(spark, "struct<ts timestamp, d date>", [
        (dt.datetime(2017, 7, 14, tzinfo=utc), dt.date(1970, 1, 1)),
        (dt.datetime(1969, 12, 31, 23, tzinfo=utc), dt.date(1969, 7, 20)),
        (dt.datetime(2017, 7, 14, 2, 40, 0, 5000, tzinfo=utc), dt.date(2017, 7, 14))])
    assert [as_dict(v) for v in values(transform(T + "Cast$Value", {"spec": "ts:string,d:string"}).apply(times))] == [
        {"ts": "2017-07-14", "d": "00:00:00.000Z"}, {"ts": "23:00:00.000Z", "d": "00:00:00.000Z"},
        {"ts": "2017-07-14T02:40:00.005Z", "d": "2017-07-14"}]


def test_timestamp_converter(spark):
    # The docs' example: field "event_date" from "yyyy-MM-dd" strings to Date, and the reverse.
    f = frame(spark, "struct<event_date string, ms long>",
              [("2017-12-31", 1500000000000), ("not a date", 0)])
    conv = lambda **c: transform(T + "TimestampConverter$Value", c).apply(f)  # noqa: E731
    out = conv(**{"field": "event_date", "target.type": "Date", "format": "yyyy-MM-dd"}).orderBy("offset").collect()
    assert out[0]["value"]["event_date"] == dt.date(2017, 12, 31) and out[0][record_frame.ERROR] is None
    assert "could not parse" in out[1][record_frame.ERROR]["message"]
    cases = [({"field": "ms", "target.type": "string", "format": "yyyy-MM-dd'T'HH:mm:ss.SSS"},
              ["2017-07-14T02:40:00.000", "1970-01-01T00:00:00.000"]),
             # unix.precision reads the input long too, as Kafka's does: seconds in, seconds out.
             ({"field": "ms", "target.type": "unix", "unix.precision": "seconds"}, [1500000000000, 0]),
             ({"field": "ms", "target.type": "Timestamp"},
              [dt.datetime(2017, 7, 14, 2, 40), dt.datetime(1970, 1, 1)]),
             # a Connect Time is an int of milliseconds of the day (02:40 is 9600000), marked as Time
             ({"field": "ms", "target.type": "Time"}, [9_600_000, 0])]
    for cfg, expected in cases:
        got = [v["ms"] for v in values(conv(**cfg))]
        got = [g.replace(tzinfo=None) if isinstance(g, dt.datetime) else g for g in got]
        assert got == expected, cfg
    time_field = conv(**{"field": "ms", "target.type": "Time"}).schema["value"].dataType["ms"]
    assert time_field.metadata["connect.name"] == "org.apache.kafka.connect.data.Time"
    micros = transform(T + "TimestampConverter$Value", {"target.type": "unix", "unix.precision": "microseconds"})
    assert values(micros.apply(frame(spark, "timestamp", [TS]))) == [1500000000000000]


def test_routers_headers_and_predicates(spark):
    f = frame(spark, "string", ["a", None, "c"], topics=["logs", "metrics", "logs.app"],
              headers=[[("trace", b"1")], [], [("trace", b"2"), ("x", b"y")]])
    r = transform(T + "RegexRouter", {"regex": "(.*)", "replacement": "$1-routed"}).apply(f)
    assert values(r, "topic") == ["logs-routed", "metrics-routed", "logs.app-routed"]
    r = transform(T + "RegexRouter", {"regex": "logs", "replacement": "x"}).apply(f)  # whole-name match only
    assert values(r, "topic") == ["x", "metrics", "logs.app"]
    r = transform(T + "TimestampRouter", {"topic.format": "${topic}_${timestamp}"}).apply(f)
    assert values(r, "topic") == ["logs_20170714", "metrics_20170714", "logs.app_20170714"]
    h = transform(T + "InsertHeader", {"header": "source", "value.literal": "riverlog"}).apply(
        transform(T + "DropHeaders", {"headers": "trace"}).apply(f))
    assert [[h2["key"] for h2 in hs] for hs in values(h, "headers")] == [["source"], ["source"], ["x", "source"]]
    filt = T + "Filter"
    steps = [Step("dropTombstones", transform(filt), predicate(T + "predicates.RecordIsTombstone")),
             Step("keepLogs", transform(filt), predicate(T + "predicates.TopicNameMatches", {"pattern": "logs.*"}),
                  negate=True),
             Step("mark", transform(T + "InsertHeader", {"header": "traced", "value.literal": "y"}),
                  predicate(T + "predicates.HasHeaderKey", {"name": "x"}))]
    out = chain(f, steps)
    assert values(out, "topic") == ["logs", "logs.app"]
    assert [[x["key"] for x in hs] for hs in values(out, "headers")] == [["trace"], ["trace", "x", "traced"]]


def test_predicate_gating_widens_structs(spark):
    f = frame(spark, "struct<id int>", [(1,), (2,)], topics=["a", "b"])
    step = Step("ins", transform(T + "InsertField$Value", {"static.field": "s", "static.value": "v"}),
                predicate(T + "predicates.TopicNameMatches", {"pattern": "a"}))
    assert [as_dict(v) for v in values(chain(f, [step]))] == [{"id": 1, "s": "v"}, {"id": 2, "s": None}]
    hoist = Step("h", transform(T + "HoistField$Value", {"field": "x"}), step.predicate)
    with pytest.raises(DataError, match="one type"):
        chain(frame(spark, "string", ["a"]), [hoist])


def test_debezium_unwrap(spark):
    row = "struct<id int, name string>"
    f = frame(spark, f"struct<before {row}, after {row}, source struct<table string, lsn long>, op string, ts_ms long>",
              [(None, (1, "a"), ("customers", 10), "c", 100), ((1, "a"), (1, "b"), ("customers", 11), "u", 101),
               ((1, "b"), None, ("customers", 12), "d", 102), None]).withMetadata("value", ENVELOPE)
    U = "io.debezium.transforms.ExtractNewRecordState"
    cases = [({}, [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]),
             ({"drop.tombstones": "false", "delete.handling.mode": "none"},
              [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}, None, None]),
             ({"delete.handling.mode": "rewrite", "add.fields": "op,table,source.lsn"},
              [{"id": 1, "name": "a", "__op": "c", "__table": "customers", "__source_lsn": 10, "__deleted": "false"},
               {"id": 1, "name": "b", "__op": "u", "__table": "customers", "__source_lsn": 11, "__deleted": "false"},
               {"id": 1, "name": "b", "__op": "d", "__table": "customers", "__source_lsn": 12, "__deleted": "true"}]),
             # a delete becomes a tombstone and the connector's own is dropped (handleTombstoneRecord)
             ({"delete.tombstone.handling.mode": "tombstone"}, [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}, None]),
             ({"delete.tombstone.handling.mode": "delete-to-tombstone"},
              [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}, None]),
             ({"delete.tombstone.handling.mode": "rewrite-with-tombstone"},
              [{"id": 1, "name": "a", "__deleted": "false"}, {"id": 1, "name": "b", "__deleted": "false"},
               {"id": 1, "name": "b", "__deleted": "true"}, None])]
    for cfg, expected in cases:
        assert [as_dict(v) for v in values(transform(U, cfg).apply(f))] == expected, cfg
    h = transform(U, {"add.headers": "op"}).apply(f)
    assert [[(x["key"], bytes(x["value"])) for x in hs] for hs in values(h, "headers")] == [[("__op", b"c")], [("__op", b"u")]]


def test_debezium_unwrap_follows_extract_new_record_states_source(spark):
    """Cases of Debezium's ExtractNewRecordStateTest: a truncate, or a delete without its row, is
    dropped; __deleted comes before the added fields; a bare id is the transaction's; a field may be
    renamed (field:name) and one the event lacks is skipped; a kept tombstone gets op "d"; a record
    that is not a change event passes as it is."""
    row = "struct<id int, name string>"
    f = frame(spark, f"struct<before {row}, after {row}, source struct<table string, lsn long>, op string, "
                     "ts_ms long, transaction struct<id string, total_order long>>",
              [(None, (1, "a"), ("customers", 10), "c", 100, ("571", 1)),
               (None, None, ("customers", 11), "t", 101, None),      # a truncate
               (None, None, ("customers", 12), "d", 102, None),      # REPLICA IDENTITY NOTHING
               ((1, "a"), None, ("customers", 13), "d", 103, None), None]).withMetadata("value", ENVELOPE)
    U = "io.debezium.transforms.ExtractNewRecordState"
    out = transform(U, {"delete.tombstone.handling.mode": "rewrite-with-tombstone",
                        "add.fields": "op:OP,id,source.lsn,nothere", "add.headers": "op,xmin"}).apply(f)
    got = values(out)
    assert [list(v.asDict()) if v else None for v in got] == [["id", "name", "__deleted", "__OP", "__id", "__source_lsn"]] * 2 + [None]
    assert [as_dict(v) for v in got[:2]] == [
        {"id": 1, "name": "a", "__deleted": "false", "__OP": "c", "__id": "571", "__source_lsn": 10},
        {"id": 1, "name": "a", "__deleted": "true", "__OP": "d", "__id": None, "__source_lsn": 13}]
    assert [[(x["key"], bytes(x["value"])) for x in hs] for hs in values(out, "headers")] == \
        [[("__op", b"c")], [("__op", b"d")], [("__op", b"d")]]
    beat = frame(spark, "struct<ts_ms long>", [(5,)])
    assert as_dict(values(transform(U, {}).apply(beat))[0]) == {"ts_ms": 5}


def errors(df):
    return [r[record_frame.ERROR] and r[record_frame.ERROR]["message"] for r in df.orderBy("offset").collect()]


def test_edge_values_are_kafkas_or_fail_one_record_never_the_batch(spark):
    """Values at the edges, against what Kafka's SMTs do with them (their sources and CastTest):
    Java's narrowing and saturation, BigDecimal's conversions, null kept null, and a value Spark
    cannot hold failing its record (the dead-letter queue's) rather than the whole batch."""
    from decimal import Decimal
    wide = frame(spark, "struct<d decimal(38,0), b boolean>", [(Decimal(2 ** 31), None), (Decimal(2 ** 64), True)])
    cast = lambda spec: [as_dict(v) for v in values(transform(T + "Cast$Value", {"spec": spec}).apply(wide))]  # noqa: E731
    assert cast("d:int32,b:int8") == [{"d": -(2 ** 31), "b": None}, {"d": 0, "b": 1}]     # BigDecimal.intValue()
    assert [v["d"] for v in cast("d:boolean")] == [True, False]                           # longValue() != 0
    small = frame(spark, "struct<d decimal(38,10)>", [(Decimal("0.0000001"),), (Decimal("0"),), (Decimal("-12.5"),)])
    assert [v["d"] for v in values(transform(T + "Cast$Value", {"spec": "d:string"}).apply(small))] == \
        ["1.000E-7", "0E-10", "-12.5000000000"]                                           # BigDecimal.toString()
    # TimestampConverter: TimeUnit saturates; a millisecond count past Spark's timestamps fails its record
    longs = frame(spark, "bigint", [2 ** 62, 1_500_000_000_000_000_000, 1_500_000_000_000])
    secs = transform(T + "TimestampConverter$Value", {"target.type": "unix", "unix.precision": "seconds"})
    assert values(secs.apply(longs.where("offset = 0"))) == [(2 ** 63 - 1) // 1000]
    out = transform(T + "TimestampConverter$Value", {"target.type": "string", "format": "yyyy-MM-ddd EEEEE"}).apply(longs)
    assert values(out)[2] == "2017-07-014 Friday"                                         # SimpleDateFormat's widths
    assert errors(out)[2] is None and all("past Spark's timestamp range" in e for e in errors(out)[:2])
    nanos = transform(T + "TimestampConverter$Value", {"target.type": "unix", "unix.precision": "nanoseconds"})
    assert values(nanos.apply(frame(spark, "timestamp", [dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc)]))) == \
        [2 ** 63 - 1]
    # MaskField: the replacement is BigDecimal's, narrowed; a tombstone (no schema) fails as requireMap fails
    masked = frame(spark, "struct<i int, b tinyint>", [(7, 7), None])
    out = transform(T + "MaskField$Value", {"fields": "i,b", "replacement": "1e3"}).apply(masked)
    assert as_dict(values(out)[0]) == {"i": 1000, "b": -24}
    assert errors(out)[1] == "Only Map objects supported in absence of schema for [mask fields], found: null"
    # HeaderFrom writes as SimpleHeaderConverter: bytes base64, a struct's null fields kept
    hf = frame(spark, "struct<raw binary, s struct<a string, n int>>", [(b"\x01\x02", (None, 1)), None])
    out = transform(T + "HeaderFrom$Value", {"fields": "raw,s", "headers": "r,s", "operation": "copy"}).apply(hf)
    assert [bytes(h["value"]) for h in out.orderBy("offset").first()["headers"]] == [b"AQI=", b'{"a":null,"n":1}']
    assert errors(out)[1] == "Only Map objects supported in absence of schema for [header copy], found: null"
    # RegexRouter takes Java's named groups and refuses Python's
    router = transform(T + "RegexRouter", {"regex": "(?<t>ord)ers", "replacement": "${t}-x"})
    assert values(router.apply(frame(spark, "string", ["v"])), "topic") == ["ord-x"]
    with pytest.raises(Exception, match=r"\(\?P"):
        transform(T + "RegexRouter", {"regex": "(?P<t>.*)", "replacement": "x"})
    # SimpleDateFormat's S is the milliseconds padded to the letter count, in both directions
    # (java: "ss.S" formats 1500000000005 as 00.5, 1500000000050 as 00.50, parses "07.5" as 7005 ms)
    ms = frame(spark, "bigint", [1_500_000_000_123, 1_500_000_000_005, 1_500_000_000_050])
    assert values(transform(T + "TimestampConverter$Value", {"target.type": "string", "format": "ss.S"}).apply(ms)) \
        == ["00.123", "00.5", "00.50"]
    assert values(transform(T + "TimestampConverter$Value", {"target.type": "unix", "format": "ss.S"}).apply(
        frame(spark, "string", ["07.5"]))) == [7005]
    # E without d: GregorianCalendar takes the first such weekday of the month (java: 2017-01-06,
    # 2017-03-03); with d the weekday is ignored
    days = transform(T + "TimestampConverter$Value", {"target.type": "Date", "format": "EEE MM yyyy"}).apply(
        frame(spark, "string", ["Fri 01 2017", "Fri 03 2017", "Sat 13 2017"]))
    assert values(days) == [dt.date(2017, 1, 6), dt.date(2017, 3, 3), dt.date(2018, 1, 6)]
    by_day = transform(T + "TimestampConverter$Value", {"target.type": "Date", "format": "MM D yyyy"})
    assert values(by_day.apply(frame(spark, "string", ["03 100 2017"]))) == [dt.date(2017, 4, 10)]   # D over M
    out = transform(T + "TimestampConverter$Value", {"target.type": "Timestamp", "format": "EEE yyyy"}).apply(
        frame(spark, "string", ["Fri 2017"]))
    assert [v.replace(tzinfo=None) for v in values(out)] == [dt.datetime(2017, 1, 6)] and errors(out) == [None]


def test_a_rename_onto_a_kept_field_is_refused_naming_it(spark):
    f = frame(spark, "struct<a int, b int>", [(1, 2)])
    with pytest.raises(DataError, match=r"\['b'\] twice"):
        transform(T + "ReplaceField$Value", {"renames": "a:b"}).apply(f)
    assert as_dict(values(transform(T + "ReplaceField$Value", {"renames": "a:b", "exclude": "b"}).apply(f))[0]) == \
        {"b": 1}
