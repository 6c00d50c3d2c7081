"""The MERGE a folded batch becomes, described once and run by delta-rs or by delta-spark.

A :class:`MergePlan` is the source rows (an Arrow table with an ``__action`` column saying what each
row is for), the join predicate and the clauses. :func:`run_delta_rs` is the default engine.
:func:`run_delta_spark` runs the same plan with ``delta-spark``'s ``DeltaTable.merge`` when the
user's session has the Delta extension loaded; idempotence there is Delta's own
``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` and the commit metadata goes in
``spark.databricks.delta.commitInfo.userMetadata``. The delta-spark path is not tested in this
repository (its jars need Maven, which is not reachable here).
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

import pyarrow as pa

ACTION = "__action"


def q(name: str) -> str:
    """A column name quoted for the MERGE SQL expressions."""
    return "`" + name.replace("`", "``") + "`"


@dataclass
class MergePlan:
    source: pa.Table
    predicate: str
    matched_update: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    matched_delete: list[str] = field(default_factory=list)
    not_matched_insert: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    merge_schema: bool = False
    by_source_update: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    by_source_delete: bool = False   # a truncate: rows the batch does not name are deleted


def scd1_plan(source: pa.Table, key_columns, columns, merge_schema: bool, truncate: bool = False,
              kept=()) -> MergePlan:
    """Upserts (``__action='u'``) and deletes (``'d'``) by key; after a truncate, every other row goes.
    An update leaves the ``kept`` columns (those the source no longer sends) as they are, as
    Debezium's JDBC sink's upsert sets only the record's fields; an insert writes them null."""
    on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in key_columns) or "false"   # no keys: only truncates
    values = {q(c): f"s.{q(c)}" for c in columns}
    updates = {q(c): f"s.{q(c)}" for c in columns if c not in set(kept)}
    return MergePlan(source, on, matched_update=[(f"s.{ACTION} = 'u'", updates)],
                     matched_delete=[f"s.{ACTION} = 'd'"],
                     not_matched_insert=[(f"s.{ACTION} = 'u'", values)], merge_schema=merge_schema,
                     by_source_delete=truncate)


def scd2_plan(source: pa.Table, key_columns, columns, merge_schema: bool, truncate_us: int | None = None) -> MergePlan:
    """``'close'`` rows end the key's current row; ``'insert'`` rows are new history rows; a
    truncate (its time in microseconds) ends every other current row."""
    on = " AND ".join([f"t.{q(k)} = s.{q(k)}" for k in key_columns]
                      + ["t.`__is_current` = true", f"s.{ACTION} = 'close'"]) if key_columns else "false"
    by_source = []
    if truncate_us is not None:
        at = (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=truncate_us)).isoformat() + "Z"
        by_source = [("t.`__is_current` = true",
                      {"`__is_current`": "false", "`__valid_to`": f"CAST('{at}' AS TIMESTAMP)"})]
    return MergePlan(source, on,
                     matched_update=[("", {"`__is_current`": "false", "`__valid_to`": "s.`__valid_to`"})],
                     not_matched_insert=[(f"s.{ACTION} = 'insert'", {q(c): f"s.{q(c)}" for c in columns})],
                     merge_schema=merge_schema, by_source_update=by_source)


def run_delta_rs(dt, plan: MergePlan, commit_properties) -> dict:
    merger = dt.merge(plan.source, plan.predicate, source_alias="s", target_alias="t",
                      merge_schema=plan.merge_schema, commit_properties=commit_properties)
    for predicate, updates in plan.matched_update:
        merger = merger.when_matched_update(updates, predicate=predicate or None)
    for predicate in plan.matched_delete:
        merger = merger.when_matched_delete(predicate)
    for predicate, values in plan.not_matched_insert:
        merger = merger.when_not_matched_insert(values, predicate=predicate or None)
    for predicate, updates in plan.by_source_update:
        merger = merger.when_not_matched_by_source_update(updates, predicate=predicate or None)
    if plan.by_source_delete:
        merger = merger.when_not_matched_by_source_delete()
    return merger.execute()


def has_delta_extension(spark) -> bool:
    """True when the session was built with Delta's SQL extension (and delta-spark imports)."""
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
        import delta.tables  # noqa: F401
    except Exception:
        return False
    return "DeltaSparkSessionExtension" in extensions


def run_delta_spark(spark, path: str, plan: MergePlan, app_id: str, batch_id: int, metadata: dict,
                    transaction: bool = True) -> None:
    """The same MERGE through delta-spark (untested here; see the module docstring); without
    ``transaction`` it records no application transaction."""
    from delta.tables import DeltaTable as SparkDeltaTable
    confs = {**({"spark.databricks.delta.write.txnAppId": app_id,
                 "spark.databricks.delta.write.txnVersion": str(batch_id)} if transaction else {}),
             "spark.databricks.delta.commitInfo.userMetadata": json.dumps(metadata),
             "spark.databricks.delta.schema.autoMerge.enabled": "true" if plan.merge_schema else "false"}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        source = spark.createDataFrame(plan.source)
        merger = SparkDeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), plan.predicate)
        for predicate, updates in plan.matched_update:
            merger = merger.whenMatchedUpdate(condition=predicate or None, set=updates)
        for predicate in plan.matched_delete:
            merger = merger.whenMatchedDelete(condition=predicate)
        for predicate, values in plan.not_matched_insert:
            merger = merger.whenNotMatchedInsert(condition=predicate or None, values=values)
        for predicate, updates in plan.by_source_update:
            merger = merger.whenNotMatchedBySourceUpdate(condition=predicate or None, set=updates)
        if plan.by_source_delete:
            merger = merger.whenNotMatchedBySourceDelete()
        merger.execute()
    finally:
        for k in confs:
            spark.conf.unset(k)
