"""A Streams application on Spark against a real broker: output equal to the reference
interpreter's, exactly once, and a restart from the broker alone after the checkpoint is lost."""
from __future__ import annotations

import shutil
import time

import pytest

from broker.client import AdminClient, ConfigResource, Consumer, Producer, TopicPartition
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Grouped, Materialized, Produced
from streams.serdes import Serdes
from streams.task_placement import placement_keys, spark_partition
from streams.testing import TopologyTestDriver
from streams.windows import TimeWindows
from tests.spark.child_process import EVERY_UPDATE
from tests.spark.test_sink import make_topic

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ORDER = "user STRING, amount DOUBLE"
BASE = 1_700_000_000_000  # a timestamp of 0 means "now" to a producer


def topology(source: str, out: str, windowed_out: str):
    b = StreamsBuilder()
    orders = b.stream(source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER)))
    big = orders.filter("value.amount > 100").mapValues("named_struct('user', value.user, 'gross', value.amount * 2)")
    (big.groupBy("value.user", Grouped.as_("by-user").withKeySerde(Serdes.String())
                 .withValueSerde(Serdes.Json("user STRING, gross DOUBLE")))
        .count(materialized=Materialized.as_("per-user").withLoggingEnabled({"min.cleanable.dirty.ratio": "0.1"}))
        .toStream().to(out, Produced.with_(Serdes.String(), Serdes.Long())))
    (orders.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 1_000))
        .count(materialized=Materialized.as_("per-key-window"))
        .toStream().map(lambda k, v: (f"{k.key}@{k.start}", v))
        .to(windowed_out, Produced.with_(Serdes.String(), Serdes.Long())))
    return b.build()


def history(n: int):
    users = ["ann", "bob", "cy"]
    return [(f"k{i % 4}", {"user": users[i % 3], "amount": float(50 + (i * 37) % 120)}, BASE + 1_000 * i) for i in range(n)]


def produce(servers, topic, records, headers=None):
    key, value = Serdes.String(), Serdes.Json(ORDER)
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for k, v, ts in records:
            p.produce(topic, key=key.serialize(k), value=value.serialize(v), timestamp=ts, partition=0,
                      headers=headers(k, ts) if headers else None)
        p.flush(30)


def read_committed(servers, topic, partitions=1, with_headers=False, quiet: float = 10.0):
    """Every committed record, partition by partition, read up to the high watermark: a quiet poll
    on a loaded machine is not the end (only ``quiet`` seconds without progress are, for a
    partition whose last stable offset stays below its high watermark)."""
    c = Consumer({"bootstrap.servers": servers, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    out = []
    try:
        for p in range(partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high <= low:
                continue
            c.assign([TopicPartition(topic, p, low)])
            last_progress = time.monotonic()
            while c.position([TopicPartition(topic, p)])[0].offset < high:
                msgs = c.consume(500, timeout=1)
                if msgs:
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > quiet:
                    break
                for m in msgs:
                    if not m.error():
                        out.append((m.key(), m.value(), m.timestamp()[1])
                                   + ((tuple(m.headers() or ()),) if with_headers else ()))
    finally:
        c.close()
    return out


def oracle(tp, records, out_topics):
    d = TopologyTestDriver(tp, {"application.id": "oracle"})
    i = d.createInputTopic(tp.nodes[0].topics[0], Serdes.String(), Serdes.Json(ORDER))
    for k, v, ts in records:
        i.pipeInput(k, v, ts)
    return {t: [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(t, Serdes.String(), Serdes.Long())
                .readRecordsToList()] for t in out_topics}


def decoded(servers, topic):
    s, l = Serdes.String(), Serdes.Long()
    return [(s.deserialize(k), l.deserialize(v), ts) for k, v, ts in read_committed(servers, topic)]


def by_key(rows):
    out: dict = {}
    for k, v, ts in rows:
        out.setdefault(k, []).append((v, ts))
    return out


@pytest.mark.timeout(600)
def test_application_output_equals_the_interpreter_and_survives_a_lost_checkpoint(spark, spark_broker, tmp_path):
    servers = spark_broker.bootstrap
    source = make_topic(spark_broker, "streams-orders", 1)
    out, wout = make_topic(spark_broker, "streams-per-user", 1), make_topic(spark_broker, "streams-windows", 1)
    tp = topology(source, out, wout)
    records = history(40)
    produce(servers, source, records[:25])
    # two batches a life (13 + 12, then 13 + 2): state carried between batches and across the restart
    config = {"application.id": "orders-app", "bootstrap.servers": servers, "state.dir": str(tmp_path / "state"),
              "maxOffsetsPerTrigger": 13, **EVERY_UPDATE}
    app = StreamsBuilder  # noqa: F841 - the builder's build() gives the app
    app = tp_app = None
    from streams.app import StreamsApp
    app = StreamsApp(tp, spark, config).start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    # The checkpoint is lost: the application restarts from the broker alone.
    shutil.rmtree(tmp_path / "state")
    produce(servers, source, records[25:])
    app = StreamsApp(tp, spark, config).start()
    try:
        app.processAllAvailable()
        # one state partition per task (the session's spark.sql.shuffle.partitions is 2)
        operators = [op for q in app.queries if q.lastProgress for op in q.lastProgress["stateOperators"]]
        assert operators and {op["numShufflePartitions"] for op in operators} == {1}
        store = app.store("per-user")
        expected = oracle(tp, records, [out, wout])
        assert by_key(decoded(servers, out)) == by_key(expected[out])
        assert by_key(decoded(servers, wout)) == by_key(expected[wout])
        final = {k: vs[-1][0] for k, vs in by_key(expected[out]).items()}
        assert dict(store.all()) == final
        # withLoggingEnabled(config) reaches the changelog topic, over compaction
        admin = AdminClient({"bootstrap.servers": servers})
        changelog = next(iter(admin.describe_configs([ConfigResource("topic", "orders-app-per-user-changelog")])
                              .values())).result(10)
        assert (changelog["min.cleanable.dirty.ratio"].value, changelog["cleanup.policy"].value) == ("0.1", "compact")
    finally:
        app.close()


@pytest.mark.timeout(600)
def test_two_tasks_run_in_two_state_partitions_through_restarts(spark, spark_broker, tmp_path):
    """A two-task count runs in two state partitions, each task under its placement key (none
    empty, none shared): the keys are kept beside the checkpoint for a restart, and a restart from
    the broker alone rebuilds each task's state under them. Per key, the output is the
    interpreter's."""
    import json
    import os
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "two-tasks-in", 2), make_topic(spark_broker, "two-tasks-out", 1)
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER))).groupByKey().count()
      .toStream().to(out, Produced.with_(Serdes.String(), Serdes.Long())))
    tp = b.build()
    records = history(36)
    key, value = Serdes.String(), Serdes.Json(ORDER)

    def produce_split(batch):
        with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
            for k, v, ts in batch:
                p.produce(source, key=key.serialize(k), value=value.serialize(v), timestamp=ts, partition=int(k[1:]) % 2)
            p.flush(30)

    config = {"application.id": "two-tasks", "bootstrap.servers": servers, "state.dir": str(tmp_path / "state"),
              "maxOffsetsPerTrigger": 5, **EVERY_UPDATE}
    placement = tmp_path / "state" / "two-tasks" / "subtopology-0" / "riverlog-streams-placement"
    keys = placement_keys(2)
    assert [spark_partition(k, 2) for k in keys] == [0, 1] and keys != (0, 1)
    for life, (lo, hi, lose_checkpoint) in enumerate([(0, 12, False), (12, 24, False), (24, 36, True)]):
        if lose_checkpoint:
            shutil.rmtree(tmp_path / "state")
        produce_split(records[lo:hi])
        app = StreamsApp(tp, spark, config).start()
        try:
            app.processAllAvailable()
            operators = [op for q in app.queries if q.lastProgress for op in q.lastProgress["stateOperators"]]
            assert operators and {op["numShufflePartitions"] for op in operators} == {2}, life
            assert json.loads(placement.read_text()) == {"partitions": 2, "keys": list(keys)}
        finally:
            app.close()
    assert os.path.exists(placement)
    expected = oracle(tp, records, [out])[out]
    assert by_key(decoded(servers, out)) == by_key(expected)


def sql_topologies(a_in, a_out, b_in, b_out):
    """(a) all Spark SQL: no Python per record; (b) a SQL prefix before a stateful count."""
    b = StreamsBuilder()
    gross = "user STRING, gross DOUBLE"
    (b.stream(a_in, Consumed.with_(Serdes.String(), Serdes.Json(ORDER)))
      .filter("value.amount > 100").mapValues("named_struct('user', value.user, 'gross', value.amount * 2)")
      .to(a_out, Produced.with_(Serdes.String(), Serdes.Json(gross))))
    (b.stream(b_in, Consumed.with_(Serdes.String(), Serdes.Json(ORDER)))
      .filterNot("value.amount <= 100").selectKey("upper(value.user)")
      .groupByKey(Grouped.with_(Serdes.String(), Serdes.Json(ORDER))).count()
      .toStream().to(b_out, Produced.with_(Serdes.String(), Serdes.Long())))
    return b.build()


@pytest.mark.timeout(600)
def test_sql_steps_run_in_spark_and_agree_with_the_interpreter(spark, spark_broker, tmp_path):
    from streams import spark_plan
    servers = spark_broker.bootstrap
    a_in, a_out = make_topic(spark_broker, "sql-a-in", 1), make_topic(spark_broker, "sql-a-out", 1)
    b_in, b_out = make_topic(spark_broker, "sql-b-in", 1), make_topic(spark_broker, "sql-b-out", 1)
    tp = sql_topologies(a_in, a_out, b_in, b_out)
    plans = [spark_plan.plan(s) for s in tp.subtopologies]
    assert plans[0].sink is not None and len(plans[0].prefix) == 2       # no Python at all
    assert len(plans[1].prefix) == 3 and plans[1].sink is not None        # filterNot, selectKey, null-key filter, repartition
    records = history(30)

    def trace(k, ts):
        return [("trace", f"{k}-{ts}".encode())]
    produce(servers, a_in, records, trace)
    produce(servers, b_in, records, trace)
    from streams.app import StreamsApp
    app = StreamsApp(tp, spark, {"application.id": "sql-app", "bootstrap.servers": servers,
                                 "state.dir": str(tmp_path / "state"), **EVERY_UPDATE}).start()
    try:
        app.processAllAvailable()
        # Kafka purges what the reading sub-topology has consumed from a repartition topic
        purged = app.purger.purge()
    finally:
        app.close()
    repartition = [t for t in tp.internal_topics("sql-app") if t.endswith("-repartition")]
    assert len(repartition) == 1 and {t for t, _ in purged} == set(repartition), purged
    from broker.client import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers, "group.id": "sql-app-watermarks"})
    try:
        for (t, p), offset in purged.items():
            low, high = c.get_watermark_offsets(TopicPartition(t, p), timeout=10)
            assert 0 < low == offset <= high, (t, p, low, offset, high)
    finally:
        c.close()
    d = TopologyTestDriver(tp, {"application.id": "oracle"})
    for t in (a_in, b_in):
        i = d.createInputTopic(t, Serdes.String(), Serdes.Json(ORDER))
        for k, v, ts in records:
            i.pipeInput(k, v, ts, headers=tuple(trace(k, ts)))
    gross = Serdes.Json("user STRING, gross DOUBLE")
    want_a = [(r.key, r.value, r.timestamp, r.headers)
              for r in d.createOutputTopic(a_out, Serdes.String(), gross).readRecordsToList()]
    got_a = [(Serdes.String().deserialize(k), gross.deserialize(v), ts, h)
             for k, v, ts, h in read_committed(servers, a_out, with_headers=True)]
    assert got_a == want_a and len(want_a) > 5 and all(h for *_, h in got_a)   # headers kept by Spark SQL
    records_b = d.createOutputTopic(b_out, Serdes.String(), Serdes.Long()).readRecordsToList()
    want_b = [(r.key, r.value, r.timestamp) for r in records_b]
    assert by_key(decoded(servers, b_out)) == by_key(want_b) and {k for k, _, _ in want_b} == {"ANN", "BOB", "CY"}
    # Headers through a repartition topic and a Python task, as the interpreter carries them.
    want_h = [(r.key, r.headers) for r in records_b]
    got_h = [(Serdes.String().deserialize(k), h) for k, _, _, h in read_committed(servers, b_out, with_headers=True)]
    assert sorted(got_h) == sorted(want_h)


@pytest.mark.timeout(600)
def test_at_least_once_delivers_everything_and_commits_the_group(spark, spark_broker, tmp_path):
    """processing.guarantee=at_least_once: plain idempotent writes, then the input offsets committed
    to the application's group (no failure here, so nothing is written twice)."""
    servers = spark_broker.bootstrap
    a_in, a_out = make_topic(spark_broker, "alo-a-in", 1), make_topic(spark_broker, "alo-a-out", 1)
    b_in, b_out = make_topic(spark_broker, "alo-b-in", 1), make_topic(spark_broker, "alo-b-out", 1)
    tp = sql_topologies(a_in, a_out, b_in, b_out)
    records = history(20)
    produce(servers, a_in, records)
    produce(servers, b_in, records)
    from streams.app import StreamsApp
    app = StreamsApp(tp, spark, {"application.id": "alo-app", "bootstrap.servers": servers,
                                 "processing.guarantee": "at_least_once", "state.dir": str(tmp_path / "state"),
                                 **EVERY_UPDATE})
    app.start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    d = TopologyTestDriver(tp, {"application.id": "oracle"})
    for t in (a_in, b_in):
        i = d.createInputTopic(t, Serdes.String(), Serdes.Json(ORDER))
        for k, v, ts in records:
            i.pipeInput(k, v, ts)
    want_b = [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(b_out, Serdes.String(), Serdes.Long())
              .readRecordsToList()]
    assert by_key(decoded(servers, b_out)) == by_key(want_b) and want_b
    c = Consumer({"bootstrap.servers": servers, "group.id": "alo-app", "enable.auto.commit": False})
    try:
        committed = {tp_.topic: tp_.offset for tp_ in c.committed([TopicPartition(a_in, 0), TopicPartition(b_in, 0)], 30)}
    finally:
        c.close()
    assert committed == {a_in: len(records), b_in: len(records)}


def fails_on_json_and_commits_nothing(app, servers: str, out: str) -> None:
    from pyspark.errors import StreamingQueryException
    app.start()
    try:
        with pytest.raises(StreamingQueryException, match="(?i)json"):
            app.processAllAvailable()
    finally:
        app.close()
    assert read_committed(servers, out) == []


@pytest.mark.timeout(300)
def test_headers_cross_the_arrow_steps_before_a_task_as_the_records_carried_them(spark, spark_broker, tmp_path):
    """A cached source table forwards each key's last record, a combined windowed count each
    window's last record and a combined count each key's last record, with those records' headers
    (binary, not UTF-8, or null values), after they crossed ``mapInArrow`` as JSON."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    t_in, t_out = make_topic(spark_broker, "hdr-table-in", 1), make_topic(spark_broker, "hdr-table-out", 1)
    w_in, w_out = make_topic(spark_broker, "hdr-window-in", 1), make_topic(spark_broker, "hdr-window-out", 1)
    c_in, c_out = make_topic(spark_broker, "hdr-count-in", 1), make_topic(spark_broker, "hdr-count-out", 1)
    b = StreamsBuilder()
    (b.stream(c_in, Consumed.with_(Serdes.String(), Serdes.String())).groupByKey().count().toStream()
     .to(c_out, Produced.with_(Serdes.String(), Serdes.Long())))
    b.table(t_in, Consumed.with_(Serdes.String(), Serdes.String())).toStream().to(t_out)
    (b.stream(w_in, Consumed.with_(Serdes.String(), Serdes.String())).groupByKey()
     .windowedBy(TimeWindows.ofSizeWithNoGrace(60_000)).count().toStream()
     .map(lambda k, v: (k.key, v)).to(w_out, Produced.with_(Serdes.String(), Serdes.Long())))

    def headers(i):
        return [("trace", b"\xff%d" % i), ("empty", None)] if i % 3 else None
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for topic in (t_in, w_in, c_in):
            for i in range(8):
                p.produce(topic, key=b"k%d" % (i % 2), value=b"v%d" % i, timestamp=BASE + i, partition=0,
                          headers=headers(i))
        p.flush(30)
    app = StreamsApp(b.build(), spark, {"application.id": "hdr-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    described = str(app.describe())
    assert "counted per window with Arrow" in described and "last record of a batch kept" in described
    assert "counted per key with Arrow" in described
    app.start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    want = {b"k0": tuple(headers(6) or ()), b"k1": tuple(headers(7) or ())}
    for topic in (t_out, w_out, c_out):
        got = {k: h for k, _, _, h in read_committed(servers, topic, with_headers=True)}
        assert got == want, topic


@pytest.mark.timeout(300)
def test_a_malformed_value_a_later_record_overwrites_still_fails_a_cached_table(spark, spark_broker, tmp_path):
    """A cached source table's task reads only each key's last record of a batch, but Spark still
    decodes every value, so a malformed one fails the query even when a later record of its key
    would have overwritten it, and nothing of that batch is committed."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "latest-in", 1), make_topic(spark_broker, "latest-out", 1)
    b = StreamsBuilder()
    (b.table(source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER))).toStream()
     .to(out, Produced.with_(Serdes.String(), Serdes.Json(ORDER))))
    with Producer({"bootstrap.servers": servers}) as p:
        p.produce(source, key=b"k0", value=b"{not json", timestamp=BASE, partition=0)
        p.flush(30)
    produce(servers, source, history(4))        # k0 again, then k1..k3
    app = StreamsApp(b.build(), spark, {"application.id": "latest-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    assert "each key's last record of a batch kept with Arrow" in str(app.describe())
    fails_on_json_and_commits_nothing(app, servers, out)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["window", "key"])
def test_a_malformed_value_fails_a_combined_count_where_it_stands(spark, spark_broker, tmp_path, kind):
    """A count counted per window or per key before its task never reads the values (a stream's
    count only whether each is null), but Spark still decodes each one, so a value its serde cannot
    read fails the query as record by record, and nothing of that batch is committed."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, f"combined-{kind}-in", 1), make_topic(spark_broker, f"combined-{kind}-out", 1)
    b = StreamsBuilder()
    grouped = b.stream(source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER))).groupByKey()
    if kind == "window":
        (grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(10_000)).count().toStream()
         .map(lambda k, v: (f"{k.key}@{k.start}", v)).to(out, Produced.with_(Serdes.String(), Serdes.Long())))
    else:
        grouped.count().toStream().to(out, Produced.with_(Serdes.String(), Serdes.Long()))
    produce(servers, source, history(5))
    with Producer({"bootstrap.servers": servers}) as p:
        p.produce(source, key=b"k0", value=b"{not json", timestamp=BASE + 6_000, partition=0)
        p.flush(30)
    app = StreamsApp(b.build(), spark, {"application.id": f"combined-{kind}-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    assert f"counted per {kind} with Arrow" in str(app.describe())
    fails_on_json_and_commits_nothing(app, servers, out)


@pytest.mark.timeout(300)
def test_an_unnamed_to_table_forwards_every_record_on_spark_with_no_store(spark, spark_broker, tmp_path):
    """Kafka's ``KStreamImpl.toTable`` without a store name keeps no store: every record is
    forwarded as ``Change(value, null)``, none merged by a record cache, and there is no changelog
    topic; the sub-topology is stateless, so it runs as ``mapInArrow``."""
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "to-table-in", 1), make_topic(spark_broker, "to-table-out", 1)
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER))).toTable().toStream()
     .to(out, Produced.with_(Serdes.String(), Serdes.Json(ORDER))))
    records = history(8)            # k0..k3, each twice, in one batch
    produce(servers, source, records)
    app = StreamsApp(b.build(), spark, {"application.id": "to-table-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    assert app.topology.internal_topics("to-table-app") == {}
    app.start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    value = Serdes.Json(ORDER)
    got = [(k.decode(), value.deserialize(v), ts) for k, v, ts in read_committed(servers, out)]
    assert got == records
