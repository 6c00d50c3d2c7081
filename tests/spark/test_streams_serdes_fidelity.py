"""Serdes on Spark against Kafka's: windowed keys an application writes read back in Kafka's
``TimeWindowedDeserializer``/``SessionWindowedDeserializer`` layouts, the windowed serdes' Spark
side agrees with their Python side, and a poison record under ``LogAndFailExceptionHandler``
fails the application naming its topic, partition and offset, as Kafka's handler logs it."""
from __future__ import annotations

import struct

import pytest

from broker.client import Producer, murmur2
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Produced
from streams.record import Windowed
from streams.serdes import Serdes, WindowedSerdes
from streams.windows import TimeWindows
from tests.spark.test_sink import make_topic, read_all
from tests.spark.test_streams_app import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

BASE = 1_700_000_000_000
OUT_PARTITIONS = 6
TIME = WindowedSerdes.timeWindowedSerdeFrom(Serdes.String(), 10_000)
SESSION = WindowedSerdes.sessionWindowedSerdeFrom(Serdes.Long())


def _long(x: int) -> bytes:
    return struct.pack(">q", x)


def _produce(servers, topic, records):
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for k, v, ts in records:
            p.produce(topic, key=k, value=v, timestamp=ts, partition=0)
        p.flush(30)


def test_windowed_serdes_decode_and_encode_agree_with_python(spark):
    from datetime import datetime, timezone
    values = [(Windowed("ann", BASE, BASE + 10_000), Windowed(7, BASE, BASE + 3_000)),
              (Windowed("", -5_000, 5_000), Windowed(-1, 0, 0))]
    rows = [(TIME.serialize(t), SESSION.serialize(s)) for t, s in values] + [(None, None), (b"", b"")]
    df = spark.createDataFrame(rows, "t binary, s binary")
    decoded = df.select(TIME.decode(df.t).alias("t"), SESSION.decode(df.s).alias("s"))
    out = decoded.select("t", "s", TIME.encode(decoded.t).alias("et"), SESSION.encode(decoded.s).alias("es")).collect()

    def ms(d):
        return int(d.replace(tzinfo=timezone.utc).timestamp() * 1000) if isinstance(d, datetime) else d
    got = {(r.t.key, ms(r.t.start), ms(r.t.end), r.s.key, ms(r.s.start), ms(r.s.end)): (bytes(r.et), bytes(r.es))
           for r in out if r.t is not None}
    want = {(t.key, t.start, t.end, s.key, s.start, s.end): (TIME.serialize(t), SESSION.serialize(s))
            for t, s in values}
    assert got == want
    assert sum(1 for r in out if r.t is None and r.s is None) == 2     # null and empty keys read as null


def test_list_serde_decode_and_encode_agree_with_python(spark):
    import uuid
    serdes = (Serdes.ListSerde(Serdes.Integer()), Serdes.ListSerde(Serdes.String()), Serdes.ListSerde(Serdes.UUID()))
    values = [([1, None, -2], ["a", None, ""], [uuid.UUID(int=1), None]), ([], [], []), (None, None, None)]
    rows = [(i, *(serde.serialize(v) for serde, v in zip(serdes, row))) for i, row in enumerate(values)]
    df = spark.createDataFrame(rows, "i int, a binary, b binary, c binary")
    decoded = df.select("i", *(serde.decode(df[c]).alias(c) for serde, c in zip(serdes, "abc")))
    out = decoded.select("*", *(serde.encode(decoded[c]).alias(f"e{c}") for serde, c in zip(serdes, "abc"))).collect()
    for r in sorted(out, key=lambda r: r.i):
        row = values[r.i]
        assert [r.a, r.b, r.c] == [row[0], row[1], None if row[2] is None else [str(u) if u else u for u in row[2]]]
        assert [None if r[f"e{c}"] is None else bytes(r[f"e{c}"]) for c in "abc"] == list(rows[r.i][1:])
    bad = spark.createDataFrame([(b"\x05",)], "b binary")
    assert bad.select(serdes[1].decode(bad.b, on_error="null").alias("v")).collect()[0].v is None


@pytest.mark.timeout(300)
def test_windowed_keys_written_by_to_read_back_in_kafkas_layout(spark, spark_broker, tmp_path):
    """``toStream().to(topic, Produced.with(WindowedSerdes.timeWindowedSerdeFrom(...)))``: a time
    window's key is the key's bytes then the window start (``WindowKeySchema.toBinary``); the
    session layout is checked without Spark (tests/unit/test_serdes_fidelity.py), through the same
    sink. Each window lands in the partition of its inner key's bytes, as Kafka's
    ``WindowedStreamPartitioner`` puts it (the task asks the topic's partition count once), where
    the producer would hash the whole windowed key."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "wk-in", 1), make_topic(spark_broker, "wk-out", OUT_PARTITIONS)
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(Serdes.Long(), Serdes.String())).groupByKey()
     .windowedBy(TimeWindows.ofSizeWithNoGrace(10_000)).count().toStream()
     .to(out, Produced.with_(WindowedSerdes.timeWindowedSerdeFrom(Serdes.Long(), 10_000), Serdes.Long())))
    later = [BASE + 10_000 * i for i in range(2, 8)]          # more windows of key 1
    _produce(servers, source, [(_long(1), b"a", BASE + 1_000), (_long(1), b"b", BASE + 2_000),
                               (_long(2), b"c", BASE + 12_000)] + [(_long(1), b"d", t) for t in later])
    app = StreamsApp(b.build(), spark, {"application.id": "windowed-keys-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    app.start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    got = read_committed(servers, out, partitions=OUT_PARTITIONS, quiet=3)
    per_window = {k: Serdes.Long().deserialize(v) for k, v, _ in got}
    assert per_window == {_long(1) + _long(BASE): 2, _long(2) + _long(BASE + 10_000): 1,
                          **{_long(1) + _long(t): 1 for t in later}}
    where = {(k[:8], p) for k, _, _, p in read_all(spark_broker, out, partitions=OUT_PARTITIONS)}
    assert where == {(_long(k), murmur2(_long(k), OUT_PARTITIONS)) for k in (1, 2)}
    # hashing the whole windowed key (the producer's way) would have spread key 1's windows
    assert len({murmur2(k, OUT_PARTITIONS) for k in per_window if k[:8] == _long(1)}) > 1


@pytest.mark.timeout(300)
def test_a_poison_value_fails_a_combined_windowed_count_naming_topic_partition_and_offset(spark, spark_broker,
                                                                                           tmp_path):
    """Decoded by Spark before the task (the count is combined per window), a value of the wrong
    size fails the query with the serde's message and where the record is, as Kafka's
    ``LogAndFailExceptionHandler`` logs it, and nothing is committed."""
    from pyspark.errors import StreamingQueryException
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "poison-in", 1), make_topic(spark_broker, "poison-out", 1)
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(Serdes.String(), Serdes.Long())).groupByKey()
     .windowedBy(TimeWindows.ofSizeWithNoGrace(10_000)).count().toStream()
     .map(lambda k, v: (f"{k.key}@{k.start}", v)).to(out, Produced.with_(Serdes.String(), Serdes.Long())))
    records = [(b"k", _long(i), BASE + 1_000 * i) for i in range(5)]
    records.insert(3, (b"k", b"\x00" * 7, BASE + 2_500))
    _produce(servers, source, records)
    app = StreamsApp(b.build(), spark, {"application.id": "poison-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    assert "counted per window with Arrow" in str(app.describe())
    app.start()
    try:
        with pytest.raises(StreamingQueryException) as e:
            app.processAllAvailable()
    finally:
        app.close()
    assert ("Long serde: Size of data received by LongDeserializer is not 8 (got 7 bytes) "
            f"(topic: {source}, partition: 0, offset: 3)") in str(e.value)
    assert read_committed(servers, out, quiet=3) == []


@pytest.mark.timeout(300)
def test_a_poison_value_fails_an_all_sql_sub_topology_naming_topic_partition_and_offset(spark, spark_broker,
                                                                                      tmp_path):
    """The same on the all-SQL path (a filter and mapValues as SQL, decoded by Spark): it used to
    fail with the serde's message alone, no record named."""
    from pyspark.errors import StreamingQueryException
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "poison-sql-in", 1), make_topic(spark_broker, "poison-sql-out", 1)
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(Serdes.String(), Serdes.Long())).filter("value > 1")
     .mapValues("value * 2").to(out, Produced.with_(Serdes.String(), Serdes.Long())))
    records = [(b"k", _long(i), BASE + 1_000 * i) for i in range(4)]
    records.insert(2, (b"k", b"\x00" * 5, BASE + 1_500))
    _produce(servers, source, records)
    app = StreamsApp(b.build(), spark, {"application.id": "poison-sql-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    app.start()
    try:
        with pytest.raises(StreamingQueryException) as e:
            app.processAllAvailable()
    finally:
        app.close()
    assert ("Long serde: Size of data received by LongDeserializer is not 8 (got 5 bytes) "
            f"(topic: {source}, partition: 0, offset: 2)") in str(e.value)
    assert read_committed(servers, out, quiet=3) == []


def test_schemaless_json_is_bad_on_spark_exactly_where_python_raises(spark):
    """The same record must be bad whichever side reads it: Riverlog picks the side per plan."""
    from streams.serdes import SerializationError
    from tests.unit.test_serdes_fidelity import SCHEMALESS
    serde, texts = Serdes.Json(), list(SCHEMALESS) + ['{"a":[1,{"b":null}]}', " null ", "-", "x"]
    df = spark.createDataFrame([(i, t.encode()) for i, t in enumerate(texts)], "i int, b binary")
    on_spark = {r.i: r.v is not None for r in df.select("i", serde.decode(df.b, on_error="null").alias("v")).collect()}

    def on_python(text):
        try:
            serde.deserialize(text.encode())
            return True
        except SerializationError:
            return False
    assert {texts[i]: ok for i, ok in on_spark.items()} == {t: on_python(t) for t in texts}


@pytest.mark.parametrize("serde, data, message", [
    (Serdes.Json("user STRING, n BIGINT"), b'{"n":"x"}', 'Json<struct<user:string,n:bigint>> serde: not JSON of this '
                                                        'schema: {"n":"x"} (topic: orders, partition: 2, offset: 41)'),
    (Serdes.Boolean(), b"\x07", "Boolean serde: Unexpected byte received by BooleanDeserializer: 7 (topic: orders, "
                                "partition: 2, offset: 41)"),
])
def test_decode_given_the_record_columns_names_the_bad_record(spark, serde, data, message):
    """``decode(col, record=(topic, partition, offset))``: the failure says where the record is,
    as Kafka's ``LogAndFailExceptionHandler`` logs it (JSON too, which otherwise fails with
    FAILFAST's row-less MALFORMED_RECORD_IN_PARSING)."""
    from pyspark.sql import functions as F
    df = spark.createDataFrame([(serde.serialize(True if serde == Serdes.Boolean() else {"n": 1}), "orders", 2, 40),
                                (data, "orders", 2, 41)], "value binary, topic string, partition int, offset long")
    with pytest.raises(Exception) as e:
        df.select(serde.decode(df.value, record=(F.col("topic"), F.col("partition"), F.col("offset")))).collect()
    assert message in str(e.value)
