"""The shipped connectors' pure parts against Kafka's: FileStreamSource's line splitting
(``FileStreamSourceTask.extractLine``), FileStreamSink's rendering (``String.valueOf`` of the Connect
value), TopicCopy's MirrorMaker 2 offsets, topic filter, config and offset checks, and the record
frame's guard detection."""
from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

pytestmark = pytest.mark.unit


# (bytes written, the (line, position) pairs Kafka's extractLine gives; positions in bytes)
LINE_CASES = {
    "LF": (b"a\nb\n", [("a", 2), ("b", 4)]),
    "CRLF": (b"a\r\nb\r\n", [("a", 3), ("b", 6)]),
    "CR only": (b"a\rb\rc\r", [("a", 2), ("b", 4)]),  # the last \r waits for the next byte
    "CR inside line": (b"a\rb\n", [("a", 2), ("b", 4)]),
    "CR CR LF": (b"a\r\r\nb\n", [("a", 2), ("", 4), ("b", 6)]),
    "empty line": (b"a\n\nb\n", [("a", 2), ("", 3), ("b", 5)]),
    "partial last": (b"a\nb", [("a", 2)]),
}


@pytest.mark.parametrize("name", sorted(LINE_CASES))
def test_file_source_ends_lines_as_kafkas_extract_line(tmp_path, name):
    from connect.file_stream import _FileLinesReader
    data, expected = LINE_CASES[name]
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    rows, end = _FileLinesReader({"path": str(path)}).read({"position": 0})
    assert list(rows) == expected
    assert end == {"position": expected[-1][1]}
    # A batch re-read between the same offsets gives the same lines.
    again = _FileLinesReader({"path": str(path)}).readBetweenOffsets({"position": 0}, end)
    assert list(again) == expected


def test_file_source_trailing_cr_waits_for_the_next_byte(tmp_path):
    """``\\r`` last in the file may be the first half of ``\\r\\n``: the line is emitted once the next
    byte says which, never as ``a`` then an empty line."""
    from connect.file_stream import _FileLinesReader
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\r")
    reader = _FileLinesReader({"path": str(path)})
    rows, end = reader.read({"position": 0})
    assert list(rows) == [] and end == {"position": 0}
    with open(path, "ab") as f:
        f.write(b"\nb\r")
    rows, end = reader.read(end)
    assert list(rows) == [("a", 3)]
    with open(path, "ab") as f:
        f.write(b"c")
    rows, end = reader.read(end)
    assert list(rows) == [("b", 5)] and end == {"position": 5}


def test_file_source_lines_span_read_chunks(tmp_path, monkeypatch):
    from connect import file_stream
    monkeypatch.setattr(file_stream, "_CHUNK", 3)
    path = tmp_path / "in.txt"
    path.write_bytes(b"abcdefg\r\nxy\r\rz\n")
    rows, _ = file_stream._FileLinesReader({"path": str(path)}).read({"position": 0})
    assert list(rows) == [("abcdefg", 9), ("xy", 12), ("", 13), ("z", 15)]


def test_file_source_batch_size_below_one_reads_one_line_a_batch(tmp_path):
    """Kafka's ``batch.size`` has no validator; its poll returns once it holds that many records,
    so 0 means one."""
    from connect.config import validate
    from connect.file_stream import _FileLinesReader
    props = {"name": "x", "connector.class": "FileStreamSource", "topic": "t", "file": "/tmp/f", "batch.size": "0"}
    assert validate(props).to_json()["error_count"] == 0
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\n")
    rows, end = _FileLinesReader({"path": str(path), "batchSize": "0"}).read({"position": 0})
    assert list(rows) == [("a", 2)] and end == {"position": 2}


def test_java_double_to_string():
    from connect.file_stream import java_double
    assert [java_double(x) for x in (3.0, 2.5, 100.0, 1e7, 9999999.0, 0.001, 1e-4, 1.234e-5, 1e20, -3.5,
                                     0.1 + 0.2, float("nan"), float("-inf"), -0.0)] == \
        ["3.0", "2.5", "100.0", "1.0E7", "9999999.0", "0.001", "1.0E-4", "1.234E-5", "1.0E20", "-3.5",
         "0.30000000000000004", "NaN", "-Infinity", "-0.0"]
    assert java_double(0.1, float32=True) == "0.1" and java_double(3.4028235e38, float32=True) == "3.4028235E38"


def test_file_sink_renders_values_as_kafkas_to_string():
    """``Struct.toString``, ``HashMap``/``ArrayList`` ``toString``, ``Double.toString``, bare strings,
    ``null``, from the value's own type."""
    from pyspark.sql import Row
    from pyspark.sql.types import (ArrayType, BinaryType, DateType, DecimalType, DoubleType, IntegerType, LongType,
                                   MapType, StringType, StructField, StructType, TimestampType)

    from connect.file_stream import java_string
    person = StructType([StructField("name", StringType()), StructField("age", IntegerType()),
                         StructField("tags", ArrayType(StringType()))])
    assert java_string(Row(name="ann", age=3, tags=["x", "y"]), person) == "Struct{name=ann,age=3,tags=[x, y]}"
    assert java_string(Row(name="bob", age=None, tags=None), person) == "Struct{name=bob}"
    assert java_string(None, person) == "null"
    # A struct inferred from plain JSON is JsonConverter's schemaless HashMap
    inferred = StructType([StructField("a", LongType()), StructField("b", StringType())])
    assert java_string(Row(a=1, b="x"), inferred, schemaless=True) == "{a=1, b=x}"
    assert java_string({"a": 1, "b": 2}, MapType(StringType(), LongType())) == "{a=1, b=2}"
    assert java_string([1, 2], ArrayType(LongType())) == "[1, 2]"
    assert java_string(3.0, DoubleType()) == "3.0"
    assert java_string("str", StringType()) == "str"
    assert java_string(Decimal("3.00"), DecimalType(38, 2)) == "3.00"      # BigDecimal.toString
    assert java_string(Decimal("2.0"), DecimalType(38, 1), schemaless=True) == "2.0"   # a Double
    assert java_string(Decimal("3"), DecimalType(38, 0), schemaless=True) == "3"       # a Long
    assert java_string(bytearray(b"raw"), BinaryType()) == "raw"
    assert java_string(datetime.date(1970, 1, 2), DateType()) == "Fri Jan 02 00:00:00 UTC 1970"
    at = datetime.datetime(2024, 3, 5, 7, 8, 9, tzinfo=datetime.timezone.utc)
    assert java_string(at, TimestampType()) == "Tue Mar 05 07:08:09 UTC 2024"


def test_file_sink_renders_a_variant_without_looking_at_the_batch():
    """A VARIANT (schemaless JSON of mixed shapes) renders each value as Kafka's JsonConverter
    reads it: a string bare, a fraction as a Double, an integer as a Long."""
    from pyspark.sql.types import VariantType, VariantVal

    from connect.file_stream import java_string

    class V(VariantVal):   # a VariantVal with a fixed Python value, no Spark session needed
        def __init__(self, value):
            self._value = value

        def toPython(self):
            return self._value

    for value, text in (("str", "str"), (Decimal("3.0"), "3.0"), (Decimal("1.10"), "1.1"), (7, "7"),
                        ({"a": 1, "b": "x"}, "{a=1, b=x}"), ([1, Decimal("2.5")], "[1, 2.5]"), (True, "true"),
                        (None, "null")):
        assert java_string(V(value), VariantType()) == text


def test_hash_map_order_is_javas():
    """``HashMap.toString`` iterates by bucket: the order Java prints (checked against a JVM)."""
    from connect.file_stream import _java_map
    keys = ["name", "age", "zeta", "id", "x", "Aa", "BB"]
    assert _java_map([(k, "1") for k in keys]) == "{zeta=1, Aa=1, BB=1, name=1, x=1, id=1, age=1}"
    many = _java_map([(f"k{i}", "1") for i in range(1, 31)])
    assert many.startswith("{k30=1, k11=1, k10=1, k13=1, k12=1,") and many.endswith("k28=1, k27=1, k29=1}")


def test_file_sink_writes_nothing_for_an_empty_batch(capsys, tmp_path):
    from connect.file_stream import FileStreamSink

    class Empty:
        schema = {"value": __import__("pyspark.sql.types", fromlist=["StructField"]).StructField(
            "value", __import__("pyspark.sql.types", fromlist=["StringType"]).StringType())}

        def orderBy(self, *a):
            return self

        def select(self, *a):
            return self

        def toLocalIterator(self):
            return iter(())

    sink = object.__new__(FileStreamSink)
    sink.values = {"file": None}
    sink.write_batch(Empty(), 0)
    assert capsys.readouterr().out == ""


# --------------------------------------------------------------------------- TopicCopy


def _copy(props: dict, stored: list | None = None):
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext
    from connect.topic_copy import TopicCopy
    config = parse_connector_config({"name": "c", "connector.class": "TopicCopy", **props})
    return TopicCopy(config, ConnectorContext(None, "b:9092", stored or []))


def test_topic_copy_stores_the_last_copied_offset_as_mirror_maker():
    """``MirrorSourceTask.convertRecord`` stores ``record.offset()``: Spark's end offset is the next
    one. A partition with nothing copied stores nothing."""
    copy = _copy({"topics": "orders"})
    assert copy.source_offsets({"orders": {"0": 3, "1": 0, "2": 10}}) == [
        ({"cluster": "source", "topic": "orders", "partition": 0}, {"offset": 2}),
        ({"cluster": "source", "topic": "orders", "partition": 2}, {"offset": 9})]


def test_topic_copy_starts_after_the_stored_offset():
    """``MirrorSourceTask.initializeConsumer`` seeks to the stored offset + 1."""
    import json
    stored = [({"cluster": "source", "topic": "orders", "partition": 1}, {"offset": 4}),
              ({"cluster": "elsewhere", "topic": "orders", "partition": 0}, {"offset": 9})]
    copy = _copy({"topics": "orders"}, stored)
    assert json.loads(copy._starting({"orders": 3})) == {"orders": {"0": -2, "1": 5, "2": -2}}
    assert _copy({"topics": "orders"})._starting({"orders": 3}) == "earliest"


def test_topic_copy_topics_are_mirror_makers_names_and_regexes():
    from connect.topic_copy import TopicFilter
    default = _copy({}).topic_filter()
    assert default.should_copy("orders") and default.should_copy("a.b")
    for internal in ("mm2-offsets.internal", "x-internal", "orders.replica", "__consumer_offsets"):
        assert not default.should_copy(internal), internal
    listed = _copy({"topics": "orders, audit-.*", "topics.exclude": "audit-secret"}).topic_filter()
    assert [t for t in ("orders", "orders2", "audit-eu", "audit-secret", "x") if listed.should_copy(t)] == \
        ["orders", "audit-eu"]
    assert not TopicFilter([], []).should_copy("orders")   # a blank list matches nothing
    import re
    pattern = re.compile(listed.subscribe_pattern())
    assert [t for t in ("orders", "orders2", "audit-eu", "audit-secret") if pattern.search(t)] == ["orders", "audit-eu"]
    regex = _copy({"topics.regex": "copied"}).topic_filter()
    assert regex.should_copy("copied") and not regex.should_copy("copied-not")


def test_topic_copy_refuses_mirror_maker_keys_it_does_not_implement():
    from connect.config import validate
    from connect.plugins import check_connector_config
    from connect.errors import ConfigError
    props = {"name": "x", "connector.class": "TopicCopy", "topics": "a",
             "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}
    errors = {c["value"]["name"]: c["value"]["errors"] for c in validate(props).to_json()["configs"]
              if c["value"]["errors"]}
    assert list(errors) == ["replication.policy.class"]
    assert "not supported by TopicCopy" in errors["replication.policy.class"][0]
    with pytest.raises(ConfigError):
        check_connector_config("x", props)
    assert validate({"name": "x", "connector.class": "TopicCopy", "topics": "(bad"}).to_json()["error_count"] == 1


@pytest.mark.parametrize("partition, offset, message", [
    (None, {"offset": 1}, "Source partitions may not be null"),
    ({"topic": "t", "partition": 0}, {"offset": 1},
     "Source partition {topic=t, partition=0} is missing the 'cluster' key, which is required"),
    ({"cluster": 1, "topic": "t", "partition": 0}, {"offset": 1},
     "Source partition {cluster=1, topic=t, partition=0} has an invalid value 1 for the 'cluster' key, which must "
     "be a string"),
    ({"cluster": "c", "partition": 0}, {"offset": 1},
     "Source partition {cluster=c, partition=0} is missing the 'topic' key, which is required"),
    ({"cluster": "c", "topic": "t"}, {"offset": 1},
     "Source partition {cluster=c, topic=t} is missing the 'partition' key, which is required"),
    ({"cluster": "c", "topic": "t", "partition": "0"}, {"offset": 1},
     "Source partition {cluster=c, topic=t, partition=0} has an invalid value 0 for the 'partition' key, which "
     "must be an integer"),
    ({"cluster": "c", "topic": "t", "partition": 2 ** 31}, {"offset": 1},
     "Source partition {cluster=c, topic=t, partition=2147483648} has an invalid value 2147483648 for the "
     "'partition' key, which must be an integer"),
    ({"cluster": "c", "topic": "t", "partition": -1}, {"offset": 1},
     "Source partition {cluster=c, topic=t, partition=-1} has an invalid value -1 for the 'partition' key, which "
     "cannot be negative"),
    ({"cluster": "c", "topic": "t", "partition": 0}, {"position": 1},
     "Source offset {position=1} for source partition {cluster=c, topic=t, partition=0} is missing the 'offset' "
     "key, which is required"),
    ({"cluster": "c", "topic": "t", "partition": 0}, {"offset": "abc"},
     "Source offset {offset=abc} for source partition {cluster=c, topic=t, partition=0} has an invalid value abc "
     "for the 'offset' key, which must be an integer"),
    ({"cluster": "c", "topic": "t", "partition": 0}, {"offset": 1.5},
     "Source offset {offset=1.5} for source partition {cluster=c, topic=t, partition=0} has an invalid value 1.5 "
     "for the 'offset' key, which must be an integer"),
    ({"cluster": "c", "topic": "t", "partition": 0}, {"offset": -1},
     "Source offset {offset=-1} for source partition {cluster=c, topic=t, partition=0} has an invalid value -1 "
     "for the 'offset' key, which cannot be negative"),
])
def test_topic_copy_alter_offsets_has_mirror_makers_checks(partition, offset, message):
    from connect.errors import ConnectError
    from connect.topic_copy import TopicCopy
    with pytest.raises(ConnectError) as e:
        TopicCopy.alter_offsets({"topics": "t"}, [(partition, offset)])
    assert str(e.value) == message


def test_topic_copy_alter_offsets_accepts_mirror_maker_offsets_and_tombstones():
    from connect.topic_copy import TopicCopy
    assert TopicCopy.alter_offsets({}, [({"garbage": 1}, None),
                                        ({"cluster": "c", "topic": "t", "partition": 0}, {"offset": 0})])


# --------------------------------------------------------------------------- record frame guard


def test_raised_matches_only_the_guards_runtime_raise():
    """Spark's messages (4.x): the guard's own raise, and an analysis error about something else
    that prints the plan holding the guard's literal."""
    from connect.record_frame import raised
    runtime = Exception("[USER_RAISED_EXCEPTION] <<connect:fail>>bad row<</connect>> SQLSTATE: P0001")
    assert raised(runtime) == ("fail", "bad row")
    wrapped = RuntimeError("the write failed")
    wrapped.__cause__ = runtime
    assert raised(wrapped) == ("fail", "bad row")
    plan = Exception(
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `nope` cannot be "
        "resolved. SQLSTATE: 42703;\n'Project ['nope]\n+- Project [CASE WHEN cast(raise_error(USER_RAISED_EXCEPTION, "
        "map(errorMessage, concat(<<connect:fail>>, bad row, <</connect>>)), NullType) as boolean) THEN s#1 END AS "
        "v#2]\n")
    assert raised(plan) is None
