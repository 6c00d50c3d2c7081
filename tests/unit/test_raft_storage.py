"""Raft storage: the file implementation against the in-memory one, recovery from torn tails and
crashes mid-snapshot, and the wire form of the Raft messages."""
from __future__ import annotations

import json
import os
import random
import shutil

import pytest

from broker.errors import CorruptRecordError
from broker.raft import (AppendRequest, AppendResponse, Entry, FileRaftStorage, MemoryRaftStorage, RaftNode,
                         SnapshotRequest, SnapshotResponse, VoteRequest, VoteResponse, from_dict, to_dict)
from broker.raft import storage as storage_module
from broker.raft.storage import LOG_FILE, STATE_FILE, encode_frame

pytestmark = pytest.mark.unit


@pytest.fixture(params=["memory", "file"])
def make_storage(request, tmp_path):
    """A factory of empty storages of either kind (files are closed at teardown)."""
    opened = []

    def make(name="s"):
        s = MemoryRaftStorage() if request.param == "memory" else FileRaftStorage(str(tmp_path / name))
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


def entries(first: int, terms: list[int], tag: str = "e") -> list[Entry]:
    return [Entry(t, first + i, f"{tag}{first + i}".encode()) for i, t in enumerate(terms)]


def observe(s) -> tuple:
    """Everything a node can read from a storage."""
    last, first = s.last_index(), s.first_index()
    return (s.hard_state(), first, last, s.snapshot(), s.entries(first, last + 1),
            [s.term_at(i) for i in range(first - 2, last + 3)])


# ---------------------------------------------------------------------------------- contract
def test_a_fresh_storage_is_empty(make_storage):
    s = make_storage()
    assert s.hard_state() == (0, None)
    assert (s.first_index(), s.last_index()) == (0, -1)
    assert s.term_at(-1) == -1 and s.term_at(0) is None
    assert s.snapshot() is None and s.entries(0, 10) == []


def test_append_truncate_and_read(make_storage):
    s = make_storage()
    s.append(entries(0, [1, 1, 2, 2, 3]))
    assert s.last_index() == 4 and [e.term for e in s.entries(1, 4)] == [1, 2, 2]
    assert s.entries(3, 99) == entries(3, [2, 3])
    s.truncate_from(3)
    assert s.last_index() == 2 and s.term_at(3) is None
    s.append(entries(3, [4], tag="x"))
    assert s.entries(3, 4)[0].data == b"x3"


def test_misuse_is_refused(make_storage):
    s = make_storage()
    s.append(entries(0, [1, 1, 1]))
    with pytest.raises(ValueError, match="does not continue"):
        s.append(entries(5, [1]))
    s.save_snapshot(1, 1, b"state")
    with pytest.raises(ValueError, match="snapshot"):
        s.truncate_from(1)
    with pytest.raises(ValueError, match="compacted"):
        s.entries(0, 3)
    with pytest.raises(ValueError, match="does not advance"):
        s.save_snapshot(1, 1, b"again")


def test_a_snapshot_keeps_the_entries_after_it(make_storage):
    s = make_storage()
    s.append(entries(0, [1, 1, 2, 2, 2]))
    s.save_snapshot(2, 2, b"through 2")
    assert s.snapshot() == (2, 2, b"through 2")
    assert (s.first_index(), s.last_index()) == (3, 4)
    assert s.term_at(2) == 2 and s.term_at(1) is None and s.term_at(-1) is None
    assert s.entries(3, 5) == entries(3, [2, 2])


def test_a_snapshot_that_disagrees_with_the_log_discards_all_of_it(make_storage):
    """The leader's snapshot has term 3 at index 2 where we hold term 2: our entries after it
    followed a different history, so none of them may survive."""
    s = make_storage()
    s.append(entries(0, [1, 1, 2, 2, 2]))
    s.save_snapshot(2, 3, b"leader's")
    assert (s.first_index(), s.last_index()) == (3, 2)
    assert s.entries(3, 10) == []


def test_a_snapshot_beyond_the_log_end(make_storage):
    s = make_storage()
    s.append(entries(0, [1, 1]))
    s.save_snapshot(9, 4, b"far ahead")
    assert (s.first_index(), s.last_index(), s.term_at(9)) == (10, 9, 4)
    s.append(entries(10, [4]))
    assert s.last_index() == 10


@pytest.mark.parametrize("seed", range(25))
def test_file_storage_behaves_like_memory_storage_across_reopens(tmp_path, seed):
    """Random operations on both kinds; the file storage is reopened at random moments (a clean
    restart) and must read back exactly what the memory storage holds."""
    rng = random.Random(seed)
    memory, path = MemoryRaftStorage(), str(tmp_path / "raft")
    files = FileRaftStorage(path)
    term = 1
    for _ in range(80):
        op = rng.random()
        if op < 0.45:
            term += rng.random() < 0.2
            batch = [Entry(term, memory.last_index() + 1 + i, rng.randbytes(rng.randint(0, 40)))
                     for i in range(rng.randint(1, 4))]
            memory.append(batch), files.append(batch)
        elif op < 0.6 and memory.last_index() >= memory.first_index():
            cut = rng.randint(memory.first_index(), memory.last_index())
            memory.truncate_from(cut), files.truncate_from(cut)
        elif op < 0.7:
            state = (term + rng.randint(0, 2), rng.choice([None, 1, 2, 3]))
            memory.save_hard_state(*state), files.save_hard_state(*state)
        elif op < 0.8 and memory.last_index() > (memory.snapshot() or (-1,))[0]:
            index = rng.randint(memory.first_index(), memory.last_index())
            snap_term = memory.term_at(index) if rng.random() < 0.8 else term + 5
            data = rng.randbytes(rng.randint(0, 64))
            memory.save_snapshot(index, snap_term, data), files.save_snapshot(index, snap_term, data)
        elif op < 0.9:
            files.close()
            files = FileRaftStorage(path)
        assert observe(files) == observe(memory)
    files.close()
    reopened = FileRaftStorage(path)
    assert observe(reopened) == observe(memory)
    reopened.close()


# ---------------------------------------------------------------------------------- crashes
def _written_log(tmp_path, count: int = 12) -> tuple[str, list[Entry], list[int]]:
    """A closed storage holding ``count`` entries; returns its directory, the entries, and where
    each frame ends in the log file."""
    rng = random.Random(count)
    path = str(tmp_path / "src")
    s = FileRaftStorage(path)
    written = [Entry(1 + i // 4, i, rng.randbytes(rng.randint(0, 30))) for i in range(count)]
    ends, pos = [], 0
    for e in written:
        s.append([e])
        pos += len(encode_frame(e))
        ends.append(pos)
    s.save_hard_state(3, 2)
    s.close()
    return path, written, ends


def test_recovery_cuts_a_torn_tail_at_any_byte(tmp_path):
    path, written, ends = _written_log(tmp_path)
    rng = random.Random(5)
    cuts = sorted({0, 1, ends[-1] - 1, *ends, *(e + 1 for e in ends[:-1]),
                   *(rng.randrange(ends[-1]) for _ in range(40))})
    for cut in cuts:
        copy = str(tmp_path / f"cut{cut}")
        shutil.copytree(path, copy)
        with open(os.path.join(copy, LOG_FILE), "r+b") as f:
            f.truncate(cut)
        kept = sum(1 for end in ends if end <= cut)
        s = FileRaftStorage(copy)
        assert s.entries(0, 100) == written[:kept], f"cut at byte {cut}"
        assert s.hard_state() == (3, 2)
        assert os.path.getsize(os.path.join(copy, LOG_FILE)) == (ends[kept - 1] if kept else 0)
        s.append([Entry(9, kept, b"after recovery")])  # the log continues cleanly
        s.close()
        assert FileRaftStorage(copy).entries(kept, kept + 1) == [Entry(9, kept, b"after recovery")]


@pytest.mark.parametrize("tail", [b"\0" * 64, b"\xff" * 7, bytes(range(200))], ids=["zeros", "ff", "noise"])
def test_recovery_drops_garbage_after_the_last_frame(tmp_path, tail):
    path, written, _ = _written_log(tmp_path)
    with open(os.path.join(path, LOG_FILE), "ab") as f:
        f.write(tail)
    s = FileRaftStorage(path)
    assert s.entries(0, 100) == written


def test_a_corrupted_frame_ends_the_log_there(tmp_path):
    """A flipped bit fails the CRC; that entry and everything after it are dropped (they were never
    acknowledged if the corruption is a torn write — and cannot be trusted otherwise)."""
    path, written, ends = _written_log(tmp_path)
    term_byte = ends[4] + 8 + 7  # the low byte of the sixth entry's term: only the CRC notices
    with open(os.path.join(path, LOG_FILE), "r+b") as f:
        f.seek(term_byte)
        byte = f.read(1)
        f.seek(term_byte)
        f.write(bytes([byte[0] ^ 0x10]))
    assert FileRaftStorage(path).entries(0, 100) == written[:5]


def test_a_crash_between_snapshot_and_log_rewrite_is_repaired_on_open(tmp_path, monkeypatch):
    path, written, _ = _written_log(tmp_path)
    s = FileRaftStorage(path)

    def crash(*_args):
        raise OSError("power lost")

    monkeypatch.setattr(FileRaftStorage, "_rewrite_log", crash)
    with pytest.raises(OSError):
        s.save_snapshot(5, written[5].term, b"state through 5")
    monkeypatch.undo()
    reopened = FileRaftStorage(path)
    assert reopened.snapshot() == (5, written[5].term, b"state through 5")
    assert reopened.entries(6, 100) == written[6:]
    assert reopened.first_index() == 6


def test_a_crash_mid_snapshot_that_diverged_discards_the_log(tmp_path, monkeypatch):
    path, written, _ = _written_log(tmp_path)
    s = FileRaftStorage(path)
    monkeypatch.setattr(FileRaftStorage, "_rewrite_log", lambda *_: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError):
        s.save_snapshot(5, 99, b"another history")
    monkeypatch.undo()
    reopened = FileRaftStorage(path)
    assert (reopened.first_index(), reopened.last_index()) == (6, 5)


def test_leftover_temp_files_are_ignored_and_removed(tmp_path):
    path, written, _ = _written_log(tmp_path)
    for name in (STATE_FILE + ".tmp", LOG_FILE + ".tmp", "snapshot-00000000000000000099-9.json.tmp"):
        with open(os.path.join(path, name), "wb") as f:
            f.write(b"{half a wri")
    s = FileRaftStorage(path)
    assert s.hard_state() == (3, 2) and s.entries(0, 100) == written and s.snapshot() is None
    assert not [n for n in os.listdir(path) if n.endswith(".tmp")]


def test_only_the_newest_snapshot_file_is_kept(tmp_path):
    path, written, _ = _written_log(tmp_path)
    s = FileRaftStorage(path)
    s.save_snapshot(3, written[3].term, b"a")
    s.save_snapshot(7, written[7].term, b"b")
    snapshots = [n for n in os.listdir(path) if n.startswith("snapshot-")]
    assert snapshots == [f"snapshot-{7:020d}-{written[7].term}.json"]
    s.close()
    assert FileRaftStorage(path).snapshot() == (7, written[7].term, b"b")


def test_a_corrupted_snapshot_fails_loudly(tmp_path):
    path, written, _ = _written_log(tmp_path)
    s = FileRaftStorage(path)
    s.save_snapshot(3, written[3].term, b"state")
    s.close()
    name = next(n for n in os.listdir(path) if n.startswith("snapshot-"))
    doc = json.loads(open(os.path.join(path, name)).read())
    doc["crc32c"] ^= 1
    with open(os.path.join(path, name), "w") as f:
        f.write(json.dumps(doc))
    with pytest.raises(CorruptRecordError, match="CRC"):
        FileRaftStorage(path)


def test_a_log_without_its_snapshot_fails_loudly(tmp_path):
    path, written, _ = _written_log(tmp_path)
    s = FileRaftStorage(path)
    s.save_snapshot(3, written[3].term, b"state")
    s.close()
    for name in os.listdir(path):
        if name.startswith("snapshot-"):
            os.remove(os.path.join(path, name))
    with pytest.raises(CorruptRecordError, match="starts at index 4"):
        FileRaftStorage(path)


def test_every_mutation_is_fsynced_before_it_returns(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(storage_module.os, "fsync", lambda fd: synced.append(fd))
    s = FileRaftStorage(str(tmp_path / "raft"))
    for action in (lambda: s.append(entries(0, [1, 1])), lambda: s.truncate_from(1),
                   lambda: s.save_hard_state(2, 1), lambda: s.save_snapshot(0, 1, b"x")):
        before = len(synced)
        action()
        assert len(synced) > before


def test_a_node_on_file_storage_survives_a_restart(tmp_path):
    """Term, vote and log come back; the restarted single node elects itself in a later term and
    hands its host the entries after the snapshot again, in order."""
    path = str(tmp_path / "node")
    node = RaftNode(1, [1], FileRaftStorage(path), random.Random(1), 0)
    node.tick(0)
    for i in range(5):
        node.propose(b"v%d" % i, 0)
    assert [e.data for e in node.take_committed()] == [b"", b"v0", b"v1", b"v2", b"v3", b"v4"]
    node.compact(3, b"state through 3")
    node.storage.close()

    storage = FileRaftStorage(path)
    assert storage.hard_state() == (1, 1) and storage.snapshot() == (3, 1, b"state through 3")
    again = RaftNode(1, [1], storage, random.Random(2), 10)
    assert again.commit_index == 3 and again.take_committed() == []
    again.tick(10)
    assert again.role == "leader" and again.term == 2
    assert [e.data for e in again.take_committed()] == [b"v3", b"v4", b""]
    storage.close()


# ---------------------------------------------------------------------------------- wire form
@pytest.mark.parametrize("message", [
    VoteRequest(3, 1, 9, 2, pre_vote=True),
    VoteResponse(4, 2, False, pre_vote=False),
    AppendRequest(5, 1, 7, 4, (Entry(5, 8, b"\x00\xffbinary"), Entry(5, 9, b"")), 6),
    AppendRequest(5, 1, -1, -1, (), -1),
    AppendResponse(5, 3, False, -1, 4),
    SnapshotRequest(6, 2, 100, 5, bytes(range(256))),
    SnapshotResponse(6, 3, 100),
], ids=lambda m: type(m).__name__)
def test_messages_survive_json(message):
    wire = json.dumps(to_dict(message))
    assert from_dict(json.loads(wire)) == message


def test_an_unknown_message_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown Raft message type 'Gossip'"):
        from_dict({"type": "Gossip", "term": 1})
    with pytest.raises(ValueError, match="lacks field 'granted'"):
        from_dict({"type": "VoteResponse", "term": 1, "voter_id": 2, "pre_vote": False})
