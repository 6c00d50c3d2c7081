"""Vectorised callables on Spark: a sub-topology of vectorised steps runs as one ``mapInArrow``
(no Python per record) and its committed output equals ``TopologyTestDriver``'s, which calls the
same functions with one-row Series."""
from __future__ import annotations

import uuid

import pandas as pd
import pytest

from streams import vectorized
from streams.app import StreamsApp
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Produced
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from tests.spark.test_sink import make_topic
from tests.spark.test_streams_app import BASE, ORDER, produce, read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

S, GROSS = Serdes.String(), Serdes.Json("user STRING, gross DOUBLE")


def topology(source: str, out: str):
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(S, Serdes.Json(ORDER)))
     .filter(vectorized(lambda k, v: v["amount"].fillna(0) > 60))
     .map(vectorized(lambda k, v: (v["user"].fillna("nobody"), v), f"key STRING, value STRUCT<{ORDER}>"))
     .mapValues(vectorized(lambda k, v: pd.DataFrame({"user": k.str.upper(), "gross": v["amount"] * 1.5}),
                           "user STRING, gross DOUBLE"))
     .flatMapValues(vectorized(lambda v: pd.Series([[r] * (1 + int(r["gross"]) % 2) for r in v.to_dict("records")]),
                               "array<struct<user: string, gross: double>>"))
     .to(out, Produced.with_(S, GROSS)))
    return b.build()


def records():
    users = ["ann", "bob", None]
    return [(f"k{i % 4}", {"user": users[i % 3], "amount": None if i % 7 == 3 else float(40 + (i * 37) % 90)},
             BASE + 1_000 * i) for i in range(40)]


@pytest.mark.timeout(300)
def test_vectorised_steps_on_spark_equal_the_test_driver(spark, spark_broker, tmp_path):
    suffix = uuid.uuid4().hex[:8]
    source, out = make_topic(spark_broker, f"vec-in-{suffix}", 1), make_topic(spark_broker, f"vec-out-{suffix}", 1)
    tp = topology(source, out)
    assert "all Spark SQL and vectorised Python (Arrow UDFs)" in str(tp.describe())
    rs = records()
    d = TopologyTestDriver(tp, {"application.id": "oracle"})
    i = d.createInputTopic(source, S, Serdes.Json(ORDER))
    for k, v, ts in rs:
        i.pipeInput(k, v, ts)
    expected = [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(out, S, GROSS).readRecordsToList()]
    assert len(expected) > len({k for k, _, _ in expected}) > 1   # several keys, some records doubled

    produce(spark_broker.bootstrap, source, rs)
    app = StreamsApp(tp, spark, {"application.id": f"vec-{suffix}", "bootstrap.servers": spark_broker.bootstrap,
                                 "state.dir": str(tmp_path)}).start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    got = [(S.deserialize(k), GROSS.deserialize(v), ts) for k, v, ts in read_committed(spark_broker.bootstrap, out)]
    assert got == expected


def test_describe_shows_no_sql_prefix_when_the_sources_decode_in_python(spark):
    """A deserialization handler that continues needs every record decoded in Python, so the
    sub-topology runs no Spark SQL prefix, and ``describe()`` says what actually runs."""
    tp = topology("vec-describe-in", "vec-describe-out")
    config = {"application.id": "vec-describe", "bootstrap.servers": "127.0.0.1:1"}
    assert "all Spark SQL and vectorised Python" in str(StreamsApp(tp, spark, config).describe())
    text = str(StreamsApp(tp, spark, {**config, "deserialization.exception.handler":
                                      "LogAndContinueExceptionHandler"}).describe())
    assert "Sub-topology 0: one streaming query: mapInArrow, stateless" in text, text
    assert "Spark SQL" not in text, text
