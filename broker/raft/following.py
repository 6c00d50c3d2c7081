"""The follower's side of a Raft node: taking the leader's entries or snapshot, cutting a divergent
tail, and answering with how far its log matches. Mixed into :class:`~broker.raft.node.RaftNode`.

Kept apart from the leader's side and from elections so each half of log replication can be read
against the Raft paper's receiver rules on its own.
"""
from __future__ import annotations

from broker.raft.election import Role
from broker.raft.messages import AppendRequest, AppendResponse, Entry, Envelope, SnapshotRequest, SnapshotResponse
from broker.raft.replication import conflict_index


class RaftFollowing:
    """Needs the node's id, term, role, storage, commit and applied indexes, leader and its last
    contact, tally, snapshot to apply, ``_set_role`` and ``_reset_election_timer`` (from RaftNode)."""

    def _follow(self, src: int, now_ms: int) -> None:
        """A message from the leader of our term: it is alive, and we are its follower."""
        if self._role is Role.LEADER:
            raise AssertionError(f"node {self.node_id} leads term {self._term} but node {src} "
                                 "sent it entries for the same term")
        if self._role is not Role.FOLLOWER:
            self._set_role(Role.FOLLOWER)
            self._tally = None
        self._leader_id, self._leader_contact_ms = src, now_ms
        self._reset_election_timer(now_ms)

    def _on_append_request(self, src: int, request: AppendRequest, now_ms: int) -> list[Envelope]:
        self._follow(src, now_ms)
        prev_index, prev_term, entries = request.prev_index, request.prev_term, request.entries
        if prev_index < self._commit:
            # Our log equals every leader's up to our commit index; skip what that covers.
            entries = entries[self._commit - prev_index:]
            prev_index, prev_term = self._commit, self._storage.term_at(self._commit)
        own_term = self._storage.term_at(prev_index)
        if own_term != prev_term:
            conflict = (self.last_index + 1 if own_term is None
                        else conflict_index(self._storage, prev_index, self._commit))
            return [self._reply(src, AppendResponse(self._term, self.node_id, False, -1, conflict))]
        self._store_entries(entries)
        match = prev_index + len(entries)
        if min(request.leader_commit, match) > self._commit:
            self._commit = min(request.leader_commit, match)
        return [self._reply(src, AppendResponse(self._term, self.node_id, True, match, -1))]

    def _store_entries(self, entries: tuple[Entry, ...]) -> None:
        """Append what we lack; cut our log where it disagrees (never at or below the commit index).
        Entries we already hold are left alone, so a late duplicate never truncates newer entries."""
        for i, entry in enumerate(entries):
            own = self._storage.term_at(entry.index)
            if own == entry.term:
                continue
            if own is not None:
                if entry.index <= self._commit:
                    raise AssertionError(f"node {self.node_id}: leader {self._leader_id} contradicts "
                                         f"committed entry {entry.index}")
                self._storage.truncate_from(entry.index)
            self._storage.append(list(entries[i:]))
            return

    def _on_snapshot_request(self, src: int, request: SnapshotRequest, now_ms: int) -> list[Envelope]:
        self._follow(src, now_ms)
        if request.last_index > self._commit:
            self._storage.save_snapshot(request.last_index, request.last_term, request.data)
            self._commit = self._applied = request.last_index
            self._snapshot_to_apply = (request.last_index, request.last_term, request.data)
        return [self._reply(src, SnapshotResponse(self._term, self.node_id, self._commit))]

    def _reply(self, dst: int, message) -> Envelope:
        return Envelope(self.node_id, dst, message)
