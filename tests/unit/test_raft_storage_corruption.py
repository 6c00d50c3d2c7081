"""Unreadable Raft state files fail with a typed error naming the file and the way out, instead of a
bare JSON or base64 error out of the controller's start; a missing quorum state is survivable."""
from __future__ import annotations

import os
import random

import pytest

from broker.errors import CorruptRecordError
from broker.raft import Entry, FileRaftStorage, RaftNode
from broker.raft.storage import STATE_FILE

pytestmark = pytest.mark.unit


def _stored(path: str) -> None:
    s = FileRaftStorage(path)
    s.save_hard_state(4, 2)
    s.append([Entry(1, 0, b""), Entry(3, 1, b"a"), Entry(4, 2, b"b")])
    s.save_snapshot(1, 3, b"image")
    s.close()


@pytest.mark.parametrize("content", [b'{"term": 4, "voted', b"", b"[1, 2]", b'{"term": "x", "voted_for": null}',
                                     b'{"term": 4}', b'{"term": 4, "voted_for": "2"}'],
                         ids=["torn", "empty", "not-an-object", "bad-term", "no-vote-field", "bad-vote"])
def test_an_unreadable_quorum_state_fails_with_a_typed_error(tmp_path, content):
    path = str(tmp_path / "node")
    _stored(path)
    with open(os.path.join(path, STATE_FILE), "wb") as f:
        f.write(content)
    with pytest.raises(CorruptRecordError, match="quorum state .*quorum-state.json is unreadable"):
        FileRaftStorage(path)


@pytest.mark.parametrize("content", [b'{"last_index": 1', b'{"last_index": 1, "last_term": 3}',
                                     b'{"last_index": 1, "last_term": 3, "crc32c": 0, "data": "%%"}'],
                         ids=["torn", "no-data", "bad-base64"])
def test_an_unreadable_snapshot_fails_with_a_typed_error(tmp_path, content):
    path = str(tmp_path / "node")
    _stored(path)
    name = next(n for n in os.listdir(path) if n.startswith("snapshot-"))
    with open(os.path.join(path, name), "wb") as f:
        f.write(content)
    with pytest.raises(CorruptRecordError, match="Raft snapshot .* fails its CRC-32C"):
        FileRaftStorage(path)


def test_a_removed_quorum_state_restarts_in_the_log_term_without_a_vote(tmp_path):
    """The documented way out: without its quorum state a node starts in its log's last term (as
    Kafka's QuorumState does), and its next election is in a later term than any entry it holds."""
    path = str(tmp_path / "node")
    _stored(path)
    os.remove(os.path.join(path, STATE_FILE))
    storage = FileRaftStorage(path)
    node = RaftNode(2, [2], storage, random.Random(1), 0)
    assert (node.term, node.voted_for) == (4, None) and node.commit_index == 1
    node.tick(0)
    assert node.role == "leader" and node.term == 5 and storage.term_at(storage.last_index()) == 5
    storage.close()
    assert FileRaftStorage(path).hard_state() == (5, 2)
