"""A Streams application on Spark merges a task's partitions by extracted timestamp, honours the
deserialization exception handler, and fails on a negative record timestamp with Kafka's default
extractor even on the SQL fast path that never calls the Python source."""
from __future__ import annotations

import pytest

from broker.client import Consumer, Producer, TopicPartition
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Produced
from streams.serdes import Serdes
from tests.spark.test_sink import make_topic
from tests.spark.test_streams_app import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

S, L = Serdes.String(), Serdes.Long()
BASE = 1_700_000_000_000


def value_time(record, partition_time):
    return record.value


@pytest.mark.timeout(300)
def test_a_join_with_extractors_applies_the_earlier_event_first_and_skips_what_does_not_deserialize(
        spark, spark_broker, tmp_path):
    """The order's broker timestamp is earlier, its event time later than the user's: Kafka's
    partition group applies the user first, so the order is enriched. A malformed order before it
    is skipped under LogAndContinueExceptionHandler and its offset committed past."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    orders, users = make_topic(spark_broker, "xo-orders", 1), make_topic(spark_broker, "xo-users", 1)
    out = make_topic(spark_broker, "xo-enriched", 1)
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        p.produce(orders, key=S.serialize("u1"), value=b"bad", timestamp=BASE, partition=0)
        p.produce(orders, key=S.serialize("u1"), value=L.serialize(100), timestamp=BASE + 1, partition=0)
        p.produce(users, key=S.serialize("u1"), value=L.serialize(50), timestamp=BASE + 2, partition=0)
        p.flush(30)
    b = StreamsBuilder()
    table = b.table(users, Consumed.with_(S, L).withTimestampExtractor(value_time))
    (b.stream(orders, Consumed.with_(S, L).withTimestampExtractor(value_time))
     .join(table, lambda o, u: o * 1000 + u).to(out, Produced.with_(S, L)))
    app = StreamsApp(b.build(), spark, {"application.id": "xo-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state"),
                                        "deserialization.exception.handler": "LogAndContinueExceptionHandler"})
    app.start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    assert [(S.deserialize(k), L.deserialize(v)) for k, v, _ in read_committed(servers, out)] == [("u1", 100_050)]
    c = Consumer({"bootstrap.servers": servers, "group.id": "xo-app", "enable.auto.commit": False})
    try:
        assert c.committed([TopicPartition(orders, 0)], timeout=30)[0].offset == 2
    finally:
        c.close()


@pytest.mark.timeout(300)
def test_a_negative_timestamp_fails_the_sql_fast_path_with_kafkas_message(spark, spark_broker, tmp_path):
    from pyspark.errors import StreamingQueryException
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "neg-in", 1), make_topic(spark_broker, "neg-out", 1)
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        p.produce(source, key=S.serialize("k"), value=L.serialize(1), timestamp=-5, partition=0)
        p.flush(30)
    b = StreamsBuilder()
    b.stream(source, Consumed.with_(S, L)).filter("value > 0").to(out, Produced.with_(S, L))
    app = StreamsApp(b.build(), spark, {"application.id": "neg-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    app.start()
    try:
        with pytest.raises(StreamingQueryException, match=r"CreateTime = -5\) has invalid \(negative\) timestamp"):
            app.processAllAvailable()
    finally:
        app.close()
    assert read_committed(servers, out) == []
