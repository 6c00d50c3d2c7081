"""Joins on Spark against the reference interpreter: one application holding every join kind
(stream–table, table–table, stream–stream windowed, cogroup, GlobalKTable, foreign-key) reads
co-partitioned topics of two partitions; its committed outputs must equal TopologyTestDriver's
on the same input, also after the checkpoint is lost halfway and the application restarts from
the broker alone (state rebuilt from the changelogs). The same application reads a topic pattern
(a matching topic created while it runs is read too) and writes it through a stream partitioner."""
from __future__ import annotations

import random
import re
import shutil
import uuid

import pytest

from broker.client import Consumer, Producer, TopicPartition
from streams.app import StreamsApp
from streams.builder import StreamsBuilder
from streams.interpreter import murmur2_partition
from streams.parameters import Consumed, Materialized, Produced
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from streams.windows import JoinWindows
from tests.spark.child_process import EVERY_UPDATE
from tests.spark.test_sink import make_topic, read_all
from tests.spark.test_streams_app import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

S = Serdes.String()
BASE = 1_700_000_000_000   # a producer's timestamp 0 means "now"
KEYS = ["k0", "k1", "k2", "k3", "k4"]
INPUTS = {"clicks": 2, "users": 2, "views": 2, "tiers": 2, "regions": 1}
SHOW = lambda a, b: f"{a}|{b}"  # noqa: E731


def outputs(suffix: str) -> dict[str, str]:
    return {name: f"{name}-{suffix}" for name in ("st-inner", "st-left", "tt-inner", "tt-outer", "ss-inner",
                                                   "ss-outer", "cogroup", "global-left", "fk-left")}


def by_last_digit(topic, key, value, n):
    return int(value[-1]) % n


def joins(topics: dict[str, str], outs: dict[str, str], pattern: str = "unmatched-pattern", patterned: str = "po"):
    b = StreamsBuilder()
    b.stream(re.compile(pattern), Consumed.with_(S, S)).mapValues("upper(value)").to(
        patterned, Produced.with_(S, S, by_last_digit))
    c = Consumed.with_(S, S)
    clicks, views = b.stream(topics["clicks"], c), b.stream(topics["views"], c)
    users = b.table(topics["users"], c, Materialized.as_("users-store"))
    tiers = b.table(topics["tiers"], c)
    regions = b.globalTable(topics["regions"], c, Materialized.as_("regions-store"))
    to = Produced.with_(S, S)
    clicks.join(users, "concat(left, '|', right)").to(outs["st-inner"], to)
    clicks.leftJoin(users, SHOW).to(outs["st-left"], to)
    users.join(tiers, SHOW).toStream().to(outs["tt-inner"], to)
    users.outerJoin(tiers, SHOW).toStream().to(outs["tt-outer"], to)
    window = JoinWindows.ofTimeDifferenceAndGrace(3_000, 1_000)
    clicks.join(views, SHOW, window).to(outs["ss-inner"], to)
    clicks.outerJoin(views, SHOW, window).to(outs["ss-outer"], to)
    (clicks.groupByKey().cogroup(lambda k, v, agg: agg + "c").cogroup(views.groupByKey(), lambda k, v, agg: agg + "v")
     .aggregate(lambda: "", Materialized.as_("cogrouped").withValueSerde(S)).toStream().to(outs["cogroup"], to))
    clicks.leftJoin(regions, key_selector=lambda k, v: v, joiner=SHOW).to(outs["global-left"], to)
    users.leftJoin(tiers, foreign_key=lambda v: v.split("/")[0], joiner=SHOW).toStream().to(outs["fk-left"], to)
    return b.build()


def history(seed: int, n: int) -> list[tuple]:
    """(input, key, value, ts): the regions first (a global table is bootstrapped before the
    streams), then clicks, views, users and tiers in increasing time, with deletes."""
    rnd = random.Random(seed)
    out = [("regions", f"r{i}", f"region{i}", BASE + i) for i in range(3)]
    for i in range(n):
        topic = rnd.choice(["clicks", "clicks", "views", "users", "tiers", "tiers"])
        key = rnd.choice(KEYS)
        if topic == "clicks":
            value = rnd.choice(["r0", "r1", "r2", "r9"])
        elif topic == "users":
            value = None if rnd.random() < 0.15 else f"{rnd.choice(KEYS)}/{i}"
        else:
            value = None if topic == "tiers" and rnd.random() < 0.15 else f"{topic[0]}{i}"
        out.append((topic, key, value, BASE + 10_000 + 700 * i))
    return out


def oracle(tp, topics, records, outs) -> dict[str, list]:
    d = TopologyTestDriver(tp, {"application.id": "oracle"},
                           partitions={topics[t]: n for t, n in INPUTS.items()})
    inputs = {t: d.createInputTopic(topics[t], S, S) for t in INPUTS}
    for topic, k, v, ts in records:
        inputs[topic].pipeInput(k, v, ts)
    return {name: [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(t, S, S).readRecordsToList()]
            for name, t in outs.items()}


def produce(servers, topics, records) -> None:
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for topic, k, v, ts in records:
            kb = S.serialize(k)
            p.produce(topics[topic], key=kb, value=S.serialize(v), timestamp=ts,
                      partition=murmur2_partition(kb, INPUTS[topic]))
        p.flush(30)


def produce_values(servers, topic, values) -> None:
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for v in values:
            p.produce(topic, key=S.serialize(f"k{v}"), value=S.serialize(v))
        p.flush(30)


def by_key(rows) -> dict:
    out: dict = {}
    for k, v, ts in rows:
        out.setdefault(k, []).append((v, ts))
    return out


def committed(servers, topic) -> list:
    return [(S.deserialize(k), S.deserialize(v), ts) for k, v, ts in read_committed(servers, topic)]


@pytest.mark.timeout(900)
def test_every_join_kind_on_spark_equals_the_interpreter_across_a_restart_from_the_broker(
        spark, spark_broker, tmp_path):
    servers, suffix = spark_broker.bootstrap, uuid.uuid4().hex[:6]
    topics = {t: make_topic(spark_broker, f"{t}-{suffix}", n) for t, n in INPUTS.items()}
    outs = {name: make_topic(spark_broker, t, 1) for name, t in outputs(suffix).items()}
    patterned = make_topic(spark_broker, f"po-{suffix}", 3)
    before = make_topic(spark_broker, f"pi-{suffix}-a", 2)
    tp = joins(topics, outs, f"pi-{suffix}-.*", patterned)
    records = history(16, 40)
    config = {"application.id": f"joins-{suffix}", "bootstrap.servers": servers, "state.dir": str(tmp_path / "state"),
              **EVERY_UPDATE}
    half = len(records) // 2
    produce_values(servers, before, ["a1", "a2", "a3"])
    later = None
    for part in (records[:half], records[half:]):
        produce(servers, topics, part)
        app = StreamsApp(tp, spark, config).start()
        try:
            app.processAllAvailable()
            if later is None:   # a matching topic created while the application runs is read too
                later = make_topic(spark_broker, f"pi-{suffix}-b", 1)
                produce_values(servers, later, ["b4", "b5"])
                app.processAllAvailable()
            else:               # read on from the offsets the group committed, as any source topic
                produce_values(servers, later, ["b6"])
                app.processAllAvailable()
        finally:
            app.close()
        shutil.rmtree(tmp_path / "state")           # the next run restarts from the broker alone
    expected = oracle(tp, topics, records, outs)
    got = {name: committed(servers, t) for name, t in outs.items()}
    for name in outs:
        if name.startswith("fk-"):
            # a foreign-key join's intermediate results depend on when responses arrive (Kafka's too):
            # the latest result per key must agree
            assert {k: vs[-1][0] for k, vs in by_key(got[name]).items()} == \
                   {k: vs[-1][0] for k, vs in by_key(expected[name]).items()}, name
        else:
            assert by_key(got[name]) == by_key(expected[name]), name
    assert all(expected[name] for name in outs)
    placed = sorted((S.deserialize(v), p) for _, v, _, p in read_all(spark_broker, patterned, partitions=3))
    assert placed == [("A1", 1), ("A2", 2), ("A3", 0), ("B4", 1), ("B5", 2), ("B6", 0)]
    c = Consumer({"bootstrap.servers": servers, "group.id": config["application.id"], "enable.auto.commit": False})
    try:
        assert [tp.offset for tp in c.committed([TopicPartition(later, 0)], timeout=30)] == [3]
    finally:
        c.close()
    # interactive queries read the committed changelogs: a table's store, and a global store (one copy)
    users: dict = {}
    for topic, k, v, _ in records:
        if topic == "users":
            users[k] = v
    assert sorted(app.store("users-store").all()) == sorted((k, v) for k, v in users.items() if v is not None)
    assert app.store("regions-store").get("r1") == "region1"
    assert len(app.store("regions-store").all()) == 3


def run_limited(spark, servers: str, tp, state, app_id: str, limit: int) -> int:
    """The application until it has nothing left, at most ``limit`` offsets a batch; its batches with input."""
    app = StreamsApp(tp, spark, {"application.id": app_id, "bootstrap.servers": servers, "state.dir": str(state),
                                 "maxOffsetsPerTrigger": limit, **EVERY_UPDATE}).start()
    try:
        app.processAllAvailable()
        return sum(1 for q in app.queries for p in q.recentProgress if p["numInputRows"])
    finally:
        app.close()


def interpreted(tp, topics: dict, partitions: dict, records, out: str) -> dict:
    d = TopologyTestDriver(tp, {"application.id": "oracle"}, partitions=partitions)
    inputs = {t: d.createInputTopic(topics[t], S, S) for t in topics}
    for topic, k, v, ts in records:
        inputs[topic].pipeInput(k, v, ts)
    return by_key((r.key, r.value, r.timestamp) for r in d.createOutputTopic(out, S, S).readRecordsToList())


@pytest.mark.timeout(300)
def test_a_global_table_is_caught_up_before_each_batch_whatever_max_offsets_per_trigger(spark, spark_broker, tmp_path):
    """Kafka bootstraps a GlobalKTable before its stream tasks run: with a rate limit, the global
    topic is still read to its end in every batch, so no click misses a region already written."""
    servers, suffix = spark_broker.bootstrap, uuid.uuid4().hex[:6]
    topics = {"clicks": make_topic(spark_broker, f"clicks-{suffix}", 2),
              "regions": make_topic(spark_broker, f"regions-{suffix}", 1)}
    out = make_topic(spark_broker, f"geo-{suffix}", 1)
    b = StreamsBuilder()
    regions = b.globalTable(topics["regions"], Consumed.with_(S, S))
    b.stream(topics["clicks"], Consumed.with_(S, S)).leftJoin(regions, key_selector=lambda k, v: v, joiner=SHOW) \
        .to(out, Produced.with_(S, S))
    tp = b.build()
    records = [("regions", f"r{i}", f"region{i}", BASE + i) for i in range(6)] + \
              [("clicks", KEYS[i % 5], f"r{(i * 5) % 6}", BASE + 1_000 + i) for i in range(6)]
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for topic, k, v, ts in records:
            kb = S.serialize(k)
            p.produce(topics[topic], key=kb, value=S.serialize(v), timestamp=ts,
                      partition=murmur2_partition(kb, 2) if topic == "clicks" else 0)
        p.flush(30)
    batches = run_limited(spark, servers, tp, tmp_path / "state", f"geo-{suffix}", 2)
    got = by_key(committed(servers, out))
    assert sum(len(v) for v in got.values()) == 6 and batches >= 3, (got, batches)
    assert all(v.split("|")[1] != "None" for vs in got.values() for v, _ in vs), got
    assert got == interpreted(tp, topics, {topics["clicks"]: 2, topics["regions"]: 1}, records, out)


@pytest.mark.timeout(600)
def test_stream_table_and_outer_stream_stream_joins_under_max_offsets_per_trigger_equal_the_interpreter(
        spark, spark_broker, tmp_path):
    """Batches cut by ``maxOffsetsPerTrigger`` are cut at one timestamp across a task's topics, as
    Kafka merges a task's partitions by timestamp: no click runs ahead of its table's updates, and
    an outer join's stream time does not run ahead on one side and close windows the other side
    has not reached yet."""
    servers, suffix = spark_broker.bootstrap, uuid.uuid4().hex[:6]
    topics = {t: make_topic(spark_broker, f"{t}-{suffix}", 2) for t in ("clicks", "users", "views")}
    outs = {name: make_topic(spark_broker, f"{name}-{suffix}", 1) for name in ("st-inner", "st-left", "ss-outer")}
    b = StreamsBuilder()
    c = Consumed.with_(S, S)
    clicks, users, views = b.stream(topics["clicks"], c), b.table(topics["users"], c), b.stream(topics["views"], c)
    clicks.join(users, SHOW).to(outs["st-inner"], Produced.with_(S, S))
    clicks.leftJoin(users, SHOW).to(outs["st-left"], Produced.with_(S, S))
    clicks.outerJoin(views, SHOW, JoinWindows.ofTimeDifferenceAndGrace(3_000, 1_000)).to(outs["ss-outer"],
                                                                                        Produced.with_(S, S))
    tp = b.build()
    records = [r for r in history(300, 60) if r[0] in topics]
    produce(servers, topics, records)
    batches = run_limited(spark, servers, tp, tmp_path / "state", f"st-{suffix}", 5)
    for name, topic in outs.items():
        expected = interpreted(tp, topics, {t: 2 for t in topics.values()}, records, topic)
        assert by_key(committed(servers, topic)) == expected, name
        assert expected, name
    assert batches >= 5, batches


def test_the_application_refuses_to_start_a_join_of_topics_not_co_partitioned(spark, spark_broker, tmp_path):
    from streams.joins import TopicsNotCopartitionedError
    suffix = uuid.uuid4().hex[:6]
    a, b_ = make_topic(spark_broker, f"a-{suffix}", 2), make_topic(spark_broker, f"b-{suffix}", 3)
    b = StreamsBuilder()
    b.stream(a, Consumed.with_(S, S)).join(b.table(b_, Consumed.with_(S, S)), SHOW).to(f"o-{suffix}", Produced.with_(S, S))
    app = StreamsApp(b.build(), spark, {"application.id": f"copart-{suffix}", "bootstrap.servers": spark_broker.bootstrap,
                                        "state.dir": str(tmp_path)})
    with pytest.raises(TopicsNotCopartitionedError, match=rf"{a} \(2 partitions\), {b_} \(3 partitions\)"):
        app.start()
    assert app.queries == []
