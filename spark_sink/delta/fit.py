"""The schema a batch is planned against, and which of its changes do not fit it.

Pure. A batch's rejects must be the same every time the batch is applied, because a crash between
the Delta commit and the dead letters' broker transaction replays it, the replay is skipped (the
table holds its batch id), and a record found only while the MERGE ran would then reach neither the
table nor the dead-letter topic. So the rejects are a function of (the batch's changes, the table
schema they are planned against) alone, computed before anything is written:

* :func:`plan` merges the batch's columns into the target schema (:func:`~spark_sink.delta.schema.evolve`):
  Connect schemas widen in position order; a record without a schema takes the table's type, or
  for a new column the type of its first non-null value. Every change counts, the rejected ones
  included, so the schema the batch commits is exactly the planned one.
* :func:`misfits` lists the changes with a value the planned column cannot hold: the row image a
  change writes (the after image; a delete's key, or under SCD-2 its before image, which may become
  the delete row's values). Nulls and unchanged TOAST values always fit.

A replay plans the same changes (those the table did not hold before the batch) against the schema
the batch committed: it holds the planned columns under the planned types, so the same changes misfit.

:func:`added_defaults` and :func:`arrived_defaults` give the Connect ``default`` a column had when it
arrived (in the schema of the first change that has it): the table's rows get it (a rewrite), and so
do the rows the batch's changes from before the column arrived write (:func:`default_before`), also
when the batch runs again after its rewrite committed.
"""
from __future__ import annotations

import pyarrow as pa

from spark_sink.delta.errors import PoisonRecordError, SchemaChangeError
from spark_sink.delta.records import Change
from spark_sink.delta.schema import UNAVAILABLE, Evolution, evolve, infer_type, widens

SCD2_TYPES = pa.schema([("__valid_from", pa.timestamp("us", tz="UTC")), ("__valid_to", pa.timestamp("us", tz="UTC")),
                        ("__is_current", pa.bool_()), ("__op", pa.string()), ("__lsn", pa.int64()),
                        ("__order", pa.int64())])
_UNFIT = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError)


def source_schema(table: str, changes: list[Change], target: pa.Schema | None) -> pa.Schema:
    """The batch's columns: Connect schemas merged in position order (a retype must widen), or for
    schemaless records the table's types and else types inferred from the values."""
    fields: dict[str, pa.DataType] = {}
    previous = None
    for c in sorted(changes, key=lambda c: c.position):
        if c.schema is not None:
            if c.schema is previous:
                continue   # merging the schema just merged again changes nothing (the parser shares it)
            previous = c.schema
            for f in c.schema:
                old = fields.get(f.name)
                if old is None or widens(old, f.type):
                    fields[f.name] = f.type
                elif not widens(f.type, old):
                    raise SchemaChangeError(f"table {table!r}: column {f.name!r} is {old} and {f.type} in one batch",
                                            table=table, column=f.name, old=str(old), new=str(f.type))
        else:
            previous = None
            for name, v in c.row.items():
                if fields.get(name) is None:
                    known = target.field(name).type if target is not None and name in target.names else None
                    fields[name] = known or _inferred(v)
    return pa.schema([(n, t if t is not None else pa.string()) for n, t in fields.items()])


def _inferred(value) -> pa.DataType | None:
    """A value Arrow cannot type (an integer beyond int64) leaves the column to the next value."""
    try:
        return infer_type(value)
    except _UNFIT:
        return None


def plan(table: str, changes: list[Change], target: pa.Schema | None, scd_type: int) -> Evolution:
    """The table schema the batch's row changes (truncates excluded) are written under."""
    source = source_schema(table, changes, target)
    if scd_type == 2:
        source = pa.schema(list(source) + [f for f in SCD2_TYPES if f.name not in source.names])
    return evolve(table, target, source)


def misfits(table: str, changes: list[Change], schema: pa.Schema, key_columns, scd_type: int
            ) -> list[tuple[Change, PoisonRecordError]]:
    """The changes (in batch order) with a value ``schema`` cannot hold, each with the error naming
    its record and column."""
    columns: dict[str, list[tuple[int, object]]] = {}
    names = set(schema.names)
    for i, c in enumerate(changes):
        written = (c.key_columns or key_columns) if c.op == "d" and scd_type == 1 else c.row
        for name in written:
            v = c.row.get(name)
            if v is not None and v is not UNAVAILABLE and name in names:
                columns.setdefault(name, []).append((i, v))
    bad: dict[int, PoisonRecordError] = {}
    for name, values in columns.items():
        type_ = schema.field(name).type
        try:
            pa.array([v for _, v in values], type=type_)
            continue
        except _UNFIT:
            pass
        for i, v in values:
            if i in bad:
                continue
            try:
                pa.array([v], type=type_)
            except _UNFIT as e:
                topic, partition, offset = changes[i].record.coordinates
                bad[i] = PoisonRecordError(
                    f"table {table!r}: record {topic}/{partition}@{offset} does not fit the table's columns "
                    f"(column {name!r} is {type_}: {e})", topic=topic, partition=partition, offset=offset,
                    column=name)
    return [(changes[i], bad[i]) for i in sorted(bad)]


def added_defaults(evolution: Evolution, changes: list) -> dict:
    """The Connect ``default`` of each column the batch adds to an existing table (the table's rows
    get it in a rewrite): see :func:`first_defaults`."""
    return {n: v for n, (_, v) in first_defaults(evolution, changes).items() if n in evolution.added}


def arrived_defaults(evolution: Evolution, changes: list) -> dict:
    """Per column with a Connect ``default``: (the position of the first change that has it, the
    default). PostgreSQL gave the default to every row the table held then, also the rows the
    batch's earlier changes (sent without the column) wrote. Taken from the changes alone, not from
    whether the table has the column yet: a batch run again after its rewrite committed (a commit
    conflict, a crash) finds the column there and still gives those rows the default."""
    return first_defaults(evolution, changes)


def first_defaults(evolution: Evolution, changes: list) -> dict:
    """Per column of the planned schema: (position, default) of the first change (by position)
    whose row has it, when that change's schema gives it a default, as ``ADD COLUMN … DEFAULT``
    gave the rows then; a default set later (``ALTER COLUMN … SET DEFAULT``) is no default of the
    rows before, as in PostgreSQL. A default the column cannot hold is left out."""
    out, seen = {}, set()
    for c in sorted(changes, key=lambda c: c.position):
        for name in c.row:
            if name in seen or name not in evolution.schema.names:
                continue
            seen.add(name)
            if name in c.defaults:
                try:
                    pa.array([c.defaults[name]], evolution.schema.field(name).type)
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
                    continue
                out[name] = (c.position, c.defaults[name])
    return out


def default_before(row: dict, position: tuple, arrived: dict, until: tuple | None = None, truncates=()) -> dict:
    """``row`` (written by a change at ``position``) with the default of each column that arrived
    after it and that it lacks. SCD-2: a version that ended before the column arrived (at
    ``until``, the key's next version, or at one of the batch's ``truncates``) keeps null."""
    def current_at(at) -> bool:
        return (until is None or tuple(until) > tuple(at)) and not any(
            tuple(position) < tuple(t) < tuple(at) for t in truncates)
    missing = {n: v for n, (at, v) in arrived.items()
               if n not in row and tuple(position) < tuple(at) and current_at(at)}
    return {**row, **missing} if missing else row
