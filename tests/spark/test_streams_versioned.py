"""Versioned tables (KIP-914) and ``Joined.withGracePeriod`` (KIP-923) on Spark against the
reference interpreter: one application joins a stream with a versioned table twice — an inner join
with a grace period and a left join without — and its committed outputs must equal
TopologyTestDriver's for the same input.

The input comes in phases, each processed before the next is produced, so a phase's records reach
Spark after the previous phase's as they reach the interpreter (inside a micro-batch Spark applies
the records of both topics in timestamp order; each phase is written in timestamp order). Across
phases the table gets out-of-order updates (older than its latest version, within the history
retention) and the stream gets late records: one within the table's history, one older than it
(Kafka's rule: no version, so no match for the inner join and a null right side for the left one).
"""
from __future__ import annotations

import uuid

import pytest

from broker.client import Producer
from streams.app import StreamsApp
from streams.builder import StreamsBuilder
from streams.joins import Joined
from streams.parameters import Consumed, Materialized, Produced
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from streams.versioned import Stores
from tests.spark.test_sink import make_topic
from tests.spark.test_streams_app import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

S = Serdes.String()
BASE = 1_700_000_000_000   # a producer's timestamp 0 means "now"
HISTORY_MS, GRACE_MS = 1_500, 200
SHOW = lambda a, b: f"{a}|{b}"  # noqa: E731

# (topic, key, value, ms after BASE), phase by phase; each phase in timestamp order
PHASES = [
    [("prices", "EUR", "a", 1000), ("orders", "EUR", "o1", 1500), ("orders", "USD", "u1", 1600),
     ("prices", "EUR", "c", 3000), ("orders", "EUR", "o2", 3100), ("prices", "EUR", "d", 3500)],
    # in timestamp order, after phase 1: o6 is older than the table's stream time - history
    # (3500 - 1500): no version. b is older than the latest (3000, 3500) and within the history; o3
    # is late for the graced join's buffer (3100 - 200) but within the table's history: it joins at
    # once with b. c2 arrives after o2 and o4 and is older than o2 only: the graced join (o2, o4
    # still held) gives it to o2, which the left join answered in phase 1. o7 releases o5.
    [("orders", "EUR", "o6", 1900), ("prices", "EUR", "b", 2600), ("orders", "EUR", "o3", 2700),
     ("orders", "EUR", "o4", 3050), ("prices", "EUR", "c2", 3060), ("orders", "EUR", "o5", 3400),
     ("orders", "EUR", "o7", 4000)],
]


def topology(topics: dict[str, str], outs: dict[str, str]):
    b = StreamsBuilder()
    c = Consumed.with_(S, S)
    orders = b.stream(topics["orders"], c)
    prices = b.table(topics["prices"], c,
                     Materialized.as_(Stores.persistentVersionedKeyValueStore("prices", HISTORY_MS)))
    orders.join(prices, SHOW, Joined.as_("graced").withGracePeriod(GRACE_MS)).to(outs["graced"], Produced.with_(S, S))
    orders.leftJoin(prices, SHOW, Joined.as_("left")).to(outs["left"], Produced.with_(S, S))
    return b.build()


def oracle(tp, topics, outs) -> tuple[dict, TopologyTestDriver]:
    d = TopologyTestDriver(tp, {"application.id": "oracle"})
    inputs = {t: d.createInputTopic(name, S, S) for t, name in topics.items()}
    for phase in PHASES:
        for t, k, v, ms in phase:
            inputs[t].pipeInput(k, v, BASE + ms)
    return {n: [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(t, S, S).readRecordsToList()]
            for n, t in outs.items()}, d


@pytest.mark.timeout(600)
def test_a_join_with_a_versioned_table_on_spark_equals_the_interpreter(spark, spark_broker, tmp_path):
    servers, suffix = spark_broker.bootstrap, uuid.uuid4().hex[:6]
    topics = {t: make_topic(spark_broker, f"v-{t}-{suffix}", 1) for t in ("orders", "prices")}
    outs = {n: make_topic(spark_broker, f"v-{n}-{suffix}", 1) for n in ("graced", "left")}
    tp = topology(topics, outs)
    expected, driver = oracle(tp, topics, outs)
    # the scenario itself, as Kafka's rules give it (the interpreter is the oracle below)
    assert [v for _, v, _ in expected["graced"]] == ["o1|a", "o3|b", "o4|c", "o2|c2", "o5|c2"]
    assert [v for _, v, _ in expected["left"]] == ["o1|a", "u1|None", "o2|c", "o6|None", "o3|b", "o4|c",
                                                    "o5|c2", "o7|d"]
    app = StreamsApp(tp, spark, {"application.id": f"versioned-{suffix}", "bootstrap.servers": servers,
                                 "state.dir": str(tmp_path / "state")}).start()
    try:
        with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
            for phase in PHASES:
                for t, k, v, ms in phase:
                    p.produce(topics[t], key=S.serialize(k), value=S.serialize(v), timestamp=BASE + ms, partition=0)
                assert p.flush(30) == 0
                app.processAllAvailable()
    finally:
        app.close()
    got = {n: [(S.deserialize(k), S.deserialize(v), ts) for k, v, ts in read_committed(servers, t)]
           for n, t in outs.items()}
    assert got == expected
    assert app.store("prices").get("EUR") == driver.getVersionedKeyValueStore("prices").get("EUR").value == "d"
