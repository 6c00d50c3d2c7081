"""The capture: slot, snapshot and stream driven by offsets, independent of Spark.

Offsets (:class:`~spark_source.postgres.cdc_offset.CdcOffset`) say how far the query has read.

A query's first batch runs from ``new`` to where the new query starts and holds no records:
Spark asks for the initial offset again when that batch is replayed after a crash, and an answer
that created a slot and exported a snapshot would differ each time (the old slot dropped, the
batch's recorded end pointing into it). ``new`` is the same every time; the slot and snapshot
are made once, when the first batch is planned, and the batch's end records them.

A new query starts as ``snapshot.mode`` says, or, given ``startingOffsets`` (a Debezium source
offset, e.g. the one a Connect worker kept), where that offset says (:meth:`Capture._resume`).
C is the slot's consistent point: the snapshot holds what committed before it, the stream starts
there. :meth:`Capture.next_offset` reads ahead (a chunk of the snapshot, or buffered transactions
up to a change limit, whole transactions only) and returns the end of the next batch;
:meth:`Capture.records` gives the batch between two offsets — from what was read ahead, or, when
Spark replays a batch after a restart, read again (the snapshot range in a fresh snapshot, the
transactions from the slot, which was never acknowledged past the start of an uncommitted
batch). :meth:`Capture.acknowledge` is called only with the end of a batch Spark committed.
"""
from __future__ import annotations

import logging
from typing import Iterator

from spark_source.postgres import slot as slots
from spark_source.postgres.catalog_session import CatalogSession
from spark_source.postgres.cdc_offset import DONE, NEW, SNAPSHOT, STREAM, CdcOffset  # noqa: F401 (public here)
from spark_source.postgres.debezium_offset import resume_from, resumed
from spark_source.postgres.envelope import CdcRecord, EnvelopeBuilder
from spark_source.postgres.errors import PublicationError, SlotLostError
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.pgoutput import lsn_to_str
from spark_source.postgres.replication import ReplicationStream
from spark_source.postgres.snapshot import Position, SnapshotReader, snapshot_markers
from spark_source.postgres.type_registry import TypeRegistry

log = logging.getLogger(__name__)


class Capture:
    """Driver-side, single-threaded. ``close()`` releases every connection (and drops the slot
    with ``slot.drop.on.stop``)."""

    def __init__(self, options: CdcOptions):
        self.options = options
        self._session = CatalogSession(options, setup=self._setup)
        self.tables: list[slots.Table] = []
        self._exported: SnapshotReader | None = None   # the slot's exported snapshot, while unread
        self._exported_lsn: int | None = None
        self.stream: ReplicationStream | None = None
        self._chunks: dict[tuple[str, str], list] = {}  # snapshot rows read ahead, by (start, end)
        self._initial: CdcOffset | None = None
        self._catalog: dict[int, tuple] = {}   # oid -> (the Relation message last described, its catalog Table)
        self._types: TypeRegistry | None = None   # the catalog's user types (domains, enums, hstore, ...)
        self._publication_checked = float("-inf")

    # ------------------------------------------------------------------------------ setup
    def _setup(self, conn) -> None:
        slots.check_server(conn, self.options)
        self.tables = slots.captured_tables(conn, self.options)
        slots.ensure_publication(conn, self.options, self.tables)

    @property
    def sql(self):
        return self._session.conn

    def _run(self, fn, *args):
        """``fn(connection, *args)`` on the catalog connection, connected again after a server restart."""
        self._session.conn   # noqa: B018 — the first connection checks the server and the publication
        return self._session.run(fn, *args)

    @property
    def types(self) -> TypeRegistry:
        if self._types is None:
            self._types = self._run(TypeRegistry.load)
        return self._types

    def initial_offset(self) -> CdcOffset:
        """Where a new query starts: creates the slot (exporting a snapshot unless ``no_data``).
        Made once per capture; the end of the query's first batch (see ``NEW``)."""
        if self._initial is None:
            self._initial = self._make_initial_offset()
        return self._initial

    def _make_initial_offset(self) -> CdcOffset:
        o = self.options
        state = self._run(slots.slot_state, o.slot_name)
        if o.starting_offset is not None:
            resuming = resume_from(o.starting_offset, state, o)
            if resuming is not None:
                return resuming
        if o.snapshot_mode == "no_data":
            if state is not None:
                slots.check_slot(state, o)
                return CdcOffset(STREAM, state.confirmed_flush_lsn)
            repl = slots.connect(o, replication=True)
            try:
                lsn, _ = slots.create_slot(repl, o.slot_name)
            finally:
                repl.close()
            return CdcOffset(STREAM, lsn)
        return self._new_snapshot(state)

    def _new_snapshot(self, state) -> CdcOffset:
        o = self.options
        if self.stream is not None:       # positions of the slot being replaced mean nothing now
            self.stream.close()
            self.stream = None
        if state is not None:
            slots.check_slot(state, o)
            log.warning("slot '%s' exists; a new query that snapshots starts it again", o.slot_name)
            self._run(slots.drop_slot, o.slot_name, 10)
        repl = slots.connect(o, replication=True)
        try:
            lsn, name = slots.create_slot(repl, o.slot_name, temporary=o.snapshot_mode == "initial_only")
            self._close_exported()
            self._exported = SnapshotReader(slots.connect(o), self.tables, name)
            self._exported_lsn = lsn
        finally:
            repl.close()   # the snapshot is imported; a temporary slot goes with this connection
        log.info("slot '%s' created at %s; snapshot of %d tables", o.slot_name, lsn_to_str(lsn), len(self.tables))
        return CdcOffset(SNAPSHOT, lsn, tuple(t.name for t in self.tables), Position(0), 0)

    def _tables_named(self, names: tuple) -> list[slots.Table]:
        by_name = {t.name: t for t in self.tables}
        missing = [n for n in names if n not in by_name]
        if missing:
            self.tables = self._run(slots.captured_tables, self.options)
            by_name = {t.name: t for t in self.tables}
        return [by_name[n] for n in names if n in by_name]

    def _check_resumable(self, start: CdcOffset) -> CdcOffset | None:
        """The slot behind ``start`` must still exist; with ``when_needed`` a lost slot means a new
        snapshot (returned), otherwise the query fails naming the fix."""
        if start.phase == DONE or (start.phase == SNAPSHOT and self._exported_lsn == start.lsn):
            return None
        if start.phase == SNAPSHOT and self.options.snapshot_mode == "initial_only":
            return None   # its slot was temporary and nothing streams after the snapshot
        if self.stream is not None and self.stream.is_open:
            return None
        state = self._run(slots.slot_state, self.options.slot_name)
        # While streaming, psycopg2 may confirm a keepalive's WAL end once everything received was
        # acknowledged (WAL with nothing for this slot), so confirmed_flush_lsn past the offset is
        # no loss then; during the snapshot nothing is acknowledged, so there it is.
        lost = state is None or state.wal_status == "lost" or (
            start.phase == SNAPSHOT and state.confirmed_flush_lsn is not None and state.confirmed_flush_lsn > start.lsn)
        if not lost:
            return None
        if self.options.snapshot_mode == "when_needed":
            log.warning("slot '%s' cannot resume from %s; snapshot.mode=when_needed takes a new snapshot",
                        self.options.slot_name, lsn_to_str(start.lsn))
            return self._new_snapshot(state)
        raise SlotLostError(f"slot '{self.options.slot_name}' "
                            f"{'does not exist' if state is None else 'no longer holds WAL from ' + lsn_to_str(start.lsn)}"
                            ": changes after the query's offsets are gone; restart the query with a new checkpoint "
                            "(snapshot.mode=initial takes a new snapshot) or set snapshot.mode=when_needed")

    # ------------------------------------------------------------------------------ reading ahead
    def next_offset(self, start: CdcOffset, max_changes: int | None, until_lsn: int | None = None) -> CdcOffset:
        """The end of the next batch after ``start`` (``start`` itself when nothing is new)."""
        if start.phase == NEW:
            return self.initial_offset()
        fresh = self._check_resumable(start)
        if fresh is not None:
            return fresh
        if start.phase == DONE:
            return start
        if start.phase == SNAPSHOT:
            return self._next_chunk(start, max_changes or self.options.snapshot_fetch_size)
        self.acknowledge(start)
        stream = self._stream(start.lsn)
        cap = max(4 * (max_changes or 0), 100_000)
        stream.poll(0.1, max_buffered=cap)
        if until_lsn is not None:
            stream.wait_for(until_lsn)
        taken, end, xid, ts = 0, start.lsn, start.xid, start.ts_us
        for txn in resumed(start, stream.take(start.lsn, until_lsn if until_lsn is not None else stream.high)):
            if max_changes and taken and taken + len(txn.changes) > max_changes:
                break
            taken += len(txn.changes)
            end = txn.end_lsn
            if txn.xid is not None:
                xid, ts = txn.xid, txn.commit_ts_us
        self._check_publication(advancing=end != start.lsn)
        return CdcOffset(STREAM, end, xid=xid, ts_us=ts) if end != start.lsn else start

    def _check_publication(self, advancing: bool) -> None:
        """The publication must still exist before the query moves on: PostgreSQL 18's pgoutput
        skips a missing publication without an error, so the changes committed while it is gone
        never reach the stream (older servers end the stream with an error). Checked before every
        batch that moves on, and once a second while nothing does."""
        import time
        now = time.monotonic()
        if not advancing and now < self._publication_checked + 1.0:
            return
        self._publication_checked = now
        name = self.options.publication_name
        if not self._run(slots.publication_exists, name):
            raise PublicationError(
                f"publication '{name}' of slot '{self.options.slot_name}' was dropped while the query ran: "
                "PostgreSQL streams no change of a missing publication, so changes committed since it was "
                "dropped are not in the stream; restart the query with a new checkpoint and "
                "snapshot.mode=initial (a new snapshot) once the publication exists again")

    def _next_chunk(self, start: CdcOffset, limit: int) -> CdcOffset:
        import psycopg2
        tables = self._tables_named(start.tables)
        reader = self._exported if self._exported_lsn == start.lsn else None
        fresh = reader is None
        if fresh:
            reader = SnapshotReader(slots.connect(self.options), tables)
        try:
            rows, position = reader.read(start.position, limit)
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            if fresh or not reader.conn.closed:
                raise
            # The server restarted under the exported snapshot: read on in a fresh one, as a query
            # restarted mid-snapshot does (what changed since arrives through the stream).
            log.warning("slot '%s': the exported snapshot was lost with its connection (%s); reading on in a "
                        "fresh snapshot", self.options.slot_name, str(e).strip())
            self._close_exported()
            return self._next_chunk(start, limit)
        finally:
            if fresh:
                reader.close()
        if reader.done(position):
            end = CdcOffset(DONE if self.options.snapshot_mode == "initial_only" else STREAM, start.lsn)
            if not fresh:
                self._close_exported()
        else:
            end = CdcOffset(SNAPSHOT, start.lsn, start.tables, position, start.rows + len(rows))
        self._chunks[(start.key, end.key)] = rows
        return end

    def _stream(self, lsn: int) -> ReplicationStream:
        if self.stream is None:
            self.stream = ReplicationStream(self.options, lsn)
            self.stream.acked = lsn
        return self.stream

    # ------------------------------------------------------------------------------ one batch
    def records(self, start: CdcOffset, end: CdcOffset, now_us=None) -> list[tuple[CdcRecord, int]]:
        """The batch (start, end] as (record, timestamp in microseconds)."""
        return list(self.iter_records(start, end, now_us))

    def iter_records(self, start: CdcOffset, end: CdcOffset, now_us=None) -> Iterator[tuple[CdcRecord, int]]:
        """:meth:`records` one at a time, built as they are taken: a large transaction's records
        never all exist at once."""
        if start.phase == NEW:
            return   # the first batch only records where the query starts
        import time
        now = now_us() if now_us else time.time_ns() // 1000
        builder = EnvelopeBuilder(self.options.envelope, last_commit_lsn=start.lsn if start.phase == STREAM else None,
                                  types=self.types)
        for table in self.tables:
            builder.table(table.relation, primary_key=table.key, not_null=table.not_null)
        if start.phase == SNAPSHOT:
            rows = self._chunks.pop((start.key, end.key), None)
            if rows is None:   # a replay: read the same key range again, in a fresh snapshot
                upper = end.position if end.phase == SNAPSHOT else Position(len(start.tables))
                reader = SnapshotReader(slots.connect(self.options), self._tables_named(start.tables))
                try:
                    rows, _ = reader.read(start.position, None, upper)
                finally:
                    reader.close()
            index = {name: i for i, name in enumerate(start.tables)}
            markers = snapshot_markers([index[t.name] for t, _ in rows], start.position,
                                       end.position if end.phase == SNAPSHOT else Position(len(start.tables)),
                                       len(start.tables))
            for i, ((table, values), marker) in enumerate(zip(rows, markers)):
                builder.table(table.relation, primary_key=table.key, not_null=table.not_null)
                yield builder.snapshot_record(table.relation, values, start.lsn, start.rows + i, marker, ts_us=now), now
        if end.phase == STREAM and end.lsn > start.lsn:
            stream = self._stream(start.lsn)
            if stream.high < end.lsn:
                stream.wait_for(end.lsn)
            include = lambda r: self.options.includes(r.namespace, r.name)  # noqa: E731
            for txn in resumed(start, stream.take(start.lsn, end.lsn)):
                self._describe_new_relations(builder, txn, include)
                ts = txn.commit_ts_us if txn.commit_ts_us is not None else now
                for record in builder.iter_transaction_records(txn, include):
                    yield record, ts

    def _describe_new_relations(self, builder: EnvelopeBuilder, txn, include) -> None:
        """Give ``builder`` the catalog's key and NOT NULL columns for every relation of ``txn``,
        read again on each new Relation message, as Debezium's
        ``PgOutputMessageDecoder.handleRelationMessage`` does: pgoutput sends one after any change
        to the table's definition (a column, the primary key, the replica identity), and the
        message says neither NOT NULL nor, under REPLICA IDENTITY FULL, the key. Under REPLICA
        IDENTITY DEFAULT the message's key flags are the primary key when the change was written,
        so they win over a catalog that moved on since. A column whose type the type registry does
        not know (a domain or enum created since) reloads the registry, as Debezium's TypeRegistry
        does on an unknown oid."""
        for relation in _relations_of(txn.changes):
            if not include(relation):
                continue
            known = self._catalog.get(relation.oid)
            if known is None or known[0] is not relation:
                known = self._catalog[relation.oid] = (relation, self._run(slots.table_by_oid, relation.oid))
                if not all(self.types.knows(c.type_oid) for c in relation.columns):
                    self._types = self._run(TypeRegistry.load)
                    builder.types = self._types
            table = known[1]
            if table is None:
                continue   # dropped since: the Relation's own flags are all there is
            builder.table(relation, primary_key=_key_of(relation, table.key),
                          not_null=[c.name for c in relation.columns if c.name in table.not_null])

    def mark(self) -> int:
        """An LSN past every transaction committed so far (Trigger.AvailableNow reads up to it)."""
        from spark_source.postgres.replication import emit_heartbeat
        return self._run(emit_heartbeat)

    # ------------------------------------------------------------------------------ acknowledging
    def acknowledge(self, committed: CdcOffset) -> None:
        """``committed`` is the end of a batch Spark has committed: the slot may move there."""
        if committed.phase != STREAM:
            return
        stream = self._stream(committed.lsn)
        if stream.is_open:
            stream.acknowledge(committed.lsn)
        else:
            stream.acked = max(stream.acked, committed.lsn)   # sent when the stream opens
            stream.forget(committed.lsn)

    # ------------------------------------------------------------------------------ closing
    def _close_exported(self) -> None:
        import psycopg2
        exported, self._exported, self._exported_lsn = self._exported, None, None
        if exported is not None:
            try:
                exported.close()
            except psycopg2.Error:   # already broken (a server restart): nothing to release
                pass

    def close(self) -> None:
        self._close_exported()
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        if self.options.slot_drop_on_stop:
            try:
                if not self._run(slots.drop_slot, self.options.slot_name, 10):
                    log.warning("slot '%s' is in use and was not dropped (slot.drop.on.stop)", self.options.slot_name)
            except Exception as e:  # noqa: BLE001 — closing goes on
                log.warning("could not drop slot '%s': %s", self.options.slot_name, e)
        self._session.close()


def _key_of(relation, catalog_key: tuple) -> tuple:
    """The key of ``relation``'s changes: the flagged columns under REPLICA IDENTITY DEFAULT (the
    primary key the change was written under), in the catalog key's order when they are the same
    columns; otherwise the catalog's key without the columns the Relation lacks."""
    names = [c.name for c in relation.columns]
    flagged = [c.name for c in relation.columns if c.flags_key]
    if relation.replica_identity == "d" and flagged:
        return tuple(catalog_key) if set(flagged) == set(catalog_key) else tuple(flagged)
    return tuple(k for k in catalog_key if k in names)


def _relations_of(changes) -> Iterator:
    """The distinct Relations of a transaction's changes in order of first use: a compact
    transaction's without decoding its changes (the batch decodes them once, as it builds them)."""
    if hasattr(changes, "relations"):
        yield from changes.relations()
        return
    seen = set()
    for change in changes:
        if change.relation is not None and id(change.relation) not in seen:
            seen.add(id(change.relation))
            yield change.relation
