"""One Raft node of the controller quorum, as a pure, synchronous state machine.

:class:`RaftNode` owns no threads, sockets or clocks: its host (the controller runtime, or the
simulation in ``tests/simulation/raft_sim.py``) passes time in as ``now_ms``, randomness as a
``random.Random``, delivers messages with :meth:`RaftNode.step`, calls :meth:`RaftNode.tick`
regularly, sends the :class:`Envelope` s it gets back (in any order, or not at all: the protocol
tolerates loss, duplication and reordering), and applies what :meth:`RaftNode.take_committed`
returns. So one seeded, single-threaded loop can run a whole cluster.

What it implements, and why:

- **Pre-vote** (Raft thesis §9.6, KIP-996). A node whose election timer fires first asks "would you
  vote for me in term+1?" without changing any term. Voters say yes only if the candidate's log is
  up to date *and* they have not heard from a leader for an election timeout. Only with a majority
  of yeses does it start a real election. A node cut off from the cluster, or one with a stale log,
  therefore never bumps terms, and rejoining does not depose a working leader.
- **Leader stickiness.** A real vote request for a higher term is ignored while its receiver hears
  from a leader (same lease as above), so a node that slipped past pre-vote cannot disrupt either.
- **Votes**: one per term, saved before it is granted; none to a candidate of a term whose leader
  we follow; only voters vote, and only for voters (Kafka's INCONSISTENT_VOTER_SET), so nodes with
  different voter sets cannot each win a term.
- **Check-quorum.** A leader that has not heard from a majority for an election timeout steps down,
  so a partitioned leader stops claiming leadership (and stops accepting proposals) on its own.
- **The election restriction** (``log_up_to_date``) and **the commit rule**: a leader commits only
  entries of its own term by counting replicas (Figure 8 of the Raft paper); earlier entries commit
  with them. So a new leader appends an empty no-op entry at once.
- **Fast back-off**: a rejecting follower names ``conflict_index`` (its log end, or the start of the
  divergent term) instead of the leader walking back one entry per round trip.
- The follower's and the leader's sides of log replication are mixed in from
  :mod:`broker.raft.following` and :mod:`broker.raft.leading`.
- **Snapshots**: the host hands the state at an applied index to :meth:`compact`, which discards
  the log before it; a follower that needs compacted entries gets the snapshot instead
  (:meth:`take_snapshot_to_apply` hands it to its state machine).

Persistence: term and vote are saved before any message that depends on them is returned; entries
are appended before they are acknowledged (or, on the leader, counted). On restart the node rebuilds
everything else; its commit index restarts at the snapshot, and the host loads
``storage.snapshot()`` itself before applying what :meth:`take_committed` returns.

    node = RaftNode(1, [1], MemoryRaftStorage(), random.Random(7), now_ms=0)
    node.tick(0)                          # a single voter elects itself at once
    index, out = node.propose(b"hello", 0)
    assert [e.data for e in node.take_committed()] == [b"", b"hello"]   # no-op, then ours
"""
from __future__ import annotations

import random

from broker.errors import NotControllerError
from broker.raft.election import Role, Tally, check_transition, log_up_to_date
from broker.raft.following import RaftFollowing
from broker.raft.leading import RaftLeading
from broker.raft.messages import (AppendRequest, AppendResponse, EndQuorumEpoch, Entry, Envelope, SnapshotRequest,
                                  SnapshotResponse, VoteRequest, VoteResponse)
from broker.raft.replication import Progress, heard_from_quorum
from broker.raft.storage import RaftStorage


class RaftNode(RaftFollowing, RaftLeading):
    """A Raft node; see the module docstring. Not thread-safe: one host thread drives it."""

    def __init__(self, node_id: int, voters: list[int], storage: RaftStorage, rng: random.Random,
                 now_ms: int, election_timeout_ms: tuple[int, int] = (1000, 2000),
                 heartbeat_ms: int = 100, max_entries_per_append: int = 256) -> None:
        lo, hi = election_timeout_ms
        if not 0 < lo <= hi:
            raise ValueError(f"election_timeout_ms {election_timeout_ms} must be (low, high) with 0 < low <= high")
        if not 0 < heartbeat_ms < lo:
            raise ValueError(f"heartbeat_ms {heartbeat_ms} must be positive and below the election "
                             f"timeout's low bound {lo}, or followers would time out between heartbeats")
        if max_entries_per_append < 1 or not voters:
            raise ValueError("max_entries_per_append must be >= 1 and voters must not be empty")
        self.node_id = node_id
        self.voters = frozenset(voters)
        self._peers = sorted(v for v in self.voters if v != node_id)
        self._storage, self._rng = storage, rng
        self._timeout, self._heartbeat_ms, self._max_entries = (lo, hi), heartbeat_ms, max_entries_per_append
        self._term, self._voted_for = storage.hard_state()
        if self._last_term() > self._term:
            # The quorum state was lost or is older than the log (Kafka's QuorumState starts
            # unattached in the log's epoch): never act in a term below entries already held.
            self._term, self._voted_for = self._last_term(), None
            storage.save_hard_state(self._term, None)
        self._role = Role.FOLLOWER
        self._leader_id: int | None = None
        snapshot = storage.snapshot()
        self._commit = self._applied = snapshot[0] if snapshot else -1
        self._snapshot_to_apply: tuple[int, int, bytes] | None = None
        self._leader_contact_ms: int | None = None
        self._tally: Tally | None = None
        self._progress: dict[int, Progress] = {}
        self._heartbeat_due = 0
        self._reset_election_timer(now_ms)

    # ------------------------------------------------------------------------------ properties
    @property
    def role(self) -> str:
        """One of ``leader``, ``candidate``, ``follower``; a prospective node (asking for pre-votes,
        still in its old term) reports ``follower``."""
        return "follower" if self._role is Role.PROSPECTIVE else self._role.value

    @property
    def state(self) -> Role:
        """The role including ``Role.PROSPECTIVE`` (asking for pre-votes)."""
        return self._role

    @property
    def term(self) -> int:
        return self._term

    @property
    def voted_for(self) -> int | None:
        return self._voted_for

    @property
    def leader_id(self) -> int | None:
        return self._leader_id

    @property
    def commit_index(self) -> int:
        return self._commit

    @property
    def last_index(self) -> int:
        return self._storage.last_index()

    @property
    def storage(self) -> RaftStorage:
        """The node's durable state, for reading (its host loads the snapshot from it at start)."""
        return self._storage

    def _last_term(self) -> int:
        return self._storage.term_at(self._storage.last_index())

    # ------------------------------------------------------------------------------ inputs
    def tick(self, now_ms: int) -> list[Envelope]:
        """Time passed: leaders heartbeat, retransmit and check their quorum; others may campaign."""
        if self._role is Role.LEADER:
            if not heard_from_quorum(self._progress, now_ms, self._timeout[0]):
                self._become_follower(self._term, None, now_ms)
                return []
            if now_ms < self._heartbeat_due:
                return []
            self._heartbeat_due = now_ms + self._heartbeat_ms
            return self._broadcast(now_ms, heartbeat=True)
        if self.node_id in self.voters and (now_ms >= self._election_deadline or len(self.voters) == 1):
            return self._start_pre_vote(now_ms)
        return []

    def step(self, src: int, message, now_ms: int) -> list[Envelope]:
        """Handle one message from ``src``; returns the messages to send in reply."""
        if isinstance(message, VoteRequest):
            return self._on_vote_request(src, message, now_ms)
        if message.term > self._term and not (isinstance(message, VoteResponse) and message.pre_vote
                                              and message.granted):
            leader = src if isinstance(message, (AppendRequest, SnapshotRequest)) else None
            self._become_follower(message.term, leader, now_ms)
        elif message.term < self._term:
            return self._answer_stale(src, message)
        handler = self._HANDLERS[type(message)]
        return handler(self, src, message, now_ms)

    def propose(self, data: bytes, now_ms: int) -> tuple[int, list[Envelope]]:
        """Append ``data`` on the leader; returns its index and the appends to send. The entry is
        committed once :meth:`take_committed` returns it (it may be lost if leadership changes first)."""
        if self._role is not Role.LEADER:
            raise NotControllerError(f"node {self.node_id} is not the Raft leader (leader: {self._leader_id})",
                                     leader_id=self._leader_id)
        entry = Entry(self._term, self._storage.last_index() + 1, bytes(data))
        self._storage.append([entry])
        self._advance_commit()
        out = [self._append_for(peer, now_ms) for peer, p in self._progress.items()
               if not p.probing and not p.snapshot_sent]
        return entry.index, [env for env in out if env is not None]

    def resign(self, now_ms: int) -> list[Envelope]:
        """Stop leading on purpose (graceful shutdown), telling the followers so they elect a
        successor at once instead of waiting out this leader's lease (Kafka's EndQuorumEpoch)."""
        if self._role is not Role.LEADER:
            return []
        successors = tuple(sorted(self._peers, key=lambda p: -self._progress[p].match_index))
        self._become_follower(self._term, None, now_ms)
        notice = EndQuorumEpoch(self._term, self.node_id, successors)
        return [Envelope(self.node_id, peer, notice) for peer in self._peers]

    # ------------------------------------------------------------------------------ outputs
    def take_committed(self) -> list[Entry]:
        """Entries committed since the last call, in order, each once. Empty while a snapshot waits
        in :meth:`take_snapshot_to_apply` (load that first)."""
        if self._snapshot_to_apply is not None or self._applied >= self._commit:
            return []
        entries = self._storage.entries(self._applied + 1, self._commit + 1)
        self._applied = self._commit
        return entries

    def take_snapshot_to_apply(self) -> tuple[int, int, bytes] | None:
        """``(last_index, last_term, data)`` of a snapshot installed from the leader, once: the state
        machine must replace its state with it before applying further entries."""
        snapshot, self._snapshot_to_apply = self._snapshot_to_apply, None
        return snapshot

    def compact(self, index: int, data: bytes) -> None:
        """The state machine's state after applying ``index`` is ``data``: keep it as the snapshot and
        discard the log up to ``index``. Ignored when it would not advance the current snapshot."""
        snapshot = self._storage.snapshot()
        if index < 0 or (snapshot is not None and index <= snapshot[0]):
            return
        if index > self._applied:
            raise ValueError(f"cannot compact through {index}: only {self._applied} has been applied")
        self._storage.save_snapshot(index, self._storage.term_at(index), data)

    # ------------------------------------------------------------------------------ roles
    def _set_role(self, role: Role) -> None:
        check_transition(self._role, role)
        self._role = role

    def _reset_election_timer(self, now_ms: int) -> None:
        self._election_deadline = now_ms + self._rng.randint(*self._timeout)

    def _become_follower(self, term: int, leader: int | None, now_ms: int, reset_timer: bool = True) -> None:
        if term > self._term:
            self._term, self._voted_for = term, None
            self._storage.save_hard_state(term, None)
        self._set_role(Role.FOLLOWER)
        self._leader_id, self._tally, self._progress = leader, None, {}
        if leader is not None:
            self._leader_contact_ms = now_ms
        if reset_timer:
            self._reset_election_timer(now_ms)

    def _start_pre_vote(self, now_ms: int) -> list[Envelope]:
        self._set_role(Role.PROSPECTIVE)
        self._leader_id = None
        self._reset_election_timer(now_ms)
        self._tally = Tally(self.voters)
        self._tally.record(self.node_id, True)
        if self._tally.won():
            return self._start_election(now_ms)
        request = VoteRequest(self._term + 1, self.node_id, self.last_index, self._last_term(), pre_vote=True)
        return [Envelope(self.node_id, peer, request) for peer in self._peers]

    def _start_election(self, now_ms: int) -> list[Envelope]:
        self._term, self._voted_for = self._term + 1, self.node_id
        self._storage.save_hard_state(self._term, self.node_id)
        self._set_role(Role.CANDIDATE)
        self._reset_election_timer(now_ms)
        self._tally = Tally(self.voters)
        self._tally.record(self.node_id, True)
        if self._tally.won():
            return self._become_leader(now_ms)
        request = VoteRequest(self._term, self.node_id, self.last_index, self._last_term(), pre_vote=False)
        return [Envelope(self.node_id, peer, request) for peer in self._peers]

    def _become_leader(self, now_ms: int) -> list[Envelope]:
        self._set_role(Role.LEADER)
        self._leader_id, self._tally = self.node_id, None
        next_index = self._storage.last_index() + 1
        self._progress = {peer: Progress(next_index, now_ms) for peer in self._peers}
        # The no-op: entries of earlier terms can only commit under an entry of this term.
        self._storage.append([Entry(self._term, next_index, b"")])
        self._advance_commit()
        self._heartbeat_due = now_ms + self._heartbeat_ms
        return self._broadcast(now_ms, heartbeat=False)

    # ------------------------------------------------------------------------------ votes
    def _in_lease(self, now_ms: int) -> bool:
        """Do we believe a leader is alive (we lead, or heard from ours within an election timeout)?"""
        if self._role is Role.LEADER:
            return True
        return (self._leader_id is not None and self._leader_contact_ms is not None
                and now_ms - self._leader_contact_ms < self._timeout[0])

    def _candidate_up_to_date(self, request: VoteRequest) -> bool:
        return log_up_to_date(request.last_log_term, request.last_log_index, self._last_term(), self.last_index)

    def _on_vote_request(self, src: int, request: VoteRequest, now_ms: int) -> list[Envelope]:
        if self.node_id not in self.voters or request.candidate_id not in self.voters:
            # Kafka's INCONSISTENT_VOTER_SET: an outsider's request changes nothing, not even the term.
            refusal = VoteResponse(self._term, self.node_id, False, request.pre_vote)
            return [Envelope(self.node_id, src, refusal)]
        if request.pre_vote:
            granted = (request.term > self._term and not self._in_lease(now_ms)
                       and self._candidate_up_to_date(request))
            response = VoteResponse(request.term if granted else self._term, self.node_id, granted, True)
            return [Envelope(self.node_id, src, response)]
        if request.term > self._term:
            if self._in_lease(now_ms):
                return []  # leader stickiness: a working leader is not deposed by one node's timer
            self._become_follower(request.term, None, now_ms, reset_timer=False)
        # One vote per term, and none in a term whose leader we already follow (Kafka's FollowerState).
        granted = (request.term == self._term and self._voted_for in (None, request.candidate_id)
                   and self._leader_id is None and self._candidate_up_to_date(request))
        if granted:
            self._voted_for = request.candidate_id
            self._storage.save_hard_state(self._term, request.candidate_id)
            self._reset_election_timer(now_ms)
        return [Envelope(self.node_id, src, VoteResponse(self._term, self.node_id, granted, False))]

    def _on_vote_response(self, src: int, response: VoteResponse, now_ms: int) -> list[Envelope]:
        if response.pre_vote:
            if self._role is not Role.PROSPECTIVE or response.term != self._term + 1:
                return []
            self._tally.record(src, response.granted)
            return self._start_election(now_ms) if self._tally.won() else []
        if self._role is not Role.CANDIDATE or response.term != self._term:
            return []
        self._tally.record(src, response.granted)
        return self._become_leader(now_ms) if self._tally.won() else []

    def _on_end_quorum_epoch(self, src: int, notice: EndQuorumEpoch, now_ms: int) -> list[Envelope]:
        """Our leader resigned: its lease is over. The most caught-up follower campaigns on its next
        tick, each next one a heartbeat later, so pre-votes are not split."""
        if self._role is Role.LEADER or self._leader_id not in (None, src):
            return []
        self._leader_id = self._leader_contact_ms = None
        if self.node_id in self.voters and self._role is Role.FOLLOWER:
            rank = (notice.preferred_successors.index(self.node_id) if self.node_id in notice.preferred_successors
                    else len(notice.preferred_successors))
            self._election_deadline = min(self._election_deadline, now_ms + rank * self._heartbeat_ms)
        return []

    def _answer_stale(self, src: int, message) -> list[Envelope]:
        """A message from an older term. A deposed leader is told the current term so it steps down;
        everything else from the past is dropped."""
        if isinstance(message, AppendRequest):
            reply = AppendResponse(self._term, self.node_id, False, -1, -1)
        elif isinstance(message, SnapshotRequest):
            reply = SnapshotResponse(self._term, self.node_id, -1)
        else:
            return []
        return [Envelope(self.node_id, src, reply)]

    _HANDLERS = {
        VoteResponse: _on_vote_response,
        AppendRequest: RaftFollowing._on_append_request,
        AppendResponse: RaftLeading._on_append_response,
        SnapshotRequest: RaftFollowing._on_snapshot_request,
        SnapshotResponse: RaftLeading._on_snapshot_response,
        EndQuorumEpoch: _on_end_quorum_epoch,
    }
