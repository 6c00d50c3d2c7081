"""pgoutput's logical replication messages as frozen dataclasses (decoded by
:mod:`spark_source.postgres.pgoutput`, which re-exports them).

Timestamps are microseconds since the Unix epoch; LSNs are unsigned 64-bit integers. A TupleData is
a tuple of values: ``None`` (SQL null), :data:`UNCHANGED_TOAST` (a TOASTed value the change did not
touch, so it was not sent), ``bytes`` (text format) or :class:`BinaryValue` (binary format).
Messages that pgoutput sends inside a streamed transaction carry that (sub)transaction's ``xid``;
it is None otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union


class _UnchangedToast:
    """The one value standing for a TOASTed column that the change did not touch ('u')."""

    _instance: Optional["_UnchangedToast"] = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self):
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST = _UnchangedToast()


class BinaryValue(bytes):
    """A column sent in binary format ('b', only with the ``binary`` option); plain ``bytes`` are text."""

    def __repr__(self) -> str:
        return f"BinaryValue({bytes(self)!r})"


Value = Union[None, _UnchangedToast, bytes]
TupleData = tuple  # tuple[Value, ...]


@dataclass(frozen=True)
class Begin:
    final_lsn: int
    commit_ts_us: int
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(frozen=True)
class Origin:
    commit_lsn: int
    name: str


@dataclass(frozen=True)
class Column:
    flags_key: bool
    name: str
    type_oid: int
    type_modifier: int


@dataclass(frozen=True)
class Relation:
    """A table's shape as the publisher sees it now; sent before its first change and after DDL.
    ``replica_identity`` is ``pg_class.relreplident``: 'd' default (the primary key), 'n' nothing,
    'f' full, 'i' an index; columns with ``flags_key`` are the replica identity's."""
    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple
    xid: Optional[int] = None


@dataclass(frozen=True)
class TypeMessage:
    oid: int
    namespace: str
    name: str
    xid: Optional[int] = None


@dataclass(frozen=True)
class Insert:
    relation_oid: int
    new: tuple
    xid: Optional[int] = None


@dataclass(frozen=True)
class Update:
    """``old_kind`` 'K': ``old`` holds only the replica identity's columns (others None; the key
    changed); 'O': the whole old row (REPLICA IDENTITY FULL); None: no old tuple was sent."""
    relation_oid: int
    old: Optional[tuple]
    old_kind: Optional[str]
    new: tuple
    xid: Optional[int] = None


@dataclass(frozen=True)
class Delete:
    relation_oid: int
    old: tuple
    old_kind: str
    xid: Optional[int] = None


@dataclass(frozen=True)
class Truncate:
    options: int
    relation_oids: tuple
    xid: Optional[int] = None

    @property
    def cascade(self) -> bool:
        return bool(self.options & 1)

    @property
    def restart_identity(self) -> bool:
        return bool(self.options & 2)


@dataclass(frozen=True)
class LogicalMessage:
    """``pg_logical_emit_message(transactional, prefix, content)``; flags bit 1 = transactional."""
    flags: int
    lsn: int
    prefix: str
    content: bytes
    xid: Optional[int] = None

    @property
    def transactional(self) -> bool:
        return bool(self.flags & 1)


@dataclass(frozen=True)
class StreamStart:
    xid: int
    first_segment: bool


@dataclass(frozen=True)
class StreamStop:
    pass


@dataclass(frozen=True)
class StreamCommit:
    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(frozen=True)
class StreamAbort:
    """``subxid == xid`` aborts the whole streamed transaction, otherwise one subtransaction."""
    xid: int
    subxid: int
    abort_lsn: Optional[int] = None
    abort_ts_us: Optional[int] = None


@dataclass(frozen=True)
class BeginPrepare:
    prepare_lsn: int
    end_lsn: int
    prepare_ts_us: int
    xid: int
    gid: str


@dataclass(frozen=True)
class Prepare:
    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_ts_us: int
    xid: int
    gid: str


@dataclass(frozen=True)
class CommitPrepared:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int
    xid: int
    gid: str


@dataclass(frozen=True)
class RollbackPrepared:
    flags: int
    prepare_end_lsn: int
    rollback_end_lsn: int
    prepare_ts_us: int
    rollback_ts_us: int
    xid: int
    gid: str


@dataclass(frozen=True)
class StreamPrepare:
    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_ts_us: int
    xid: int
    gid: str


Message = Union[Begin, Commit, Origin, Relation, TypeMessage, Insert, Update, Delete, Truncate,
                LogicalMessage, StreamStart, StreamStop, StreamCommit, StreamAbort, BeginPrepare,
                Prepare, CommitPrepared, RollbackPrepared, StreamPrepare]
