"""Replication pieces of the Raft node: the leader's view of each follower, the commit rule, and the
follower's conflict search. Pure; :class:`~broker.raft.node.RaftNode` wires them.

The leader keeps one :class:`Progress` per follower. A follower is *probing* until an append
succeeds (the leader does not yet know where their logs meet, so it sends one request at a time
from ``next_index`` and backs off on each rejection); after that it is *replicating*: new entries
are sent as soon as they are proposed and ``next_index`` moves past them at once. Nothing is
acknowledged twice by accident — a success names the exact index it proved — so lost, duplicated
and reordered messages only cost retransmissions, which happen on every heartbeat from
``match_index + 1``.
"""
from __future__ import annotations

from broker.raft.election import majority
from broker.raft.storage import RaftStorage


class Progress:
    """What the leader knows about one follower."""

    __slots__ = ("match_index", "next_index", "probing", "last_ack_ms", "snapshot_sent")

    def __init__(self, next_index: int, now_ms: int) -> None:
        self.match_index = -1          # highest index known to equal ours
        self.next_index = next_index   # next index to send
        self.probing = True
        self.last_ack_ms = now_ms      # any answer in this term, for check-quorum
        self.snapshot_sent = False     # a SnapshotRequest is unanswered; resent on heartbeats

    def acknowledged(self, match_index: int) -> bool:
        """Record a proven match; True when it moved ``match_index``."""
        self.snapshot_sent = False
        self.probing = False
        moved = match_index > self.match_index
        if moved:
            self.match_index = match_index
        self.next_index = max(self.next_index, self.match_index + 1)
        return moved

    def rejected(self, conflict_index: int) -> None:
        """Back off to where the follower says our logs may meet, never below a proven match."""
        self.probing = True
        self.next_index = max(self.match_index + 1, min(conflict_index, self.next_index))

    def __repr__(self) -> str:
        return (f"Progress(match={self.match_index}, next={self.next_index}, probing={self.probing}, "
                f"snapshot_sent={self.snapshot_sent})")


def quorum_index(own_last_index: int, matches: list[int]) -> int:
    """The highest index held by a majority of voters (the leader holds its whole log)."""
    ranked = sorted([own_last_index, *matches], reverse=True)
    return ranked[majority(len(ranked)) - 1]


def heard_from_quorum(progress: dict[int, Progress], now_ms: int, window_ms: int) -> bool:
    """Check-quorum: has a majority (counting the leader) answered within ``window_ms``?"""
    recent = 1 + sum(1 for p in progress.values() if now_ms - p.last_ack_ms < window_ms)
    return recent >= majority(len(progress) + 1)


def conflict_index(storage: RaftStorage, index: int, floor: int) -> int:
    """Where a leader should resume after our entry at ``index`` disagreed with its: the first index
    of that entry's term (a leader never needs a divergent term one entry at a time), but never at or
    below ``floor`` (our commit index: committed entries always agree)."""
    term = storage.term_at(index)
    first = max(floor + 1, storage.first_index())
    while index > first and storage.term_at(index - 1) == term:
        index -= 1
    return max(index, floor + 1)
