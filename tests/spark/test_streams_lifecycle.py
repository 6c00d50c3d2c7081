"""A failing query on Spark against Kafka's ``StreamsUncaughtExceptionHandler`` rules: by default
the client shuts down (``RUNNING -> PENDING_ERROR -> ERROR``, every query stopped, the query's
exception surfaced); ``REPLACE_THREAD`` starts the query again (``RUNNING -> REBALANCING ->
RUNNING``) and the output stays exactly once. Also the store errors before start and Kafka's
``StoreQueryParameters``."""
from __future__ import annotations

import os

import pytest

from streams.app_state import State, StreamThreadExceptionResponse
from streams.builder import StreamsBuilder
from streams.errors import IllegalStateError, InvalidStateStorePartitionError, StreamsError, StreamsNotStartedError
from streams.parameters import Consumed, Materialized, Produced
from streams.serdes import Serdes
from streams.store_query import QueryableStoreTypes, StoreQueryParameters
from streams.testing import TopologyTestDriver
from tests.conftest import wait_until
from tests.spark.child_process import EVERY_UPDATE
from tests.spark.test_sink import make_topic
from tests.spark.test_streams_app import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

S, L = Serdes.String(), Serdes.Long()
BASE = 1_700_000_000_000


def produce(servers, topic, records):
    from broker.client import Producer
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for i, (k, v) in enumerate(records):
            p.produce(topic, key=S.serialize(k), value=S.serialize(v), timestamp=BASE + i, partition=0)
        p.flush(30)


def fail_on(flag: str):
    """A mapper that fails on "boom" while ``flag`` exists, removing it: a failure that a retry
    of the same batch does not meet again (Python workers share the machine's disk)."""
    def mapper(v):
        if v == "boom" and os.path.exists(flag):
            os.remove(flag)
            raise RuntimeError("boom: a transient failure")
        return v
    return mapper


def recorder(app):
    seen = []
    app.setStateListener(lambda new, old: seen.append((old.name, new.name)))
    return seen


@pytest.mark.timeout(600)
def test_a_failed_query_shuts_the_client_down_to_error_by_default(spark, spark_broker, tmp_path):
    """Kafka's default handler answers SHUTDOWN_CLIENT: every query stops (the healthy one too),
    the state ends in ERROR through PENDING_ERROR, the listener sees each change in order, and
    the query's exception is what processAllAvailable raises. A closed-by-error client closes at
    once, cannot start again, and may be cleaned up."""
    from pyspark.errors import StreamingQueryException
    servers = spark_broker.bootstrap
    bad_in, bad_out = make_topic(spark_broker, "life-bad-in", 1), make_topic(spark_broker, "life-bad-out", 1)
    ok_in, ok_out = make_topic(spark_broker, "life-ok-in", 1), make_topic(spark_broker, "life-ok-out", 1)
    flag = tmp_path / "fail"
    flag.write_text("")
    b = StreamsBuilder()
    b.stream(bad_in, Consumed.with_(S, S)).mapValues(fail_on(str(flag))).to(bad_out, Produced.with_(S, S))
    b.stream(ok_in, Consumed.with_(S, S)).mapValues(lambda v: v.upper()).to(ok_out, Produced.with_(S, S))
    produce(servers, bad_in, [("a", "x"), ("a", "boom")])
    app = b.build(spark, {"application.id": "life-error", "bootstrap.servers": servers,
                          "state.dir": str(tmp_path / "state")})
    seen = recorder(app)
    app.start()
    try:
        wait_until(lambda: app.state() is State.ERROR, timeout=240, message="the state ERROR")
        assert seen == [("CREATED", "REBALANCING"), ("REBALANCING", "RUNNING"), ("RUNNING", "PENDING_ERROR"),
                        ("PENDING_ERROR", "ERROR")]
        assert app.queries == [] and not [q for q in spark.streams.active if q.name.startswith("life-error-")]
        assert isinstance(app.failure, StreamsError) and isinstance(app.failure.__cause__, StreamingQueryException)
        assert "boom: a transient failure" in str(app.failure)
        with pytest.raises(StreamingQueryException, match="boom: a transient failure"):
            app.processAllAvailable()
        with pytest.raises(IllegalStateError, match="cannot re-start"):
            app.start()
    finally:
        assert app.close() is True
    assert app.state() is State.ERROR and seen[-1] == ("PENDING_ERROR", "ERROR")
    app.cleanUp()
    assert not (tmp_path / "state" / "life-error").exists()
    assert read_committed(servers, bad_out) == []


@pytest.mark.timeout(600)
def test_replace_thread_restarts_the_failed_query_and_the_output_stays_exactly_once(spark, spark_broker, tmp_path):
    """REPLACE_THREAD: the failed sub-topology's query starts again from its checkpoint; the batch
    that failed is read again, and every count is written once, as the interpreter writes them."""
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "life-replace-in", 1), make_topic(spark_broker, "life-replace-out", 1)
    flag = tmp_path / "fail"
    flag.write_text("")
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(S, S)).mapValues(fail_on(str(flag))).groupByKey()
      .count(materialized=Materialized.as_("counts")).toStream().to(out, Produced.with_(S, L)))
    tp = b.build()
    records = [(k, "boom" if i == 7 else "v") for i, k in enumerate("abcabcabcab")]
    produce(servers, source, records)
    from streams.app import StreamsApp
    app = StreamsApp(tp, spark, {"application.id": "life-replace", "bootstrap.servers": servers,
                                 "state.dir": str(tmp_path / "state"), "maxOffsetsPerTrigger": 3, **EVERY_UPDATE})
    seen, handled = recorder(app), []

    def handler(e):
        handled.append(e)
        return StreamThreadExceptionResponse.REPLACE_THREAD
    app.setUncaughtExceptionHandler(handler)
    app.start()
    try:
        app.processAllAvailable()
        assert not flag.exists() and len(handled) == 1 and "boom" in str(handled[0])
        assert seen == [("CREATED", "REBALANCING"), ("REBALANCING", "RUNNING"), ("RUNNING", "REBALANCING"),
                        ("REBALANCING", "RUNNING")]
        assert app.state() is State.RUNNING and len(app.queries) == 1 and app.queries[0].isActive
        assert dict(app.store("counts").all()) == {"a": 4, "b": 4, "c": 3}
        # Kafka's StoreQueryParameters: the type picks the view, the partition one task's part
        stamped = app.store(StoreQueryParameters.fromNameAndType("counts", QueryableStoreTypes.timestampedKeyValueStore())
                            .withPartition(0).enableStaleStores())
        assert (stamped.get("a").value, stamped.get("a").timestamp) == (4, BASE + 9)
        with pytest.raises(InvalidStateStorePartitionError, match=r"^The specified partition 1 for store counts does "
                                                                  r"not exist\.$"):
            app.store(StoreQueryParameters.fromNameAndType("counts", QueryableStoreTypes.keyValueStore())
                      .withPartition(1))
    finally:
        app.close()
    assert app.state() is State.NOT_RUNNING and seen[-2:] == [("RUNNING", "PENDING_SHUTDOWN"),
                                                               ("PENDING_SHUTDOWN", "NOT_RUNNING")]
    d = TopologyTestDriver(tp, {"application.id": "oracle", **EVERY_UPDATE})
    i = d.createInputTopic(source, S, S)
    for n, (k, v) in enumerate(records):
        i.pipeInput(k, "v" if v == "boom" else v, BASE + n)
    want = [(S.serialize(r.key), L.serialize(r.value)) for r in d.createOutputTopic(out, S, L).readRecordsToList()]
    assert [(k, v) for k, v, _ in read_committed(servers, out)] == want


def test_a_store_before_the_first_start_is_kafkas_streams_not_started(spark, spark_broker, tmp_path):
    """Before start() no changelog exists: Kafka's StreamsNotStartedException (an
    InvalidStateStoreException), with its message."""
    b = StreamsBuilder()
    b.stream(make_topic(spark_broker, "life-early-in", 1), Consumed.with_(S, S)).toTable(
        materialized=Materialized.as_("early"))
    app = b.build(spark, {"application.id": "life-early", "bootstrap.servers": spark_broker.bootstrap,
                          "state.dir": str(tmp_path / "state")})
    with pytest.raises(StreamsNotStartedError, match=r"^KafkaStreams has not been started, you can retry after "
                                                     r"calling start\(\)"):
        app.store("early")
    app.close()


@pytest.mark.timeout(600)
def test_pause_stops_processing_and_resume_goes_on_exactly_once(spark, spark_broker, tmp_path):
    """Kafka's pause()/resume() (KIP-834): paused before start(), the application starts RUNNING
    with nothing processed; resumed, it processes; paused again, its queries stop and the state
    stays RUNNING; resumed, it goes on from its checkpoint, every record written once."""
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "life-pause-in", 1), make_topic(spark_broker, "life-pause-out", 1)
    b = StreamsBuilder()
    b.stream(source, Consumed.with_(S, S)).mapValues(lambda v: v.upper()).to(out, Produced.with_(S, S))
    app = b.build(spark, {"application.id": "life-pause", "bootstrap.servers": servers,
                          "state.dir": str(tmp_path / "state")})
    seen = recorder(app)
    produce(servers, source, [("a", "x"), ("b", "y")])
    app.pause()
    assert app.isPaused()
    app.start()
    try:
        assert app.state() is State.RUNNING and app.queries == []
        app.processAllAvailable()
        assert read_committed(servers, out) == []
        app.resume()
        assert not app.isPaused() and len(app.queries) == 1
        app.processAllAvailable()
        want = [(S.serialize(k), S.serialize(v)) for k, v in [("a", "X"), ("b", "Y")]]
        assert [(k, v) for k, v, _ in read_committed(servers, out)] == want
        app.pause()
        assert app.isPaused() and app.state() is State.RUNNING and app.queries == []
        assert not [q for q in spark.streams.active if q.name.startswith("life-pause-")]
        produce(servers, source, [("c", "z")])
        app.processAllAvailable()
        assert [(k, v) for k, v, _ in read_committed(servers, out)] == want
        app.resume()
        app.processAllAvailable()
        assert [(k, v) for k, v, _ in read_committed(servers, out)] == want + [(b"c", b"Z")]
        assert seen == [("CREATED", "REBALANCING"), ("REBALANCING", "RUNNING")]
    finally:
        app.close()
    assert app.state() is State.NOT_RUNNING
