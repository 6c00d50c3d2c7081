"""A pending transaction's changes, compact: their pgoutput bytes, packed, decoded when read.

A decoded change (its message, its tuple of column values, the numbering around it) costs the
driver about ten times the bytes pgoutput sent for it, and a transaction is held until its commit
arrives. Here each change is one packed entry — the Relation it arrived under (an index into the
buffer's own list), its LSN, its (sub)transaction id and the message bytes — and past
``spill_bytes`` the entries go to a temporary file in ``spill_dir``, read back in order each time
the transaction is read. The file is unlinked when it is made: a crash leaves nothing behind, and
the slot, never acknowledged past an unstored transaction, sends the transaction again.
"""
from __future__ import annotations

import os
import struct
import tempfile
from typing import Iterator, Optional

from broker.errors import InvalidConfigError
from spark_source.postgres.pgoutput import Message, Relation, decode

# relation index (-1: none), LSN, xid (-1: none), 1 when the message carries its xid (streamed), length
_ENTRY = struct.Struct("<iqqBI")
_WRITE_CHUNK = 1 << 20    # spilled entries are written once this many bytes gathered
_READ_CHUNK = 1 << 20


def check_spill_dir(spill_dir: Optional[str]) -> None:
    """Refuse a ``transaction.spill.dir`` no file can be made in when the stream starts, not when
    the first large transaction arrives (hours later, failing the query then)."""
    if spill_dir is None:
        return
    if not os.path.isdir(spill_dir):
        raise InvalidConfigError(f"option 'transaction.spill.dir': {spill_dir!r} is not a directory",
                                 config="transaction.spill.dir")
    try:
        tempfile.TemporaryFile(prefix="riverlog-cdc-txn-", dir=spill_dir).close()
    except OSError as e:
        raise InvalidConfigError(f"option 'transaction.spill.dir': no file can be made in {spill_dir!r} ({e})",
                                 config="transaction.spill.dir") from None


class ChangeBuffer:
    """Append-only (but for :meth:`drop_xid`), read any number of times. Not thread-safe."""

    def __init__(self, spill_bytes: Optional[int] = None, spill_dir: Optional[str] = None):
        self.spill_bytes, self.spill_dir = spill_bytes, spill_dir
        self._relations: list[Optional[Relation]] = []
        self._relation_index: dict[int, int] = {}   # id(relation) -> index; the list keeps them alive
        self._tail = bytearray()                    # entries not (yet) in the file
        self._file = None
        self._filed = 0                             # bytes in the file
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def spilled(self) -> bool:
        return self._file is not None

    @property
    def size_bytes(self) -> int:
        """The packed entries' size, in memory and in the file."""
        return self._filed + len(self._tail)

    def append(self, relation: Optional[Relation], lsn: int, payload: bytes, xid: Optional[int],
               in_stream: bool) -> None:
        index = -1
        if relation is not None:
            index = self._relation_index.get(id(relation))
            if index is None or self._relations[index] is not relation:
                index = self._relation_index[id(relation)] = len(self._relations)
                self._relations.append(relation)
        self._tail += _ENTRY.pack(index, lsn, -1 if xid is None else xid, in_stream, len(payload))
        self._tail += payload
        self._count += 1
        if self.spill_bytes is not None and (
                len(self._tail) >= _WRITE_CHUNK if self._file is not None else self.size_bytes > self.spill_bytes):
            self._spill()

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="riverlog-cdc-txn-", dir=self.spill_dir)
        self._file.write(self._tail)
        self._file.flush()
        self._filed += len(self._tail)
        self._tail = bytearray()

    def _raw(self) -> Iterator[tuple[int, int, int, int, bytes]]:
        """(relation index, LSN, xid, in_stream, payload) in arrival order."""
        if self._file is not None:
            yield from _entries_of(_read_file(self._file.fileno(), self._filed))
        yield from _entries_of([bytes(self._tail)])

    def entries(self) -> Iterator[tuple[Optional[Relation], int, Message, Optional[int]]]:
        """(relation, LSN, decoded message, change xid) in arrival order."""
        for index, lsn, xid, in_stream, payload in self._raw():
            yield (None if index < 0 else self._relations[index], lsn, decode(payload, bool(in_stream)),
                   None if xid < 0 else xid)

    def relations(self) -> Iterator[Relation]:
        """The distinct Relations the changes arrived under, in order of first use, without
        decoding any change."""
        seen = set()
        for index, *_ in self._raw():
            if index >= 0 and index not in seen:
                seen.add(index)
                yield self._relations[index]

    def drop_xid(self, xid: int) -> None:
        """Forget the changes of subtransaction ``xid`` (its Stream Abort)."""
        kept = ChangeBuffer(self.spill_bytes, self.spill_dir)
        kept._relations, kept._relation_index = self._relations, self._relation_index
        for index, lsn, change_xid, in_stream, payload in self._raw():
            if change_xid != xid:
                kept._tail += _ENTRY.pack(index, lsn, change_xid, in_stream, len(payload))
                kept._tail += payload
                kept._count += 1
                if kept.spill_bytes is not None and (len(kept._tail) >= _WRITE_CHUNK if kept._file is not None
                                                     else kept.size_bytes > kept.spill_bytes):
                    kept._spill()
        self.close()
        self.__dict__.update(kept.__dict__)

    def close(self) -> None:
        """Release the file (a transaction that was stored or dropped); reading afterwards is an error."""
        if self._file is not None:
            self._file.close()


def _read_file(fd: int, size: int) -> Iterator[bytes]:
    offset = 0
    while offset < size:
        block = os.pread(fd, min(_READ_CHUNK, size - offset), offset)
        if not block:
            raise OSError(f"spill file ended at {offset} of {size} bytes")
        offset += len(block)
        yield block


def _entries_of(blocks) -> Iterator[tuple[int, int, int, int, bytes]]:
    pending = b""
    for block in blocks:
        data = pending + block if pending else block
        pos = 0
        while len(data) - pos >= _ENTRY.size:
            index, lsn, xid, in_stream, length = _ENTRY.unpack_from(data, pos)
            end = pos + _ENTRY.size + length
            if end > len(data):
                break
            yield index, lsn, xid, in_stream, bytes(data[pos + _ENTRY.size:end])
            pos = end
        pending = data[pos:]
    if pending:
        raise OSError(f"a change buffer ends inside an entry ({len(pending)} bytes left)")
