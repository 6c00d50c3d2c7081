"""Which key a change is applied under, where the stream's key is not one fixed set of columns.

* :func:`key_runs`: a primary key replaced on a live table keys the later events by other columns;
  a batch is cut into runs of one key, one MERGE each (pure).
* :func:`live_tombstones`: a tombstone is a delete of its record key when its own delete is not
  there to do it (a compacted topic keeps a key's tombstone and drops the events before it);
  which tombstones of a batch can delete something, read from the table.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from spark_sink.delta.fold import METADATA_COLUMNS
from spark_sink.delta.schema import UNAVAILABLE
from spark_sink.delta.table import SinkTable


def key_runs(changes: list) -> list[list]:
    """The batch's changes of one table, in position order, cut where their key columns change.

    A primary key dropped and added on other columns keys the later events by the new columns
    (pgoutput's Relation message after the DDL); one MERGE joins on one set of columns, so each
    run is a MERGE of its own, committed in order. Every MERGE but the last records the marks it
    advanced and no application transaction: a crash between two of them replays the batch, and
    the marks drop what the earlier ones hold."""
    runs: list[list] = []
    columns = None
    for c in sorted(changes, key=lambda c: c.position):
        if c.op != "t" and c.key_columns != columns:
            if runs and columns is not None:
                runs.append([])
            columns = c.key_columns
        if not runs:
            runs.append([])
        runs[-1].append(c)
    return runs


def live_tombstones(table: SinkTable, changes: list, scd_type: int) -> list:
    """``changes`` with the tombstones that can delete something: none for a table not written
    yet; under SCD-2, where a delete writes a history row, a tombstone that comes first of its
    key's changes in the batch only when the table holds a current row of the key (one after its
    own delete is dropped by the fold). A kept tombstone's row holds the table's columns as
    unavailable, so its delete row takes the key's last values."""
    if not any(c.tombstone for c in changes):
        return changes
    if table.dt is None:
        return [c for c in changes if not c.tombstone]
    names = [n for n in table.schema.names if n not in METADATA_COLUMNS]
    if scd_type == 2:
        first: dict[tuple, Any] = {}
        for c in sorted(changes, key=lambda c: c.position):
            if c.op != "t":
                first.setdefault((c.key_columns, c.key), c)
        live = set()
        for columns in {c.key_columns for c in first.values() if c.tombstone}:
            lone = {k for (cols, k), c in first.items() if c.tombstone and cols == columns}
            live |= {(columns, k) for k in table.current_rows(columns, lone, scd2=True)}
        changes = [c for c in changes if not (c.tombstone and first[(c.key_columns, c.key)] is c
                                              and (c.key_columns, c.key) not in live)]
    return [replace(c, row={**{n: UNAVAILABLE for n in names}, **c.row}) if c.tombstone else c for c in changes]
