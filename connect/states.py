"""Connector and task lifecycles as explicit state machines, and the restart-with-backoff rule.

States are Kafka's ``AbstractStatus.State`` (what ``GET /connectors/{name}/status`` shows) and
``TargetState`` (what the user asked for: ``PUT .../pause``, ``.../resume``, ``.../stop``). Every
status change goes through :data:`CONNECTOR` or :data:`TASK`, which refuse a move the table does
not list, so a worker bug surfaces where it happens instead of as a wrong status in the topic.

    state = CONNECTOR.move(ConnectorState.RUNNING, ConnectorState.FAILED)
    decision = restart_decision(retry_timeout_ms=60_000, retry_delay_max_ms=10_000,
                                attempt=1, elapsed_ms=0, jitter=0.5)
    decision.restart, decision.delay_ms          # True, 300

The module is pure (no clock, no randomness): the caller passes elapsed time and the jitter draw.
``broker.state_machine`` is the broker's own and outside the client API Connect may use, so the
same small table-checking helper is kept here.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:
        return self.value


class ConnectorState(_StrEnum):
    """Kafka's ``AbstractStatus.State`` (written to connect-status as ``"state"``)."""
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    DESTROYED = "DESTROYED"  # never shown: the status record becomes a tombstone
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"  # connectors only; Kafka never shows a task STOPPED


TaskState = ConnectorState


class TargetState(_StrEnum):
    """Kafka's ``TargetState`` (written to connect-configs as ``target-state-<name>``)."""
    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class IllegalStateTransition(AssertionError):
    """A move the transition table does not allow: a bug in the caller, never retried."""


S = TypeVar("S", bound=enum.Enum)


class Transitions(Generic[S]):
    """The allowed moves of one state machine; staying put is allowed only where listed."""

    def __init__(self, name: str, allowed: Mapping[S, frozenset[S] | set[S]]):
        self.name = name
        self.allowed = {state: frozenset(targets) for state, targets in allowed.items()}

    def can_move(self, current: S, target: S) -> bool:
        return target in self.allowed.get(current, frozenset())

    def move(self, current: S, target: S) -> S:
        if not self.can_move(current, target):
            listed = ", ".join(sorted(s.name for s in self.allowed.get(current, ()))) or "none (final)"
            raise IllegalStateTransition(f"{self.name}: {current.name} -> {target.name} is not allowed "
                                         f"(from {current.name}: {listed})")
        return target


_C = ConnectorState
_LIVE = {_C.RUNNING, _C.PAUSED, _C.STOPPED}
CONNECTOR: Transitions[ConnectorState] = Transitions("connector", {
    # Assigned to this worker: start in the target state, or fail starting.
    _C.UNASSIGNED: _LIVE | {_C.FAILED, _C.RESTARTING, _C.DESTROYED},
    _C.RUNNING: {_C.PAUSED, _C.STOPPED, _C.FAILED, _C.RESTARTING, _C.UNASSIGNED, _C.DESTROYED},
    _C.PAUSED: {_C.RUNNING, _C.STOPPED, _C.FAILED, _C.RESTARTING, _C.UNASSIGNED, _C.DESTROYED},
    # Resumed or paused, a stopped connector starts again, and that start may fail (Kafka's
    # WorkerConnector goes STOPPED -> FAILED then).
    _C.STOPPED: {_C.RUNNING, _C.PAUSED, _C.FAILED, _C.RESTARTING, _C.UNASSIGNED, _C.DESTROYED},
    # A failed instance never runs again (Kafka's WorkerConnector): only a restart, a stop (which
    # shuts it down), losing the assignment or deletion move it on.
    _C.FAILED: {_C.RESTARTING, _C.STOPPED, _C.UNASSIGNED, _C.DESTROYED},
    _C.RESTARTING: _LIVE | {_C.FAILED, _C.UNASSIGNED, _C.DESTROYED},
    _C.DESTROYED: set(),
})
"""A connector's status moves."""

TASK: Transitions[TaskState] = Transitions("task", {
    _C.UNASSIGNED: {_C.RUNNING, _C.PAUSED, _C.FAILED, _C.RESTARTING, _C.DESTROYED},
    _C.RUNNING: {_C.PAUSED, _C.FAILED, _C.RESTARTING, _C.UNASSIGNED, _C.DESTROYED},
    _C.PAUSED: {_C.RUNNING, _C.FAILED, _C.RESTARTING, _C.UNASSIGNED, _C.DESTROYED},
    _C.FAILED: {_C.RESTARTING, _C.UNASSIGNED, _C.DESTROYED},
    _C.RESTARTING: {_C.RUNNING, _C.PAUSED, _C.FAILED, _C.UNASSIGNED, _C.DESTROYED},
    _C.STOPPED: set(),  # never entered: a stopped connector has no tasks (they are DESTROYED)
    _C.DESTROYED: set(),
})
"""A task's status moves: as a connector's, but a task is never STOPPED."""

TARGET: Transitions[TargetState] = Transitions("target state", {
    t: set(TargetState) for t in TargetState
})
"""Any target may follow any other (``PUT .../pause`` twice is allowed, as in Kafka)."""


def running_state(target: TargetState) -> ConnectorState:
    """The status a healthy connector shows in ``target``."""
    return {TargetState.STARTED: _C.RUNNING, TargetState.PAUSED: _C.PAUSED,
            TargetState.STOPPED: _C.STOPPED}[target]


# ------------------------------------------------------------------------------------------ backoff
RETRIES_DELAY_MIN_MS = 300
"""Kafka's ``RetryWithToleranceOperator.RETRIES_DELAY_MIN_MS``."""


@dataclass(frozen=True)
class RestartDecision:
    """Restart after ``delay_ms``, or stay FAILED (``restart`` False) with ``reason``."""
    restart: bool
    delay_ms: int
    reason: str


def restart_decision(retry_timeout_ms: int, retry_delay_max_ms: int, attempt: int, elapsed_ms: int,
                     jitter: float) -> RestartDecision:
    """Whether a failed connector or task restarts, and after how long.

    The shape of Kafka's ``RetryWithToleranceOperator.execAndRetry``/``backoff`` applied to whole
    restarts: ``errors.retry.timeout`` 0 never retries, -1 retries forever, otherwise retries
    while less than that has passed since the first failure (``elapsed_ms``). The ``attempt``-th
    failure (from 1) waits ``300 << (attempt - 1)`` ms; beyond ``errors.retry.delay.max.ms`` the
    wait is a uniform draw below that maximum (``jitter`` in [0, 1) stands for Kafka's
    ``ThreadLocalRandom``), so restarting workers do not move in step; and no wait runs past the
    deadline."""
    if attempt < 1:
        raise ValueError(f"attempt counts failures from 1, got {attempt}")
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")
    if retry_timeout_ms == 0:
        return RestartDecision(False, 0, "errors.retry.timeout is 0: failures are not retried")
    if 0 <= retry_timeout_ms <= elapsed_ms:
        return RestartDecision(False, 0, f"errors.retry.timeout of {retry_timeout_ms} ms has passed "
                                         f"({elapsed_ms} ms since the first failure, {attempt} attempt(s))")
    shift = attempt - 1
    delay = RETRIES_DELAY_MIN_MS << shift if shift < 62 else retry_delay_max_ms + 1
    if delay > retry_delay_max_ms:
        delay = int(jitter * retry_delay_max_ms) if retry_delay_max_ms > 0 else 0
    if retry_timeout_ms > 0:
        delay = max(0, min(delay, retry_timeout_ms - elapsed_ms))
    return RestartDecision(True, delay, f"restart attempt {attempt} after {delay} ms")


@dataclass(frozen=True)
class Failures:
    """A connector's (or task's) run of failures since it last ran cleanly, folded by the worker.

    ``first_failure_ms`` is the worker's clock reading at the first failure of the run."""
    attempts: int = 0
    first_failure_ms: int | None = None

    def failed(self, now_ms: int) -> "Failures":
        return Failures(self.attempts + 1, now_ms if self.first_failure_ms is None else self.first_failure_ms)

    def decide(self, now_ms: int, retry_timeout_ms: int, retry_delay_max_ms: int, jitter: float) -> RestartDecision:
        elapsed = 0 if self.first_failure_ms is None else now_ms - self.first_failure_ms
        return restart_decision(retry_timeout_ms, retry_delay_max_ms, max(1, self.attempts), elapsed, jitter)

    def recovered(self) -> "Failures":
        return Failures()
