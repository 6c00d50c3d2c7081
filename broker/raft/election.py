"""Election pieces of the Raft node: its roles and their transitions, the vote tally, and the
election restriction. Pure functions and small values; :class:`~broker.raft.node.RaftNode` wires them.

Roles (KIP-996 names the pre-vote role *prospective*)::

    follower ──timeout──▶ prospective ──pre-votes from a majority──▶ candidate ──votes──▶ leader
       ▲  ▲                   │  ▲  (timeout: new pre-vote round)      │ (timeout: back    │
       │  └────── a leader or a higher term ─────────────────────────────┘  to prospective)  │
       └──────────────────── a higher term, or no quorum for an election timeout ◀───────────┘

A prospective node has not changed its term or vote: asking "would you vote for me?" costs the
cluster nothing, so a node that cannot win (partitioned, or with a stale log) never bumps terms and
never deposes a working leader.
"""
from __future__ import annotations

import enum


class Role(enum.Enum):
    FOLLOWER = "follower"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"


ALLOWED_TRANSITIONS: dict[Role, frozenset[Role]] = {
    Role.FOLLOWER: frozenset({Role.FOLLOWER, Role.PROSPECTIVE}),
    Role.PROSPECTIVE: frozenset({Role.FOLLOWER, Role.PROSPECTIVE, Role.CANDIDATE}),
    Role.CANDIDATE: frozenset({Role.FOLLOWER, Role.PROSPECTIVE, Role.LEADER}),
    Role.LEADER: frozenset({Role.FOLLOWER}),
}


def check_transition(old: Role, new: Role) -> None:
    if new not in ALLOWED_TRANSITIONS[old]:
        raise AssertionError(f"Raft role {old.value} cannot become {new.value}")


def majority(voters: int) -> int:
    return voters // 2 + 1


def log_up_to_date(candidate_last_term: int, candidate_last_index: int,
                   own_last_term: int, own_last_index: int) -> bool:
    """The election restriction (Raft §5.4.1): vote only for a log at least as up to date as ours —
    a later last term, or the same last term and at least as long. A leader so elected holds every
    committed entry, because a committed entry is on a majority and the candidate needed a majority."""
    return (candidate_last_term, candidate_last_index) >= (own_last_term, own_last_index)


class Tally:
    """Votes (or pre-votes) of one round. Only voters count, and each voter once."""

    __slots__ = ("voters", "granted", "rejected")

    def __init__(self, voters: frozenset[int]) -> None:
        self.voters = voters
        self.granted: set[int] = set()
        self.rejected: set[int] = set()

    def record(self, voter: int, granted: bool) -> None:
        if voter in self.voters and voter not in self.granted and voter not in self.rejected:
            (self.granted if granted else self.rejected).add(voter)

    def won(self) -> bool:
        return len(self.granted) >= majority(len(self.voters))
