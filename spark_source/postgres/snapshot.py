"""The initial snapshot: the captured tables read in key order, in chunks, inside one snapshot.

The first time, the chunks are read in the snapshot the slot exported when it was created
(``SET TRANSACTION SNAPSHOT``), so the snapshot holds exactly the transactions committed before
the slot's consistent point and the stream starts right after them. A position in the snapshot
is (index of the table in name order, the last key read, as text) and goes into the query's
offsets, so a chunk is the key range between two positions and can be read again.

After a restart the exported snapshot is gone; a chunk Spark must replay is then read in a fresh
``REPEATABLE READ`` snapshot, taken later. Its rows may already show changes committed after the
consistent point, and the stream (which starts at the consistent point, because the slot is never
acknowledged past it until the snapshot's batches committed) delivers those changes again,
after them: applied in order, rows and changes end in the same state, and nothing is skipped.

``snapshot.mode``: ``initial`` snapshots a new query, then streams; ``initial_only`` snapshots
and stops (its slot is temporary); ``no_data`` streams only; ``when_needed`` snapshots a new
query and again whenever the offsets cannot be resumed from the slot.
"""
from __future__ import annotations

from dataclasses import dataclass

from spark_source.postgres.slot import Table, quote


@dataclass(frozen=True)
class Position:
    """Everything before table ``table`` is read, and its rows with key up to ``after`` (text
    values of the key columns; None: none of it yet)."""
    table: int
    after: tuple | None = None

    def to_json(self) -> dict:
        return {"table": self.table, "after": list(self.after) if self.after is not None else None}

    @classmethod
    def from_json(cls, data: dict) -> "Position":
        after = data.get("after")
        return cls(int(data["table"]), tuple(after) if after is not None else None)


def snapshot_markers(table_of_row: list[int], start: Position, end: Position, table_count: int,
                     holds_first: bool = True, holds_last: bool = True) -> list[str]:
    """``source.snapshot`` of each row of a chunk, as Debezium 2.7 marks them
    (RelationalSnapshotChangeEventSource.setSnapshotMarker): "first" for the first table's first
    row, "first_in_data_collection" / "last_in_data_collection" for a table's first and last
    row, "true" otherwise, and "last" for the snapshot's very last row, even when the tables
    after it are empty (BufferingSnapshotChangeRecordReceiver.completeSnapshot).
    ``table_of_row``: each row's table index; ``start``/``end``: the chunk's positions.
    ``holds_first``/``holds_last``: whether these tables begin/end the whole snapshot (a batch
    read spreads the tables over tasks, and only one task holds each end)."""
    out, n = [], len(table_of_row)
    for i, t in enumerate(table_of_row):
        first = (i == 0 or table_of_row[i - 1] != t) and (t > start.table or start.after is None)
        last = table_of_row[i + 1] != t if i + 1 < n else end.table > t
        if i == n - 1 and end.table >= table_count and holds_last:
            out.append("last")
        elif first and t == 0 and holds_first:
            out.append("first")
        elif last:
            out.append("last_in_data_collection")
        elif first:
            out.append("first_in_data_collection")
        else:
            out.append("true")
    return out


class SnapshotReader:
    """Reads chunks of the captured tables in one read-only ``REPEATABLE READ`` transaction on
    ``conn`` (a plain connection this object owns): the exported ``snapshot_name``, or a fresh one."""

    def __init__(self, conn, tables: list[Table], snapshot_name: str | None = None):
        self.conn = conn
        self.tables = tables
        self._override_columns: dict[int, frozenset] = {}
        conn.autocommit = False
        conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
        with conn.cursor() as cur:
            if snapshot_name:
                cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot_name,))
            cur.execute("SELECT 1")  # takes the snapshot now, not at the first chunk

    def close(self) -> None:
        try:
            self.conn.rollback()
        finally:
            self.conn.close()

    def done(self, position: Position) -> bool:
        return position.table >= len(self.tables)

    def read(self, start: Position, limit: int | None, end: Position | None = None):
        """Rows after ``start``: at most ``limit`` (None: no limit), and none past ``end``.
        Returns (rows as (table, text values), the position after them)."""
        rows: list[tuple[Table, tuple]] = []
        position = start
        while position.table < len(self.tables) and (limit is None or len(rows) < limit):
            if end is not None and (position.table > end.table or (position.table == end.table and end.after is None)):
                break
            table = self.tables[position.table]
            upper = end.after if end is not None and end.table == position.table else None
            want = None if limit is None else limit - len(rows)
            if not self._chunk_key(table):   # no key of NOT NULL columns to page by: the whole table in one chunk
                want = None
            # One row more than wanted tells whether the table goes on, so the snapshot's last row
            # is known to be the last when it is read.
            chunk = self._chunk(table, position.after, upper, None if want is None else want + 1)
            more = want is not None and len(chunk) > want
            chunk = chunk[:want] if more else chunk
            rows.extend((table, values) for values in chunk)
            if self._chunk_key(table) and more:
                position = Position(position.table, self._key_of(table, chunk[-1]))
            elif upper is not None:
                position = Position(position.table, upper)
                break
            else:
                position = Position(position.table + 1, None)
        # Past the tables with no rows left, so a chunk whose last row is the snapshot's last
        # ends the snapshot and that row can say "last" (Debezium buffers one record for this:
        # BufferingSnapshotChangeRecordReceiver.completeSnapshot).
        while end is None and position.after is None and position.table < len(self.tables) \
                and not self._has_rows(self.tables[position.table]):
            position = Position(position.table + 1, None)
        return rows, position

    def _source(self, table: Table) -> str:
        """What a chunk reads from: the table, or its ``snapshot.select.statement.overrides`` SELECT."""
        if table.select_override is None:
            return table.quoted
        return f"({table.select_override}) AS {quote(table.relation.name)}"

    def _columns_of_override(self, table: Table) -> frozenset:
        """The override's column names (read once), so the table's other columns are selected as null."""
        oid = table.relation.oid
        if oid not in self._override_columns:
            with self.conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {self._source(table)} LIMIT 0")
                self._override_columns[oid] = frozenset(d[0] for d in cur.description)
        return self._override_columns[oid]

    def _chunk_key(self, table: Table) -> tuple[str, ...]:
        """The table's chunk key, unless an override leaves a key column out (then one chunk)."""
        key = table.chunk_key
        if key and table.select_override is not None and not set(key) <= self._columns_of_override(table):
            return ()
        return key

    def _has_rows(self, table: Table) -> bool:
        sql, params = f"SELECT 1 FROM {self._source(table)}", []
        if table.skipped_partitions and table.select_override is None:
            sql, params = sql + " WHERE tableoid <> ALL (%s::oid[])", [list(table.skipped_partitions)]
        with self.conn.cursor() as cur:
            cur.execute(sql + " LIMIT 1", params)
            return cur.fetchone() is not None

    def _key_of(self, table: Table, values: tuple) -> tuple:
        names = [c.name for c in table.relation.columns]
        return tuple(values[names.index(k)].decode() for k in self._chunk_key(table))

    def _chunk(self, table: Table, after: tuple | None, upper: tuple | None, limit: int | None) -> list[tuple]:
        # Each value as its type's output function writes it, the text pgoutput sends: ``::text``
        # is a cast, and some casts differ from the output (boolean 'true' for 't', char(n)
        # without its padding, inet with its /32), so a snapshot row would differ from the same
        # row streamed, and a key column would key it apart. concat() calls the output function
        # (and gives '' for NULL, hence the CASE). Aliased: ORDER BY a column's name
        # would otherwise sort by its text output column.
        present = None if table.select_override is None else self._columns_of_override(table)
        columns = ", ".join(f"CASE WHEN {quote(c.name)} IS NULL THEN NULL ELSE concat({quote(c.name)}) END AS c{i}"
                            if present is None or c.name in present else f"NULL AS c{i}"
                            for i, c in enumerate(table.relation.columns))
        sql, params, where = f"SELECT {columns} FROM {self._source(table)}", [], []
        if table.skipped_partitions and present is None:   # their rows are snapshotted under the partitions' own names
            where.append("tableoid <> ALL (%s::oid[])")
            params.append(list(table.skipped_partitions))
        key = self._chunk_key(table)
        if key:
            row_key = "(" + ", ".join(quote(k) for k in key) + ")"
            holes = "(" + ", ".join(["%s"] * len(key)) + ")"
            if after is not None:
                where.append(f"{row_key} > {holes}")
                params.extend(after)
            if upper is not None:
                where.append(f"{row_key} <= {holes}")
                params.extend(upper)
        if where:
            sql += " WHERE " + " AND ".join(where)
        if key:
            sql += " ORDER BY " + ", ".join(quote(k) for k in key)
            if limit is not None:
                sql += f" LIMIT {int(limit)}"
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return [tuple(None if v is None else v.encode() for v in row) for row in cur.fetchall()]
