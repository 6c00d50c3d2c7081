"""``GET /health`` (Kafka's KIP-1017) for :class:`~connect.worker.Worker`: whether the worker has
started, and whether it can still handle requests, told by the worker's own state rather than by
the REST server being up.

    200 {"status": "healthy",   "message": "Worker has completed startup and is ready to handle requests."}
    503 {"status": "starting",  "message": "Worker is still starting up. The worker is currently ..."}
    500 {"status": "unhealthy", "message": "Worker was unable to handle this request and may be unable
                                            to handle other requests. The worker is currently ..."}

Kafka's health request goes through the herder's tick thread and is unhealthy when that thread
does not answer within 10 s, naming the stage it is in. Riverlog's worker has no tick thread: every
request and the supervisor's pass (which notices failed queries and restarts them) run under the
worker's one lock, so that lock is its main loop. The worker is stuck when the lock is not free
within the health check's timeout (a hung broker write, a query that does not stop), and the
message names what its holder is doing (:class:`StagedLock`). It is also unhealthy once it lost its
``group.id`` membership (it runs no connector until restarted), when the thread keeping that
membership ended or has not polled for ``max.poll.interval.ms`` (the group may have expired it
without the worker knowing), when its supervisor thread ended, and while it shuts down.
"""
from __future__ import annotations

import contextvars
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

__all__ = ["DEFAULT_HEALTH_CHECK_TIMEOUT_MS", "OPERATION", "Stage", "StagedLock", "WorkerHealth"]

DEFAULT_HEALTH_CHECK_TIMEOUT_MS = 10_000     # Kafka's RestServer.DEFAULT_HEALTH_CHECK_TIMEOUT_MS
HEALTHY = "Worker has completed startup and is ready to handle requests."
STARTING = "Worker is still starting up."
UNHEALTHY = "Worker was unable to handle this request and may be unable to handle other requests."

# What the current thread is doing for its caller (the REST server sets the request), named by
# a stage that takes the worker's lock without naming one itself.
OPERATION: contextvars.ContextVar[str | None] = contextvars.ContextVar("connect_operation", default=None)


def _instant(epoch: float) -> str:
    """Java's ``Instant.toString`` of an epoch-millisecond instant, as Kafka's messages print it."""
    ms = int(epoch * 1000)
    text = datetime.fromtimestamp(ms // 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{ms % 1000:03d}" if ms % 1000 else "") + "Z"


@dataclass
class Stage:
    """Kafka's ``org.apache.kafka.connect.util.Stage``: what the worker is (or last was) doing."""
    description: str
    started: float
    completed: float | None = None

    def summarize(self) -> str:
        if self.completed is not None:
            return (f"The last operation the worker completed was {self.description}, which began at "
                    f"{_instant(self.started)} and completed at {_instant(self.completed)}.")
        return f"The worker is currently {self.description}, which began at {_instant(self.started)}."


class StagedLock:
    """The worker's re-entrant lock, recording the stage of its holder: :meth:`stage` names it
    (innermost wins), else the caller's :data:`OPERATION`, else the holder's thread."""

    def __init__(self):
        self._lock = threading.RLock()
        self._owner: int | None = None
        self._depth = 0
        self._stages: list[Stage] = []
        self.last: Stage | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        if self._depth == 1:
            self._owner = threading.get_ident()
            operation = OPERATION.get() or f"running on thread '{threading.current_thread().name}'"
            self._stages = [Stage(operation, time.time())]
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            stage = self._stages[0] if self._stages else None
            self._owner, self._stages = None, []
            if stage is not None:
                stage.completed = time.time()
                self.last = stage
        self._lock.release()

    def __enter__(self) -> "StagedLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    @contextmanager
    def stage(self, description: str):
        """Name what the holder does for the duration (the lock taken for it)."""
        with self:
            self._stages.append(Stage(description, time.time()))
            try:
                yield
            finally:
                self._stages.pop()

    @property
    def held(self) -> bool:
        return self._owner is not None

    def current(self) -> Stage | None:
        """The holder's innermost stage, else the last completed one (read by another thread)."""
        stages = self._stages
        return stages[-1] if stages else self.last

    def free_within(self, timeout: float) -> bool:
        """Whether the lock can be taken within ``timeout`` s (by this thread, and at once released)."""
        if not self._lock.acquire(True, timeout):
            return False
        self._lock.release()
        return True


def _body(status: str, base: str, detail: Stage | str | None) -> dict:
    if isinstance(detail, Stage):
        detail = detail.summarize()
    return {"status": status, "message": base if detail is None else f"{base} {detail}"}


class WorkerHealth:
    """Needs ``_lock`` (a :class:`StagedLock`), ``_ready``, ``_stopping``, ``_lease``, ``_lease_lost_at``,
    ``_supervisor``, ``config`` and ``worker_id`` (from Worker)."""

    def health(self, timeout_ms: float = DEFAULT_HEALTH_CHECK_TIMEOUT_MS) -> tuple[int, dict]:
        """Kafka's ``RootResource.healthCheck``: the HTTP status and the ``WorkerStatus`` body."""
        if self._stopping.is_set():
            return 500, _body("unhealthy", UNHEALTHY, "The worker is shutting down.")
        if not self._ready:          # start() has not returned: answered at once, naming its stage
            return 503, _body("starting", STARTING, self._lock.current() if self._lock.held else None)
        lease = self._lease
        if lease is None or not lease.held:
            lost = self._lease_lost_at or time.time()
            return 500, _body("unhealthy", UNHEALTHY, Stage(
                f"out of its group: it lost its membership of group.id '{self.config.group_id}' and runs no "
                f"connector until it is restarted", lost))
        stalled = lease.stalled()
        if stalled is not None:
            return 500, _body("unhealthy", UNHEALTHY, f"The worker may be out of its group: {stalled}.")
        supervisor = self._supervisor
        if supervisor is None or not supervisor.is_alive():
            return 500, _body("unhealthy", UNHEALTHY, "The worker's supervisor thread has ended: failed "
                                                      "connectors are no longer noticed or restarted.")
        if not self._lock.free_within(timeout_ms / 1000):
            return 500, _body("unhealthy", UNHEALTHY, self._lock.current())
        return 200, _body("healthy", HEALTHY, None)
