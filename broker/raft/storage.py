"""Durable state of one Raft node: hard state (term, vote), the log, and the latest snapshot.

Raft's safety rests on three things surviving a crash once a node has acted on them: the term and
vote (or a node could vote twice in a term), and the entries it acknowledged (or a committed entry
could end up on fewer than a majority). So **every mutating call is durable when it returns**;
the node never sends a message that depends on state it has not saved.

Both implementations hold the retained log in memory (it is the controller's metadata log, kept
short by snapshots); the file implementation also writes it through to disk.

Snapshot and log together
-------------------------
A snapshot ``(S, T, data)`` stands for every entry up to index S (whose term was T). Saving one
discards entries ``<= S``; if the log held an entry at S with another term, the log had diverged
from the one the snapshot came from and *all* entries are discarded (the leader resends the rest).
The same rule is applied when a directory is opened, so a crash between writing a snapshot and
rewriting the log is harmless.

Files of :class:`FileRaftStorage` (in its directory)
----------------------------------------------------
``quorum-state.json``
    ``{"term": int, "voted_for": int | null}``. Replaced atomically: written to
    ``quorum-state.json.tmp``, fsynced, renamed over the old file, directory fsynced. A crash leaves
    the old or the new state, never a mix; so an unreadable file was corrupted after it was written,
    and opening fails (``CorruptRecordError``). Without the file the node starts in the last term
    of its log or snapshot with no vote (see :class:`~broker.raft.node.RaftNode`).
``raft.log``
    Entries in index order, each one frame, all integers big-endian::

        length   u32   bytes after this field (16 + len(data))
        crc      u32   CRC-32C (Castagnoli) of term, index and data
        term     i64
        index    i64   each frame's index is the previous one's + 1
        data     length - 16 bytes

    Appends and truncations are fsynced before they return. On open the file is scanned and cut at
    the first frame that is short, fails its CRC, or breaks the index sequence: a torn tail (a crash
    mid-append) or zeros left by the filesystem. Entries cut this way were never acknowledged,
    because a node acknowledges only after the fsync. Compaction rewrites the file (temp + rename).
``snapshot-<index:020d>-<term>.json``
    ``{"last_index", "last_term", "crc32c", "data": base64}``, written atomically like the quorum
    state; older snapshots are deleted after the new one is in place. The newest is loaded on open;
    a snapshot under its final name that fails its CRC means the disk corrupted a file that was
    fsynced, and opening fails rather than silently losing committed state.
``*.tmp`` files are leftovers of a crash mid-write and are deleted on open.
"""
from __future__ import annotations

import base64
import json
import os
import struct
from abc import ABC, abstractmethod

from crc32c import crc32c

from broker.errors import CorruptRecordError
from broker.raft.messages import NO_INDEX, NO_TERM, Entry
from broker.storage.checkpoint import fsync_dir, write_atomically

Snapshot = tuple[int, int, bytes]


class RaftStorage(ABC):
    """What a :class:`RaftNode` keeps across crashes. Single-threaded: its node's thread only."""

    @abstractmethod
    def hard_state(self) -> tuple[int, int | None]:
        """``(current term, voted for in that term or None)``; ``(0, None)`` when fresh."""

    @abstractmethod
    def save_hard_state(self, term: int, voted_for: int | None) -> None: ...

    @abstractmethod
    def append(self, entries: list[Entry]) -> None:
        """Append entries that continue the log (the first has index ``last_index() + 1``)."""

    @abstractmethod
    def truncate_from(self, index: int) -> None:
        """Discard entries ``>= index``; entries covered by the snapshot cannot be discarded."""

    # Both kinds keep the entries after the snapshot in memory (``_log``) beside the snapshot
    # (``_snapshot``), so reading them is the same code.
    _log: list[Entry]
    _snapshot: Snapshot | None

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Entries with ``lo <= index < hi``, clipped to ``last_index()``; ``lo >= first_index()``."""
        first = self.first_index()
        if lo < first:
            raise ValueError(f"entries from {lo} are compacted; the log starts at {first}")
        return self._log[lo - first: max(lo, hi) - first]

    def term_at(self, index: int) -> int | None:
        """The term of the entry at ``index``: the snapshot's term at its last index, ``NO_TERM`` at
        ``NO_INDEX`` when there is no snapshot, None when the index is compacted away or beyond the end."""
        return _term_at(index, self.first_index(), self._log, self._snapshot)

    def last_index(self) -> int:
        """The last entry's index (the snapshot's last index when no entry follows it; -1 if none)."""
        return self.first_index() + len(self._log) - 1

    def first_index(self) -> int:
        """The first index the log can hold: the snapshot's last index + 1, or 0."""
        return self._snapshot[0] + 1 if self._snapshot else 0

    @abstractmethod
    def save_snapshot(self, last_index: int, last_term: int, data: bytes) -> None:
        """Make ``data`` the snapshot through ``last_index`` and discard the entries it covers."""

    @abstractmethod
    def snapshot(self) -> Snapshot | None:
        """``(last_index, last_term, data)`` of the latest snapshot, or None."""

    def close(self) -> None:
        """Release files; the storage must not be used afterwards."""


def _check_contiguous(entries: list[Entry], after: int) -> None:
    expected = after + 1
    for entry in entries:
        if entry.index != expected:
            raise ValueError(f"entry index {entry.index} does not continue the log (expected {expected})")
        expected += 1


class MemoryRaftStorage(RaftStorage):
    """Storage in plain Python lists, for unit tests and the simulation. "Durable" means it survives
    whatever the test throws away: a simulated crash rebuilds the node from the same object."""

    def __init__(self) -> None:
        self._term, self._voted_for = 0, None
        self._log: list[Entry] = []
        self._snapshot: Snapshot | None = None

    def hard_state(self):
        return self._term, self._voted_for

    def save_hard_state(self, term, voted_for):
        self._term, self._voted_for = term, voted_for

    def append(self, entries):
        _check_contiguous(entries, self.last_index())
        self._log.extend(entries)

    def truncate_from(self, index):
        if index < self.first_index():
            raise ValueError(f"cannot truncate from {index}: entries before {self.first_index()} are "
                             "in the snapshot")
        del self._log[index - self.first_index():]

    def save_snapshot(self, last_index, last_term, data):
        _check_snapshot_advances(self._snapshot, last_index)
        self._log = _entries_after_snapshot(self._log, self.first_index(), last_index, last_term)
        self._snapshot = (last_index, last_term, bytes(data))

    def snapshot(self):
        return self._snapshot


def _term_at(index: int, first: int, log: list[Entry], snapshot: Snapshot | None) -> int | None:
    if index >= first:
        pos = index - first
        return log[pos].term if pos < len(log) else None
    if snapshot is not None:
        return snapshot[1] if index == snapshot[0] else None
    return NO_TERM if index == NO_INDEX else None


def _check_snapshot_advances(current: Snapshot | None, last_index: int) -> None:
    if last_index < 0 or (current is not None and last_index <= current[0]):
        raise ValueError(f"a snapshot through {last_index} does not advance the current one "
                         f"(through {current[0] if current else NO_INDEX})")


def _entries_after_snapshot(log: list[Entry], first: int, last_index: int, last_term: int) -> list[Entry]:
    """What of ``log`` (starting at index ``first``) survives a snapshot through ``last_index``."""
    pos = last_index - first
    if 0 <= pos < len(log) and log[pos].term != last_term:
        return []  # diverged at the snapshot point: nothing after it can be trusted
    if log and log[0].index > last_index + 1:
        return []  # a gap between the snapshot and the log
    return log[max(0, pos + 1):]


# ---------------------------------------------------------------------------------------- files
_FRAME = struct.Struct(">IIqq")  # length, crc, term, index
_HEAD = 8                        # bytes of length + crc
_BODY_MIN = 16                   # term + index
_MAX_ENTRY = 64 * 1024 * 1024    # a longer length field is garbage, not an entry
STATE_FILE = "quorum-state.json"
LOG_FILE = "raft.log"
SNAPSHOT_PREFIX = "snapshot-"


def encode_frame(entry: Entry) -> bytes:
    body = struct.pack(">qq", entry.term, entry.index) + entry.data
    return struct.pack(">II", len(body), crc32c(body)) + body


def decode_frames(buf: bytes) -> tuple[list[Entry], list[int], int]:
    """Entries from the start of ``buf`` up to the first bad frame: ``(entries, start position of
    each, length of the valid prefix)``."""
    entries, positions, pos = [], [], 0
    while pos + _FRAME.size <= len(buf):
        length, crc, term, index = _FRAME.unpack_from(buf, pos)
        end = pos + _HEAD + length
        if length < _BODY_MIN or length > _MAX_ENTRY or end > len(buf):
            break
        if crc32c(memoryview(buf)[pos + _HEAD:end]) != crc:
            break
        if entries and index != entries[-1].index + 1:
            break
        entries.append(Entry(term, index, bytes(buf[pos + _FRAME.size:end])))
        positions.append(pos)
        pos = end
    return entries, positions, pos


def _snapshot_name(last_index: int, last_term: int) -> str:
    return f"{SNAPSHOT_PREFIX}{last_index:020d}-{last_term}.json"


class FileRaftStorage(RaftStorage):
    """:class:`RaftStorage` in a directory (see the module docstring for the files). Every mutating
    call has been fsynced when it returns.

        storage = FileRaftStorage("/var/lib/riverlog/__cluster_metadata-0")
        node = RaftNode(1, [1, 2, 3], storage, random.Random(), clock.time_ms())
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):
            if name.endswith(".tmp"):
                os.remove(os.path.join(directory, name))
        self._term, self._voted_for = self._load_hard_state()
        self._snapshot = self._load_snapshot()
        self._log: list[Entry] = []
        self._positions: list[int] = []
        self._file = self._open_log()

    # ------------------------------------------------------------------------------ opening
    def _load_hard_state(self) -> tuple[int, int | None]:
        path = os.path.join(self.directory, STATE_FILE)
        if not os.path.exists(path):
            return 0, None
        with open(path, "rb") as f:
            raw = f.read()
        try:
            state = json.loads(raw)
            term, voted_for = int(state["term"]), state["voted_for"]
            if term < 0 or not (voted_for is None or isinstance(voted_for, int)):
                raise ValueError(f"term {term}, voted_for {voted_for!r}")
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptRecordError(f"Raft quorum state {path} is unreadable ({e}); the file was corrupted "
                                     "after it was written. Remove it to restart this node in its log's "
                                     "last term without a vote (a vote it gave in a later term is then "
                                     "forgotten), or its whole metadata directory to copy the log from "
                                     "the leader") from e
        return term, voted_for

    def _snapshot_files(self) -> list[str]:
        return sorted(n for n in os.listdir(self.directory)
                      if n.startswith(SNAPSHOT_PREFIX) and n.endswith(".json"))

    def _load_snapshot(self) -> Snapshot | None:
        names = self._snapshot_files()
        if not names:
            return None
        path = os.path.join(self.directory, names[-1])
        with open(path, "rb") as f:
            raw = f.read()
        try:
            doc = json.loads(raw)
            snapshot = int(doc["last_index"]), int(doc["last_term"]), base64.b64decode(doc["data"], validate=True)
            intact = crc32c(snapshot[2]) == doc["crc32c"]
        except (ValueError, KeyError, TypeError):
            intact = False  # unparseable: as corrupt as a failed CRC
        if not intact:
            raise CorruptRecordError(f"Raft snapshot {path} fails its CRC-32C; the file was corrupted "
                                     "after it was written. Restore the directory or remove the node's "
                                     "metadata directory so it copies the log from the leader")
        for stale in names[:-1]:
            os.remove(os.path.join(self.directory, stale))
        return snapshot

    def _open_log(self):
        path = os.path.join(self.directory, LOG_FILE)
        created = not os.path.exists(path)
        f = open(path, "a+b")
        if created:
            fsync_dir(self.directory)
        f.seek(0)
        buf = f.read()
        entries, positions, valid = decode_frames(buf)
        if valid < len(buf):  # torn or garbage tail
            f.truncate(valid)
            f.flush()
            os.fsync(f.fileno())
        self._log, self._positions = entries, positions
        if self._snapshot is None:
            if entries and entries[0].index != 0:
                f.close()
                raise CorruptRecordError(f"Raft log {path} starts at index {entries[0].index} but no "
                                         "snapshot covers the entries before it (was a snapshot file "
                                         "deleted?)")
            return f
        last_index, last_term, _ = self._snapshot
        first = entries[0].index if entries else last_index + 1
        kept = _entries_after_snapshot(entries, first, last_index, last_term)
        if len(kept) != len(entries):  # a crash between saving a snapshot and rewriting the log
            f.close()
            f = self._rewrite_log(kept)
        return f

    def _rewrite_log(self, entries: list[Entry]):
        """Replace the log file with ``entries`` (temp file + rename) and return the new handle."""
        frames = [encode_frame(e) for e in entries]
        write_atomically(os.path.join(self.directory, LOG_FILE), b"".join(frames))
        positions, pos = [], 0
        for frame in frames:
            positions.append(pos)
            pos += len(frame)
        self._log, self._positions = list(entries), positions
        f = open(os.path.join(self.directory, LOG_FILE), "a+b")
        return f

    # ------------------------------------------------------------------------------ hard state
    def hard_state(self):
        return self._term, self._voted_for

    def save_hard_state(self, term, voted_for):
        doc = json.dumps({"term": term, "voted_for": voted_for}).encode()
        write_atomically(os.path.join(self.directory, STATE_FILE), doc)
        self._term, self._voted_for = term, voted_for

    # ------------------------------------------------------------------------------ the log
    def append(self, entries):
        if not entries:
            return
        _check_contiguous(entries, self.last_index())
        frames = [encode_frame(e) for e in entries]
        self._file.seek(0, os.SEEK_END)
        pos = self._file.tell()
        self._file.write(b"".join(frames))
        self._file.flush()
        os.fsync(self._file.fileno())
        for entry, frame in zip(entries, frames):
            self._log.append(entry)
            self._positions.append(pos)
            pos += len(frame)

    def truncate_from(self, index):
        first = self.first_index()
        if index < first:
            raise ValueError(f"cannot truncate from {index}: entries before {first} are in the snapshot")
        pos = index - first
        if pos >= len(self._log):
            return
        self._file.truncate(self._positions[pos])
        self._file.flush()
        os.fsync(self._file.fileno())
        del self._log[pos:], self._positions[pos:]

    # ------------------------------------------------------------------------------ snapshots
    def save_snapshot(self, last_index, last_term, data):
        _check_snapshot_advances(self._snapshot, last_index)
        data = bytes(data)
        old = self._snapshot_files()
        doc = {"last_index": last_index, "last_term": last_term, "crc32c": crc32c(data),
               "data": base64.b64encode(data).decode("ascii")}
        name = _snapshot_name(last_index, last_term)
        write_atomically(os.path.join(self.directory, name), json.dumps(doc).encode())
        kept = _entries_after_snapshot(self._log, self.first_index(), last_index, last_term)
        self._file.close()
        self._snapshot = (last_index, last_term, data)
        self._file = self._rewrite_log(kept)
        for stale in old:
            if stale != name:
                os.remove(os.path.join(self.directory, stale))
        fsync_dir(self.directory)

    def snapshot(self):
        return self._snapshot

    def close(self):
        self._file.close()
