"""PostgreSQL's ``pgoutput`` logical replication messages, decoded (protocol versions 1-4).

Byte layout (PostgreSQL's "Logical Replication Message Formats"; all integers big-endian, a
String is NUL-terminated UTF-8, an LSN is an Int64, a timestamp is Int64 microseconds since
2000-01-01 and is given here as microseconds since the Unix epoch):

    'B' Begin           final_lsn:i64 commit_ts:i64 xid:i32
    'C' Commit          flags:i8 commit_lsn:i64 end_lsn:i64 commit_ts:i64
    'O' Origin          commit_lsn:i64 name:str
    'R' Relation        [xid:i32] oid:i32 namespace:str name:str replica_identity:u8 ncols:i16
                        ncols x (flags:i8 (1 = part of the key) name:str type_oid:i32 typmod:i32)
    'Y' Type            [xid:i32] oid:i32 namespace:str name:str
    'I' Insert          [xid:i32] relation_oid:i32 'N' TupleData
    'U' Update          [xid:i32] relation_oid:i32 ['K'|'O' TupleData] 'N' TupleData
    'D' Delete          [xid:i32] relation_oid:i32 ('K'|'O') TupleData
    'T' Truncate        [xid:i32] nrelations:i32 options:i8 (1 cascade, 2 restart identity)
                        nrelations x oid:i32
    'M' Message         [xid:i32] flags:i8 (1 = transactional) lsn:i64 prefix:str length:i32 bytes
    'S' Stream Start    xid:i32 first_segment:i8                                       (v2+)
    'E' Stream Stop     (empty)                                                        (v2+)
    'c' Stream Commit   xid:i32 flags:i8 commit_lsn:i64 end_lsn:i64 commit_ts:i64      (v2+)
    'A' Stream Abort    xid:i32 subxid:i32 [abort_lsn:i64 abort_ts:i64 (v4, parallel)] (v2+)
    'b' Begin Prepare   prepare_lsn:i64 end_lsn:i64 prepare_ts:i64 xid:i32 gid:str     (v3+)
    'P' Prepare         flags:i8 prepare_lsn:i64 end_lsn:i64 prepare_ts:i64 xid:i32 gid:str
    'K' Commit Prepared flags:i8 commit_lsn:i64 end_lsn:i64 commit_ts:i64 xid:i32 gid:str
    'r' Rollback Prep.  flags:i8 prepare_end_lsn:i64 rollback_end_lsn:i64 prepare_ts:i64
                        rollback_ts:i64 xid:i32 gid:str
    'p' Stream Prepare  same as Prepare

    TupleData           ncols:i16, ncols x ('n' null | 'u' unchanged TOAST |
                                            't' len:i32 text bytes | 'b' len:i32 binary bytes)

``[xid:i32]`` is present only between Stream Start and Stream Stop: whether a message carries it
is not in the message itself, so :class:`PgOutputDecoder` follows the stream state and
:func:`decode` takes it as ``in_stream``. Inside a stream, a change's xid is that of the
(sub)transaction that made it, which is what Stream Abort's ``subxid`` refers to.

Decoding is strict: a message must be consumed exactly, so a truncated or padded payload is a
:class:`PgOutputDecodeError` naming the byte offset, never a half-filled message.
"""
from __future__ import annotations

import struct
from typing import Optional

from broker.errors import RiverlogError
from spark_source.postgres.messages import (  # noqa: F401  (re-exported: the decoder's API)
    UNCHANGED_TOAST, BinaryValue, Value, TupleData, Begin, Commit, Origin, Column, Relation,
    TypeMessage, Insert, Update, Delete, Truncate, LogicalMessage, StreamStart, StreamStop,
    StreamCommit, StreamAbort, BeginPrepare, Prepare, CommitPrepared, RollbackPrepared, StreamPrepare,
    Message)

PG_EPOCH_OFFSET_US = 946_684_800_000_000
"""Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's timestamp epoch."""


class PgOutputDecodeError(RiverlogError):
    """A pgoutput payload does not follow the protocol (truncated, padded, an unknown message or
    tuple kind). ``details`` carry ``offset`` (the byte where decoding stopped) and ``message_type``.
    The WAL is not at fault: check the protocol version the slot was started with."""
    code, name, retriable, grpc_status = 1350, "PGOUTPUT_DECODE", False, "INVALID_ARGUMENT"


_NAMES = {"B": "Begin", "C": "Commit", "O": "Origin", "R": "Relation", "Y": "Type", "I": "Insert",
          "U": "Update", "D": "Delete", "T": "Truncate", "M": "Message", "S": "Stream Start",
          "E": "Stream Stop", "c": "Stream Commit", "A": "Stream Abort", "b": "Begin Prepare",
          "P": "Prepare", "K": "Commit Prepared", "r": "Rollback Prepared", "p": "Stream Prepare"}
_STREAMABLE = frozenset("RYIUDTM")

_I8, _U8, _I16, _I32, _U32, _I64 = (struct.Struct(f) for f in (">b", ">B", ">h", ">i", ">I", ">q"))


class _Reader:
    """A cursor over one payload; every read checks bounds and names the offset when it fails."""

    __slots__ = ("buf", "pos", "kind")

    def __init__(self, buf: bytes, kind: str):
        self.buf, self.pos, self.kind = buf, 1, kind

    def fail(self, what: str, at: Optional[int] = None) -> PgOutputDecodeError:
        at = self.pos if at is None else at
        name = _NAMES.get(self.kind, repr(self.kind))
        return PgOutputDecodeError(f"pgoutput {name} message: {what} at byte offset {at} "
                                   f"(payload is {len(self.buf)} bytes)",
                                   offset=at, message_type=self.kind)

    def _fixed(self, s: struct.Struct, what: str) -> int:
        end = self.pos + s.size
        if end > len(self.buf):
            raise self.fail(f"truncated {what} ({s.size} bytes needed, {len(self.buf) - self.pos} left)")
        (value,) = s.unpack_from(self.buf, self.pos)
        self.pos = end
        return value

    def i8(self, what: str) -> int:
        return self._fixed(_I8, what)

    def u8(self, what: str) -> int:
        return self._fixed(_U8, what)

    def i16(self, what: str) -> int:
        return self._fixed(_I16, what)

    def i32(self, what: str) -> int:
        return self._fixed(_I32, what)

    def u32(self, what: str) -> int:
        """Oids and xids are unsigned 32-bit in PostgreSQL."""
        return self._fixed(_U32, what)

    def i64(self, what: str) -> int:
        return self._fixed(_I64, what)

    def lsn(self, what: str) -> int:
        value = self.i64(what)
        return value & 0xFFFF_FFFF_FFFF_FFFF

    def ts(self, what: str) -> int:
        return self.i64(what) + PG_EPOCH_OFFSET_US

    def char(self, what: str) -> str:
        return chr(self.u8(what))

    def string(self, what: str) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise self.fail(f"{what} has no terminating NUL")
        raw = self.buf[self.pos:end]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not UTF-8 ({e.reason})", self.pos + e.start) from None
        self.pos = end + 1
        return text

    def take(self, n: int, what: str) -> bytes:
        if n < 0:
            raise self.fail(f"negative length {n} for {what}", self.pos - 4)
        end = self.pos + n
        if end > len(self.buf):
            raise self.fail(f"truncated {what} ({n} bytes needed, {len(self.buf) - self.pos} left)")
        data = bytes(self.buf[self.pos:end])
        self.pos = end
        return data

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def tuple_data(self) -> tuple:
        """The hot path: read without per-column checks, and on any inconsistency read again
        slowly (``_tuple_data_checked``) for the precise error."""
        buf, start = self.buf, self.pos
        try:
            (count,) = _I16.unpack_from(buf, start)
            pos, values = start + 2, []
            append = values.append
            for _ in range(count):
                kind = buf[pos]
                if kind == 0x74:                       # 't'
                    (n,) = _I32.unpack_from(buf, pos + 1)
                    end = pos + 5 + n
                    if n < 0 or end > len(buf):
                        raise ValueError
                    append(bytes(buf[pos + 5:end]))
                    pos = end
                elif kind == 0x6E:                     # 'n'
                    append(None)
                    pos += 1
                elif kind == 0x75:                     # 'u'
                    append(UNCHANGED_TOAST)
                    pos += 1
                else:
                    raise ValueError
            if count < 0:
                raise ValueError
        except (ValueError, IndexError, struct.error):
            return self._tuple_data_checked()
        self.pos = pos
        return tuple(values)

    def _tuple_data_checked(self) -> tuple:
        count = self.i16("TupleData column count")
        if count < 0:
            raise self.fail(f"negative TupleData column count {count}", self.pos - 2)
        values = []
        for i in range(count):
            at = self.pos
            kind = self.char(f"kind of column {i}")
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(UNCHANGED_TOAST)
            elif kind == "t":
                values.append(self.take(self.i32(f"length of column {i}"), f"value of column {i}"))
            elif kind == "b":
                values.append(BinaryValue(self.take(self.i32(f"length of column {i}"), f"value of column {i}")))
            else:
                raise self.fail(f"unknown TupleData kind {kind!r} for column {i}", at)
        return tuple(values)

    def expect(self, allowed: str, what: str) -> str:
        at = self.pos
        kind = self.char(what)
        if kind not in allowed:
            raise self.fail(f"expected {what} {' or '.join(map(repr, allowed))}, found {kind!r}", at)
        return kind


def decode(payload: bytes, in_stream: bool = False) -> Message:
    """Decode one pgoutput message. ``in_stream``: the message came between Stream Start and
    Stream Stop, so a Relation/Type/Insert/Update/Delete/Truncate/Message carries an xid first.

    >>> decode(bytes.fromhex("42" "0000000001000028" "0000000000000000" "000002d2"))
    Begin(final_lsn=16777256, commit_ts_us=946684800000000, xid=722)
    """
    if not payload:
        raise PgOutputDecodeError("pgoutput message is empty at byte offset 0; a message starts with its type byte",
                                  offset=0, message_type=None)
    kind = chr(payload[0])
    parse = _PARSERS.get(kind)
    if parse is None:
        raise PgOutputDecodeError(f"unknown pgoutput message type {kind!r} at byte offset 0",
                                  offset=0, message_type=kind)
    r = _Reader(payload, kind)
    xid = r.u32("xid") if in_stream and kind in _STREAMABLE else None
    message = parse(r, xid)
    if r.remaining():
        raise r.fail(f"{r.remaining()} unexpected trailing bytes")
    return message


class PgOutputDecoder:
    """Decodes a replication stream in arrival order, following Stream Start/Stop so that it knows
    which messages carry an xid. One per replication connection; not thread-safe."""

    def __init__(self):
        self.in_stream = False

    def decode(self, payload: bytes) -> Message:
        message = decode(payload, self.in_stream)
        if isinstance(message, StreamStart):
            self.in_stream = True
        elif isinstance(message, StreamStop):
            self.in_stream = False
        return message


def _begin(r: _Reader, xid) -> Begin:
    return Begin(r.lsn("final LSN"), r.ts("commit timestamp"), r.u32("xid"))


def _commit(r: _Reader, xid) -> Commit:
    return Commit(r.i8("flags"), r.lsn("commit LSN"), r.lsn("end LSN"), r.ts("commit timestamp"))


def _origin(r: _Reader, xid) -> Origin:
    return Origin(r.lsn("origin commit LSN"), r.string("origin name"))


def _relation(r: _Reader, xid) -> Relation:
    oid, namespace, name = r.u32("relation oid"), r.string("namespace"), r.string("relation name")
    identity = r.char("replica identity")
    count = r.i16("column count")
    if count < 0:
        raise r.fail(f"negative column count {count}", r.pos - 2)
    columns = tuple(Column(bool(r.i8("column flags") & 1), r.string("column name"), r.u32("column type oid"),
                           r.i32("column type modifier")) for _ in range(count))
    return Relation(oid, namespace, name, identity, columns, xid)


def _type(r: _Reader, xid) -> TypeMessage:
    return TypeMessage(r.u32("type oid"), r.string("namespace"), r.string("type name"), xid)


def _insert(r: _Reader, xid) -> Insert:
    oid = r.u32("relation oid")
    r.expect("N", "new tuple marker")
    return Insert(oid, r.tuple_data(), xid)


def _update(r: _Reader, xid) -> Update:
    oid = r.u32("relation oid")
    marker = r.expect("KON", "tuple marker")
    old = old_kind = None
    if marker != "N":
        old_kind, old = marker, r.tuple_data()
        r.expect("N", "new tuple marker")
    return Update(oid, old, old_kind, r.tuple_data(), xid)


def _delete(r: _Reader, xid) -> Delete:
    oid = r.u32("relation oid")
    kind = r.expect("KO", "old tuple marker")
    return Delete(oid, r.tuple_data(), kind, xid)


def _truncate(r: _Reader, xid) -> Truncate:
    count = r.i32("relation count")
    if count < 0:
        raise r.fail(f"negative relation count {count}", r.pos - 4)
    options = r.i8("options")
    return Truncate(options, tuple(r.u32("relation oid") for _ in range(count)), xid)


def _message(r: _Reader, xid) -> LogicalMessage:
    flags, lsn, prefix = r.i8("flags"), r.lsn("message LSN"), r.string("prefix")
    return LogicalMessage(flags, lsn, prefix, r.take(r.i32("content length"), "content"), xid)


def _stream_start(r: _Reader, xid) -> StreamStart:
    return StreamStart(r.u32("xid"), r.i8("first segment flag") == 1)


def _stream_stop(r: _Reader, xid) -> StreamStop:
    return StreamStop()


def _stream_commit(r: _Reader, xid) -> StreamCommit:
    return StreamCommit(r.u32("xid"), r.i8("flags"), r.lsn("commit LSN"), r.lsn("end LSN"),
                        r.ts("commit timestamp"))


def _stream_abort(r: _Reader, xid) -> StreamAbort:
    top, sub = r.u32("xid"), r.u32("subtransaction xid")
    if r.remaining() == 0:
        return StreamAbort(top, sub)
    return StreamAbort(top, sub, r.lsn("abort LSN"), r.ts("abort timestamp"))


def _begin_prepare(r: _Reader, xid) -> BeginPrepare:
    return BeginPrepare(r.lsn("prepare LSN"), r.lsn("end LSN"), r.ts("prepare timestamp"), r.u32("xid"),
                        r.string("gid"))


def _prepare_fields(r: _Reader) -> tuple:
    return (r.i8("flags"), r.lsn("prepare LSN"), r.lsn("end LSN"), r.ts("prepare timestamp"), r.u32("xid"),
            r.string("gid"))


def _prepare(r: _Reader, xid) -> Prepare:
    return Prepare(*_prepare_fields(r))


def _stream_prepare(r: _Reader, xid) -> StreamPrepare:
    return StreamPrepare(*_prepare_fields(r))


def _commit_prepared(r: _Reader, xid) -> CommitPrepared:
    return CommitPrepared(r.i8("flags"), r.lsn("commit LSN"), r.lsn("end LSN"), r.ts("commit timestamp"),
                          r.u32("xid"), r.string("gid"))


def _rollback_prepared(r: _Reader, xid) -> RollbackPrepared:
    return RollbackPrepared(r.i8("flags"), r.lsn("prepare end LSN"), r.lsn("rollback end LSN"),
                            r.ts("prepare timestamp"), r.ts("rollback timestamp"), r.u32("xid"), r.string("gid"))


_PARSERS = {"B": _begin, "C": _commit, "O": _origin, "R": _relation, "Y": _type, "I": _insert, "U": _update,
            "D": _delete, "T": _truncate, "M": _message, "S": _stream_start, "E": _stream_stop,
            "c": _stream_commit, "A": _stream_abort, "b": _begin_prepare, "P": _prepare, "K": _commit_prepared,
            "r": _rollback_prepared, "p": _stream_prepare}


def lsn_to_str(lsn: int) -> str:
    """PostgreSQL's text form of an LSN (``0/16B3748``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_from_str(text: str) -> int:
    """Parse ``XXX/XXX`` (as ``pg_current_wal_lsn()`` prints it) into an integer LSN."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)
