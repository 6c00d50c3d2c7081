"""The record frame: how Connect's records look inside Spark.

A *record frame* is a DataFrame with one row per Kafka Connect record:

==========  ==========================================  ====================================
column      type                                        Kafka Connect's ``ConnectRecord``
==========  ==========================================  ====================================
topic       string                                      ``topic()``
partition   int (null: let the producer choose)        ``kafkaPartition()``
offset      long (null for source records)              ``SinkRecord.kafkaOffset()``
timestamp   timestamp                                   ``timestamp()``
key         any Spark type (binary before conversion)   ``key()`` with ``keySchema()``
value       any Spark type; null is a tombstone         ``value()`` with ``valueSchema()``
headers     array<struct<key string, value binary>>     ``headers()`` (already serialised)
==========  ==========================================  ====================================

The Spark type of ``key``/``value`` is the record's schema: Kafka lets each record carry its own
schema, Spark gives one type to a column, so one frame holds records of one key and one value schema.

Two optional columns travel with the rows and every converter and transform keeps them:

- :data:`ERROR` (struct<stage, class, message>): set by the first stage that could not convert or
  transform the row, null otherwise. A stage never fails the batch for one bad record: it flags the
  row, later stages leave flagged rows alone (they may compute garbage for them, never fail), and
  the runtime splits the frame with :func:`split_errors` — dead-letter queue under
  ``errors.tolerance=all``, a :class:`~connect.errors.DataError` naming the first bad row otherwise.
  So each step yields "(frame, error column)" as one DataFrame, since a Column computed from a
  frame's old ``value`` would no longer mean the same once the step replaced ``value``.
- :data:`ORIGINAL` (struct<topic, key, value, headers> as consumed): what the dead-letter queue
  writes, as Kafka's ``errors.deadletterqueue`` writes the record as it was read, and the topic an
  error names (Kafka's ``context.original().topic()``), which a ``RegexRouter`` or
  ``TimestampRouter`` may have renamed in ``topic`` since.

A null ``key`` or ``value`` is a record whose schema is null too (a tombstone, as consumed) unless
the hidden boolean column :func:`typed_null` names is true for the row: then it is a null *with* a
schema, as Kafka's ``SchemaAndValue(schema, null)`` — what ``ExtractField`` gives for a null field
or Debezium's unwrap for a delete. ``JsonConverter.fromConnectData`` writes null bytes only when
schema and value are both null; a null with a schema is ``{"schema": …, "payload": null}`` or the
JSON ``null``. The column exists once a step could make such a null (a JsonConverter reading
envelopes, ``ExtractField`` on a schema'd value, the unwrap's ``tombstone`` mode), and the
converter that writes the record drops it; a step that makes the value non-null leaves it, as it
means nothing then.

A stage may also flag a row with the :data:`REBIND` stage: its JSON does not fit the type a
converter carried over from an earlier batch (a schema change). Such a row is no bad record: the
runtime infers the type again from the batch and runs the batch once more.

Failing without a separate scan. Under ``errors.tolerance=none`` the frames the sink reads carry a
:func:`raising` guard, so the sink's own write job fails on the first flagged row with a message
that names it; :func:`raised` finds that message again in the exception the write throws.
"""
from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from connect.errors import DataError

RECORD_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
ERROR = "__connect_error"
ORIGINAL = "__connect_original"
REBIND = "rebind"
FAIL = "fail"
_RAISED = re.compile(r"\[USER_RAISED_EXCEPTION\] <<connect:(\w+)>>(.*?)<</connect>>", re.S)
"""The guard's message as Spark's ``raise_error`` throws it (error class ``USER_RAISED_EXCEPTION``),
never the guard's literal in a plan that an error about something else prints."""

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
ERROR_TYPE = StructType([StructField("stage", StringType()), StructField("class", StringType()),
                         StructField("message", StringType())])


def typed_null(column: str) -> str:
    """The hidden column marking rows whose ``column`` (``key`` or ``value``) is a null with a
    schema rather than a tombstone (see the module docstring)."""
    return f"__connect_{column}_typed_null"


def is_typed_null(frame: DataFrame, column: str) -> Column:
    """True where ``frame[column]`` is null and has a schema; false for a tombstone."""
    name = typed_null(column)
    return F.col(column).isNull() & F.coalesce(F.col(name), F.lit(False)) if name in frame.columns else F.lit(False)


def from_source(source: DataFrame, keep_original: bool = True) -> DataFrame:
    """A record frame from ``format("riverlog")`` rows (key and value still bytes), with an empty
    error column and, for the dead-letter queue, the consumed bytes."""
    cols = [F.col(c) for c in RECORD_COLUMNS]
    cols.append(F.lit(None).cast(ERROR_TYPE).alias(ERROR))
    if keep_original:
        cols.append(F.struct("topic", "key", "value", "headers").alias(ORIGINAL))
    return source.select(*cols)


def consumed_topic(frame: DataFrame) -> Column:
    """The topic a row was consumed from: :data:`ORIGINAL`'s where the frame keeps it, else
    ``topic`` (a source connector's frame, which keeps no original)."""
    return F.col(ORIGINAL).topic if ORIGINAL in frame.columns else F.col("topic")


def to_sink(frame: DataFrame, partition: bool = False) -> DataFrame:
    """The columns the riverlog sink writes (topic, key, value, headers, timestamp, and partition
    when asked): key and value must already be converted to bytes or strings."""
    for name in ("key", "value"):
        t = frame.schema[name].dataType
        if not isinstance(t, (BinaryType, StringType)):
            raise DataError(f"record frame column {name!r} is {t.simpleString()}; convert it to bytes with a "
                            "converter's from_column before writing")
    cols = ["topic", "key", "value", "headers", "timestamp"] + (["partition"] if partition else [])
    return frame.select(*cols)


def error_struct(stage: "str | Column", cls: str, message: Column) -> Column:
    stage = F.lit(stage) if isinstance(stage, str) else stage
    return F.struct(stage.alias("stage"), F.lit(cls).alias("class"), message.alias("message"))


def flag(frame: DataFrame, failed: Column, stage: "str | Column", cls: str, message: Column,
         replace: dict, drop: "tuple[str, ...] | list[str]" = ()) -> DataFrame:
    """Replace columns and flag failing rows in one projection, so ``failed`` and ``message`` see the
    frame as it was before the step; ``drop`` leaves columns out of it (a step's hidden stages).
    The first error a row got is kept."""
    new = error_struct(stage, cls, message)
    err = F.when(failed, new)
    columns = frame.columns
    if ERROR in columns:
        err = F.coalesce(F.col(ERROR), err)
    out = [replace[c].alias(c) if c in replace else F.col(c) for c in columns if c != ERROR and c not in drop]
    out += [replace[c].alias(c) for c in replace if c not in columns]
    return frame.select(*out, err.cast(ERROR_TYPE).alias(ERROR))


def error_column(frame: DataFrame) -> Column:
    """The error column of a frame (null for every row when no stage flagged one)."""
    return F.col(ERROR) if ERROR in frame.columns else F.lit(None).cast(ERROR_TYPE)


def fence(c: Column) -> Column:
    """``c`` unchanged, but nondeterministic to Spark's optimizer (``spark_partition_id`` is never
    negative), so a filter above it — a sink's own, or a ``Filter`` transform's — stays above instead
    of being pushed down through the projections beneath, which would compute them a second time
    for the filter (a JSON parse, every converter check) with no sharing."""
    return F.when(F.spark_partition_id() >= 0, c)


def split_errors(frame: DataFrame, fail: Column | None = None, rebind: bool = False) -> tuple[DataFrame, DataFrame]:
    """(records that went through every stage, records some stage flagged) — the second for the
    dead-letter queue or to fail the task, per ``errors.tolerance``.

    ``fail`` (``errors.tolerance=none``): the message naming a flagged row; reading the first
    frame's key or value then fails on such a row instead of leaving it out (the second frame is
    empty): the guard sits in those columns, behind a :func:`fence`, rather than in a filter that
    Spark would push down through every stage below and compute them again for. ``rebind``:
    reading either frame fails on a :data:`REBIND` row."""
    columns = frame.columns
    if ERROR not in columns:
        return frame, frame.limit(0)
    err = F.col(ERROR)
    again = raising(REBIND, F.lit("a record does not fit the type carried from an earlier batch"))
    if fail is not None:
        keep = F.when(err.isNull(), F.lit(True))
        if rebind:
            keep = keep.when(err.stage == REBIND, again)
        keep = keep.otherwise(raising(FAIL, fail))
        return frame.select(*[fence(F.when(keep, F.col(c))).alias(c) if c in ("key", "value") else F.col(c)
                              for c in columns if c != ERROR]), frame.limit(0)
    frame = frame.withColumn(ERROR, fence(err))
    good, bad = err.isNull(), err.isNotNull()
    if rebind:
        good = F.when(err.stage == REBIND, again).otherwise(good)
        bad = F.when(err.stage == REBIND, again).otherwise(bad)
    return frame.where(good).drop(ERROR), frame.where(bad)


def raising(kind: str, message: Column) -> Column:
    """A boolean column that fails the Spark job reading it, with ``message`` marked as ``kind``
    (:data:`FAIL` or :data:`REBIND`) so that :func:`raised` can tell it from other failures."""
    return F.raise_error(F.concat(F.lit(f"<<connect:{kind}>>"), message, F.lit("<</connect>>"))).cast("boolean")


def raised(exc: BaseException) -> tuple[str, str] | None:
    """(kind, message) of the :func:`raising` guard that failed the job behind ``exc``, if one did
    (looked for in the exception and its causes, as a sink may wrap Spark's error). Only the raise
    itself counts: an analysis or runtime error about something else quotes the query plan, and
    the guard's ``<<connect:…>>`` literal with it."""
    seen = 0
    while exc is not None and seen < 10:
        m = _RAISED.search(str(exc))
        if m:
            return m.group(1), m.group(2)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
