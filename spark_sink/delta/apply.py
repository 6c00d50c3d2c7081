"""``delta_apply``: Debezium change events into Delta tables, exactly once, from ``foreachBatch``.

    changes.writeStream.foreachBatch(delta_apply("/lake", keys={"public.customers": ["id"]}, scd_type=1))

For each batch: parse the records (:mod:`records`), group them by table, drop the changes the
table already holds (:class:`~spark_sink.delta.fold.Watermarks` from its commit metadata), plan the
table schema under the policy (:mod:`schema`) and reject the changes it cannot hold (:mod:`fit`),
fold the rest per key (:mod:`fold`), then **one MERGE per table** committed with the application
transaction ``(app_id, batch_id)`` and the new high-water marks — or, when the table's key columns
changed inside the batch (a primary key replaced), one MERGE per run of one key, only the last
holding the application transaction. A tombstone is a delete of its record key when its own
delete is not there to do it (a compacted topic). Both in :mod:`keys`.

Rejects (dead letters under ``errors.tolerance=all``) are found before anything is written, and a
skipped replay recomputes them without writing, so every run of a batch id returns the same ones:
the Connect worker writes them after the Delta commit, and a crash in between must not lose them.

Idempotence has two layers. (1) Before every MERGE the table's ``transaction_version(app_id)`` is
read: a batch id at or below it was committed already (a replay after a crash) and is skipped —
delta-rs would accept an older version and move it backwards, so the check is ours. (2) The marks
drop every change at or below what the table holds, so a query restarted from a new checkpoint
(new query id, hence new default app id) replays from the source's committed position without
duplicates, and an out-of-order or replayed change never moves a row backwards. The batch id the
table holds is a replay and is skipped even if it carries other changes (a snapshot chunk re-read
from a fresh snapshot does); an older batch id that carries changes beyond the marks raises
:class:`StaleBatchError` rather than guess.

One Delta table mirrors one source table: a batch that would bring a second source table's changes
into a path (in the batch, or besides the ``table`` its commits record) is refused with
:class:`DeltaConfigError` before anything is written. A column the batch adds with a Connect
``default`` gives the table's rows (SCD-2: current rows) that value, in a rewrite committed just
before the MERGE (as a widening is); a replay finds the column and does not rewrite again. The rows
the batch's own changes from before the column arrived write get it too (:func:`.fit.default_before`).

A MERGE that changes no row makes no commit in delta-rs; the batch's application transaction and
marks are then committed without data (:meth:`.SinkTable.record`), or a new query would apply it again.

The SCD-1 table mirrors the source: no extra columns (positions live in the commit metadata). The
SCD-2 table adds ``__valid_from``, ``__valid_to`` (timestamps, UTC, the source commit time),
``__is_current``, ``__op`` (c/u/d/r) and ``__lsn``, ``__order`` (the change's position).
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa
from deltalake.exceptions import CommitFailedError

from spark_sink.delta import merge as merges
from spark_sink.delta.errors import CommitConflictError, DeltaConfigError, PoisonRecordError, StaleBatchError
from spark_sink.delta import fit
from spark_sink.delta.fold import (METADATA_COLUMNS, Delete, after_last_truncate, close_time, fold_scd1,
                                   fold_scd2, history_rows, resolve, split_truncates)
from spark_sink.delta.keys import key_runs, live_tombstones
from spark_sink.delta.records import (HEARTBEAT_TOPIC_PREFIX, ChangeParser, SourceRecord, records_from_arrow,
                                     topic_table)
from spark_sink.delta.results import ApplyResult, DeadLetter, TableResult
from spark_sink.delta.schema import DEFAULT_PLACEHOLDER, UNAVAILABLE, Evolution, to_arrow
from spark_sink.delta.table import SinkTable

log = logging.getLogger(__name__)

DEFAULT_APP_ID = "riverlog.delta"
COMMIT_ATTEMPTS = 5
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def delta_apply(root: str | None = None, *, table_path: str | None = None,
                table_paths: Mapping[str, str] | None = None,
                keys: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
                scd_type: int = 1, app_id: str | None = None, errors_tolerance: str = "none",
                dlq: Callable[[list[DeadLetter]], Any] | None = None,
                unavailable_value_placeholder: str = DEFAULT_PLACEHOLDER,
                storage_options: Mapping[str, str] | None = None, engine: str = "auto") -> "DeltaApply":
    """A ``foreachBatch`` function applying Debezium change events to Delta (see the module)."""
    return DeltaApply(root, table_path=table_path, table_paths=table_paths, keys=keys, scd_type=scd_type,
                      app_id=app_id, errors_tolerance=errors_tolerance, dlq=dlq,
                      unavailable_value_placeholder=unavailable_value_placeholder,
                      storage_options=storage_options, engine=engine)


def to_arrow_table(batch) -> tuple[pa.Table, Any]:
    """(Arrow table, Spark session or None) from a Spark DataFrame, pandas DataFrame or Arrow data."""
    if isinstance(batch, pa.Table):
        return batch, None
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch]), None
    if hasattr(batch, "toArrow") and hasattr(batch, "sparkSession"):
        return batch.toArrow(), batch.sparkSession
    try:
        import pandas as pd
        if isinstance(batch, pd.DataFrame):
            return pa.Table.from_pandas(batch, preserve_index=False), None
    except ImportError:
        pass
    raise DeltaConfigError(f"delta_apply: a batch must be a Spark/pandas DataFrame or Arrow data, not {type(batch).__name__}")


def streaming_query_id(spark) -> str | None:
    """The running query's id (the checkpoint keeps it; a new checkpoint gives a new one)."""
    try:
        return spark.sparkContext.getLocalProperty("sql.streaming.queryId")
    except Exception:
        return None


class DeltaApply:
    """Callable as ``fn(batch, batch_id) -> ApplyResult``; built by :func:`delta_apply`."""

    def __init__(self, root, *, table_path, table_paths, keys, scd_type, app_id, errors_tolerance, dlq,
                 unavailable_value_placeholder, storage_options, engine):
        if sum(x is not None for x in (root, table_path)) != 1 and not table_paths:
            raise DeltaConfigError("delta_apply: give a root directory, table_path or table_paths")
        if scd_type not in (1, 2, "1", "2"):
            raise DeltaConfigError(f"scd.type must be 1 or 2, not {scd_type!r}")
        if errors_tolerance not in ("none", "all"):
            raise DeltaConfigError(f"errors.tolerance must be 'none' or 'all', not {errors_tolerance!r}")
        if engine not in ("auto", "delta-rs", "delta-spark"):
            raise DeltaConfigError(f"engine must be auto, delta-rs or delta-spark, not {engine!r}")
        self.root, self.table_path, self.table_paths = root, table_path, dict(table_paths or {})
        self.scd_type, self.app_id, self.tolerate = int(scd_type), app_id, errors_tolerance == "all"
        self.dlq, self.storage_options, self.engine = dlq, dict(storage_options or {}) or None, engine
        if keys is not None and not isinstance(keys, Mapping):
            keys = {"*": list(keys)}
        self.parser = ChangeParser(keys, placeholder=unavailable_value_placeholder)
        self._topic_tables: dict[str, str] = {}   # topic -> the source table its change events name

    def path_of(self, table: str) -> str:
        if self.table_path is not None:
            return self.table_path
        if table in self.table_paths:
            return self.table_paths[table]
        if self.root is None:
            raise DeltaConfigError(f"no Delta path for table {table!r}: add it to table_paths or give a root")
        return f"{self.root.rstrip('/')}/{table}"

    # ------------------------------------------------------------------------------ a batch
    def __call__(self, batch, batch_id: int) -> ApplyResult:
        data, spark = to_arrow_table(batch)
        query_id = streaming_query_id(spark) if spark is not None else None
        app_id = self.app_id or (f"{DEFAULT_APP_ID}.{query_id}" if query_id else DEFAULT_APP_ID)
        if self.engine == "delta-spark" and spark is None:
            raise DeltaConfigError("engine='delta-spark' needs the Spark DataFrame foreachBatch hands over; "
                                   "Arrow and pandas batches are written with delta-rs (engine='auto')")
        use_spark = spark is not None and (self.engine == "delta-spark" or (
            self.engine == "auto" and merges.has_delta_extension(spark)))
        result = ApplyResult(int(batch_id), app_id)
        by_path: dict[str, list] = {}
        tombstones = []
        for record in records_from_arrow(data):
            if record.value is None:
                tombstones.append(record)
                continue
            try:
                changes = self.parser.changes(record)
            except PoisonRecordError as e:
                self._dead(result, record, e)
                continue
            for change in changes:
                self._topic_tables[change.record.topic] = change.table
                by_path.setdefault(self.path_of(change.table), []).append(change)
        for record in tombstones:
            table = self._tombstone_table(record)
            change = self.parser.tombstone(record, table) if table is not None else None
            if change is not None:
                by_path.setdefault(self.path_of(table), []).append(change)
        tables = {path: self._one_source_table(path, changes) for path, changes in by_path.items()}
        engine = spark if use_spark else None
        for path, changes in by_path.items():
            result.tables[path] = commit_retrying(tables[path], result, lambda t=tables[path], c=changes:
                                                  self._apply_table(t, c, result, engine))
        if result.dead_letters and self.dlq is not None:
            self.dlq(result.dead_letters)
        return result

    def _tombstone_table(self, record: SourceRecord) -> str | None:
        """The source table a tombstone's topic carries: the one its change events name (in this
        or an earlier batch of the query), else the one whose Delta table holds changes of the
        tombstone's topic partition (a restarted query whose batch holds only the tombstone); None
        when neither says (a table never written: nothing to delete)."""
        table = self._topic_tables.get(record.topic)
        if table is not None or record.topic.startswith(HEARTBEAT_TOPIC_PREFIX):
            return table
        candidate = topic_table(record.topic)
        try:
            sink = SinkTable(self.path_of(candidate), self.storage_options)
        except DeltaConfigError:
            return None
        if sink.dt is None or (record.topic, record.partition) not in sink.watermarks().marks:
            return None
        table = self._topic_tables[record.topic] = sink.source_table() or candidate
        return table

    def _dead(self, result: ApplyResult, record: SourceRecord, error: PoisonRecordError) -> None:
        if not self.tolerate:
            raise error
        log.warning("delta sink: dead letter %s", error)
        result.dead_letters.append(DeadLetter(record, error))

    def _one_source_table(self, path: str, changes: list) -> SinkTable:
        """The Delta table at ``path``, refused (before anything of the batch is written) when it
        would receive the changes of more than one source table: their rows, keys, schemas and
        truncates would mix."""
        table = SinkTable(path, self.storage_options)
        names = sorted({c.table for c in changes} | ({table.source_table()} - {None}))
        if len(names) > 1:
            where = "table_path" if path == self.table_path else "the table path"
            raise DeltaConfigError(
                f"{where} {path!r} receives changes of source tables {', '.join(map(repr, names))}: one Delta "
                f"table mirrors one source table (equal keys of two tables would overwrite each other, their "
                f"schemas merge, a delete or truncate hits both). Use delta.root.path / root (one table per "
                f"source table) or table_paths, or subscribe to one table's topic (topics / topics.regex)",
                path=path, tables=names)
        return table

    def _apply_table(self, table: SinkTable, changes: list, result: ApplyResult, spark) -> TableResult:
        path = table.path
        out = TableResult(path)
        marks = table.watermarks()
        fresh, held = marks.split(changes)
        out.held = len(held)
        done = table.transaction_version(result.app_id)
        if done is not None and result.batch_id <= done:
            # The same id is a replay of a committed batch, skipped whatever it carries: a source may
            # re-read a replayed batch differently (a snapshot chunk from a fresh snapshot), and what
            # differs arrives again later. Only an older id with changes beyond the marks is refused.
            if fresh and result.batch_id < done:
                first = fresh[0].record
                raise StaleBatchError(
                    f"table {path!r} holds batch {done} of app id {result.app_id!r}, and batch {result.batch_id} "
                    f"carries changes it does not hold (from {first.topic}/{first.partition}@{first.offset}): the "
                    f"query's checkpoint was replaced. Give this query a new app_id", path=path,
                    app_id=result.app_id, batch_id=result.batch_id, table_batch_id=done)
            out.skipped = "replayed" if result.batch_id == done else "older"
            log.info("delta sink: %s batch %s skipped (%s; the table holds %s)", path, result.batch_id, out.skipped, done)
            self._rejects_of_applied(table, changes, result)
            return out
        self._reject_held(held, table.schema, result)
        fresh = live_tombstones(table, fresh, self.scd_type)
        if fresh:
            rows, _ = split_truncates(fresh)
            evolution = fit.plan(fresh[0].table, rows, table.schema, self.scd_type)
            rejected = self._reject(rows, evolution.schema, result)
            runs = key_runs(fresh)
            for i, run in enumerate(runs):
                if i:   # the table and its marks as the run before committed them
                    marks = table.watermarks()
                    evolution = fit.plan(run[0].table, split_truncates(run)[0], table.schema, self.scd_type)
                self._merge(table, run, rejected, evolution, out, result, marks, spark, last=i == len(runs) - 1)
        return out

    def _reject(self, rows: list, schema: pa.Schema, result: ApplyResult) -> set[int]:
        """Dead-letters the changes ``schema`` cannot hold; their ids (offsets need not be unique)."""
        if not rows:
            return set()
        key_columns = self.parser.key_columns(rows[0].table, rows[0].record)
        bad = fit.misfits(rows[0].table, rows, schema, key_columns, self.scd_type)
        dead = set()
        for change, error in bad:
            if id(change.record) not in dead:   # a key move's delete and update are one record
                dead.add(id(change.record))
                self._dead(result, change.record, error)
        return {id(c) for c in rows if id(c.record) in dead}

    def _reject_held(self, held: list, schema: pa.Schema | None, result: ApplyResult) -> None:
        """Held changes write nothing, but the batch that applied them may have lost its dead letters
        (a crash before the group commit, then a lost checkpoint: a new app id replays them as held):
        those that do not fit the table's schema are returned again."""
        rows, _ = split_truncates(held)
        if self.tolerate and rows and schema is not None:
            self._reject(rows, schema, result)

    def _rejects_of_applied(self, table: SinkTable, changes: list, result: ApplyResult) -> None:
        """A skipped batch's rejects, recomputed without writing, as its first run found them: the
        changes the table held before it against the schema before it, the others planned against
        the schema its commit left (the planned one). Without that commit in the log (a batch that
        wrote nothing here, or a log cleaned up since), every change against today's schema."""
        rows, _ = split_truncates(changes)
        if not self.tolerate or not rows:
            return
        planned = table.planned(result.app_id, result.batch_id)
        if planned is None:
            self._reject(rows, fit.plan(rows[0].table, rows, table.schema, self.scd_type).schema, result)
            return
        schema, before, schema_before = planned
        rows, held = before.split(rows)
        self._reject_held(held, schema_before, result)
        if rows:
            self._reject(rows, fit.plan(rows[0].table, rows, schema, self.scd_type).schema, result)

    def _merge(self, table: SinkTable, changes: list, rejected: set[int], evolution: Evolution, out: TableResult,
               result: ApplyResult, marks, spark, last: bool = True) -> None:
        """One MERGE of the accepted changes under the planned ``evolution``; the marks and offsets
        advance over every change, the rejected ones included (their dead letters hold them). Only
        the batch's ``last`` MERGE records its application transaction (:func:`~.keys.key_runs`)."""
        name = changes[0].table
        all_changes, (changes, truncates) = changes, split_truncates(c for c in changes if id(c) not in rejected)
        if not changes and (table.dt is None or not truncates):
            return   # nothing accepted, or a truncate of a table that was never written
        key_columns = self.parser.key_columns(name, changes[0].record) if changes else ()
        existed = table.dt is not None
        if not existed:
            table.create(evolution.schema)
        else:
            defaults = fit.added_defaults(evolution, changes) if not truncates else {}
            if evolution.widened or defaults:
                log.warning("delta sink: %s widening %s, adding %s with their defaults (the table is rewritten)",
                            table.path, evolution.widened, sorted(defaults))
                table.widen(pa.schema([f for f in evolution.schema if f.name in table.schema.names
                                       or f.name in defaults]), defaults, self.scd_type == 2)
        rows, blamed = [], []   # blamed[i]: the change row i stands for, named if it does not fit
        last_change = {(c.table, c.key): c for c in changes}
        arrived = fit.arrived_defaults(evolution, changes)
        if self.scd_type == 1:
            finals = fold_scd1(after_last_truncate(changes, truncates))
            # The rows unavailable values come from (a key change's: the old key's), read before the
            # MERGE deletes the old key's row.
            need = {f.fill or f.key for f in finals.values()
                    if not isinstance(f, Delete) and UNAVAILABLE in f.row.values()}
            current = table.current_rows(key_columns, need, scd2=False) if not truncates else {}
            for k, f in finals.items():
                if isinstance(f, Delete):
                    rows.append({**dict(zip(key_columns, f.key)), merges.ACTION: "d"})
                    out.deletes += 1
                else:
                    row = fit.default_before(resolve(f.row, current.get(f.fill or f.key)), f.position, arrived)
                    rows.append({**row, merges.ACTION: "u"})
                    out.upserts += 1
                blamed.append(last_change[k])
        else:
            versions = fold_scd2(changes, key_columns)
            need = {k[1] for k, vs in versions.items() if UNAVAILABLE in vs[0].row.values()}
            fills = {v.fill for vs in versions.values() for v in vs
                     if v.fill is not None and UNAVAILABLE in v.row.values()}
            current = table.current_rows(key_columns, need, scd2=True)
            # An old key's row: its current one, or (its delete committed in an earlier batch) its last.
            filled = table.latest_rows(key_columns, fills)
            for k, vs in versions.items():
                history = history_rows(vs, current.get(k[1]), truncates, filled)
                # Closes the table's current row of the key, if it has one (the MERGE matches it).
                rows.append({**dict(zip(key_columns, k[1])), "__valid_to": close_time(vs, truncates),
                             merges.ACTION: "close"})
                blamed.append(last_change[k])
                for i, h in enumerate(history):
                    if vs[i].op != "d":   # a version current when a column arrived has its default
                        h = fit.default_before(h, vs[i].position, arrived, vs[i + 1].position if i + 1 < len(vs)
                                               else None, [t[0] for t in truncates])
                    rows.append({**h, merges.ACTION: "insert"})
                    blamed.append(last_change[k])
                out.history_rows += len(history)
        schema = evolution.schema.append(pa.field(merges.ACTION, pa.string()))
        source = to_arrow(name, [_timestamps(r) for r in rows], schema, [c.record.coordinates for c in blamed])
        columns = list(evolution.schema.names)
        if self.scd_type == 1:
            plan = merges.scd1_plan(source, key_columns, columns, bool(evolution.added) and existed, bool(truncates),
                                    kept=evolution.missing)
        else:
            plan = merges.scd2_plan(source, key_columns, columns, bool(evolution.added) and existed,
                                    truncates[0][1] if truncates else None)
        out.truncates = len(truncates)
        new_marks = marks.advanced(((c.record.topic, c.record.partition), c.stream_mark) for c in all_changes)
        props = table.commit_properties(result.app_id, result.batch_id, new_marks, (c.record for c in all_changes),
                                        name, transaction=last)
        if spark is not None:
            merges.run_delta_spark(spark, table.path, plan, result.app_id, result.batch_id,
                                   {"riverlog.delta": props.custom_metadata["riverlog.delta"]}, transaction=last)
        else:
            metrics = merges.run_delta_rs(table.dt, plan, props)
            if not metrics.get("num_target_files_added") and not metrics.get("num_target_files_removed"):
                table.reload()
                if not table.holds(props):   # delta-rs commits nothing for a MERGE that changed no row
                    table.record(props)
        table.reload()
        out.version = table.dt.version()


def commit_retrying(table: SinkTable, result: ApplyResult, run: Callable[[], Any]) -> Any:
    """``run()`` (a batch's write to ``table``), again from a fresh read of the table when delta-rs
    refuses its commit because another writer committed since the read (an OPTIMIZE run while the
    query streams). The retry reads the application transaction and the marks anew, so what a
    commit of the batch made before the conflict (a run of one key) is not applied twice; past
    :data:`COMMIT_ATTEMPTS` it is :class:`CommitConflictError` (retriable)."""
    attempt = 0
    while True:
        attempt += 1
        dead = len(result.dead_letters)
        try:
            return run()
        except CommitFailedError as e:
            del result.dead_letters[dead:]   # found again by the next attempt
            table.reload()
            if attempt == COMMIT_ATTEMPTS:
                raise CommitConflictError(
                    f"table {table.path!r}: another writer committed between the read and the commit of batch "
                    f"{result.batch_id} {attempt} times ({e}); nothing of the batch is lost: restart the query",
                    path=table.path, batch_id=result.batch_id, attempts=attempt) from e
            log.info("delta sink: %s commit conflict on batch %s, attempt %s: %s", table.path, result.batch_id,
                     attempt, e)


def _timestamps(row: dict) -> dict:
    for c in ("__valid_from", "__valid_to"):
        if isinstance(row.get(c), int):
            row[c] = _EPOCH_UTC + dt.timedelta(microseconds=row[c])
    return row


__all__ = ["ApplyResult", "DeadLetter", "DeltaApply", "TableResult", "delta_apply", "METADATA_COLUMNS"]
