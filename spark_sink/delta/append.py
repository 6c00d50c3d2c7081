"""``delta_append``: a plain (non-CDC) topic appended to a Delta table, exactly once.

``value_format="raw"`` appends the Kafka-shaped rows as they are (``key``, ``value``, ``topic``,
``partition``, ``offset``, ``timestamp``, ``timestampType``, ``headers``). ``"json"`` appends the
value's JSON object (the payload, when it has Connect's ``{"schema", "payload"}`` envelope, typed by
that schema) as columns, plus ``__topic``, ``__partition``, ``__offset``, ``__timestamp``. New
columns are added; a retype follows the CDC sink's policy (:mod:`schema`).

Exactly once as in :mod:`apply`: the application transaction ``(app_id, batch_id)`` checked before
the commit, and per-partition offset marks in the commit metadata that drop a replayed record.
A replayed or held record writes nothing, but its dead letter is returned again: the Connect worker
writes dead letters after the Delta commit, and a crash in between must not lose them.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Mapping

import pyarrow as pa
from deltalake import write_deltalake

from spark_sink.delta.apply import DEFAULT_APP_ID, commit_retrying, streaming_query_id, to_arrow_table
from spark_sink.delta.errors import DeltaConfigError, PoisonRecordError, StaleBatchError
from spark_sink.delta.records import records_from_arrow
from spark_sink.delta.results import ApplyResult, DeadLetter, TableResult
from spark_sink.delta.schema import arrow_schema, converter, evolve, infer_type, to_arrow, widens
from spark_sink.delta.table import SinkTable

log = logging.getLogger(__name__)


def delta_append(table_path: str, *, value_format: str = "raw", app_id: str | None = None,
                 errors_tolerance: str = "none", dlq: Callable[[list[DeadLetter]], Any] | None = None,
                 storage_options: Mapping[str, str] | None = None) -> "DeltaAppend":
    """A ``foreachBatch`` function appending a topic's records to the Delta table at ``table_path``."""
    return DeltaAppend(table_path, value_format=value_format, app_id=app_id, errors_tolerance=errors_tolerance,
                       dlq=dlq, storage_options=storage_options)


class DeltaAppend:
    def __init__(self, table_path, *, value_format, app_id, errors_tolerance, dlq, storage_options):
        if value_format not in ("raw", "json"):
            raise DeltaConfigError(f"value_format must be 'raw' or 'json', not {value_format!r}")
        if errors_tolerance not in ("none", "all"):
            raise DeltaConfigError(f"errors.tolerance must be 'none' or 'all', not {errors_tolerance!r}")
        self.path, self.value_format, self.app_id = table_path, value_format, app_id
        self.tolerate, self.dlq = errors_tolerance == "all", dlq
        self.storage_options = dict(storage_options) if storage_options else None

    def __call__(self, batch, batch_id: int) -> ApplyResult:
        data, spark = to_arrow_table(batch)
        qid = streaming_query_id(spark) if spark is not None else None
        result = ApplyResult(int(batch_id), self.app_id or (f"{DEFAULT_APP_ID}.{qid}" if qid else DEFAULT_APP_ID))
        table = SinkTable(self.path, self.storage_options)
        result.tables[self.path] = commit_retrying(table, result, lambda: self._write(table, data, result))
        if result.dead_letters and self.dlq is not None:
            self.dlq(result.dead_letters)
        return result

    def _write(self, table: SinkTable, data: pa.Table, result: ApplyResult) -> TableResult:
        out = TableResult(self.path)
        marks = table.watermarks()
        records = records_from_arrow(data)
        keep = [i for i, r in enumerate(records) if not marks.holds((r.topic, r.partition), (r.offset, 0))]
        out.held = len(records) - len(keep)
        done = table.transaction_version(result.app_id)
        if done is not None and result.batch_id <= done:
            if keep and result.batch_id < done:   # the held id itself is a replay: skipped, as in delta_apply
                raise StaleBatchError(f"table {self.path!r} holds batch {done} of app id {result.app_id!r} and batch "
                                      f"{result.batch_id} carries records it does not hold: give this query a new app_id",
                                      path=self.path, app_id=result.app_id, batch_id=result.batch_id)
            out.skipped = "replayed" if result.batch_id == done else "older"
            self._rejects_of_applied(table, records, result)
        else:
            kept = set(keep)
            self._rejects_again([r for i, r in enumerate(records) if i not in kept], table.schema, result)
            if keep:
                self._append(table, data, records, keep, marks, result, out)
        return out

    def _append(self, table: SinkTable, data: pa.Table, records: list, keep: list[int], marks, result: ApplyResult,
                out: TableResult) -> None:
        if self.value_format == "raw":
            rows = data.take(pa.array(keep, pa.int64()))
        else:
            rows = self._json_rows([records[i] for i in keep], table.schema, result)
        if rows.num_rows:
            new_marks = marks.advanced(((records[i].topic, records[i].partition), (records[i].offset, 0)) for i in keep)
            evolution = evolve(self.path, table.schema, rows.schema)
            if evolution.widened:
                table.widen(pa.schema([f for f in evolution.schema if f.name in table.schema.names]))
            write_deltalake(table.dt if table.dt is not None else self.path, rows, mode="append",
                            schema_mode="merge" if table.dt is not None else None,
                            storage_options=self.storage_options,
                            commit_properties=table.commit_properties(result.app_id, result.batch_id, new_marks,
                                                                      [records[i] for i in keep]))
            table.reload()
            out.upserts, out.version = rows.num_rows, table.dt.version()

    def _rejects_again(self, records: list, schema: pa.Schema | None, result: ApplyResult) -> None:
        """Dead letters of records this run writes nothing for, parsed and checked against
        ``schema`` as the run that wrote them did: a crash between that Delta commit and the dead
        letters' transaction must not lose them (see :mod:`fit`). The DLQ is at least once."""
        if self.tolerate and self.value_format == "json" and records:
            self._json_rows(records, schema, result)

    def _rejects_of_applied(self, table: SinkTable, records: list, result: ApplyResult) -> None:
        """A skipped batch's dead letters: the records the table held before it against the schema
        before it, the others against the schema its commit left."""
        planned = table.planned(result.app_id, result.batch_id)
        if planned is None:
            self._rejects_again(records, table.schema, result)
            return
        schema, before, schema_before = planned
        held = [before.holds((r.topic, r.partition), (r.offset, 0)) for r in records]
        self._rejects_again([r for r, h in zip(records, held) if h], schema_before, result)
        self._rejects_again([r for r, h in zip(records, held) if not h], schema, result)

    def _json_rows(self, records, target: pa.Schema | None, result: ApplyResult) -> pa.Table:
        rows, fields, coordinates, kept = [], {}, [], []
        for r in records:
            try:
                doc = json.loads(r.value) if r.value is not None else None
                schema = None
                if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
                    schema, doc = doc["schema"], doc["payload"]
                if not isinstance(doc, dict):
                    raise ValueError("the value is not a JSON object")
                if schema is not None:
                    row = converter(schema)(doc)
                    for f in arrow_schema(schema):   # a later record's wider type widens the column
                        if fields.get(f.name) is None or widens(fields[f.name], f.type):
                            fields[f.name] = f.type
                else:
                    row = doc
                    for k, v in doc.items():
                        if fields.get(k) is None:
                            fields[k] = (target.field(k).type if target is not None and k in target.names
                                         else infer_type(v))
            except (ValueError, TypeError, KeyError, ArithmeticError) as e:
                error = PoisonRecordError(f"record {r.topic}/{r.partition}@{r.offset}: {e}", topic=r.topic,
                                          partition=r.partition, offset=r.offset)
                if not self.tolerate:
                    raise error from e
                result.dead_letters.append(DeadLetter(r, error))
                continue
            rows.append({**row, "__topic": r.topic, "__partition": r.partition, "__offset": r.offset,
                         "__timestamp": r.timestamp_us})
            coordinates.append(r.coordinates)
            kept.append(r)
        schema = pa.schema([(n, t or pa.string()) for n, t in fields.items()] + [
            ("__topic", pa.string()), ("__partition", pa.int32()), ("__offset", pa.int64()),
            ("__timestamp", pa.timestamp("us", tz="UTC"))])
        for row in rows:
            if row["__timestamp"] is not None:
                row["__timestamp"] = pa.scalar(row["__timestamp"], pa.timestamp("us", tz="UTC")).as_py()
        while True:
            try:
                return to_arrow(self.path, rows, schema, coordinates)
            except PoisonRecordError as e:
                if not self.tolerate:
                    raise
                i = e.details["row"]
                result.dead_letters.append(DeadLetter(kept[i], e))
                del rows[i], coordinates[i], kept[i]
