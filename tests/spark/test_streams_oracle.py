"""The reference interpreter is the oracle of ``StreamsApp``: random input histories (a few keys,
JSON values, timestamps out of order by up to a few seconds) go through ``TopologyTestDriver`` and
through the application on Spark, batched one record at a time, seven at a time and all at once;
every output topic, read with read_committed, must hold the same records per key, in the same
order, with the same values and timestamps when each record is its own batch; with larger
batches, Kafka's record cache keeps each key's latest update of a commit: a subsequence of the
driver's updates per key, leaving the same table. The hopping count alone on its source is
counted per window with Arrow before its task (:mod:`streams.window_combine`), a source table
keeps each key's last record of a batch (:mod:`streams.table_combine`), and a count alone in its
sub-topology, of a stream or of a grouped table, is counted per key (:mod:`streams.count_combine`):
the same rules.

Each case's history comes from ``random.Random(seed)``; the seed is in the test id, so a failure
is replayed with ``pytest 'tests/spark/test_streams_oracle.py::test_...[<id>]'``.
"""
from __future__ import annotations

import random
import uuid

import pytest

from broker.client import Producer
from streams.app import StreamsApp
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Grouped, Materialized, Produced
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from streams.windows import SessionWindows, TimeWindows
from tests.spark.test_sink import make_topic
from tests.spark.test_streams_app import read_committed
from tests.streams.test_record_cache import is_subsequence

pytestmark = [pytest.mark.spark, pytest.mark.integration]

BASE = 1_700_000_000_000   # a producer's timestamp 0 means "now"
ORDER = "user STRING, amount BIGINT"
GROSS = "user STRING, gross BIGINT"
S, L = Serdes.String(), Serdes.Long()
KEYS = ["k0", "k1", "k2", "k3"]
USERS = ["ann", "bob", "cy", None]


def history(seed: int, n: int) -> list[tuple]:
    """``n`` records: keys from KEYS, values from a few users (sometimes null) and amounts
    (sometimes null), timestamps about a second apart and moved back by up to 4 s at random."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        user = rnd.choice(USERS) if rnd.random() < 0.9 else None
        amount = rnd.randrange(0, 100) if rnd.random() < 0.9 else None
        ts = BASE + 1_000 * i - (rnd.randrange(0, 4_000) if rnd.random() < 0.3 else 0)
        out.append((rnd.choice(KEYS), {"user": user, "amount": amount}, ts))
    return out


def aggregations(source: str, outs: dict[str, str]):
    """(a) filter → mapValues (SQL) → groupBy → count and aggregate → toStream → to."""
    b = StreamsBuilder()
    big = (b.stream(source, Consumed.with_(S, Serdes.Json(ORDER)))
           .filter("value.amount > 20")
           .mapValues("named_struct('user', value.user, 'gross', value.amount * 2)"))
    g = big.groupBy("value.user", Grouped.as_("by-user").withKeySerde(S).withValueSerde(Serdes.Json(GROSS)))
    g.count(materialized=Materialized.as_("count")).toStream().to(outs["count"], Produced.with_(S, L))
    (g.aggregate("cast(0 AS BIGINT)", "agg + value.gross", materialized=Materialized.as_("sum").withValueSerde(L))
     .toStream().to(outs["sum"], Produced.with_(S, L)))
    return b.build()


def windows(source: str, outs: dict[str, str]):
    """(b) a windowed count (tumbling, with grace) and a session count, each toStream().map(...) → to."""
    b = StreamsBuilder()
    orders = b.stream(source, Consumed.with_(S, Serdes.Json(ORDER)))
    (orders.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(5_000, 2_000))
     .count(materialized=Materialized.as_("per-window")).toStream()
     .map(lambda k, v: (f"{k.key}@{k.start - BASE}", v)).to(outs["window"], Produced.with_(S, L)))
    (orders.groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(2_500, 2_000))
     .count(materialized=Materialized.as_("per-session")).toStream()
     .map(lambda k, v: (f"{k.key}@{k.start - BASE}-{k.end - BASE}", v)).to(outs["session"], Produced.with_(S, L)))
    return b.build()


def combined(source: str, outs: dict[str, str]):
    """(c) a hopping windowed count alone on its source behind a SQL filter: counted per window
    with Arrow before its task (:mod:`streams.window_combine`), where (b) runs record by record.
    Without the filter it is the fault tests' combined application."""
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(S, Serdes.Json(ORDER))).filter("value.amount IS NOT NULL").groupByKey()
     .windowedBy(TimeWindows.ofSizeAndGrace(6_000, 2_000).advanceBy(2_000))
     .count(materialized=Materialized.as_("per-hop")).toStream()
     .map(lambda k, v: (f"{k.key}@{k.start - BASE}", v)).to(outs["hop"], Produced.with_(S, L)))
    return b.build()


def table(source: str, outs: dict[str, str]):
    """(d) a table → groupBy → count: the cached source table keeps each key's last record of a
    batch with Arrow before its task (:mod:`streams.table_combine`); the count subtracts and adds,
    counted per key before its task (:mod:`streams.count_combine`)."""
    b = StreamsBuilder()
    (b.table(source, Consumed.with_(S, Serdes.Json(ORDER)), Materialized.as_("orders"))
     .groupBy("value.user", Grouped.with_(S, Serdes.Json(ORDER))).count(materialized=Materialized.as_("users"))
     .toStream().to(outs["users"], Produced.with_(S, L)))
    return b.build()


def counted(source: str, outs: dict[str, str]):
    """(e) SQL steps in Spark (a filter, and a flatMapValues giving each record two rows of one
    offset) → count: counted per key with Arrow before its task (:mod:`streams.count_combine`).
    A count behind a repartition is the fault tests' (``streams_app_process.topology``)."""
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(S, Serdes.Json(ORDER))).filter("value.amount > 20")
     .flatMapValues("array(value, value)").groupByKey()
     .count(materialized=Materialized.as_("big-orders")).toStream().to(outs["per-key"], Produced.with_(S, L)))
    return b.build()


TOPOLOGIES = {"aggregations": (aggregations, ["count", "sum"]), "windows": (windows, ["window", "session"]),
              "combined": (combined, ["hop"]), "table": (table, ["users"]), "counted": (counted, ["per-key"])}
PER_WINDOW, LAST_RECORD, PER_KEY = ("counted per window with Arrow", "each key's last record of a batch kept",
                                    "counted per key with Arrow")
COMBINED = {"combined": {PER_WINDOW}, "table": {LAST_RECORD, PER_KEY}, "counted": {PER_KEY}}


def produce(servers: str, topic: str, records) -> None:
    value = Serdes.Json(ORDER)
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for k, v, ts in records:
            p.produce(topic, key=S.serialize(k), value=value.serialize(v), timestamp=ts, partition=0)
        p.flush(30)


def by_key(rows) -> dict:
    out: dict = {}
    for k, v, ts in rows:
        out.setdefault(k, []).append((v, ts))
    return out


def oracle(tp, source: str, records, topics: list[str]) -> dict[str, dict]:
    d = TopologyTestDriver(tp, {"application.id": "oracle"})
    i = d.createInputTopic(source, S, Serdes.Json(ORDER))
    for k, v, ts in records:
        i.pipeInput(k, v, ts)
    return {t: by_key((r.key, r.value, r.timestamp) for r in d.createOutputTopic(t, S, L).readRecordsToList())
            for t in topics}


def on_spark(spark, broker, tp, records, topics: list[str], source: str, split, state_dir,
             combined: set[str]) -> dict[str, dict]:
    produce(broker.bootstrap, source, records)
    config = {"application.id": f"oracle-{uuid.uuid4().hex[:8]}", "bootstrap.servers": broker.bootstrap,
              "state.dir": str(state_dir)}
    if split is not None:
        config["maxOffsetsPerTrigger"] = split
    app = StreamsApp(tp, spark, config)
    described = str(app.describe())
    assert {p for p in (PER_WINDOW, LAST_RECORD, PER_KEY) if p in described} == combined, described
    app.start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    return {t: by_key((S.deserialize(k), L.deserialize(v), ts) for k, v, ts in read_committed(broker.bootstrap, t))
            for t in topics}


CASES = [(name, split, seed) for split, seed in ((None, 13), (7, 12), (1, 11)) for name in TOPOLOGIES
         if (name, split) != ("counted", 1)]   # a batch per record combines nothing


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name, split, seed", CASES,
                         ids=[f"{n}-split{s or 'all'}-seed{seed}" for n, s, seed in CASES])
def test_application_output_equals_the_interpreter(spark, spark_broker, tmp_path, name, split, seed):
    make, outputs = TOPOLOGIES[name]
    suffix = uuid.uuid4().hex[:8]
    source = make_topic(spark_broker, f"oracle-in-{suffix}", 1)
    outs = {o: make_topic(spark_broker, f"oracle-{o}-{suffix}", 1) for o in outputs}
    tp = make(source, outs)
    records = history(seed, 6 if split == 1 else 20)   # one batch per record: a stateful batch takes seconds
    expected = oracle(tp, source, records, list(outs.values()))
    got = on_spark(spark, spark_broker, tp, records, list(outs.values()), source, split, tmp_path / "state",
                   combined=COMBINED.get(name, set()))
    assert any(expected.values()), "the history produced no output: the case checks nothing"
    for o, topic in outs.items():
        where = f"{o} (seed {seed}, maxOffsetsPerTrigger {split})"
        if split == 1:     # a commit per record, as the driver: every update
            assert got[topic] == expected[topic], where
            continue
        # Kafka's record cache: per key (window), the latest update of each commit (a batch), so a
        # subsequence of the driver's updates, and the same table at the end (a session merged
        # away within one batch is never forwarded, nor its tombstone). A table aggregation counts
        # rows its cached table forwards once per key a batch, in order of each key's last write:
        # a group may pass through counts the driver, in record order, never shows (one a key left
        # before another joined it, at 0, when the next hop's batch ends between them), its
        # updates carry their row's latest timestamp, and a group a row left within one batch,
        # which the driver leaves at 0, may never be updated: there, the table at the end only.
        values_only = name == "table"
        for key, updates in got[topic].items():
            assert values_only or is_subsequence(updates, expected[topic].get(key, [])), (where, key)
        final, ended = latest(expected[topic]), latest(got[topic])
        if values_only:
            final = {k: v for k, (v, _) in final.items() if k in ended or v != 0}
            ended = {k: v for k, (v, _) in ended.items()}
        assert ended == final, where
        if split is None and name == "aggregations":   # one transaction in, one batch out
            assert all(len(v) == 1 for v in got[topic].values()), where


def latest(updates: dict) -> dict:
    """The table the updates leave: each key's last value, a null deleting it."""
    return {k: v[-1] for k, v in updates.items() if v[-1][0] is not None}
