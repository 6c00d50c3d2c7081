"""What happens to a record some stage could not convert, transform or write: Kafka's
``errors.tolerance`` (fail the connector, naming the record), ``errors.log.enable`` (log it) and
``errors.deadletterqueue.*`` (write it as consumed to the DLQ topic, with Kafka's
``__connect.errors.*`` context headers when asked).

Header names and values are ``DeadLetterQueueReporter``'s: UTF-8 strings, numbers in decimal::

    __connect.errors.topic / .partition / .offset       where the record was consumed (the topic before
                                                        any RegexRouter or TimestampRouter renamed it)
    __connect.errors.connector.name / .task.id
    __connect.errors.stage                              KEY_CONVERTER, VALUE_CONVERTER, TRANSFORMATION, TASK_PUT
    __connect.errors.class.name                         the converter, transform or connector class
    __connect.errors.exception.class.name / .exception.message / .exception.stacktrace
"""
from __future__ import annotations

import logging

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from connect.config import SINK, ConnectorConfig
from connect.errors import DataError
from connect.record_frame import ERROR, HEADERS_TYPE, ORIGINAL, consumed_topic

log = logging.getLogger("connect.errors")

PREFIX = "__connect.errors."
DATA_EXCEPTION = "org.apache.kafka.connect.errors.DataException"


def kafka_stage(stage: Column) -> Column:
    """The frame's stage names (``value.converter``, ``transforms.<alias>``) as Kafka's ``Stage``."""
    return (F.when(stage == "key.converter", F.lit("KEY_CONVERTER"))
            .when(stage == "value.converter", F.lit("VALUE_CONVERTER"))
            .when(stage == "header.converter", F.lit("HEADER_CONVERTER"))
            .when(stage.startswith("transforms."), F.lit("TRANSFORMATION"))
            .otherwise(F.upper(stage)))


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(PREFIX + name).alias("key"), F.encode(value.cast("string"), "UTF-8").alias("value"))


def context_headers(connector: str, topic: Column) -> Column:
    """Kafka's context headers; ``topic`` is the one the record was consumed from."""
    err = F.col(ERROR)
    trace = F.concat(F.lit(DATA_EXCEPTION + ": "), err.message, F.lit("\n\tat "), err["class"],
                     F.lit(" ("), err.stage, F.lit(")"))
    return F.array(_header("topic", topic), _header("partition", F.col("partition")),
                   _header("offset", F.col("offset")), _header("connector.name", F.lit(connector)),
                   _header("task.id", F.lit(0)), _header("stage", kafka_stage(err.stage)),
                   _header("class.name", err["class"]), _header("exception.class.name", F.lit(DATA_EXCEPTION)),
                   _header("exception.message", err.message), _header("exception.stacktrace", trace))


def dead_letter_frame(bad: DataFrame, config: ConnectorConfig) -> DataFrame:
    """The DLQ records for flagged rows: the record as consumed (key, value, headers bytes and its
    timestamp, as Kafka's reporter keeps it) to ``errors.deadletterqueue.topic.name``, context
    headers appended when enabled."""
    original = F.col(ORIGINAL)
    headers = F.coalesce(original.headers, F.array().cast(HEADERS_TYPE))
    if config.dlq_context_headers_enable:
        headers = F.concat(headers, context_headers(config.name, consumed_topic(bad)))
    stamp = F.col("timestamp") if "timestamp" in bad.columns else F.lit(None).cast("timestamp")
    return bad.select(F.lit(config.dlq_topic).alias("topic"), original.key.alias("key"),
                      original.value.alias("value"), headers.cast(HEADERS_TYPE).alias("headers"),
                      stamp.alias("timestamp"))


def describe(row) -> str:
    """One flagged row of :func:`report` as the failure message names it (its consumed topic)."""
    err = row[ERROR]
    where = f"topic '{row['topic']}'"
    if row["partition"] is not None:
        where += f" partition {row['partition']}"
    if row["offset"] is not None:
        where += f" offset {row['offset']}"
    return f"{where}: stage {err['stage']} ({err['class']}) failed: {err['message']}"


def describe_column(frame: DataFrame) -> Column:
    """:func:`describe` as a column of ``frame``, for the message a failing write carries."""
    err = F.col(ERROR)
    text = lambda c: F.coalesce(c.cast("string"), F.lit("null"))  # noqa: E731
    return F.concat(F.lit("topic '"), text(consumed_topic(frame)), F.lit("'"),
                    F.when(F.col("partition").isNotNull(), F.concat(F.lit(" partition "), text(F.col("partition"))))
                    .otherwise(F.lit("")),
                    F.when(F.col("offset").isNotNull(), F.concat(F.lit(" offset "), text(F.col("offset"))))
                    .otherwise(F.lit("")),
                    F.lit(": stage "), text(err.stage), F.lit(" ("), text(err["class"]), F.lit(") failed: "),
                    text(err.message))


def log_message(row, config: ConnectorConfig) -> str:
    """Kafka's ``LogReporter`` line for a row of :func:`report`: stage and class; with
    ``errors.log.include.messages`` the record's coordinates (a sink record: topic, partition,
    offset, timestamp and its type; never its key or value, which stay out of log files) or, for a source
    record, its key and value too."""
    err = row[ERROR]
    text = (f"Error encountered in task {config.name}-0. Executing stage '{row['kafka_stage'] or ''}' with class "
            f"'{err['class']}'")
    if config.errors_log_include_messages:
        if config.kind == SINK:
            text += (f", where consumed record is {{topic='{row['topic']}', partition={row['partition']}, "
                     f"offset={row['offset']}")
            if row["timestamp"] is not None:   # Kafka's TimestampType names
                kind = "LogAppendTime" if row["timestamp_type"] == 1 else "CreateTime"
                text += f", timestamp={row['timestamp']}, timestampType={kind}"
            text += "}"
        else:
            text += (f", where source record is = {{topic='{row['topic']}', key={row['key']!r}, "
                     f"value={row['value']!r}}}")
    return f"{text}.\n{DATA_EXCEPTION}: {err['message']}"


def report(bad: DataFrame, config: ConnectorConfig, limit: int = 20) -> list:
    """Log every flagged row when ``errors.log.enable`` (see :func:`log_message`); returns the first
    ``limit`` of them (what a failure names)."""
    source_record = config.errors_log_include_messages and config.kind != SINK
    stamp = (F.col("timestamp").cast("double") * 1000).cast("long").alias("timestamp") \
        if "timestamp" in bad.columns else F.lit(None).cast("long").alias("timestamp")
    kind = F.col("timestampType") if "timestampType" in bad.columns else F.lit(0)
    cols = [consumed_topic(bad).alias("topic"), F.col("partition"), F.col("offset"), stamp,
            kind.cast("int").alias("timestamp_type"), F.col(ERROR),
            kafka_stage(F.col(ERROR).stage).alias("kafka_stage")]
    if source_record:
        cols += [F.col("key").cast("string"), F.col("value").cast("string")]
    if not config.errors_log_enable:
        return bad.select(*cols).limit(limit).collect()
    rows = []
    for row in bad.select(*cols).toLocalIterator():  # every flagged record is logged, as Kafka's are
        log.error("%s", log_message(row, config))
        if len(rows) < limit:
            rows.append(row)
    return rows


def fail(rows: list, config: ConnectorConfig) -> DataError:
    """``errors.tolerance=none``: the error that fails the connector, naming the first bad record."""
    return tolerance_exceeded(describe(rows[0]), config)


def tolerance_exceeded(described: str, config: ConnectorConfig) -> DataError:
    """The error for a record :func:`describe` (or :func:`describe_column`) named."""
    return DataError(f"Tolerance exceeded in error handler (errors.tolerance=none) for connector "
                     f"'{config.name}': {described}")


__all__ = ["context_headers", "dead_letter_frame", "describe", "describe_column", "fail", "kafka_stage", "log_message",
           "report", "tolerance_exceeded"]
