"""The controller quorum's Raft: a pure node, its durable storage, and its messages.

See ``docs/raft.md``. The node is a synchronous state machine (messages and time in, messages and
committed entries out); threads, sockets and clocks belong to its host
(``broker/server/controller_runtime.py``), and ``tests/simulation/raft_sim.py`` drives many nodes
under faults from one seed.
"""
from broker.raft.election import Role
from broker.raft.messages import (NO_INDEX, NO_TERM, AppendRequest, AppendResponse, EndQuorumEpoch, Entry,
                                  Envelope, SnapshotRequest, SnapshotResponse, VoteRequest, VoteResponse,
                                  from_dict, to_dict)
from broker.raft.node import RaftNode
from broker.raft.storage import FileRaftStorage, MemoryRaftStorage, RaftStorage

__all__ = [
    "NO_INDEX", "NO_TERM", "AppendRequest", "AppendResponse", "EndQuorumEpoch", "Entry", "Envelope",
    "FileRaftStorage", "MemoryRaftStorage", "RaftNode", "RaftStorage", "Role", "SnapshotRequest", "SnapshotResponse",
    "VoteRequest", "VoteResponse", "from_dict", "to_dict",
]
