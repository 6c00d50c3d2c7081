"""The replication stream: pgoutput over psycopg2's ``LogicalReplicationConnection``.

``START_REPLICATION SLOT … LOGICAL <lsn> (proto_version '1', publication_names '…', messages
'true')``; each message's payload goes through the decoder into the
:class:`~spark_source.postgres.transactions.TransactionAssembler`, which hands back whole
committed transactions in commit order, each held compact (its changes' pgoutput bytes, in a
temporary file past ``transaction.spill.threshold.bytes``). They are buffered here until the data source hands them
to Spark; a transaction whose commit end LSN is not above the highest already taken is a replay
(after a reconnect the server starts again at the slot's confirmed position) and is dropped.

Acknowledgement: :meth:`acknowledge` sends ``flush_lsn`` at once (``force=True``: lazy feedback
is lost if the connection closes first) and is only ever called with the end of a batch Spark has
committed, so the slot never moves past data not yet stored, and a crash replays, never skips.
psycopg2 answers the server's keepalives with the last flush position it was given; when
everything received was acknowledged it may report the keepalive's WAL end, which holds no
change for this slot.

Faults: a connection that breaks (a server restart or crash, a terminated walsender) is opened
again at the last position acknowledged (never past a buffered transaction: see
:attr:`ReplicationStream.resume_lsn`), retried for up to ``RECONNECT_TIMEOUT_S``; buffered
transactions stay. A server error that reconnecting cannot mend — the slot dropped or
invalidated, the publication missing — is typed (``CDC_SLOT_LOST``, ``CDC_PUBLICATION``).

Heartbeats: every ``heartbeat.interval.ms`` a non-transactional
``pg_logical_emit_message(false, 'riverlog.heartbeat', '')`` is written. It comes back through the
stream as a position without rows, so an idle database, or one whose writes all go to tables that
are not captured, still gives the query an offset to commit and the slot a position to confirm:
``restart_lsn`` moves and PostgreSQL can recycle its WAL. ``heartbeat.action.query`` runs just
before each, on the same connection, as Debezium's ``DatabaseHeartbeatImpl`` runs it; one that
fails is logged and the heartbeat goes on.
"""
from __future__ import annotations

import logging
import select
import time

from spark_source.postgres.catalog_session import reconnect
from spark_source.postgres.change_buffer import check_spill_dir
from spark_source.postgres.errors import (PostgresConnectionError, PublicationError, SlotInUseError,
                                          SlotLostError)
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.pgoutput import LogicalMessage, PgOutputDecoder, lsn_from_str, lsn_to_str
from spark_source.postgres.slot import connect
from spark_source.postgres.transactions import Transaction, TransactionAssembler

log = logging.getLogger(__name__)

HEARTBEAT_PREFIX = "riverlog.heartbeat"
PROTO_VERSION = "1"


def _connection_broke(error, conn) -> bool:
    """The replication connection is gone (a server restart, a terminated walsender): psycopg2
    says so with OperationalError or InterfaceError, or, when the server closed the COPY under it,
    with a client-side DatabaseError ("no COPY in progress") that carries no SQLSTATE."""
    import psycopg2
    return (isinstance(error, (psycopg2.OperationalError, psycopg2.InterfaceError)) or error.pgcode is None
            or conn is None or bool(conn.closed))


def _stream_failed(slot: str, error) -> Exception:
    """A server error on a live replication connection, typed: the slot invalidated or dropped
    (``CDC_SLOT_LOST``), the publication dropped (``CDC_PUBLICATION``), anything else
    ``CDC_CONNECTION``."""
    text = str(error).strip()
    if "replication slot" in text and any(why in text for why in ("can no longer", "invalidated", "does not exist")):
        return SlotLostError(f"replication slot '{slot}' lost its WAL or was dropped while streaming ({text}): "
                             "changes after the query's offsets are gone; restart the query with a new checkpoint "
                             "(snapshot.mode=initial) or use snapshot.mode=when_needed")
    if "publication" in text and "does not exist" in text:
        return PublicationError(f"the publication of slot '{slot}' was dropped while streaming ({text}): create it "
                                "again (or set publication.autocreate.mode=all_tables or filtered) and restart the "
                                "query; changes committed while it was missing are not in the stream")
    return PostgresConnectionError(f"streaming from slot '{slot}' failed: {text}")


def is_heartbeat(txn: Transaction) -> bool:
    """A position without data: our heartbeat, or any other message outside a transaction."""
    return txn.xid is None and all(isinstance(c.message, LogicalMessage) for c in txn.changes)


def emit_heartbeat(conn) -> int:
    """Write a heartbeat message to the WAL (not in a transaction); its LSN, which is past every
    transaction committed before the call."""
    with conn.cursor() as cur:
        cur.execute("SELECT pg_logical_emit_message(false, %s, '')::text", (HEARTBEAT_PREFIX,))
        return lsn_from_str(cur.fetchone()[0])


class ReplicationStream:
    """One replication connection and what it has delivered. Driver-side, single-threaded: call
    :meth:`poll` often (it also answers keepalives). ``buffer`` holds committed transactions (and
    heartbeat positions) with ``end_lsn`` above ``taken_up_to``, in commit order."""

    def __init__(self, options: CdcOptions, start_lsn: int, clock=time.monotonic):
        self.options = options
        self.clock = clock
        self.start_lsn = start_lsn
        self.high = start_lsn          # the highest end LSN received
        self.acked = 0                 # the highest LSN acknowledged to the server
        self.buffer: list[Transaction] = []
        self._buffered = 0             # changes in ``buffer``, kept as it changes: poll checks it per message
        self._conn = self._cursor = None
        self._decoder = None           # set once streaming started
        self._next_heartbeat = 0.0
        self._sql = None

    # ------------------------------------------------------------------------------ connection
    def open(self, in_use_timeout_s: float = 30.0) -> None:
        """Start streaming; a slot still held by a reader that is going away (a stopped query's
        connection) is waited for up to ``in_use_timeout_s``."""
        check_spill_dir(self.options.spill_dir)
        deadline = self.clock() + in_use_timeout_s
        while True:
            try:
                return self._open()
            except SlotInUseError:
                if self.clock() > deadline:
                    raise
                time.sleep(0.2)

    def reopen(self, why: str) -> None:
        """Stream again after the connection broke (the server restarted, the walsender was
        terminated): retried for up to ``RECONNECT_TIMEOUT_S`` while the server is unreachable or
        the old walsender still holds the slot. Resumes at the last position acknowledged; what was
        buffered stays and the replays of it are dropped. A slot that is gone is ``SlotLostError`` at once."""
        log.warning("replication connection of slot '%s' broke (%s); reconnecting at %s",
                    self.options.slot_name, why, lsn_to_str(self.resume_lsn))
        self._close_connection()
        reconnect(self._open, f"the replication connection of slot '{self.options.slot_name}'", why, self.clock,
                  (PostgresConnectionError, SlotInUseError))

    def _open(self) -> None:
        import psycopg2
        self._conn = connect(self.options, replication=True)
        self._cursor = self._conn.cursor()
        start = self.resume_lsn
        try:
            self._cursor.start_replication(
                slot_name=self.options.slot_name, decode=False, start_lsn=start,
                options={"proto_version": PROTO_VERSION, "publication_names": self.options.publication_name,
                         "messages": "true"})
        except psycopg2.errors.ObjectInUse:
            self._close_connection()
            raise SlotInUseError(f"slot '{self.options.slot_name}' is in use by another process (one reader per "
                                 "slot): stop the other query or connector, or choose another slot.name") from None
        except psycopg2.errors.UndefinedObject as e:
            self._close_connection()
            if "publication" in str(e):
                raise _stream_failed(self.options.slot_name, e) from None
            raise SlotLostError(f"replication slot '{self.options.slot_name}' does not exist ({str(e).strip()}): "
                                "it was dropped, so changes after the query's offsets are gone; restart the query "
                                "with a new checkpoint (snapshot.mode=initial) or use snapshot.mode=when_needed") \
                from None
        except psycopg2.Error as e:
            self._close_connection()
            failed = _stream_failed(self.options.slot_name, e)
            if isinstance(failed, PostgresConnectionError):
                failed = PostgresConnectionError(f"START_REPLICATION on slot '{self.options.slot_name}' failed: "
                                                 f"{str(e).strip()}")
            raise failed from None
        self._decoder = PgOutputDecoder()
        self._assembler = TransactionAssembler(compact=True, spill_bytes=self.options.spill_threshold_bytes,
                                               spill_dir=self.options.spill_dir)
        if self.acked:
            self._feedback(self.acked)
        log.info("streaming slot '%s' from %s", self.options.slot_name, lsn_to_str(start))

    @property
    def resume_lsn(self) -> int:
        """Where a (re)opened connection starts: the last acknowledged position, never the last
        one received. Started past transactions that are buffered but not yet stored, the server
        skips them and its keepalives carry a WAL end past them; psycopg2 reports such a WAL end as
        flushed once no data message arrived since the last acknowledgement, so the slot would
        confirm them and a crash would lose them. Resent, they are dropped as replays."""
        return max(self.acked, self.start_lsn)

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    def _close_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 — already broken
                pass
        self._conn = self._cursor = None

    def close(self) -> None:
        self._close_connection()
        for txn in self.buffer:
            txn.release()
        if self._sql is not None:
            self._sql.close()
            self._sql = None

    # ------------------------------------------------------------------------------ reading
    def poll(self, budget_s: float = 0.2, max_buffered: int | None = None, until_lsn: int | None = None) -> int:
        """Read what the server has sent, for up to ``budget_s`` seconds while messages keep
        coming, and no further than ``until_lsn`` once a position at or past it arrived; returns
        how many transactions were added. A broken connection is reopened at the last
        acknowledged position (what was buffered stays; replays are dropped)."""
        import psycopg2
        if self._conn is None:
            if self._decoder is None:
                self.open()
            else:   # it was open and broke (an acknowledgement failed): the server may be restarting
                self.reopen("closed after a failed acknowledgement")
        self._maybe_heartbeat()
        added, deadline = 0, self.clock() + budget_s
        try:
            while (max_buffered is None or self.buffered_changes() < max_buffered) and \
                    (until_lsn is None or self.high < until_lsn):
                message = self._cursor.read_message()
                if message is None:
                    remaining = deadline - self.clock()
                    if remaining <= 0:
                        break
                    ready = select.select([self._conn], [], [], min(remaining, 0.05))[0]
                    if not ready and added:
                        break
                    continue
                payload = message.payload
                for txn in self._assembler.feed(self._decoder.decode(payload), message.data_start, payload):
                    if txn.end_lsn > self.high:
                        self.buffer.append(txn)
                        self._buffered += len(txn.changes)
                        self.high = txn.end_lsn
                        added += 1
                    else:
                        txn.release()
        except psycopg2.Error as e:
            if not _connection_broke(e, self._conn):
                raise _stream_failed(self.options.slot_name, e) from None
            self.reopen(str(e).strip())
        return added

    def buffered_changes(self) -> int:
        return self._buffered

    def take(self, after: int, until: int) -> list[Transaction]:
        """Buffered transactions with ``after < end_lsn <= until``."""
        return [t for t in self.buffer if after < t.end_lsn <= until]

    def forget(self, up_to: int) -> None:
        """Drop buffered transactions that Spark has committed."""
        for txn in self.buffer:
            if txn.end_lsn <= up_to:
                txn.release()
        self.buffer = [t for t in self.buffer if t.end_lsn > up_to]
        self._buffered = sum(len(t.changes) for t in self.buffer)

    def wait_for(self, lsn: int, timeout_s: float = 120.0) -> None:
        """Read until a position at or past ``lsn`` arrived (a batch replayed after a restart), and
        no further: a backlog behind the batch waits in the slot, not in the driver's memory."""
        deadline = self.clock() + timeout_s
        while self.high < lsn:
            if self.clock() > deadline:
                raise SlotLostError(f"slot '{self.options.slot_name}' did not deliver changes up to "
                                    f"{lsn_to_str(lsn)} within {timeout_s:.0f} s (it is at {lsn_to_str(self.high)}); "
                                    "the batch Spark replays cannot be rebuilt")
            self.poll(0.5, until_lsn=lsn)

    # ------------------------------------------------------------------------------ acknowledging
    def acknowledge(self, lsn: int) -> None:
        """Tell the server everything up to ``lsn`` is stored (never more than Spark committed)."""
        if lsn <= self.acked:
            return
        self.acked = lsn
        self.forget(lsn)
        if self._conn is not None:
            self._feedback(lsn)

    def _feedback(self, lsn: int) -> None:
        import psycopg2
        try:
            self._cursor.send_feedback(write_lsn=lsn, flush_lsn=lsn, apply_lsn=lsn, force=True)
        except psycopg2.Error as e:
            if not _connection_broke(e, self._conn):
                raise _stream_failed(self.options.slot_name, e) from None
            log.warning("could not acknowledge %s on slot '%s' (%s); it is sent again on reconnect",
                        lsn_to_str(lsn), self.options.slot_name, str(e).strip())
            self._close_connection()

    # ------------------------------------------------------------------------------ heartbeats
    def _maybe_heartbeat(self) -> None:
        interval = self.options.heartbeat_interval_ms
        if not interval or self.clock() < self._next_heartbeat:
            return
        self._next_heartbeat = self.clock() + interval / 1000
        self.heartbeat()

    def _action_query(self) -> None:
        import psycopg2
        try:
            with self._sql.cursor() as cur:
                cur.execute(self.options.heartbeat_action_query)
        except psycopg2.Error as e:
            if _connection_broke(e, self._sql):
                raise
            log.warning("heartbeat.action.query on slot '%s' failed: %s", self.options.slot_name, str(e).strip())

    def heartbeat(self) -> None:
        import psycopg2
        try:
            if self._sql is None:
                self._sql = connect(self.options)
            if self.options.heartbeat_action_query:
                self._action_query()
            emit_heartbeat(self._sql)
        except (psycopg2.Error, PostgresConnectionError) as e:
            log.warning("heartbeat on slot '%s' failed: %s", self.options.slot_name, str(e).strip())
            if self._sql is not None:
                self._sql.close()
            self._sql = None
