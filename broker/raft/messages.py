"""The Raft RPCs of the controller quorum, as frozen dataclasses, and their JSON-safe form.

Indexes are 0-based like Kafka offsets: the first log entry has index 0. The position *before* the
first entry is ``NO_INDEX`` (-1) and its term is ``NO_TERM`` (-1); real terms start at 1 (a fresh
node is in term 0 and has voted for nobody). So an empty log's last entry is ``(-1, -1)`` and an
AppendRequest that starts the log carries ``prev_index=-1, prev_term=-1``.

Messages are plain values: the pure :class:`~broker.raft.node.RaftNode` returns them wrapped in
:class:`Envelope`, and the server carries them between nodes as JSON (:func:`to_dict` /
:func:`from_dict`; ``bytes`` travel as base64). There are no request ids: every response names the
term and the index it is about, so a duplicated, late or reordered response is harmless.

    >>> from_dict(to_dict(VoteRequest(3, 1, 9, 2, pre_vote=True))) == VoteRequest(3, 1, 9, 2, True)
    True
"""
from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass

NO_INDEX = -1
NO_TERM = -1


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. ``data`` is opaque to Raft; an empty ``data`` is a new leader's no-op."""
    term: int
    index: int
    data: bytes


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A (pre-)vote request. A pre-vote carries the term the candidate *would* use (its term + 1)
    and changes nothing on the voter; only a real vote bumps terms and is recorded."""
    term: int
    candidate_id: int
    last_log_index: int
    last_log_term: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    term: int
    voter_id: int
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """Entries after ``prev_index`` (empty for a heartbeat) and the leader's commit index."""
    term: int
    leader_id: int
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    leader_commit: int


@dataclass(frozen=True, slots=True)
class AppendResponse:
    """On success ``match_index`` is the last index this request proved equal to the leader's log.
    On failure ``conflict_index`` is where the leader should resume: the follower's log end, or the
    first index of the follower's term at ``prev_index`` (a whole divergent term is skipped at once)."""
    term: int
    follower_id: int
    success: bool
    match_index: int
    conflict_index: int


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """The leader's whole snapshot, sent when a follower needs entries the leader has compacted away.
    It is sent in one message: the controller's metadata image is small."""
    term: int
    leader_id: int
    last_index: int
    last_term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class SnapshotResponse:
    """``last_index``: the follower's log now equals the leader's up to here."""
    term: int
    follower_id: int
    last_index: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    """A leader stepping down on purpose (Kafka's EndQuorumEpoch, sent on graceful shutdown): its
    followers stop waiting out its lease and campaign at once, in the order of
    ``preferred_successors`` (most caught-up first). Unanswered; a lost one costs an election timeout."""
    term: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message on its way from ``src`` to ``dst`` (what :class:`RaftNode` hands its host to send)."""
    src: int
    dst: int
    message: object


Message = (VoteRequest | VoteResponse | AppendRequest | AppendResponse | SnapshotRequest | SnapshotResponse
           | EndQuorumEpoch)
MESSAGE_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    VoteRequest, VoteResponse, AppendRequest, AppendResponse, SnapshotRequest, SnapshotResponse, EndQuorumEpoch)}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _entry_to_dict(entry: Entry) -> dict:
    return {"term": entry.term, "index": entry.index, "data": _b64(entry.data)}


def _entry_from_dict(d: dict) -> Entry:
    return Entry(int(d["term"]), int(d["index"]), base64.b64decode(d["data"]))


def to_dict(message: Message) -> dict:
    """A JSON-safe dict with the class name under ``"type"``."""
    out: dict = {"type": type(message).__name__}
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if isinstance(value, bytes):
            value = _b64(value)
        elif f.name == "entries":
            value = [_entry_to_dict(e) for e in value]
        elif f.name == "preferred_successors":
            value = list(value)
        out[f.name] = value
    return out


def from_dict(d: dict) -> Message:
    """Rebuild a message from :func:`to_dict`'s output; an unknown type or field raises ValueError."""
    cls = MESSAGE_TYPES.get(d.get("type", ""))
    if cls is None:
        raise ValueError(f"unknown Raft message type {d.get('type')!r}; known: {sorted(MESSAGE_TYPES)}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in d:
            raise ValueError(f"Raft message {cls.__name__} lacks field {f.name!r}")
        value = d[f.name]
        if f.name == "data":
            value = base64.b64decode(value)
        elif f.name == "entries":
            value = tuple(_entry_from_dict(e) for e in value)
        elif f.name == "preferred_successors":
            value = tuple(int(v) for v in value)
        kwargs[f.name] = value
    return cls(**kwargs)
