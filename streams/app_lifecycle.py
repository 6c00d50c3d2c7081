"""A :class:`~streams.app.StreamsApp`'s public lifecycle, as Kafka's ``KafkaStreams``: ``start()``
once, ``state()``, ``setStateListener``, ``setUncaughtExceptionHandler``, ``close(timeout)``,
``cleanUp()``, ``pause()``/``resume()`` (KIP-834), and what happens when a query fails.

A Spark query that fails is Kafka's stream thread dying of an uncaught exception: a watcher thread
(and ``processAllAvailable()``, which sees the failure first) asks the handler
(:meth:`~streams.app_state.Lifecycle.respond`). ``REPLACE_THREAD`` starts that sub-topology's query
again from its checkpoint (``RUNNING -> REBALANCING -> RUNNING``); otherwise every query is stopped
(``PENDING_ERROR -> ERROR``), as Kafka's default handler shuts the client down. The rules on states
are in :mod:`streams.app_state`; this module is the thin shell with the threads.
"""
from __future__ import annotations

import logging
import os
import shutil
import threading

from streams.app_state import Lifecycle, State, StreamThreadExceptionResponse, timeout_seconds
from streams.errors import StreamsError
from streams.state_dir import StateDirLock

log = logging.getLogger("streams.app")

WATCH_INTERVAL_S = 0.2   # how often the watcher looks for a query that stopped


class ApplicationLifecycle:
    """Needs ``app``, ``config`` and ``queries`` (from StreamsApp), ``_create_internal_topics()``,
    ``_start_queries()`` (creates the internal topics, starts every query and the purger),
    ``_restart_query(i)`` and ``_stop_queries()``."""

    def _init_lifecycle(self) -> None:
        self._life = Lifecycle(self.app)
        self._guard = threading.RLock()       # the query list: the watcher, close() and start()
        self._answering = threading.Lock()    # one failure answered at a time, start to finish
        self._watching = threading.Event()
        self._paused = False
        self.failure: StreamsError | None = None
        self._lock = StateDirLock(os.path.join(self.config["state.dir"], self.app))

    # ------------------------------------------------------------------ Kafka's public methods
    def state(self) -> State:
        return self._life.state

    def setStateListener(self, listener) -> None:
        """``listener(new_state, old_state)`` (or an object with ``onChange``) on every change;
        only before ``start()``."""
        self._life.set_state_listener(listener)

    def setUncaughtExceptionHandler(self, handler) -> None:
        """``handler(exception)`` (or an object with ``handle``) answers a failed query with a
        :class:`~streams.app_state.StreamThreadExceptionResponse`; only before ``start()``."""
        self._life.set_uncaught_exception_handler(handler)

    def cleanUp(self) -> None:
        """Delete this application's directory under ``state.dir`` (Spark's checkpoints): the next
        start restores its state from the broker. Only before ``start()`` or after ``close()``,
        and not while another instance runs on the same directory (:mod:`streams.state_dir`)."""
        self._life.check_clean_up()
        self._lock.acquire()
        try:
            shutil.rmtree(self._lock.directory, ignore_errors=True)
        finally:
            self._lock.release()

    def start(self):
        """Start every sub-topology's query: ``REBALANCING`` while they start, then ``RUNNING``.
        Once only: a second call, or one after ``close()``, raises ``IllegalStateError``. A start
        that fails stops what it started and leaves the application in ``ERROR``."""
        self._life.begin_start()
        try:
            self._lock.acquire()    # one running instance per state.dir/application.id
            with self._guard:
                if self._paused:
                    self._create_internal_topics()
                else:
                    self._start_queries()
        except BaseException as e:
            self._close_to_error(StreamsError(f"the application {self.app!r} failed to start: {e}"))
            raise
        self._life.set_state(State.RUNNING)
        threading.Thread(target=self._watch, name=f"{self.app}-query-watcher", daemon=True).start()
        return self

    def pause(self) -> None:
        """Stop processing (Kafka's KIP-834): every query stops (Spark has no paused query; its
        checkpoint keeps its place) and the state stays what it was, ``RUNNING`` included. Before
        ``start()``, the application starts paused. Stores stay queryable (they read the changelog)."""
        with self._guard:
            self._paused = True
            if self._life.state.isRunningOrRebalancing() and self.queries:
                self._stop_queries()

    def resume(self) -> None:
        """Go on processing where ``pause()`` stopped: every query starts again from its checkpoint
        (a batch cut short by the pause is replayed, its output written once). A query that cannot
        start takes the application to ``ERROR``, as a failed ``start()`` does."""
        with self._guard:
            if not self._paused:
                return
            self._paused = False
            if not self._life.state.isRunningOrRebalancing() or self.queries:
                return
            try:
                self._start_queries()
                return
            except BaseException as e:
                failed = StreamsError(f"the application {self.app!r} failed to resume: {e}")
                failed.__cause__ = e
        self._close_to_error(failed)
        raise failed

    def isPaused(self) -> bool:
        """Whether ``pause()`` was called and ``resume()`` not since."""
        return self._paused

    def close(self, timeout=None) -> bool:
        """Stop every query and wait up to ``timeout`` (seconds or a ``timedelta``; None: until
        done; 0: do not wait) for ``NOT_RUNNING``; True if it was reached. Idempotent: a closed
        or failed application answers True at once."""
        seconds = timeout_seconds(timeout)
        state = self._life.state
        if state.hasCompletedShutdown():
            return True
        if state.isShuttingDown():
            return self._life.wait_on(State.ERROR if state is State.PENDING_ERROR else State.NOT_RUNNING, seconds)
        if not self._life.set_state(State.PENDING_SHUTDOWN):
            return self.close(timeout)      # a failure began the shutdown first
        threading.Thread(target=self._shutdown, args=(State.NOT_RUNNING,), name=f"{self.app}-close",
                         daemon=True).start()
        return self._life.wait_on(State.NOT_RUNNING, seconds)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ failures
    def _watch(self) -> None:
        while not self._watching.wait(WATCH_INTERVAL_S):
            if not self._life.state.isRunningOrRebalancing():
                return
            try:
                stopped = [q for q in list(self.queries) if not q.isActive]
            except Exception:       # the Spark session is gone
                log.debug("stream-client [%s] cannot watch its queries", self.app, exc_info=True)
                return
            for q in stopped:
                self._query_failed(q)

    def _query_failed(self, query) -> None:
        """The handler's answer to ``query`` having stopped; nothing if another caller answered
        (a second caller waits for the first's answer). The handler runs outside the query list's
        lock, so it may call ``close()``."""
        with self._answering:
            with self._guard:
                if not self._live(query):
                    return
                cause = query.exception()
            error = StreamsError(f"query {query.name!r} of application {self.app!r} "
                                 f"{'failed: ' + _first_line(cause) if cause else 'was stopped outside the application'}")
            error.__cause__ = cause
            response = self._life.respond(error)
            with self._guard:
                if not self._live(query):
                    return
                if response is StreamThreadExceptionResponse.REPLACE_THREAD:
                    log.error("stream-client [%s] Replacing thread in the streams uncaught exception handler",
                              self.app, exc_info=error)
                    self._life.set_state(State.REBALANCING)
                    try:
                        self._restart_query(next(i for i, q in enumerate(self.queries) if q is query))
                    except Exception as e:
                        failed = StreamsError(f"query {query.name!r} could not be replaced: {e}")
                    else:
                        self._life.set_state(State.RUNNING)
                        return
                else:
                    failed = error
                    log.error("stream-client [%s] Encountered the following exception during processing and the "
                              "registered exception handler opted to %s. The streams client is going to shut down now.",
                              self.app, response.name, exc_info=error)
            self._close_to_error(failed)

    def _live(self, query) -> bool:
        """Whether ``query`` is still one of the running application's queries."""
        return self._life.state.isRunningOrRebalancing() and any(q is query for q in self.queries)

    def _close_to_error(self, error: StreamsError) -> None:
        if self.failure is None:
            self.failure = error
        if self._life.set_state(State.PENDING_ERROR):
            self._shutdown(State.ERROR)

    def _shutdown(self, final: State) -> None:
        self._watching.set()
        try:
            with self._guard:
                self._stop_queries()
        except Exception:
            log.exception("stream-client [%s] stopping the queries failed", self.app)
        finally:
            self._lock.release()
            self._life.set_state(final)

    def _check_not_failed(self) -> None:
        """Raise the failed query's own exception (else the failure) once the application failed."""
        if self._life.state in (State.PENDING_ERROR, State.ERROR) and self.failure is not None:
            raise self.failure.__cause__ or self.failure


def _first_line(e: BaseException) -> str:
    """What failed, in one line: a Python worker's exception line (the last of its traceback),
    else the first line of Spark's message."""
    text = str(getattr(e, "desc", None) or e).split("=== Streaming Query ===")[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("SQLSTATE")]
    if not lines:
        return type(e).__name__
    return lines[-1] if "Traceback (most recent call last)" in text else lines[0]
