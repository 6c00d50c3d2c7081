"""``spark.read.format("postgres-cdc")``: a bounded read, as Spark's Kafka source gives one.

    snapshot = spark.read.format("postgres-cdc").option("dsn", dsn).load()          # op: r rows
    pending = (spark.read.format("postgres-cdc").option("dsn", dsn).option("slot.name", "lake")
               .option("snapshot.mode", "no_data").load())                         # peeked changes

The rows are the stream's (Spark's Kafka source schema, Debezium's JSON, the ``riverlog.cdc.*``
headers); what is read is planned in :mod:`spark_source.postgres.batch_plan`.

* **Snapshot** (``snapshot.mode`` ``initial``, the default): each Spark task reads its tables in
  one ``REPEATABLE READ`` read-only transaction, in key order, ``snapshot.fetch.size`` rows at a
  time, as the stream's snapshot does. No slot and no publication are created and nothing needs
  ``REPLICATION``. ``offset`` and ``riverlog.cdc.commit_lsn`` are the WAL insert position read in
  that transaction (every change the snapshot holds committed at or before it).
  ``snapshot.max.threads`` (Debezium's name, default 1) spreads the tables over that many tasks;
  with 1, all tables come from one snapshot. With more, each task's tables are consistent among
  themselves but not with another task's: PostgreSQL's exported snapshot lives only as long as the
  transaction that exported it, and no process outlives Spark's planning to hold it open.
* **Pending changes** (``snapshot.mode=no_data``): the committed transactions in the existing
  slot ``slot.name`` between ``startingOffsets`` and ``endingOffsets``, read with
  ``pg_logical_slot_peek_binary_changes`` (pgoutput, ``proto_version`` 1, the publication) and
  decoded by the project's decoder: the slot does not move, is never created or dropped, and
  ``readStream`` later delivers the same changes. One task: a slot is one sequential stream.
  PostgreSQL decodes only WAL flushed to disk, and with ``synchronous_commit=off`` a commit
  returns before its WAL is flushed; planning waits (up to ``FLUSH_WAIT_S``) for the flush to
  reach the read's end, so a change committed before the read is in it.

The planning (``partitions``) runs in a Spark Python worker on the driver, ``read`` in the
executors' workers: both connect to PostgreSQL, so every worker needs psycopg2 and Riverlog.
"""
from __future__ import annotations

import logging
import time

from pyspark.sql.datasource import DataSourceReader, InputPartition

from spark_source.postgres.batch_plan import BatchOptions, pending_transactions, spread_tables
from spark_source.postgres.errors import SlotNotFoundError
from spark_source.postgres.options import CdcOptions

log = logging.getLogger(__name__)
RECORDS_PER_BATCH = 10_000
PEEK_FETCH = 2_000
_WAL_POSITION = ("SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
                 "ELSE pg_current_wal_insert_lsn() END)::text")
_FLUSHED = ("SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
            "ELSE pg_current_wal_flush_lsn() END)::text")
# The WAL writer flushes asynchronously committed WAL within three wal_writer_delay (at most 10 s).
FLUSH_WAIT_S = 30.0


class SnapshotPartition(InputPartition):
    """Tables read in one snapshot; ``first``: they include the read's first table (its first row
    is marked "first"); ``last``: this task's last row is the read's last."""

    def __init__(self, tables: tuple, first: bool, last: bool):
        super().__init__(tables)
        self.tables, self.first, self.last = tables, first, last


class ChangesPartition(InputPartition):
    """Transactions with ``after < commit end LSN <= until``, peeked from the slot."""

    def __init__(self, after: int, until: int):
        super().__init__((after, until))
        self.after, self.until = after, until


class CdcBatchReader(DataSourceReader):
    """Options parsed once, at planning; picklable (no connection is kept)."""

    def __init__(self, options: CdcOptions, batch: BatchOptions):
        self.options, self.batch = options, batch

    @classmethod
    def from_options(cls, options) -> "CdcBatchReader":
        batch, rest = BatchOptions.split(options)
        return cls(CdcOptions.parse(rest), batch)

    # ------------------------------------------------------------------------------ planning
    def partitions(self):
        from spark_source.postgres import slot as slots
        conn = slots.connect(self.options)
        try:
            if self.options.snapshot_mode == "no_data":
                return [self._plan_changes(conn)]
            tables = slots.captured_tables(conn, self.options)
            with conn.cursor() as cur:
                cur.execute("SELECT c.oid, greatest(c.reltuples, 0)::bigint FROM pg_class c WHERE c.oid = ANY(%s)",
                            ([t.relation.oid for t in tables],))
                rows = dict(cur.fetchall())
            groups = spread_tables([(t.name, rows.get(t.relation.oid, 0)) for t in tables], self.batch.max_threads)
            first = tables[0].name if tables else None      # in captured order, as each task lists them
            return [SnapshotPartition(g, first in g, i == len(groups) - 1) for i, g in enumerate(groups)]
        finally:
            conn.close()

    def _plan_changes(self, conn) -> ChangesPartition:
        from spark_source.postgres import slot as slots
        from spark_source.postgres.errors import PublicationError
        from spark_source.postgres.pgoutput import lsn_from_str, lsn_to_str
        o = self.options
        slots.check_server(conn, o)
        slots.captured_tables(conn, o)
        state = slots.slot_state(conn, o.slot_name)
        if state is None:
            raise SlotNotFoundError(
                f"slot '{o.slot_name}' does not exist: a batch read with snapshot.mode=no_data reads the changes "
                "pending in an existing slot and never creates one; start a readStream with this slot.name first, "
                "or read the snapshot (snapshot.mode=initial)")
        slots.check_slot(state, o)
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (o.publication_name,))
            if cur.fetchone() is None:
                raise PublicationError(f"publication '{o.publication_name}' does not exist; a batch read creates "
                                       "none: set publication.name to the slot's publication")
            cur.execute(_WAL_POSITION)
            latest = lsn_from_str(cur.fetchone()[0])
        confirmed = state.confirmed_flush_lsn or 0
        after = confirmed if self.batch.starting_lsn is None else self.batch.starting_lsn
        if after < confirmed:
            log.warning("startingOffsets %s is before slot '%s''s confirmed position %s: the changes in between "
                        "were consumed and are not in the slot any more", lsn_to_str(after), o.slot_name,
                        lsn_to_str(confirmed))
        until = latest if self.batch.ending_lsn is None else self.batch.ending_lsn
        return ChangesPartition(after, min(until, _wait_for_flush(conn, min(until, latest))))

    # ------------------------------------------------------------------------------ reading
    def read(self, partition):
        if isinstance(partition, ChangesPartition):
            yield from self._read_changes(partition)
        else:
            yield from self._read_snapshot(partition)

    def _builder(self, tables, conn, last_commit_lsn=None):
        from spark_source.postgres.envelope import EnvelopeBuilder
        from spark_source.postgres.type_registry import TypeRegistry
        builder = EnvelopeBuilder(self.options.envelope, last_commit_lsn=last_commit_lsn,
                                  types=TypeRegistry.load(conn))
        for table in tables:
            builder.table(table.relation, primary_key=table.key, not_null=table.not_null)
        return builder

    def _read_snapshot(self, partition: SnapshotPartition):
        from spark_source.postgres import slot as slots
        from spark_source.postgres.cdc_source import to_arrow
        from spark_source.postgres.pgoutput import lsn_from_str
        from spark_source.postgres.snapshot import Position, SnapshotReader, snapshot_markers
        conn = slots.connect(self.options)
        try:
            tables = [t for t in slots.captured_tables(conn, self.options) if t.name in partition.tables]
            reader = SnapshotReader(conn, tables)   # the snapshot is taken here
        except BaseException:
            conn.close()
            raise
        try:
            with conn.cursor() as cur:
                cur.execute(_WAL_POSITION)
                lsn = lsn_from_str(cur.fetchone()[0])
            builder, now = self._builder(tables, conn), time.time_ns() // 1000
            position, order = Position(0), 0
            index = {t.name: i for i, t in enumerate(tables)}
            while not reader.done(position):
                start = position
                rows, position = reader.read(position, self.options.snapshot_fetch_size)
                # Debezium's markers, as the stream's snapshot sets them; "first" and "last" only in
                # the task holding the read's first table and its last row.
                markers = snapshot_markers([index[t.name] for t, _ in rows], start, position, len(tables),
                                           holds_first=partition.first, holds_last=partition.last)
                records = []
                for (table, values), marker in zip(rows, markers):
                    records.append((builder.snapshot_record(table.relation, values, lsn, order, marker, ts_us=now), now))
                    order += 1
                if records:
                    yield to_arrow(records)
        finally:
            reader.close()

    def _read_changes(self, partition: ChangesPartition):
        import psycopg2
        from spark_source.postgres import slot as slots
        from spark_source.postgres.cdc_source import to_arrow
        from spark_source.postgres.errors import PublicationError, SlotInUseError
        from spark_source.postgres.pgoutput import lsn_from_str, lsn_to_str
        o = self.options
        conn = slots.connect(o)
        try:
            tables = slots.captured_tables(conn, o)
            builder, include = self._builder(tables, conn, partition.after), lambda r: o.includes(r.namespace, r.name)
            conn.autocommit = False
            cur = conn.cursor(name="riverlog_peek")
            cur.itersize = PEEK_FETCH
            try:
                cur.execute("SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL, "
                            "'proto_version', '1', 'publication_names', %s, 'messages', 'true')",
                            (o.slot_name, lsn_to_str(partition.until), o.publication_name))
                messages = ((lsn_from_str(lsn), data) for lsn, data in cur)
                out: list = []
                for txn in pending_transactions(messages, partition.after, partition.until):
                    ts = txn.commit_ts_us if txn.commit_ts_us is not None else time.time_ns() // 1000
                    for record in builder.iter_transaction_records(txn, include):
                        out.append((record, ts))
                        if len(out) >= RECORDS_PER_BATCH:   # a large transaction spans record batches
                            yield to_arrow(out)
                            out = []
                if out:
                    yield to_arrow(out)
            except psycopg2.errors.ObjectInUse:
                raise SlotInUseError(f"slot '{o.slot_name}' is streaming to another reader, and a slot in use cannot "
                                     "be peeked: read while the stream is stopped") from None
            except psycopg2.errors.UndefinedObject as e:
                text = str(e).strip()
                if "publication" in text:
                    raise PublicationError(f"slot '{o.slot_name}' cannot decode with publication "
                                           f"'{o.publication_name}': {text}") from None
                raise SlotNotFoundError(f"slot '{o.slot_name}' is gone: {text}") from None
        finally:
            conn.close()   # the peek's transaction goes with it


def _wait_for_flush(conn, target: int, timeout_s: float = FLUSH_WAIT_S) -> int:
    """The flushed WAL position once it reaches ``target``; past ``timeout_s``, the position
    reached (the read then ends there, with a warning naming what it leaves out)."""
    from spark_source.postgres.pgoutput import lsn_from_str, lsn_to_str
    deadline, pause = time.monotonic() + timeout_s, 0.005
    with conn.cursor() as cur:
        while True:
            cur.execute(_FLUSHED)
            flushed = lsn_from_str(cur.fetchone()[0])
            if flushed >= target:
                return target
            if time.monotonic() >= deadline:
                log.warning("the WAL is flushed to %s only, short of %s after %.0f s: the read ends at %s; "
                            "changes committed after it are read next time", lsn_to_str(flushed),
                            lsn_to_str(target), timeout_s, lsn_to_str(flushed))
                return flushed
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
