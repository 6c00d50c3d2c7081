"""The fixed parts of Debezium's schemas and names: the PostgreSQL ``source`` block, the
transaction block and transaction topic schemas, schema names, topic names, and the
fallback a required field gets when its value was not sent."""
from __future__ import annotations

import re
from typing import Any

SOURCE_SCHEMA_NAME = "io.debezium.connector.postgresql.Source"
SNAPSHOT_ALLOWED = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"


def schema_name(prefix: str, schema: str, table: str, suffix: str) -> str:
    """A table's ``Key``, ``Value`` or ``Envelope`` schema name: its topic name and the suffix,
    unchanged otherwise, as Debezium 2.x names them under its default
    ``schema.name.adjustment.mode=none`` (``TableSchemaBuilder`` with the topic naming strategy's
    ``recordSchemaPrefix``); "a-b" and "1st" stay as they are."""
    return f"{topic_name(prefix, schema, table)}.{suffix}"


def topic_name(prefix: str, schema: str, table: str) -> str:
    """``<topic.prefix>.<schema>.<table>``, characters Kafka refuses in a topic name as '_'."""
    return re.sub(r"[^A-Za-z0-9._\-]", "_", f"{prefix}.{schema}.{table}")


# JdbcValueConverters' fallbacks for the string-encoded temporals: the epoch (UTC), midnight, zero.
_FALLBACKS = {"io.debezium.time.ZonedTimestamp": "1970-01-01T00:00:00Z", "io.debezium.time.ZonedTime": "00:00:00Z",
              "io.debezium.time.Interval": "P0Y0M0DT0H0M0S"}


def fallback(field_schema: dict) -> Any:
    """What Debezium's converters give a required (NOT NULL) field whose value was not sent (the
    non-key columns of a delete's or key change's old tuple under REPLICA IDENTITY DEFAULT):
    the type's zero, never null, so the struct stays valid under its schema."""
    kind, name = field_schema["type"], field_schema.get("name")
    if name in _FALLBACKS:
        return _FALLBACKS[name]
    if name == "io.debezium.data.VariableScaleDecimal":
        return {"scale": 0, "value": "AA=="}
    if name == "org.apache.kafka.connect.data.Decimal":
        return "AA=="
    if name == "io.debezium.data.geometry.Point":   # PostgresValueConverter.convertPoint: Point.createValue(0, 0)
        from spark_source.postgres.special_types import point
        return point("(0,0)")
    return {"string": "", "bytes": "", "boolean": False, "float32": 0.0, "float64": 0.0,
            "array": [], "map": {}}.get(kind, 0 if kind.startswith("int") else None)


def field(kind: str, field_name: str, optional: bool, **extra) -> dict:
    return {"type": kind, "optional": optional, **extra, "field": field_name}


SOURCE_FIELDS = [
    field("string", "version", False), field("string", "connector", False), field("string", "name", False),
    field("int64", "ts_ms", False), field("int64", "ts_us", True), field("int64", "ts_ns", True),
    field("string", "snapshot", True, name="io.debezium.data.Enum", version=1,
           parameters={"allowed": SNAPSHOT_ALLOWED}, default="false"),
    field("string", "db", False), field("string", "sequence", True), field("string", "schema", False),
    field("string", "table", False), field("int64", "txId", True), field("int64", "lsn", True),
    field("int64", "xmin", True)]

TRANSACTION_BLOCK = {"type": "struct", "fields": [
    field("string", "id", False), field("int64", "total_order", False),
    field("int64", "data_collection_order", False)], "optional": True, "name": "event.block", "version": 1,
    "field": "transaction"}

ENVELOPE_VERSION = 2
"""``Envelope.SCHEMA_VERSION``: the version JsonConverter writes for a change event's value schema.
Debezium's ``SchemaFactory`` versions the transaction schemas 1; the table's Key and Value none."""

TRANSACTION_KEY_SCHEMA = {"type": "struct", "fields": [field("string", "id", False)], "optional": False,
                          "name": "io.debezium.connector.common.TransactionMetadataKey", "version": 1}

TRANSACTION_VALUE_SCHEMA = {"type": "struct", "fields": [
    field("string", "status", False), field("string", "id", False), field("int64", "event_count", True),
    {"type": "array", "items": {"type": "struct", "fields": [
        field("string", "data_collection", False), field("int64", "event_count", False)], "optional": True,
        "name": "event.collection", "version": 1},
     "optional": True, "field": "data_collections"},
    field("int64", "ts_ms", False)], "optional": False, "name": "io.debezium.connector.common.TransactionMetadataValue",
    "version": 1}


def source_schema() -> dict:
    return {"type": "struct", "fields": SOURCE_FIELDS, "optional": False, "name": SOURCE_SCHEMA_NAME,
            "field": "source"}
