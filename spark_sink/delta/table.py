"""One Delta table as the sink sees it: its schema, the app transaction it holds, the high-water
marks in its commit metadata, and the commit that records both with the data.

Every commit the sink makes carries, in the Delta commit info, ``riverlog.delta`` = JSON
``{"app_id", "batch_id", "watermarks": {"<topic>/<partition>": [commit_lsn, order]},
"offsets": {"<topic>/<partition>": last offset}, "table": "<schema>.<table>"}`` (``table``: the CDC
source table, which no other source table may then write into) (cumulative: the latest such commit holds every
stream's mark; a record without riverlog.cdc headers is marked ``[offset, 0]``) and the application transaction
``(app_id, batch_id)``. Commits without it (OPTIMIZE, VACUUM, other writers) are skipped over when
the marks are read back.
"""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from spark_sink.delta.fold import Watermarks

METADATA_KEY = "riverlog.delta"


class SinkTable:
    """A handle on the table at ``path`` (which may not exist yet)."""

    def __init__(self, path: str, storage_options: dict | None = None):
        self.path, self.storage_options = path, storage_options
        self.dt = self._load()
        self._offsets: dict[str, int] = {}   # read with the watermarks, advanced by the next commit

    def _load(self) -> DeltaTable | None:
        if DeltaTable.is_deltatable(self.path, storage_options=self.storage_options):
            return DeltaTable(self.path, storage_options=self.storage_options)
        return None

    def reload(self) -> None:
        self.dt = self._load()

    @property
    def schema(self) -> pa.Schema | None:
        return pa.schema(self.dt.schema().to_arrow()) if self.dt is not None else None

    def transaction_version(self, app_id: str) -> int | None:
        return self.dt.transaction_version(app_id) if self.dt is not None else None

    def metadata(self) -> dict:
        """The newest ``riverlog.delta`` commit metadata, or {} when no commit has one."""
        if self.dt is None:
            return {}
        for limit in (16, 256, None):
            history = self.dt.history(limit)
            for commit in history:
                doc = commit.get(METADATA_KEY) or _user_metadata(commit)
                if doc:
                    return json.loads(doc) if isinstance(doc, str) else doc
            if limit is None or len(history) < limit:
                return {}
        return {}

    def planned(self, app_id: str, batch_id: int) -> tuple[pa.Schema, Watermarks, pa.Schema | None] | None:
        """For a batch the table holds: the schema its commit left, and the marks and schema of the
        sink commit before it (what the batch was planned against); None when no commit of the
        batch is in the log."""
        if self.dt is None:
            return None
        schema = None
        for doc, version in self._sink_commits():
            mine = doc.get("app_id") == app_id and doc.get("batch_id") == batch_id
            if schema is not None and not mine:   # past the batch's own earlier MERGEs ("part")
                return schema, Watermarks.from_json(doc.get("watermarks")), self._schema_at(version)
            if mine and schema is None:
                schema = self._schema_at(version)
        return (schema, Watermarks(), None) if schema is not None else None

    def _schema_at(self, version: int) -> pa.Schema:
        return pa.schema(DeltaTable(self.path, version=version, storage_options=self.storage_options)
                         .schema().to_arrow())

    def _sink_commits(self):
        """(``riverlog.delta`` metadata, version) of the sink's commits, newest first."""
        for commit in self.dt.history():
            doc = commit.get(METADATA_KEY) or _user_metadata(commit)
            if doc:
                yield (json.loads(doc) if isinstance(doc, str) else doc), commit.get("version")

    def watermarks(self) -> Watermarks:
        doc = self.metadata()
        self._offsets = dict(doc.get("offsets") or {})
        return Watermarks.from_json(doc.get("watermarks"))

    def source_table(self) -> str | None:
        """The source table (``schema.table``) the sink's commits say this table holds; None for a
        table the sink never wrote, or wrote before it recorded it."""
        return self.metadata().get("table")

    def commit_properties(self, app_id: str, batch_id: int, marks: Watermarks, records=(),
                          source_table: str | None = None, transaction: bool = True) -> CommitProperties:
        """The commit's app transaction and metadata; ``records`` advance the per-partition
        ``offsets`` (the last Kafka offset the table has seen, for a consumer that must seek);
        ``source_table`` is the CDC source table the Delta table mirrors. Without ``transaction``
        (a MERGE of a batch that commits more), the metadata says ``"part": true``."""
        offsets = dict(self._offsets)
        for r in records:
            name = f"{r.topic}/{r.partition}"
            offsets[name] = max(offsets.get(name, -1), r.offset)
        doc = {"app_id": app_id, "batch_id": batch_id, "watermarks": marks.to_json(),
               "offsets": dict(sorted(offsets.items()))}
        if source_table is not None:
            doc["table"] = source_table
        if not transaction:
            doc["part"] = True
        doc = json.dumps(doc, separators=(",", ":"))
        return CommitProperties(custom_metadata={METADATA_KEY: doc},
                                app_transactions=[Transaction(app_id, batch_id)] if transaction else None)

    def record(self, commit_properties: CommitProperties) -> None:
        """Commit ``commit_properties`` (the batch's application transaction and marks) with no
        data: delta-rs makes no commit for a MERGE that changes no row (a delete of a key the
        table does not hold: a row inserted and deleted inside one batch), and a batch that left no
        record would be applied again over later changes after a restart."""
        write_deltalake(self.dt, self.schema.empty_table(), mode="append", commit_properties=commit_properties)
        self.reload()

    def holds(self, commit_properties: CommitProperties) -> bool:
        """Whether the newest sink commit is the one ``commit_properties`` describes."""
        doc = json.loads(commit_properties.custom_metadata[METADATA_KEY])
        return self.metadata() == doc

    def create(self, schema: pa.Schema) -> None:
        """An empty table of ``schema`` (its first commit holds no app transaction)."""
        if self.dt is None:
            if "://" not in self.path:
                os.makedirs(self.path, exist_ok=True)
            DeltaTable.create(self.path, schema, mode="ignore", storage_options=self.storage_options)
            self.reload()

    def widen(self, schema: pa.Schema, defaults: dict | None = None, scd2: bool = False) -> None:
        """Rewrite the table under ``schema`` (a widening of its columns, see schema.evolve), in one
        commit; a new column named in ``defaults`` holds its default in every row (SCD-2: every
        current row), as the source's ``ADD COLUMN ... DEFAULT`` gave the rows it had."""
        data = self.dt.to_pyarrow_table()
        defaults = defaults or {}
        current = data.column("__is_current").to_pylist() if scd2 else [True] * data.num_rows

        def column(f):
            if f.name in data.column_names:
                return data.column(f.name).cast(f.type)
            if f.name in defaults:
                return pa.array([defaults[f.name] if c else None for c in current], f.type)
            return pa.nulls(data.num_rows, f.type)
        data = pa.Table.from_arrays([column(f) for f in schema], schema=schema)
        # The predicate makes delta-rs check the rewrite against commits made since the read: without
        # one it commits over an OPTIMIZE that rewrote the same rows (CommitFailedError instead).
        write_deltalake(self.dt, data, mode="overwrite", schema_mode="overwrite", predicate="true",
                        storage_options=self.storage_options)
        self.reload()

    def current_rows(self, key_columns: tuple[str, ...], keys: set[tuple], scd2: bool) -> dict[tuple, dict]:
        """The table's current row per key (SCD-2: the one with ``__is_current``), for the given keys."""
        out = {}
        for row in self._rows_of(key_columns, keys, scd2):
            out[tuple(row[c] for c in key_columns)] = row
        return out

    def latest_rows(self, key_columns: tuple[str, ...], keys: set[tuple]) -> dict[tuple, dict]:
        """SCD-2: the newest history row per key (highest ``__lsn``, ``__order``), current or not: a
        delete row holds the key's last values."""
        out: dict[tuple, dict] = {}
        for row in self._rows_of(key_columns, keys, False):
            k = tuple(row[c] for c in key_columns)
            if k not in out or (row["__lsn"], row["__order"]) > (out[k]["__lsn"], out[k]["__order"]):
                out[k] = row
        return out

    def _rows_of(self, key_columns: tuple[str, ...], keys: set[tuple], current_only: bool) -> list[dict]:
        if self.dt is None or not keys:
            return []
        type_ = self.schema.field(key_columns[0]).type
        first = pa.array(sorted({k[0] for k in keys}, key=repr), type_)
        column = pc.field(key_columns[0])
        if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_binary(type_) \
                or pa.types.is_large_binary(type_):
            # delta-rs gives text and binary file statistics as string_view / binary_view, which
            # pyarrow cannot compare with the column's type when it prunes files by an ``isin``
            # spanning a file's min and max (ArrowNotImplementedError 'greater_equal'); a cast
            # expression is filtered row by row instead.
            column = column.cast(type_)
        expr = column.isin(first)
        if current_only:
            expr = expr & (pc.field("__is_current") == True)  # noqa: E712 (an Arrow expression)
        rows = self.dt.to_pyarrow_dataset().to_table(filter=expr).to_pylist()
        return [r for r in rows if tuple(r[c] for c in key_columns) in keys]


def _user_metadata(commit: dict):
    """delta-spark writes ``spark.databricks.delta.commitInfo.userMetadata`` as ``userMetadata``."""
    doc = commit.get("userMetadata")
    if isinstance(doc, str) and doc.startswith("{") and METADATA_KEY in doc:
        return json.loads(doc).get(METADATA_KEY)
    return None


def held_positions(path: str, storage_options: dict | None = None) -> dict:
    """What the table at ``path`` holds, from its newest sink commit: ``{"app_id", "batch_id",
    "watermarks": {"<topic>/<partition>": [commit_lsn, order]}, "offsets": {"<topic>/<partition>":
    last offset}}`` ({} for a table the sink never wrote). A source or a Connect runtime that lost
    its checkpoint may start from here; the sink itself drops anything at or below the marks."""
    return SinkTable(path, storage_options).metadata()
