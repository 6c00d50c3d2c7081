"""Guards from KafkaStreamsTest for the states a ``StreamsApp`` reaches without a query: pause and
resume before ``start()`` (testStartingPaused, testShowPauseResumeAreIdempotent) and ``close()``
from a failure's states (KafkaStreams.close: a PENDING_ERROR client is waited on to ERROR, never
moved to PENDING_SHUTDOWN; a client in ERROR answers true at once). No Spark, no broker."""
from __future__ import annotations

import datetime

import pytest

from streams.app_state import State
from streams.builder import StreamsBuilder
from streams.errors import IllegalStateError
from streams.parameters import Consumed
from streams.serdes import Serdes

pytestmark = pytest.mark.unit


def app(tmp_path):
    from streams.app import StreamsApp
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(Serdes.String(), Serdes.String())).to("out")
    return StreamsApp(b.build(), None, {"application.id": "pause", "bootstrap.servers": "127.0.0.1:1",
                                        "state.dir": str(tmp_path)})


def test_pause_and_resume_are_idempotent_and_leave_a_created_application_created(tmp_path):
    a = app(tmp_path)
    assert a.isPaused() is False
    a.pause()
    a.pause()
    assert a.isPaused() is True and a.state() is State.CREATED and a.queries == []
    a.resume()
    assert a.isPaused() is False
    a.resume()
    assert a.isPaused() is False and a.state() is State.CREATED
    a.pause()
    a.close()
    assert a.state() is State.NOT_RUNNING and a.isPaused() is True


def test_close_while_failing_waits_for_error_and_does_not_turn_it_into_a_shutdown(tmp_path):
    a = app(tmp_path)
    seen = []
    a.setStateListener(lambda new, old: seen.append(str(new)))
    a._life.set_state(State.REBALANCING)
    a._life.set_state(State.PENDING_ERROR)
    assert a.close(datetime.timedelta(0)) is False          # ERROR not reached yet
    assert a.state() is State.PENDING_ERROR
    a._life.set_state(State.ERROR)
    assert a.close() is True and a.close(0) is True
    assert seen == ["REBALANCING", "PENDING_ERROR", "ERROR"]
    with pytest.raises(IllegalStateError, match="already started or already stopped"):
        a.start()
    a.cleanUp()     # allowed once the shutdown completed, in ERROR too
