"""Connections, server checks, the publication and the replication slot.

Everything the source needs from the server before it reads a row is checked here, once, with an
error that names the fix: ``wal_level=logical``, a role with ``REPLICATION``, the publication
(``publication.autocreate.mode``: ``all_tables`` creates ``FOR ALL TABLES``, ``filtered`` creates
or alters it to exactly the captured tables, ``disabled`` requires it to exist) and the slot.

A slot is created over a replication connection with ``CREATE_REPLICATION_SLOT … LOGICAL pgoutput
(SNAPSHOT 'export')``: PostgreSQL answers with the slot's consistent point and the name of a
snapshot that sees exactly the transactions committed before it, so a snapshot read there and the
stream that starts there neither overlap nor leave a gap.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Optional

from spark_source.postgres import snapshot_overrides
from spark_source.postgres.errors import (NoTablesError, PostgresConnectionError,
                                          PublicationError, ReplicationPrivilegeError, SlotError,
                                          SlotInUseError, WalLevelError)
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.pgoutput import Column, Relation, lsn_from_str

log = logging.getLogger(__name__)

# Text output as pgoutput's walsender gives it, for snapshot and stream alike.
SESSION_SETTINGS = "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=postgres -c extra_float_digits=3 " \
                   "-c bytea_output=hex"


def connect(options: CdcOptions, replication: bool = False, timeout: int | None = None):
    """A psycopg2 connection (``LogicalReplicationConnection`` for ``replication``), autocommit;
    ``timeout``: seconds to wait for the server (libpq's ``connect_timeout``; none by default)."""
    import psycopg2
    import psycopg2.extras
    kwargs = dict(options.connect_kwargs())
    if timeout is not None:
        kwargs["connect_timeout"] = timeout
    kwargs["options"] = SESSION_SETTINGS
    kwargs.setdefault("application_name", f"riverlog-cdc-{options.slot_name}")
    if replication:
        kwargs["connection_factory"] = psycopg2.extras.LogicalReplicationConnection
    try:
        conn = psycopg2.connect(**kwargs)
    except psycopg2.OperationalError as e:
        text = str(e).strip()
        if "replication" in text and ("permission" in text or "must be" in text):
            raise ReplicationPrivilegeError(_no_replication(options)) from None
        raise PostgresConnectionError(f"cannot connect to PostgreSQL ({_where(options)}): {text}") from None
    if not replication:
        conn.autocommit = True
    return conn


def _where(options: CdcOptions) -> str:
    return "dsn" if options.dsn else f"{options.hostname}:{options.port}/{options.dbname} as {options.user}"


def _no_replication(options: CdcOptions, role: str | None = None) -> str:
    if role is None and options.dsn:
        import psycopg2.extensions
        role = psycopg2.extensions.parse_dsn(options.dsn).get("user")
    role = role or options.user
    return (f"role '{role}' may not stream changes: it needs the REPLICATION privilege "
            f"(ALTER ROLE \"{role}\" REPLICATION;) and pg_hba.conf must allow its replication connection")


def check_server(conn, options: CdcOptions) -> None:
    """``wal_level`` and the role's privileges."""
    with conn.cursor() as cur:
        cur.execute("SHOW wal_level")
        level = cur.fetchone()[0]
        if level != "logical":
            raise WalLevelError(f"wal_level is '{level}', and logical decoding needs 'logical': run "
                                "ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL")
        cur.execute("SELECT rolreplication OR rolsuper, current_user FROM pg_roles WHERE rolname = current_user")
        row = cur.fetchone()
        if not row or not row[0]:
            raise ReplicationPrivilegeError(_no_replication(options, row[1] if row else None))


@dataclass(frozen=True)
class Table:
    """A captured table: its Relation (as pgoutput would describe it) and the columns that key it."""
    relation: Relation
    key: tuple[str, ...]        # primary key (else first unique index) columns in the key's order; empty: none
    not_null: tuple[str, ...] = ()   # NOT NULL columns: required fields in the schemas, as Debezium's
    partitioned: bool = False   # a partitioned parent (relkind 'p')
    skipped_partitions: tuple[int, ...] = ()   # a parent's captured leaf partitions: their rows are snapshotted there
    select_override: Optional[str] = None   # snapshot.select.statement.overrides: the snapshot reads this SELECT

    @property
    def chunk_key(self) -> tuple[str, ...]:
        """The key the snapshot pages by: a unique index may hold several NULLs, which a row
        comparison would skip, so only a key of NOT NULL columns (a primary key always is)."""
        return self.key if set(self.key) <= set(self.not_null) else ()

    @property
    def name(self) -> str:
        return f"{self.relation.namespace}.{self.relation.name}"

    @property
    def quoted(self) -> str:
        return f'{quote(self.relation.namespace)}.{quote(self.relation.name)}'


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _candidates(cur, options: CdcOptions) -> list[tuple]:
    """(oid, schema, name, replica identity, relkind) of the user tables and partitioned tables the
    include/exclude lists select, sorted by schema and name."""
    cur.execute("""
        SELECT c.oid, n.nspname, c.relname, c.relreplident, c.relkind
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p')
          AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%%'
        ORDER BY n.nspname, c.relname""")
    return [r for r in cur.fetchall() if options.includes(r[1], r[2])]


def captured_names(conn, options: CdcOptions) -> list[tuple[str, str]]:
    """(schema, table) of the tables :func:`captured_tables` captures now, without describing
    them (empty when none matches): what a caller naming their topics needs."""
    with conn.cursor() as cur:
        return [(r[1], r[2]) for r in _candidates(cur, options)]


def captured_tables(conn, options: CdcOptions) -> list[Table]:
    """The user tables ``table.include.list`` selects, sorted by name.

    Leaf partitions are tables of their own, as in Debezium (``PostgresConnection.getAllTableIds``
    lists both TABLE and PARTITIONED TABLE): pgoutput without ``publish_via_partition_root``
    streams a partition's changes under the partition's name, so its rows are snapshotted to that
    topic too. A captured parent's snapshot reads only the rows of its partitions that are not
    captured themselves, so no row is snapshotted twice (Debezium reads them under both names).

    A table without a primary key or unique index is captured with a null record key, as Debezium
    captures it; without ``REPLICA IDENTITY FULL`` (or ``USING INDEX``) PostgreSQL refuses its
    updates and deletes once it is published, so that is logged."""
    with conn.cursor() as cur:
        candidates = _candidates(cur, options)
        if not candidates:
            raise NoTablesError(f"table.include.list={','.join(options.table_include) or '(all)'} matches no "
                                f"table of database '{options.dbname}'; names are schema.table regexes, e.g. public.orders")
        tables = []
        for oid, schema, name, identity, kind in candidates:
            table = _described(cur, oid, schema, name, identity, partitioned=kind == "p")
            override = snapshot_overrides.statement_for(options.snapshot_overrides, schema, name)
            if override is not None:
                table = dataclasses.replace(table, select_override=override)
            if not table.key and identity not in ("f", "i") and not table.partitioned:
                log.warning("table %s.%s has no primary key or unique index: its records have a null key, and with "
                            "REPLICA IDENTITY %s PostgreSQL refuses its updates and deletes while it is published; "
                            "add a primary key or run ALTER TABLE %s.%s REPLICA IDENTITY FULL;", schema, name,
                            "NOTHING" if identity == "n" else "DEFAULT", quote(schema), quote(name))
            tables.append(table)
        captured = {t.relation.oid for t in tables}
        for i, table in enumerate(tables):
            if table.partitioned:
                cur.execute("SELECT relid::oid, relid::regclass::text FROM pg_partition_tree(%s) WHERE isleaf",
                            (table.relation.oid,))
                all_leaves = cur.fetchall()
                leaves = tuple(sorted(r[0] for r in all_leaves if r[0] in captured))
                tables[i] = dataclasses.replace(table, skipped_partitions=leaves)
                left_out = sorted(r[1] for r in all_leaves if r[0] not in captured)
                if left_out:
                    log.warning("partitioned table %s is captured but its partitions %s are not: their rows are "
                                "snapshotted under %s, but PostgreSQL streams their changes under the partitions' "
                                "names (unless the publication has publish_via_partition_root = true), which "
                                "table.include.list leaves out; add the partitions to table.include.list",
                                table.name, ", ".join(left_out), table.name)
        return tables


def table_by_oid(conn, oid: int) -> Optional[Table]:
    """The catalog's description of one table as it is now, or None once it is dropped. The stream
    reads it on each new Relation message, as Debezium's ``PgOutputMessageDecoder.handleRelationMessage``
    re-reads the key and the columns' optionality from the catalog: the Relation message carries
    neither NOT NULL nor, under REPLICA IDENTITY FULL, the primary key."""
    with conn.cursor() as cur:
        cur.execute("""
            SELECT c.oid, n.nspname, c.relname, c.relreplident
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = %s""", (oid,))
        row = cur.fetchone()
        return None if row is None else _described(cur, *row)


def _described(cur, oid: int, schema: str, name: str, identity: str, partitioned: bool = False) -> Table:
    # The key: the primary key, else the first unique index by name without expression columns
    # (JdbcConnection.readPrimaryKeyOrUniqueIndexNames over pgjdbc's getIndexInfo order, with
    # PostgresConnection.isTableUniqueIndexIncluded), in the index's own column order (KEY_SEQ).
    cur.execute("""
        SELECT (i.indkey::int2[])[0:i.indnkeyatts - 1]
        FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid
        WHERE i.indrelid = %s AND (i.indisprimary OR i.indisunique) AND 0 <> ALL (i.indkey::int2[])
        ORDER BY i.indisprimary DESC, ci.relname LIMIT 1""", (oid,))
    row = cur.fetchone()
    positions = list(row[0]) if row else []
    cur.execute("""
        SELECT a.attname, a.atttypid, a.atttypmod, a.attnum, a.attnotnull
        FROM pg_attribute a WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum""", (oid,))
    columns = cur.fetchall()
    by_number = {c[3]: c[0] for c in columns}
    key = tuple(by_number[n] for n in positions if n in by_number)
    relation = Relation(oid, schema, name, identity,
                        tuple(Column(c[0] in key or identity == "f", c[0], c[1], c[2]) for c in columns))
    return Table(relation, key, tuple(c[0] for c in columns if c[4]), partitioned)


def ensure_publication(conn, options: CdcOptions, tables: list[Table]) -> None:
    """Make the publication match ``publication.autocreate.mode``."""
    name = options.publication_name
    with conn.cursor() as cur:
        cur.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
        row = cur.fetchone()
        wanted = sorted(t.name for t in tables)
        if options.publication_autocreate == "disabled":
            if row is None:
                raise PublicationError(
                    f"publication '{name}' does not exist and publication.autocreate.mode=disabled: create it "
                    f"(CREATE PUBLICATION {quote(name)} FOR TABLE {', '.join(t.quoted for t in tables)};) "
                    "or set publication.autocreate.mode to filtered or all_tables")
            return
        try:
            if options.publication_autocreate == "all_tables":
                if row is None:
                    cur.execute(f"CREATE PUBLICATION {quote(name)} FOR ALL TABLES")
                return
            listed = ", ".join(t.quoted for t in tables)
            if row is None:
                cur.execute(f"CREATE PUBLICATION {quote(name)} FOR TABLE {listed}")
            elif row[0] or (published := publication_tables(conn, name)) != wanted:
                if row[0]:
                    cur.execute(f"DROP PUBLICATION {quote(name)}")
                    cur.execute(f"CREATE PUBLICATION {quote(name)} FOR TABLE {listed}")
                else:
                    cur.execute(f"ALTER PUBLICATION {quote(name)} SET TABLE {listed}")
                    added = sorted(set(wanted) - set(published))
                    if added:
                        log.warning("tables %s added to publication '%s' (publication.autocreate.mode=filtered): "
                                    "their changes stream from now on; rows written to them before were not "
                                    "published and are only in a new snapshot, not in a query resuming from its "
                                    "offsets", ", ".join(added), name)
        except Exception as e:  # psycopg2.Error: insufficient privilege, most often
            raise PublicationError(f"cannot create or change publication '{name}' "
                                   f"(publication.autocreate.mode={options.publication_autocreate}): "
                                   f"{str(e).strip()}; create it yourself and set publication.autocreate.mode="
                                   "disabled, or grant the role ownership of the tables") from None


def publication_exists(conn, name: str) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        return cur.fetchone() is not None


def publication_tables(conn, name: str) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s "
                    "ORDER BY 1", (name,))
        return [r[0] for r in cur.fetchall()]


@dataclass(frozen=True)
class SlotState:
    """A row of ``pg_replication_slots``."""
    name: str
    plugin: str
    database: str
    active_pid: int | None
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    wal_status: str | None


def slot_state(conn, name: str) -> SlotState | None:
    with conn.cursor() as cur:
        cur.execute("SELECT slot_name, plugin, database, active_pid, restart_lsn::text, confirmed_flush_lsn::text, "
                    "wal_status FROM pg_replication_slots WHERE slot_name = %s", (name,))
        row = cur.fetchone()
    if row is None:
        return None
    lsn = lambda v: lsn_from_str(v) if v else None  # noqa: E731
    return SlotState(row[0], row[1], row[2], row[3], lsn(row[4]), lsn(row[5]), row[6])


def check_slot(state: SlotState, options: CdcOptions) -> None:
    """A slot this source can stream from: pgoutput, this database, not in use, WAL still there."""
    if state.plugin != "pgoutput" or state.database != options.dbname:
        raise SlotError(f"slot '{state.name}' exists for plugin '{state.plugin}' on database '{state.database}'; "
                        f"this source needs pgoutput on '{options.dbname}': choose another slot.name or drop it "
                        f"(SELECT pg_drop_replication_slot('{state.name}');)")
    if state.active_pid is not None:
        raise SlotInUseError(f"slot '{state.name}' is in use by server process {state.active_pid} (one reader per "
                             "slot): stop the other query or connector, or choose another slot.name")


def create_slot(repl_conn, name: str, temporary: bool = False) -> tuple[int, str]:
    """``CREATE_REPLICATION_SLOT``, exporting its snapshot: (consistent point LSN, snapshot name).
    The snapshot can be imported only while ``repl_conn`` stays open and runs nothing else."""
    import psycopg2
    kind = "TEMPORARY " if temporary else ""
    try:
        with_cursor = repl_conn.cursor()
        with_cursor.execute(f"CREATE_REPLICATION_SLOT {quote(name)} {kind}LOGICAL pgoutput (SNAPSHOT 'export')")
        _slot, consistent_point, snapshot_name, _plugin = with_cursor.fetchone()
    except psycopg2.errors.DuplicateObject:
        raise SlotInUseError(f"slot '{name}' was created by someone else a moment ago; retry") from None
    except psycopg2.Error as e:
        raise SlotError(f"cannot create replication slot '{name}': {str(e).strip()} (max_replication_slots full? "
                        "drop unused slots with pg_drop_replication_slot)") from None
    return lsn_from_str(consistent_point), snapshot_name


def drop_slot(conn, name: str, wait_s: float = 0.0) -> bool:
    """Drop the slot if it exists and nobody streams from it; True when it is gone. ``wait_s``:
    how long a reader that is going away (the server process of a connection just closed) may
    still hold it."""
    import time
    deadline = time.monotonic() + wait_s
    while True:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                        "WHERE slot_name = %s AND NOT active", (name,))
            cur.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (name,))
            if cur.fetchone()[0] == 0:
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
