"""A ``StreamsApp``'s lifecycle against Kafka's ``KafkaStreams`` (its ``State`` enum, ``setState``
and KafkaStreamsTest): the transition table, the quiet refusals of repeated shutdowns, the
listener's ``(new, old)`` calls, ``start()`` once, ``close()`` idempotent and bounded,
``cleanUp()``'s rule and the store errors. No Spark: the rules are pure, and the application
object is used only in the states it reaches without starting a query."""
from __future__ import annotations

import datetime

import pytest

from streams.app_state import TRANSITIONS, Lifecycle, State, StreamThreadExceptionResponse
from streams.builder import StreamsBuilder
from streams.errors import (IllegalStateError, InvalidStateStoreError, StreamsError, StreamsNotStartedError,
                            UnknownStateStoreError)
from streams.parameters import Consumed, Materialized
from streams.serdes import Serdes

pytestmark = pytest.mark.unit

S = Serdes.String()

KAFKA_VALID = {   # KafkaStreams.State: CREATED(1, 3), REBALANCING(2, 3, 5), RUNNING(1, 2, 3, 5), ...
    "CREATED": {"REBALANCING", "PENDING_SHUTDOWN"},
    "REBALANCING": {"RUNNING", "PENDING_SHUTDOWN", "PENDING_ERROR"},
    "RUNNING": {"REBALANCING", "RUNNING", "PENDING_SHUTDOWN", "PENDING_ERROR"},
    "PENDING_SHUTDOWN": {"NOT_RUNNING"},
    "NOT_RUNNING": set(),
    "PENDING_ERROR": {"ERROR"},
    "ERROR": set(),
}


def app(tmp_path, app_id="life"):
    from streams.app import StreamsApp
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).toTable(materialized=Materialized.as_("latest"))
    return StreamsApp(b.build(), None, {"application.id": app_id, "bootstrap.servers": "127.0.0.1:1",
                                        "state.dir": str(tmp_path / "state")})


def recorder(target):
    seen = []
    target.setStateListener(lambda new, old: seen.append((str(old), str(new)))) if hasattr(target, "setStateListener") \
        else target.set_state_listener(lambda new, old: seen.append((str(old), str(new))))
    return seen


def test_the_states_and_their_transitions_are_kafkas():
    assert [s.name for s in State] == list(KAFKA_VALID)
    assert {s.name: {t.name for t in TRANSITIONS[s]} for s in State} == KAFKA_VALID
    assert [s.name for s in State if s.isRunningOrRebalancing()] == ["REBALANCING", "RUNNING"]
    assert [s.name for s in State if s.isShuttingDown()] == ["PENDING_SHUTDOWN", "PENDING_ERROR"]
    assert [s.name for s in State if s.hasCompletedShutdown()] == ["NOT_RUNNING", "ERROR"]


def test_repeated_shutdowns_are_refused_quietly_and_an_unlisted_move_raises():
    """Kafka's setState: a second close, a second rebalance, anything but the end of a shutdown
    under way return false without a listener call; any other move outside the table throws."""
    life = Lifecycle("c")
    seen = recorder(life)
    assert life.set_state(State.REBALANCING) and not life.set_state(State.REBALANCING)
    assert life.set_state(State.RUNNING) and life.set_state(State.PENDING_SHUTDOWN)
    assert not life.set_state(State.RUNNING) and not life.set_state(State.PENDING_ERROR)
    assert life.set_state(State.NOT_RUNNING)
    assert not life.set_state(State.PENDING_SHUTDOWN) and not life.set_state(State.NOT_RUNNING)
    assert seen == [("CREATED", "REBALANCING"), ("REBALANCING", "RUNNING"), ("RUNNING", "PENDING_SHUTDOWN"),
                    ("PENDING_SHUTDOWN", "NOT_RUNNING")]
    with pytest.raises(IllegalStateError, match="Stream-client c: Unexpected state transition from NOT_RUNNING "
                                                "to REBALANCING"):
        life.set_state(State.REBALANCING)
    err = Lifecycle("e")
    for s in (State.REBALANCING, State.PENDING_ERROR):
        assert err.set_state(s)
    assert not err.set_state(State.PENDING_SHUTDOWN) and not err.set_state(State.RUNNING)
    assert err.set_state(State.ERROR) and not err.set_state(State.ERROR) and not err.set_state(State.PENDING_ERROR)
    with pytest.raises(IllegalStateError):
        Lifecycle("x").set_state(State.RUNNING)


def test_close_right_after_creation_goes_to_not_running_and_is_idempotent(tmp_path):
    """KafkaStreamsTest.testShouldTransitToNotRunningIfCloseRightAfterCreated, testCloseIsIdempotent."""
    a = app(tmp_path)
    assert a.state() is State.CREATED
    seen = recorder(a)
    assert a.close() is True and a.state() is State.NOT_RUNNING
    assert a.close() is True and a.close(datetime.timedelta(0)) is True
    assert seen == [("CREATED", "PENDING_SHUTDOWN"), ("PENDING_SHUTDOWN", "NOT_RUNNING")]


def test_a_closed_application_cannot_start_again_nor_take_a_listener_or_handler(tmp_path):
    """KafkaStreamsTest.testCannotStartOnceClosed: start() after close() is refused before any
    query or topic is touched (this application has no Spark session and no broker)."""
    a = app(tmp_path)
    a.close()
    with pytest.raises(IllegalStateError, match="^The client is either already started or already stopped, "
                                                "cannot re-start$") as e:
        a.start()
    assert isinstance(e.value, StreamsError)
    with pytest.raises(IllegalStateError, match=r"^Can only set StateListener before calling start\(\)\. "
                                                r"Current state is: NOT_RUNNING$"):
        a.setStateListener(lambda new, old: None)
    with pytest.raises(IllegalStateError, match=r"^Can only set UncaughtExceptionHandler before calling start\(\)\. "
                                                r"Current state is: NOT_RUNNING$"):
        a.setUncaughtExceptionHandler(lambda e: StreamThreadExceptionResponse.SHUTDOWN_CLIENT)
    assert a.state() is State.NOT_RUNNING


def test_a_second_start_is_refused_while_running():
    life = Lifecycle("c")
    life.begin_start()
    with pytest.raises(IllegalStateError, match="already started or already stopped"):
        life.begin_start()


def test_clean_up_only_before_start_or_after_shutdown(tmp_path):
    """KafkaStreamsTest.shouldAllowCleanupBeforeStartAndAfterClose / shouldThrowOnCleanupWhileRunning
    / ...WhileShuttingDown: the application's directory under state.dir goes; another's stays."""
    a = app(tmp_path)
    mine, other = tmp_path / "state" / "life" / "subtopology-0", tmp_path / "state" / "other-app"
    mine.mkdir(parents=True)
    other.mkdir(parents=True)
    a.cleanUp()
    assert not (tmp_path / "state" / "life").exists() and other.exists()
    a.cleanUp()     # nothing to delete
    a.close()
    mine.mkdir(parents=True)
    a.cleanUp()
    assert not mine.exists()
    for path in ([State.REBALANCING], [State.REBALANCING, State.RUNNING],
                 [State.REBALANCING, State.RUNNING, State.PENDING_SHUTDOWN], [State.REBALANCING, State.PENDING_ERROR]):
        life = Lifecycle("c")
        for s in path:
            life.set_state(s)
        with pytest.raises(IllegalStateError, match=r"^Cannot clean up while running\.$"):
            life.check_clean_up()
    for path in ([State.REBALANCING, State.PENDING_ERROR, State.ERROR], [State.PENDING_SHUTDOWN, State.NOT_RUNNING]):
        life = Lifecycle("c")
        for s in path:
            life.set_state(s)
        life.check_clean_up()


def test_close_refuses_a_negative_timeout(tmp_path):
    a = app(tmp_path)
    for timeout in (-1, datetime.timedelta(seconds=-1)):
        with pytest.raises(ValueError, match="^Timeout can't be negative.$"):
            a.close(timeout)
    assert a.state() is State.CREATED


def test_an_unknown_store_is_kafkas_unknown_state_store_exception(tmp_path):
    """KafkaStreamsTest.shouldThrowUnknownStateStoreExceptionWhenStoreNotExist, with Kafka's message;
    decided before the broker is asked (there is none here)."""
    a = app(tmp_path)
    with pytest.raises(UnknownStateStoreError, match=r"^Cannot get state store nope because no such store is "
                                                     r"registered in the topology\.$") as e:
        a.store("nope")
    assert isinstance(e.value, InvalidStateStoreError) and e.value.code == 1282


def test_the_uncaught_exception_handler_defaults_to_shutdown_client_and_is_set_before_start():
    life = Lifecycle("c")
    boom = StreamsError("boom")
    assert life.respond(boom) is StreamThreadExceptionResponse.SHUTDOWN_CLIENT
    with pytest.raises(TypeError):
        life.set_uncaught_exception_handler(None)

    class Replace:
        def handle(self, exception):
            assert exception is boom
            return StreamThreadExceptionResponse.REPLACE_THREAD
    life.set_uncaught_exception_handler(Replace())
    assert life.respond(boom) is StreamThreadExceptionResponse.REPLACE_THREAD
    life.set_uncaught_exception_handler(lambda e: "not a response")
    assert life.respond(boom) is StreamThreadExceptionResponse.SHUTDOWN_CLIENT
    life.set_uncaught_exception_handler(lambda e: 1 / 0)
    assert life.respond(boom) is StreamThreadExceptionResponse.SHUTDOWN_CLIENT


def test_validate_running_is_kafkas():
    """KafkaStreams.validateIsRunningOrRebalancing, for the calls that need a running client."""
    life = Lifecycle("c")
    with pytest.raises(StreamsNotStartedError, match=r"^KafkaStreams has not been started, you can retry after "
                                                     r"calling start\(\)$"):
        life.validate_running()
    life.set_state(State.REBALANCING)
    life.validate_running()
    life.set_state(State.PENDING_SHUTDOWN)
    with pytest.raises(IllegalStateError, match=r"^KafkaStreams is not running\. State is PENDING_SHUTDOWN\.$"):
        life.validate_running()


def test_wait_on_a_state_is_bounded():
    life = Lifecycle("c")
    assert life.wait_on(State.CREATED, 0) is True
    assert life.wait_on(State.NOT_RUNNING, 0.01) is False


def test_store_query_parameters_are_kafkas_and_a_type_that_does_not_fit_is_refused(tmp_path):
    """StoreQueryParameters is immutable (each with... gives a new one); a queryable store type that
    does not accept the store's kind is Kafka's InvalidStateStoreException, decided before the
    broker is asked; an unknown name inside the parameters is UnknownStateStoreError."""
    from streams.store_query import QueryableStoreTypes, StoreQueryParameters
    base = StoreQueryParameters.fromNameAndType("latest", QueryableStoreTypes.keyValueStore())
    p = base.withPartition(3).enableStaleStores()
    assert (base.partition(), base.staleStoresEnabled()) == (None, False)
    assert (p.storeName(), p.partition(), p.staleStoresEnabled()) == ("latest", 3, True)
    assert p.queryableStoreType() == QueryableStoreTypes.keyValueStore()
    a = app(tmp_path)
    for wrong in (QueryableStoreTypes.windowStore(), QueryableStoreTypes.timestampedWindowStore(),
                  QueryableStoreTypes.sessionStore()):
        with pytest.raises(InvalidStateStoreError, match=rf"^Cannot get state store latest because the queryable "
                                                         rf"store type \[{wrong}\] does not accept the actual store "
                                                         rf"type \[keyValue store\]\.$"):
            a.store(StoreQueryParameters.fromNameAndType("latest", wrong))
    with pytest.raises(UnknownStateStoreError, match="Cannot get state store nope because"):
        a.store(StoreQueryParameters.fromNameAndType("nope", QueryableStoreTypes.keyValueStore()))


def _started_without_queries(tmp_path, app_id="life"):
    """An application started with no query (no Spark session, no broker): the lifecycle alone."""
    a = app(tmp_path, app_id)
    a._start_queries = lambda: None
    a._stop_queries = lambda: None
    return a.start()


def test_one_running_instance_per_state_dir_and_application_id(tmp_path):
    """KafkaStreams' StateDirectory locks state.dir/<application.id> (its .lock file): a second
    instance on the same directory fails with Kafka's message (here at start(), into ERROR) and
    cannot cleanUp() the running one's checkpoints; another application id, or the directory once
    the first instance closed, is free."""
    first = _started_without_queries(tmp_path)
    checkpoint = tmp_path / "state" / "life" / "subtopology-0"
    checkpoint.mkdir(parents=True)
    second = app(tmp_path)
    with pytest.raises(StreamsError, match=r"^Unable to initialize state, this can happen if multiple instances of "
                                           r"Kafka Streams are running in the same state directory"):
        second.cleanUp()
    assert checkpoint.exists()
    with pytest.raises(StreamsError, match=r"multiple instances of Kafka Streams are running in the same state "
                                           r"directory \(current state directory is \[.*/state/life\]"):
        second._start_queries = lambda: None
        second.start()
    assert second.state() is State.ERROR
    other = _started_without_queries(tmp_path, "other-app")
    assert other.state() is State.RUNNING
    assert first.close(10) is True and other.close(10) is True
    third = _started_without_queries(tmp_path)
    assert third.state() is State.RUNNING
    assert third.close(10) is True
    third.cleanUp()
    assert not checkpoint.exists()
