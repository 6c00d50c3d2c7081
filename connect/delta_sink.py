"""``DeltaSink``: Debezium change events from topics into Delta tables, exactly once, as a Connect
sink connector (the through-the-broker half of CDC to Delta; docs/cdc.md).

Each micro-batch goes to :mod:`spark_sink.delta` as the raw records (``key`` and ``value`` bytes,
the ``riverlog.cdc.*`` headers that order changes exactly): the connector defaults both converters
to ``ByteArrayConverter``, since the sink parses Debezium's JSON itself (with or without the
``{"schema", "payload"}`` envelope). SCD type 1 mirrors the source table, type 2 keeps its history;
``delta.mode=append`` appends a plain topic instead.

Exactly once. The worker runs ``write_batch`` and then commits the consumer group
``connect-<name>``. The Delta commit carries the application transaction ``(connect-<name>.<query
id>, batch id)``: a crash between the two replays the batch with the same id (Spark's checkpoint),
which the table recognises and skips, so only the group commit is redone. A query that lost its
checkpoint gets a new query id, hence a new app id, and starts from the group's committed offsets;
the table's commit metadata (the highest position it holds per partition) drops what it has already.

Dead letters. A record the sink cannot apply (not Debezium JSON, a key column missing, a value its
column cannot hold) is returned to the worker: with ``errors.tolerance=all`` it goes to
``errors.deadletterqueue.topic.name`` at stage TASK_PUT in the transaction that moves the group's
offsets, and every other record of the batch is in the table; with ``none`` the batch fails before
its offsets move, naming the record (another source table's MERGE of the batch may have committed
with the batch's application transaction: a replay skips it). A replayed batch the table holds returns the same dead
letters again (found before the MERGE, recomputed without writing), so a crash between the Delta
commit and that transaction loses none; the DLQ is at least once, as Kafka Connect's.

    {"connector.class": "DeltaSink", "topics": "shop.public.customers", "delta.table.path": "/lake/customers",
     "primary.key.fields": "id", "scd.type": "2", "errors.tolerance": "all",
     "errors.deadletterqueue.topic.name": "dlq.customers"}
"""
from __future__ import annotations

import logging

from pyspark.sql import DataFrame

from connect.config import CONVERTERS
from connect.config_def import ConfigDef, ConfigKey, Importance, Type, Width
from connect.config_validators import one_of
from connect.connector import SinkConnector, register_connector
from connect.converters import BYTE_ARRAY_CONVERTER, STRING_CONVERTER
from connect.errors import ConfigError, DataError

log = logging.getLogger(__name__)

GROUP = "Delta"
CRASH_POINT = "before_group_commit"
"""The :mod:`spark_sink.crash_points` point between a batch's Delta commit and its group commit."""
_REJECTED_SCHEMA = "topic string, partition int, offset long, message string"
_RAW_CONVERTERS = (BYTE_ARRAY_CONVERTER, STRING_CONVERTER)


def _key(name: str, type_: str, default, doc: str, order: int, validator=None,
         importance: str = Importance.HIGH) -> ConfigKey:
    return ConfigKey(name, type_, default, validator, importance, doc, GROUP, order, Width.LONG, name)


@register_connector
class DeltaSink(SinkConnector):
    """Debezium change events into Delta tables (see the module docstring)."""
    class_name = "io.riverlog.connect.delta.DeltaSinkConnector"
    aliases = ("DeltaSink", "DeltaSinkConnector")
    bytes_in_bytes_out = True
    config_def = ConfigDef([
        _key("delta.table.path", Type.STRING, "",
             "The Delta table every record goes to; it mirrors one source table (records of a second one fail "
             "the batch: use delta.root.path or a topic filter). Set this or delta.root.path.", 1),
        _key("delta.root.path", Type.STRING, "",
             "A directory holding one Delta table per source table, <root>/<schema>.<table>.", 2),
        _key("primary.key.fields", Type.LIST, "",
             "Key columns, separated by commas; empty: the fields of the record key (Debezium's primary key).", 3),
        _key("scd.type", Type.STRING, "1", "1: the table mirrors the source; 2: history rows with __valid_from, "
             "__valid_to, __is_current, __op, __lsn, __order.", 4, one_of("1", "2")),
        _key("delta.mode", Type.STRING, "cdc", "cdc: Debezium change events; append: a plain topic's records "
             "appended (delta.table.path only).", 5, one_of("cdc", "append"), Importance.MEDIUM),
        _key("value.format", Type.STRING, "raw", "delta.mode=append: raw Kafka-shaped rows, or json: the value's "
             "fields as columns.", 6, one_of("raw", "json"), Importance.LOW),
        _key("delta.app.id", Type.STRING, "", "The Delta application transaction id; empty: connect-<name>.<the "
             "streaming query's id>, which a lost checkpoint renews (keep it empty unless you know why).", 7,
             None, Importance.LOW),
        _key("unavailable.value.placeholder", Type.STRING, "__debezium_unavailable_value",
             "Debezium's marker of an unchanged TOAST value; the table keeps its current value.", 8, None,
             Importance.LOW),
    ])

    def __init__(self, config, context):
        super().__init__(config, context)
        errors = self.problems(config.originals)
        if errors:
            count = sum(len(v) for v in errors.values())
            raise ConfigError(f"Connector configuration is invalid and contains the following {count} error(s):\n"
                              + "\n".join(m for ms in errors.values() for m in ms), errors=errors)
        self.settings = self._settings(self.values, config.originals)
        self._appliers: dict[str, object] = {}

    @staticmethod
    def _settings(values, props) -> dict[str, str]:
        """The Delta options as :func:`spark_sink.delta.from_config` takes them."""
        return {**{k: ",".join(v) if isinstance(v, (list, tuple)) else str(v) for k, v in values.items()},
                "errors.tolerance": str(props.get("errors.tolerance") or "none").strip()}

    @classmethod
    def problems(cls, props) -> dict[str, list[str]]:
        """What the per-key checks cannot see: one of the two paths (``append`` needs the table
        path), and converters that leave the record bytes alone."""
        from spark_sink.delta import DeltaConfigError, from_config
        values = cls.config_def.validate_all(props)
        if any(v.errors for v in values.values()):
            return {}   # listed by the per-key checks
        errors: dict[str, list[str]] = {}
        for which in ("key", "value"):
            name = props.get(f"{which}.converter")
            plugin = CONVERTERS.get(str(name).strip()) if name else None
            full = plugin.class_name if plugin is not None else name
            if full and full not in _RAW_CONVERTERS:
                errors[f"{which}.converter"] = [
                    f"DeltaSink parses Debezium's JSON itself: use {BYTE_ARRAY_CONVERTER} (the default) or "
                    f"{STRING_CONVERTER}, not {name}"]
        try:
            from_config(cls._settings({n: v.value for n, v in values.items()}, props))
        except DeltaConfigError as e:
            for field, found in (e.details.get("errors") or {"delta.table.path": [e.message]}).items():
                errors.setdefault(field, []).extend(found)
        return errors

    def app_id(self, query_id: str | None) -> str:
        explicit = self.values.get("delta.app.id")
        return explicit or f"connect-{self.config.name}" + (f".{query_id}" if query_id else "")

    def _applier(self, spark):
        """One sink function per streaming query (its id is part of the default app id)."""
        from spark_sink.delta import from_config
        from spark_sink.delta.apply import streaming_query_id
        app_id = self.app_id(streaming_query_id(spark))
        if app_id not in self._appliers:
            self._appliers = {app_id: from_config({**self.settings, "delta.app.id": app_id})}
        return self._appliers[app_id]

    def write_batch(self, frame: DataFrame, batch_id: int) -> DataFrame | None:
        from spark_sink.crash_points import crash_at
        from spark_sink.delta import PoisonRecordError
        apply = self._applier(frame.sparkSession)
        try:
            result = apply(frame.select("topic", "partition", "offset", "timestamp", "key", "value", "headers"),
                           batch_id)
        except PoisonRecordError as e:   # errors.tolerance=none: nothing of the batch was committed
            d = e.details
            raise DataError(f"Tolerance exceeded in error handler (errors.tolerance=none) for connector "
                            f"'{self.config.name}': topic '{d.get('topic')}' partition {d.get('partition')} "
                            f"offset {d.get('offset')}: stage TASK_PUT ({self.class_name}) failed: {e.message}") \
                from e
        if any(t.version is not None for t in result.tables.values()):
            crash_at(CRASH_POINT, batch_id)
        if not result.dead_letters:
            return None
        rows = [(d.record.topic, d.record.partition, d.record.offset, d.error.message) for d in result.dead_letters]
        return frame.sparkSession.createDataFrame(rows, _REJECTED_SCHEMA)


__all__ = ["DeltaSink"]
