"""Whole committed transactions out of a pgoutput message stream.

pgoutput sends a transaction as Begin, changes, Commit — unless it is large and the slot was
started with ``streaming``, in which case its changes arrive early in chunks (Stream Start ..
Stream Stop), interleaved with other transactions, and are decided by Stream Commit or Stream
Abort (of the whole transaction, or of one subtransaction, whose changes alone are dropped).
Two-phase transactions (protocol v3) are held from Prepare until Commit/Rollback Prepared.

The assembler emits a transaction only once it is committed, so everything downstream sees
committed data in commit order, each change numbered by its position (``order``) and carrying the
LSN it arrived at. Relations (and types) are remembered across transactions: a Relation message
after DDL replaces the old one, and each change keeps the Relation that was current when it
arrived. A non-transactional logical message (a heartbeat from ``pg_logical_emit_message(false,
…)``) comes out at once as a transaction of its own with ``xid`` None, so its LSN can be
acknowledged.

With ``compact`` the changes are held as their pgoutput bytes
(:class:`~spark_source.postgres.change_buffer.ChangeBuffer`, spilled to a file past
``spill_bytes``) and decoded each time the transaction's ``changes`` are read; ``feed`` then takes
each message's payload too.

    assembler = TransactionAssembler(compact=True)
    for payload, wal_start in replication_messages:
        for txn in assembler.feed(decoder.decode(payload), wal_start, payload):
            handle(txn)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

from broker.errors import RiverlogError
from spark_source.postgres.change_buffer import ChangeBuffer
from spark_source.postgres.pgoutput import (Begin, BeginPrepare, Commit, CommitPrepared, Delete, Insert,
                                            LogicalMessage, Message, Origin, Prepare, Relation,
                                            RollbackPrepared, StreamAbort, StreamCommit, StreamPrepare,
                                            StreamStart, StreamStop, Truncate, TypeMessage, Update)


class UnknownRelationError(RiverlogError):
    """A change names a relation oid no Relation message described: the stream did not start where
    pgoutput's session started (pgoutput sends each Relation before its first change)."""
    code, name, retriable, grpc_status = 1352, "CDC_UNKNOWN_RELATION", False, "FAILED_PRECONDITION"


class TransactionSequenceError(RiverlogError):
    """Messages out of the protocol's order (a change outside a transaction, a Commit without a
    Begin, a Begin inside a transaction). ``details["lsn"]`` is where it was found."""
    code, name, retriable, grpc_status = 1353, "CDC_TRANSACTION_SEQUENCE", False, "FAILED_PRECONDITION"


_KINDS = {Insert: "insert", Update: "update", Delete: "delete", Truncate: "truncate", LogicalMessage: "message"}


@dataclass(frozen=True)
class Change:
    """One change of a committed transaction. ``relation`` is None for a logical message; a Truncate
    of several tables becomes one Change per table, each with its own ``order``."""
    relation: Optional[Relation]
    order: int
    lsn: int
    message: Message
    xid: Optional[int] = None

    @property
    def kind(self) -> str:
        """'insert', 'update', 'delete', 'truncate' or 'message'."""
        return _KINDS[type(self.message)]

    @property
    def old(self) -> Optional[tuple]:
        return getattr(self.message, "old", None)

    @property
    def old_kind(self) -> Optional[str]:
        return getattr(self.message, "old_kind", None)

    @property
    def new(self) -> Optional[tuple]:
        return getattr(self.message, "new", None)


class ChangeList:
    """A compact transaction's changes: a sequence read in order (any number of times), decoded
    as it is read."""

    def __init__(self, buffer: ChangeBuffer):
        self.buffer = buffer

    def __len__(self) -> int:
        return len(self.buffer)

    def __iter__(self) -> Iterator[Change]:
        for i, (rel, lsn, msg, xid) in enumerate(self.buffer.entries()):
            yield Change(rel, i, lsn, msg, xid)

    def relations(self) -> Iterator[Relation]:
        """The distinct Relations of the changes, in order of first use (none decoded)."""
        return self.buffer.relations()

    def __eq__(self, other) -> bool:
        return isinstance(other, (list, ChangeList)) and len(self) == len(other) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"ChangeList({len(self)} changes{', spilled' if self.buffer.spilled else ''})"


@dataclass(frozen=True)
class Transaction:
    """A committed transaction. ``end_lsn`` is the offset to acknowledge once it is stored; it is
    also what ``riverlog.cdc.commit_lsn`` carries."""
    xid: Optional[int]
    commit_lsn: int
    end_lsn: int
    commit_ts_us: Optional[int]
    changes: list
    origin: Optional[str] = None
    streamed: bool = False

    def release(self) -> None:
        """Free what a compact transaction holds (its spill file) once it is stored or dropped."""
        if isinstance(self.changes, ChangeList):
            self.changes.buffer.close()


@dataclass
class _Pending:
    xid: int
    changes: object = field(default_factory=list)   # (relation, lsn, message, change xid), or a ChangeBuffer
    origin: Optional[str] = None
    begin_lsn: Optional[int] = None


class TransactionAssembler:
    """Pure state machine: messages in arrival order in, committed transactions out. Not thread-safe.

    ``relations``/``types`` are the latest Relation and Type per oid."""

    def __init__(self, compact: bool = False, spill_bytes: Optional[int] = None, spill_dir: Optional[str] = None):
        self.compact, self.spill_bytes, self.spill_dir = compact, spill_bytes, spill_dir
        self._payload: Optional[bytes] = None              # the message being fed, when compact
        self.relations: dict[int, Relation] = {}
        self.types: dict[int, TypeMessage] = {}
        self._current: Optional[_Pending] = None        # between Begin (or Begin Prepare) and Commit
        self._streams: dict[int, _Pending] = {}          # streamed, undecided, by top-level xid
        self._stream_xid: Optional[int] = None           # between Stream Start and Stream Stop
        self._prepared: dict[str, _Pending] = {}         # by gid, until Commit/Rollback Prepared

    @property
    def in_transaction(self) -> bool:
        return self._current is not None

    def pending_xids(self) -> list[int]:
        """Streamed transactions started and not yet decided (their changes are held)."""
        return list(self._streams)

    def assemble(self, messages: Iterable[tuple]) -> Iterator[Transaction]:
        """``(message, lsn)`` pairs in, committed transactions out, lazily."""
        for message, lsn in messages:
            yield from self.feed(message, lsn)

    def feed(self, message: Message, lsn: int, payload: Optional[bytes] = None) -> list[Transaction]:
        """Take one message, the LSN it arrived at (``wal_start``) and, when ``compact``, the
        bytes it was decoded from; return the transactions it completed (usually none or one)."""
        handler = _HANDLERS.get(type(message))
        if handler is None:
            raise TransactionSequenceError(f"not a pgoutput message: {type(message).__name__}", lsn=lsn)
        if self.compact and payload is None:
            raise TypeError("a compact TransactionAssembler needs each message's payload")
        self._payload = payload
        return handler(self, message, lsn) or []

    def _pending(self, xid: int, begin_lsn: Optional[int] = None) -> _Pending:
        changes = ChangeBuffer(self.spill_bytes, self.spill_dir) if self.compact else []
        return _Pending(xid, changes, begin_lsn=begin_lsn)

    def _add(self, target: _Pending, relation: Optional[Relation], lsn: int, m: Message) -> None:
        if isinstance(target.changes, ChangeBuffer):
            target.changes.append(relation, lsn, self._payload, m.xid, self._stream_xid is not None)
        else:
            target.changes.append((relation, lsn, m, m.xid))

    # -- schema ---------------------------------------------------------------------------------
    def _relation(self, m: Relation, lsn: int):
        self.relations[m.oid] = m

    def _type(self, m: TypeMessage, lsn: int):
        self.types[m.oid] = m

    # -- ordinary transactions ------------------------------------------------------------------
    def _begin(self, m: Begin, lsn: int):
        if self._current is not None:
            raise TransactionSequenceError(f"Begin of xid {m.xid} inside xid {self._current.xid}", lsn=lsn)
        self._current = self._pending(m.xid, begin_lsn=lsn)

    def _origin(self, m: Origin, lsn: int):
        if self._current is not None:
            self._current.origin = m.name
        elif self._stream_xid is not None:
            self._streams[self._stream_xid].origin = m.name

    def _commit(self, m: Commit, lsn: int):
        pending = self._take_current("Commit", lsn)
        return [self._emit(pending, m.commit_lsn, m.end_lsn, m.commit_ts_us, streamed=False)]

    def _take_current(self, what: str, lsn: int) -> _Pending:
        if self._current is None:
            raise TransactionSequenceError(f"{what} at LSN {lsn} without a Begin", lsn=lsn)
        pending, self._current = self._current, None
        return pending

    def _change(self, m, lsn: int):
        if isinstance(m, LogicalMessage) and not m.transactional:
            change = Change(None, 0, m.lsn, m, m.xid)
            return [Transaction(None, m.lsn, m.lsn, None, [change])]
        if m.xid is not None and self._stream_xid is not None:
            target = self._streams[self._stream_xid]
        elif self._current is not None:
            target = self._current
        else:
            raise TransactionSequenceError(
                f"{type(m).__name__} at LSN {lsn} outside a transaction", lsn=lsn)
        if isinstance(m, Truncate):
            for oid in m.relation_oids:
                self._add(target, self._lookup(oid, lsn), lsn, m)
        elif isinstance(m, LogicalMessage):
            self._add(target, None, lsn, m)
        else:
            self._add(target, self._lookup(m.relation_oid, lsn), lsn, m)
        return None

    def _lookup(self, oid: int, lsn: int) -> Relation:
        relation = self.relations.get(oid)
        if relation is None:
            raise UnknownRelationError(f"change at LSN {lsn} for relation oid {oid}, which no Relation "
                                       "message described; restart streaming from the slot", oid=oid, lsn=lsn)
        return relation

    def _emit(self, pending: _Pending, commit_lsn: int, end_lsn: int, ts: int, streamed: bool) -> Transaction:
        if isinstance(pending.changes, ChangeBuffer):
            changes = ChangeList(pending.changes)
        else:
            changes = [Change(rel, i, lsn, msg, xid) for i, (rel, lsn, msg, xid) in enumerate(pending.changes)]
        return Transaction(pending.xid, commit_lsn, end_lsn, ts, changes, pending.origin, streamed)

    # -- streamed transactions (protocol v2+) ---------------------------------------------------
    def _stream_start(self, m: StreamStart, lsn: int):
        if self._stream_xid is not None or self._current is not None:
            raise TransactionSequenceError(f"Stream Start of xid {m.xid} inside another transaction", lsn=lsn)
        self._stream_xid = m.xid
        if m.xid not in self._streams:
            self._streams[m.xid] = self._pending(m.xid)

    def _stream_stop(self, m: StreamStop, lsn: int):
        if self._stream_xid is None:
            raise TransactionSequenceError("Stream Stop without a Stream Start", lsn=lsn)
        self._stream_xid = None

    def _stream_commit(self, m: StreamCommit, lsn: int):
        pending = self._streams.pop(m.xid, None) or self._pending(m.xid)
        return [self._emit(pending, m.commit_lsn, m.end_lsn, m.commit_ts_us, streamed=True)]

    def _stream_abort(self, m: StreamAbort, lsn: int):
        if m.subxid == m.xid:
            _drop(self._streams.pop(m.xid, None))
        elif m.xid in self._streams:
            pending = self._streams[m.xid]
            if isinstance(pending.changes, ChangeBuffer):
                pending.changes.drop_xid(m.subxid)
            else:
                pending.changes = [c for c in pending.changes if c[3] != m.subxid]

    # -- two-phase (protocol v3+) ---------------------------------------------------------------
    def _begin_prepare(self, m: BeginPrepare, lsn: int):
        if self._current is not None:
            raise TransactionSequenceError(f"Begin Prepare of xid {m.xid} inside xid {self._current.xid}", lsn=lsn)
        self._current = self._pending(m.xid, begin_lsn=lsn)

    def _prepare(self, m: Prepare, lsn: int):
        self._prepared[m.gid] = self._take_current("Prepare", lsn)

    def _stream_prepare(self, m: StreamPrepare, lsn: int):
        self._prepared[m.gid] = self._streams.pop(m.xid, None) or self._pending(m.xid)

    def _commit_prepared(self, m: CommitPrepared, lsn: int):
        pending = self._prepared.pop(m.gid, None) or self._pending(m.xid)
        return [self._emit(pending, m.commit_lsn, m.end_lsn, m.commit_ts_us, streamed=False)]

    def _rollback_prepared(self, m: RollbackPrepared, lsn: int):
        _drop(self._prepared.pop(m.gid, None))


def _drop(pending: Optional[_Pending]) -> None:
    if pending is not None and isinstance(pending.changes, ChangeBuffer):
        pending.changes.close()


_HANDLERS = {Relation: TransactionAssembler._relation, TypeMessage: TransactionAssembler._type,
             Begin: TransactionAssembler._begin, Origin: TransactionAssembler._origin,
             Commit: TransactionAssembler._commit, Insert: TransactionAssembler._change,
             Update: TransactionAssembler._change, Delete: TransactionAssembler._change,
             Truncate: TransactionAssembler._change, LogicalMessage: TransactionAssembler._change,
             StreamStart: TransactionAssembler._stream_start, StreamStop: TransactionAssembler._stream_stop,
             StreamCommit: TransactionAssembler._stream_commit, StreamAbort: TransactionAssembler._stream_abort,
             BeginPrepare: TransactionAssembler._begin_prepare, Prepare: TransactionAssembler._prepare,
             StreamPrepare: TransactionAssembler._stream_prepare,
             CommitPrepared: TransactionAssembler._commit_prepared,
             RollbackPrepared: TransactionAssembler._rollback_prepared}
