"""Kafka Streams' configuration and error handling, as Kafka's ``StreamsConfig``,
``PartitionGroup``, ``RecordQueue``/``RecordDeserializer``, ``ProcessorNode`` and its timestamp
extractors behave: checked on the test driver and on the task the Spark queries run
(``streams.spark_task.run_rows``), plus the internal topics' replication factor on a real cluster."""
from __future__ import annotations

import logging

import pytest

from broker.errors import InvalidConfigError
from streams.app import StreamsApp, _config
from streams.builder import StreamsBuilder
from streams.errors import StreamsError
from streams.interpreter import Interpreter
from streams.parameters import Consumed, Materialized, Produced
from streams.serdes import Serdes
from streams.spark_task import run_rows
from streams.testing import TopologyTestDriver
from streams.windows import TimeWindows
from tests.conftest import wait_until

S, L = Serdes.String(), Serdes.Long()
APP = {"application.id": "app", "bootstrap.servers": "127.0.0.1:1"}


def policy(**config):
    """The task config StreamsApp hands its Spark tasks."""
    from streams.interpreter import task_policy
    return task_policy({**APP, **config})


def value_time(record, partition_time):
    return record.value


def row(topic, offset, key, value, ts):
    return {"topic": topic, "partition": 0, "offset": offset, "key": S.serialize(key), "value": L.serialize(value),
            "timestamp": ts, "headers": []}


def copy(config=None, consumed=None):
    b = StreamsBuilder()
    b.stream("in", consumed or Consumed.with_(S, L)).to("out", Produced.with_(S, L))
    return b.build()


# ------------------------------------------------------------------ 1. partition group order
def test_a_tasks_partitions_merge_by_the_extracted_timestamp_of_their_heads():
    """Kafka's PartitionGroup picks the partition whose head has the lowest *extracted* timestamp:
    the broker timestamps (A's earlier) do not decide, and a head the extractor drops (negative) is
    skipped, so the partition's next record is its head."""
    b = StreamsBuilder()
    skip_negative = Consumed.with_(S, L).withTimestampExtractor(lambda r, pt: -1 if r.value < 0 else r.value)
    b.stream("A", skip_negative).merge(b.stream("B", skip_negative)).to("out", Produced.with_(S, L))
    rows = [row("A", 0, "a-dropped", -7, 1), row("A", 1, "a", 100, 2), row("B", 0, "b", 50, 3),
            row("A", 2, "a2", 60, 4)]
    _, out, _ = run_rows(b.build(), 0, "app", 0, rows, (None, None))
    assert [(S.deserialize(k), ts.timestamp() * 1000) for _, _, k, _, ts, _ in out] == \
        [("b", 50), ("a", 100), ("a2", 60)]


def test_a_stream_table_join_sees_the_table_update_with_the_earlier_extracted_time():
    """r5: the order's broker timestamp is earlier, its event time later than the user's; Kafka
    applies the user first, so the join finds it."""
    b = StreamsBuilder()
    users = b.table("users", Consumed.with_(S, L).withTimestampExtractor(value_time))
    (b.stream("orders", Consumed.with_(S, L).withTimestampExtractor(value_time))
     .join(users, lambda o, u: o * 1000 + u).to("enriched", Produced.with_(S, L)))
    topology = b.build()
    sub = next(s for s in topology.subtopologies if any(n.kind == "source" for n in s.nodes))
    rows = [row("orders", 0, "u1", 100, 1), row("users", 0, "u1", 50, 2)]
    _, out, _ = run_rows(topology, sub.id, "app", 0, rows, (None, None))
    assert [(t, S.deserialize(k), L.deserialize(v)) for t, _, k, v, _, _ in out if t == "enriched"] == \
        [("enriched", "u1", 100_050)]


# ------------------------------------------------------------------ 2. invalid timestamps
def windowed():
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, L))
    s.to("copy", Produced.with_(S, L))
    s.groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1000)).count(Materialized.as_("w"))
    return b.build()


def test_a_negative_record_timestamp_fails_the_task_with_kafkas_default_extractor():
    """FailOnInvalidTimestamp: the driver's interpreter and the Spark task both raise Kafka's
    StreamsException, nothing is written."""
    it = Interpreter(windowed(), {"application.id": "a"})
    with pytest.raises(StreamsError, match=r"has invalid \(negative\) timestamp.*Use a different TimestampExtractor"):
        it.pipe("in", S.serialize("k"), L.serialize(1), -5)
    assert not it.topics.get("copy", [[]])[0]
    with pytest.raises(StreamsError, match=r"topic = in, partition = 0, offset = 3, CreateTime = -5"):
        run_rows(windowed(), 0, "app", 0, [row("in", 3, "k", 1, -5)], (None, None), policy=policy())


@pytest.mark.parametrize("given", ["LogAndSkipOnInvalidTimestamp",
                                   "org.apache.kafka.streams.processor.LogAndSkipOnInvalidTimestamp"])
def test_log_and_skip_drops_a_negative_timestamp_and_use_partition_time_replaces_it(given):
    from streams.parameters import LogAndSkipOnInvalidTimestamp
    it = Interpreter(windowed(), {"application.id": "a", "default.timestamp.extractor": given})
    it.pipe("in", S.serialize("k"), L.serialize(1), -5)
    it.pipe("in", S.serialize("k"), L.serialize(2), 7)
    assert [ts for _, _, ts, _ in it.topics["copy"][0]] == [7]
    it = Interpreter(windowed(), {"application.id": "a",
                                  "default.timestamp.extractor": "UsePartitionTimeOnInvalidTimestamp"})
    with pytest.raises(StreamsError, match="because partition time is unknown"):
        it.pipe("in", S.serialize("k"), L.serialize(1), -5)
    it.pipe("in", S.serialize("k"), L.serialize(2), 7)
    it.pipe("in", S.serialize("k"), L.serialize(3), -5)
    assert [ts for _, _, ts, _ in it.topics["copy"][0]] == [7, 7]
    # per source, by Consumed (an extractor class or its name), over the default
    it = Interpreter(copy(consumed=Consumed.with_(S, L).withTimestampExtractor(LogAndSkipOnInvalidTimestamp)),
                     {"application.id": "a"})
    it.pipe("in", S.serialize("k"), L.serialize(1), -5)
    assert "out" not in it.topics
    with pytest.raises(InvalidConfigError, match="default.timestamp.extractor"):
        Interpreter(copy(), {"application.id": "a", "default.timestamp.extractor": "my.OwnExtractor"})


# ------------------------------------------------------------------ 3. exception handlers
def pipe_malformed(config):
    d = TopologyTestDriver(copy(), {"application.id": "a", **config})
    i = d.createInputTopic("in", S, Serdes.Bytes())
    i.pipeInput("bad", b"\x01\x02\x03", 1)
    i.pipeInput("good", (7).to_bytes(8, "big"), 2)
    return [(r.key, r.value) for r in d.createOutputTopic("out", S, L).readRecordsToList()]


@pytest.mark.parametrize("name", ["default.deserialization.exception.handler", "deserialization.exception.handler"])
def test_log_and_continue_skips_a_record_that_does_not_deserialize(name, caplog):
    with pytest.raises(StreamsError, match="Deserialization exception handler is set to fail"):
        pipe_malformed({})
    with caplog.at_level(logging.WARNING):
        got = pipe_malformed({name: "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler"})
    assert got == [("good", 7)]
    assert "Exception caught during Deserialization, taskId: 0, topic: in, partition: 0, offset: 0" in caplog.text
    # the new name wins over the deprecated one, as Kafka's StreamsConfig.deserializationExceptionHandler()
    with pytest.raises(StreamsError):
        pipe_malformed({"deserialization.exception.handler": "LogAndFailExceptionHandler",
                        "default.deserialization.exception.handler": "LogAndContinueExceptionHandler"})


def test_log_and_continue_skips_a_bad_record_on_the_spark_task_too():
    rows = [{**row("in", 0, "bad", 0, 1), "value": b"\x01"}, row("in", 1, "good", 7, 2)]
    _, out, _ = run_rows(copy(), 0, "app", 0, rows, (None, None),
                         policy=policy(**{"deserialization.exception.handler": "LogAndContinueExceptionHandler"}))
    assert [S.deserialize(k) for _, _, k, _, _, _ in out] == ["good"]


def test_the_processing_handler_that_continues_drops_the_record_at_the_failing_processor():
    def build():
        b = StreamsBuilder()
        b.stream("in", Consumed.with_(S, L)).mapValues(lambda v: 10 // v).to("out", Produced.with_(S, L))
        return b.build()

    def run(config):
        d = TopologyTestDriver(build(), {"application.id": "a", **config})
        i = d.createInputTopic("in", S, L)
        i.pipeInput("zero", 0, 1)
        i.pipeInput("two", 2, 2)
        return d.createOutputTopic("out", S, L).readKeyValuesToList()
    with pytest.raises(ZeroDivisionError):
        run({"processing.exception.handler": "LogAndFailProcessingExceptionHandler"})
    assert run({"processing.exception.handler":
                "org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler"}) == [("two", 5)]


def test_handlers_riverlog_does_not_have_are_refused_naming_the_config():
    for name in ("default.production.exception.handler", "production.exception.handler",
                 "processing.exception.handler", "deserialization.exception.handler"):
        with pytest.raises(InvalidConfigError, match=f"configuration {name}: Class my.Handler could not be found") \
                as e:
            TopologyTestDriver(copy(), {"application.id": "a", name: "my.Handler"})
        assert e.value.details["config"] == name
    TopologyTestDriver(copy(), {"application.id": "a", "default.production.exception.handler":
                                "org.apache.kafka.streams.errors.DefaultProductionExceptionHandler"})


# ------------------------------------------------------------------ 4. config acceptance
def test_kafkas_streams_keys_and_client_prefixes_are_accepted(caplog):
    from streams.app import _client
    kafka = {"num.stream.threads": "4", "max.task.idle.ms": "1000", "num.standby.replicas": "1",
             "client.id": "c1", "topology.optimization": "all", "producer.compression.type": "lz4",
             "consumer.max.poll.records": "100", "main.consumer.max.poll.records": "50",
             "main.consumer.group.id": "not-mine", "admin.request.timeout.ms": "5000",
             "restore.consumer.fetch.max.bytes": "1", "my.custom.setting": "x"}
    with caplog.at_level(logging.INFO, logger="streams"):
        c = _config({**APP, **kafka})
    assert c["topology.optimization"] == "all" and "is not applied" in caplog.text
    assert "'my.custom.setting'" in caplog.text and "'num.stream.threads'" in caplog.text
    assert _client(c, "producer.") == {"compression.type": "lz4"}
    assert _client(c, "consumer.", "main.consumer.") == {"max.poll.records": "50"}     # group.id is the app's
    assert _client(c, "admin.") == {"request.timeout.ms": "5000"}


@pytest.mark.parametrize("key,value", [("processing.guarantee", "bogus"), ("processing.guarantee", "exactly_once"),
                                       ("commit.interval.ms", "-5"), ("topology.optimization", "bogus"),
                                       ("topology.optimization", "all,reuse.ktable.source.topics"),
                                       ("max.task.idle.ms", "-2")])
def test_values_kafkas_validators_refuse_are_refused_by_the_app_and_the_driver(key, value):
    with pytest.raises(InvalidConfigError) as e:
        _config({**APP, key: value})
    assert e.value.details["config"] == key
    with pytest.raises(InvalidConfigError) as e:      # no bootstrap.servers needed by the driver
        TopologyTestDriver(copy(), {"application.id": "a", key: value})
    assert e.value.details["config"] == key


# ------------------------------------------------------------------ 5. replication factor
def test_internal_topics_take_the_brokers_default_replication_factor(cluster_factory):
    """Kafka's replication.factor default is -1: a changelog on a cluster whose
    default.replication.factor is 2 has two replicas (it had 1)."""
    assert _config(APP)["replication.factor"] == -1
    cluster = cluster_factory(2, configs={"default.replication.factor": 2})
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, L)).groupByKey().count(Materialized.as_("counts"))
    with cluster.admin() as admin:
        from broker.client import NewTopic
        admin.create_topics([NewTopic("in", 2, 1)])["in"].result(30)

    def replicas(topic):
        try:
            return len(cluster.partition(topic, 0).replicas)
        except Exception:  # noqa: BLE001 - a broker that has not seen the topic's metadata yet
            return None
    wait_until(lambda: all(replicas("in") == 1 for _ in range(4)), 30, message="'in' known to both brokers")
    app = StreamsApp(b.build(), None, {"application.id": "rf", "bootstrap.servers": cluster.bootstrap})
    app._create_internal_topics()
    for topic in ("rf-counts-changelog", "rf-streams-generations"):
        wait_until(lambda: replicas(topic) == 2, 30, message=f"{topic} with 2 replicas (has {replicas(topic)})")


# ------------------------------------------------------------------ 6. max.task.idle.ms
def test_the_driver_respects_task_idling_as_kafkas_test_driver():
    """Kafka's TopologyTestDriverTest.shouldRespectTaskIdling: a record waits while another input
    partition of its task is empty, until that one has data or the idle deadline (wall-clock
    time) passes; the lowest extracted head goes first."""
    b = StreamsBuilder()
    b.stream("input1", Consumed.with_(S, S)).merge(b.stream("input2", Consumed.with_(S, S))) \
        .to("output", Produced.with_(S, S))
    it = Interpreter(b.build(), {"application.id": "a", "max.task.idle.ms": "1000"})

    def out():
        return [S.deserialize(k) for k, *_ in it.topics.get("output", [[]])[0]]
    it.pipe("input1", S.serialize("A"), S.serialize("alpha"), 10)
    it.advance_wall_clock(1)
    assert out() == []
    it.pipe("input2", S.serialize("B"), S.serialize("beta"), 10)
    assert out() == ["A"]
    it.advance_wall_clock(1000)
    assert out() == ["A", "B"]


def test_an_idling_stream_table_join_sees_the_earlier_table_update_piped_after_the_order():
    b = StreamsBuilder()
    users = b.table("users", Consumed.with_(S, S))
    b.stream("orders", Consumed.with_(S, S)).join(users, lambda o, u: f"{o}@{u}").to("enriched", Produced.with_(S, S))
    it = Interpreter(b.build(), {"application.id": "a", "max.task.idle.ms": "1000"})
    it.pipe("orders", S.serialize("u1"), S.serialize("o1"), 100)
    it.pipe("users", S.serialize("u1"), S.serialize("ann"), 50)
    it.advance_wall_clock(1000)
    assert [(S.deserialize(k), S.deserialize(v), ts) for k, v, ts, _ in it.topics["enriched"][0]] == \
        [("u1", "o1@ann", 100)]


def test_the_test_drivers_wall_clock_releases_an_idling_task():
    """The same through TopologyTestDriver: advanceWallClockTime passes the idle deadline."""
    from streams.testing import TopologyTestDriver
    b = StreamsBuilder()
    b.stream("input1", Consumed.with_(S, S)).merge(b.stream("input2", Consumed.with_(S, S))) \
        .to("output", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "a", "max.task.idle.ms": "1000"})
    one, out = d.createInputTopic("input1", S, S), d.createOutputTopic("output", S, S)
    one.pipeInput("A", "alpha", 10)
    assert out.readKeyValuesToList() == []
    d.advanceWallClockTime(1000)
    assert [kv.key for kv in out.readKeyValuesToList()] == ["A"]
