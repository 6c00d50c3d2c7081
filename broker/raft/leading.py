"""The leader's side of a Raft node: sending each follower the entries (or the snapshot) it lacks,
and counting acknowledgements into the commit index. Mixed into :class:`~broker.raft.node.RaftNode`.

Kept apart from the follower's side and from elections so each half of log replication can be read
against the Raft paper's sender rules on its own.
"""
from __future__ import annotations

from broker.raft.election import Role
from broker.raft.messages import AppendRequest, AppendResponse, Envelope, SnapshotRequest, SnapshotResponse
from broker.raft.replication import quorum_index


class RaftLeading:
    """Needs the node's id, term, role, storage, commit index, the followers' ``Progress`` and the
    largest append (from RaftNode)."""

    def _on_append_response(self, src: int, response: AppendResponse, now_ms: int) -> list[Envelope]:
        progress = self._progress.get(src) if self._role is Role.LEADER else None
        if progress is None:
            return []
        progress.last_ack_ms = now_ms
        if not response.success:
            if progress.snapshot_sent or response.conflict_index < 0:
                return []  # a snapshot on its way answers this; or a reply to a request of an older term
            progress.rejected(response.conflict_index)
        elif progress.acknowledged(response.match_index):
            self._advance_commit()
        if progress.next_index > self.last_index and response.success:
            return []
        envelope = self._append_for(src, now_ms, allow_snapshot=not progress.snapshot_sent)
        return [envelope] if envelope is not None else []

    def _on_snapshot_response(self, src: int, response: SnapshotResponse, now_ms: int) -> list[Envelope]:
        progress = self._progress.get(src) if self._role is Role.LEADER else None
        if progress is None:
            return []
        progress.last_ack_ms = now_ms
        if progress.acknowledged(response.last_index):
            self._advance_commit()
        if progress.next_index > self.last_index:
            return []
        envelope = self._append_for(src, now_ms, allow_snapshot=True)
        return [envelope] if envelope is not None else []

    def _advance_commit(self) -> None:
        index = quorum_index(self._storage.last_index(), [p.match_index for p in self._progress.values()])
        if index > self._commit and self._storage.term_at(index) == self._term:
            self._commit = index

    def _broadcast(self, now_ms: int, heartbeat: bool) -> list[Envelope]:
        out = []
        for peer, progress in self._progress.items():
            if heartbeat and not progress.probing and progress.match_index < self.last_index:
                progress.next_index = progress.match_index + 1  # retransmit what is unacknowledged
            envelope = self._append_for(peer, now_ms, allow_snapshot=heartbeat or not progress.snapshot_sent)
            if envelope is not None:
                out.append(envelope)
        return out

    def _append_for(self, peer: int, now_ms: int, allow_snapshot: bool = False) -> Envelope | None:
        """The next AppendRequest for ``peer`` (a SnapshotRequest when it needs compacted entries)."""
        progress = self._progress[peer]
        prev_index = progress.next_index - 1
        prev_term = self._storage.term_at(prev_index)
        if prev_term is None:
            if not allow_snapshot:
                return None
            progress.snapshot_sent = True
            last_index, last_term, data = self._storage.snapshot()
            return Envelope(self.node_id, peer, SnapshotRequest(self._term, self.node_id, last_index, last_term, data))
        entries = tuple(self._storage.entries(progress.next_index, progress.next_index + self._max_entries))
        if not progress.probing:
            progress.next_index += len(entries)
        request = AppendRequest(self._term, self.node_id, prev_index, prev_term, entries, self._commit)
        return Envelope(self.node_id, peer, request)
