"""A :class:`~streams.app.StreamsApp`'s lifecycle, as Kafka's ``KafkaStreams.State``: the states,
the transition table, the rules ``setState`` applies to repeated shutdowns, the listener told of
each change, and the uncaught exception handler's answer to a failed query.

    CREATED -> REBALANCING -> RUNNING -> PENDING_SHUTDOWN -> NOT_RUNNING
                     \\            \\---> PENDING_ERROR -> ERROR
                      \\-----------------/

A ``StreamsApp`` is ``REBALANCING`` while its queries start (and while a failed one is replaced),
``RUNNING`` once all have started. Pure apart from the lock and the condition ``close(timeout)``
waits on: no threads or clocks of its own.

    life = Lifecycle("orders-app")
    life.set_state_listener(lambda new, old: print(old, "->", new))
    life.begin_start()                       # CREATED -> REBALANCING, else IllegalStateError
"""
from __future__ import annotations

import enum
import logging
import threading
import time

from streams.errors import IllegalStateError, StreamsNotStartedError

log = logging.getLogger(__name__)


class State(enum.Enum):
    """Kafka's ``KafkaStreams.State``, with its predicates under Kafka's names."""
    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"

    def __str__(self) -> str:
        return self.value

    def hasNotStarted(self) -> bool:
        return self is State.CREATED

    def isRunningOrRebalancing(self) -> bool:
        return self in (State.RUNNING, State.REBALANCING)

    def isShuttingDown(self) -> bool:
        return self in (State.PENDING_SHUTDOWN, State.PENDING_ERROR)

    def hasCompletedShutdown(self) -> bool:
        return self in (State.NOT_RUNNING, State.ERROR)

    def hasStartedOrFinishedShuttingDown(self) -> bool:
        return self.isShuttingDown() or self.hasCompletedShutdown()

    def isValidTransition(self, new: "State") -> bool:
        return new in TRANSITIONS[self]


TRANSITIONS: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN}),
    State.REBALANCING: frozenset({State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.RUNNING: frozenset({State.REBALANCING, State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.PENDING_SHUTDOWN: frozenset({State.NOT_RUNNING}),
    State.NOT_RUNNING: frozenset(),
    State.PENDING_ERROR: frozenset({State.ERROR}),
    State.ERROR: frozenset(),
}
"""Kafka's ``State(validTransitions...)`` table."""


class StreamThreadExceptionResponse(enum.Enum):
    """Kafka's ``StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse``: what to do when
    a query fails. ``REPLACE_THREAD`` starts the failed sub-topology's query again (from its
    checkpoint: the failed batch was not committed, so it is read again); ``SHUTDOWN_CLIENT``
    stops every query and ends in ``ERROR``; ``SHUTDOWN_APPLICATION`` does the same, since one
    ``StreamsApp`` runs all of the application's tasks."""
    REPLACE_THREAD = 0
    SHUTDOWN_CLIENT = 1
    SHUTDOWN_APPLICATION = 2


def _call(target, method: str, *args):
    """A Kafka-style single-method interface given as an object with ``method``, or a callable."""
    fn = getattr(target, method, None)
    return fn(*args) if fn is not None else target(*args)


class Lifecycle:
    """The state of one application and the rules on it (Kafka's ``KafkaStreams.setState`` and
    the checks its public methods make). The listener is called outside the lock, with
    ``(new, old)``, as Kafka calls ``StateListener.onChange``."""

    def __init__(self, client_id: str):
        self.client_id = client_id
        self._state = State.CREATED
        self._cond = threading.Condition()
        self._listener = None
        self._handler = None

    @property
    def state(self) -> State:
        return self._state

    def set_state(self, new: State) -> bool:
        """Move to ``new``; False (and no change) for the moves Kafka refuses quietly: anything but
        the end of a shutdown under way, a second close, a second rebalance. Any other move the
        table does not allow raises :class:`IllegalStateError`."""
        with self._cond:
            old = self._state
            if old is State.PENDING_SHUTDOWN and new is not State.NOT_RUNNING:
                return False
            if old is State.NOT_RUNNING and new in (State.PENDING_SHUTDOWN, State.NOT_RUNNING):
                return False
            if old is State.REBALANCING and new is State.REBALANCING:
                return False
            if old is State.ERROR and new in (State.PENDING_ERROR, State.ERROR):
                return False
            if old is State.PENDING_ERROR and new is not State.ERROR:
                return False
            if not old.isValidTransition(new):
                raise IllegalStateError(f"Stream-client {self.client_id}: Unexpected state transition "
                                        f"from {old} to {new}")
            log.info("stream-client [%s] State transition from %s to %s", self.client_id, old, new)
            self._state = new
            self._cond.notify_all()
        if self._listener is not None:
            _call(self._listener, "onChange", new, old)
        return True

    def wait_on(self, target: State, timeout: float | None) -> bool:
        """Whether the state reached ``target`` within ``timeout`` seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._state is not target:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    # ---------------------------------------------------------------- the public methods' checks
    def set_state_listener(self, listener) -> None:
        with self._cond:
            if not self._state.hasNotStarted():
                raise IllegalStateError(f"Can only set StateListener before calling start(). "
                                        f"Current state is: {self._state}")
            self._listener = listener

    def set_uncaught_exception_handler(self, handler) -> None:
        with self._cond:
            if not self._state.hasNotStarted():
                raise IllegalStateError(f"Can only set UncaughtExceptionHandler before calling start(). "
                                        f"Current state is: {self._state}")
            if handler is None:     # Kafka's Objects.requireNonNull
                raise TypeError("the uncaught exception handler cannot be None")
            self._handler = handler

    def begin_start(self) -> None:
        """``CREATED -> REBALANCING``; from any other state ``start()`` is refused with Kafka's
        message (Kafka would also let a RUNNING client "rebalance" into starting its threads again,
        which then fails; here a second start is refused whatever the state)."""
        if not self._state.hasNotStarted() or not self.set_state(State.REBALANCING):
            raise IllegalStateError("The client is either already started or already stopped, cannot re-start")

    def check_clean_up(self) -> None:
        if not (self._state.hasNotStarted() or self._state.hasCompletedShutdown()):
            raise IllegalStateError("Cannot clean up while running.")

    def validate_running(self) -> None:
        """Kafka's ``validateIsRunningOrRebalancing``."""
        state = self._state
        if state.hasNotStarted():
            raise StreamsNotStartedError("KafkaStreams has not been started, you can retry after calling start()")
        if not state.isRunningOrRebalancing():
            raise IllegalStateError(f"KafkaStreams is not running. State is {state}.")

    def respond(self, exception: BaseException) -> StreamThreadExceptionResponse:
        """The handler's answer to a failed query; without a handler, Kafka's default
        ``SHUTDOWN_CLIENT``. A handler that fails, or answers something else, shuts the client
        down too (the failure is logged)."""
        if self._handler is None:
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        try:
            answer = _call(self._handler, "handle", exception)
        except Exception:
            log.exception("stream-client [%s] the uncaught exception handler failed; shutting down", self.client_id)
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        if not isinstance(answer, StreamThreadExceptionResponse):
            log.error("stream-client [%s] the uncaught exception handler answered %r, not a "
                      "StreamThreadExceptionResponse; shutting down", self.client_id, answer)
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        return answer


def timeout_seconds(timeout) -> float | None:
    """``close(timeout)``'s limit in seconds: a number of seconds or a ``timedelta``; None waits
    as long as it takes. Negative is refused, as Kafka refuses it."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    if seconds < 0:
        raise ValueError("Timeout can't be negative.")
    return seconds
