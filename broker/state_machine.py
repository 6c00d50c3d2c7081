"""Explicit state machines: an enum of states and a table of allowed transitions, checked on every
change, so an illegal move fails loudly where it happens instead of corrupting state quietly.

    class TxnState(enum.Enum):
        EMPTY = "Empty"; ONGOING = "Ongoing"; PREPARE_COMMIT = "PrepareCommit"

    TXN = Transitions("transaction", {
        TxnState.EMPTY: {TxnState.ONGOING},
        TxnState.ONGOING: {TxnState.PREPARE_COMMIT},
        TxnState.PREPARE_COMMIT: {TxnState.EMPTY},
    })
    state = TXN.move(state, TxnState.ONGOING)      # returns the new state, or raises

Pure: no threads, no clock. The owner keeps the state (a field of its own dataclass, so it
pickles, serialises and replays like any other); this module only rules on moves.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, TypeVar

S = TypeVar("S", bound=enum.Enum)


class StrEnum(str, enum.Enum):
    """An enum whose members are their string values (``enum.StrEnum`` arrived only in Python
    3.11; Riverlog runs on 3.10): states compare equal to, print as and serialise to their names."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class IllegalStateTransition(AssertionError):
    """A move the owner's transition table does not allow: a bug in the caller, never retried."""


class Transitions(Generic[S]):
    """The allowed moves of one kind of state machine; staying in a state is allowed only when the
    table lists the state among its own successors."""

    def __init__(self, name: str, allowed: Mapping[S, set[S] | frozenset[S]]):
        states = set(allowed) | {s for targets in allowed.values() for s in targets}
        kind = type(next(iter(states)))
        missing = set(kind) - set(allowed)
        if missing:
            raise ValueError(f"{name}: no transitions listed for {sorted(s.name for s in missing)} "
                             "(list an empty set for a final state)")
        self.name = name
        self.allowed = {state: frozenset(targets) for state, targets in allowed.items()}

    def can_move(self, current: S, target: S) -> bool:
        return target in self.allowed[current]

    def move(self, current: S, target: S) -> S:
        """``target`` if the table allows ``current -> target``; otherwise raise."""
        if target not in self.allowed[current]:
            allowed = ", ".join(sorted(s.name for s in self.allowed[current])) or "none (final)"
            raise IllegalStateTransition(f"{self.name}: {current.name} -> {target.name} is not allowed "
                                         f"(from {current.name}: {allowed})")
        return target

    def finals(self) -> set[S]:
        return {state for state, targets in self.allowed.items() if not targets}
