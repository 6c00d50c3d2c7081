"""``PostgresCdcSource``: Debezium's PostgreSQL connector (``io.debezium.connector.postgresql.
PostgresConnector``) as a Connect source over the ``postgres-cdc`` Spark source.

A Debezium user's config carries over (``database.*``, ``topic.prefix``, ``table.include.list``,
``slot.name``, ``publication.autocreate.mode``, ``snapshot.mode``, ``plugin.name=pgoutput``, …):
each key is handed to ``format("postgres-cdc")`` under the same name and checked there
(:class:`spark_source.postgres.options.CdcOptions`), so the connector and the plain Spark source
accept exactly the same values. A Debezium key this connector does not implement
(``heartbeat.topics.prefix``, ``database.sslmode``, ``include.unknown.datatypes``,
…) is refused per field at POST/validate, as the Spark source refuses an unknown option: ignored,
it would change what reaches the topics (a column meant to be left out published) without a word.
Connect's own keys (converters, transforms, predicates, ``errors.*``, client overrides, topic
creation) stay the worker's.

Records. The source already writes Debezium's JSON, so the worker passes key and value bytes
through (``pre_serialized``: no converter runs in the pipeline); what a ``JsonConverter`` would
decide is decided here instead: ``key.converter.schemas.enable`` / ``value.converter.schemas.enable``
(true by default, as Kafka's) choose the envelope ``{"schema", "payload"}`` or the payload alone.
A ``ByteArrayConverter`` or ``StringConverter`` gets the JSON with its schema. Transforms see
bytes, so topic and header transforms apply; value transforms (``unwrap``) belong on the sink.

Offsets, as Debezium writes them: partition ``{"server": <topic.prefix>}``, offset
``{"lsn", "lsn_commit", "lsn_proc", "txId", "ts_usec"}`` once streaming (``lsn`` = the commit end
LSN of the last transaction in the batch), ``{"lsn", "snapshot": true, "last_snapshot_record":
false}`` while the snapshot runs, and ``last_snapshot_record: true`` once an ``initial_only``
snapshot is done. They are written in the batch's broker transaction. A query without a
checkpoint resumes from them (``startingOffsets``): an unfinished snapshot is taken again (as
Debezium does), a streaming offset resumes after its LSN, a missing slot fails (or, with
``snapshot.mode=when_needed``, snapshots again). The slot is acknowledged only after Spark
committed a batch, so it is never ahead of the stored offset unless keepalives moved it over WAL
with nothing for it; if it is, streaming goes on from the slot (nothing else can be sent).

    {"name": "shop-cdc", "config": {"connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1",
      "database.dbname": "shop", "topic.prefix": "shop", "table.include.list": "public.customers",
      "slot.name": "shop", "publication.autocreate.mode": "filtered", "snapshot.mode": "initial"}}
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from broker.errors import InvalidConfigError
from connect.config_def import ConfigDef, ConfigKey, ConfigValue, Importance, Invalid, Type, Width
from connect.connector import SourceConnector, register_connector
from connect.errors import ConfigError
from spark_source.postgres import column_lists, snapshot_overrides

log = logging.getLogger(__name__)

JSON_CONVERTERS = ("org.apache.kafka.connect.json.JsonConverter", "JsonConverter")
CONNECTION, CAPTURE, EVENTS = "Connection", "Capture", "Events"

# (name, type, default shown by validate, group, doc). Every key is passed to format("postgres-cdc")
# as given; the source's own parsing is the one check of its value.
_KEYS: tuple[tuple[str, str, Any, str, str], ...] = (
    ("database.hostname", Type.STRING, "localhost", CONNECTION, "Resolvable hostname or IP address of the server."),
    ("database.port", Type.INT, 5432, CONNECTION, "Port of the server."),
    ("database.user", Type.STRING, "postgres", CONNECTION, "Role to connect as (LOGIN and REPLICATION)."),
    ("database.password", Type.PASSWORD, None, CONNECTION, "Password of the role."),
    ("database.dbname", Type.STRING, "postgres", CONNECTION, "The database to capture."),
    ("topic.prefix", Type.STRING, None, CONNECTION,
     "Topics are <topic.prefix>.<schema>.<table>; also the source partition's server (default: the database)."),
    ("table.include.list", Type.STRING, None, CAPTURE, "Regexes of schema.table to capture (default: all)."),
    ("table.exclude.list", Type.STRING, None, CAPTURE, "Regexes of schema.table to leave out."),
    ("schema.include.list", Type.STRING, None, CAPTURE, "Regexes of schemas to capture (default: all)."),
    ("schema.exclude.list", Type.STRING, None, CAPTURE, "Regexes of schemas to leave out."),
    ("column.include.list", Type.STRING, None, EVENTS, "Regexes of schema.table.column the events carry."),
    ("column.exclude.list", Type.STRING, None, EVENTS, "Regexes of schema.table.column left out of the events."),
    ("message.key.columns", Type.STRING, None, EVENTS,
     "<schema>.<table regex>:<column>,... entries separated by ';': the record key's columns."),
    ("plugin.name", Type.STRING, "pgoutput", CAPTURE, "Logical decoding plugin; only pgoutput is supported."),
    ("slot.name", Type.STRING, "riverlog", CAPTURE, "The logical replication slot."),
    ("slot.drop.on.stop", Type.BOOLEAN, False, CAPTURE, "Drop the slot when the connector stops."),
    ("publication.name", Type.STRING, "riverlog_publication", CAPTURE, "The pgoutput publication."),
    ("publication.autocreate.mode", Type.STRING, "all_tables", CAPTURE, "all_tables, filtered or disabled."),
    ("snapshot.mode", Type.STRING, "initial", CAPTURE, "initial, initial_only, no_data (or never) or when_needed."),
    ("snapshot.fetch.size", Type.INT, 10_000, CAPTURE, "Snapshot rows per batch."),
    ("snapshot.select.statement.overrides", Type.STRING, None, CAPTURE,
     "schema.table names whose snapshot reads snapshot.select.statement.overrides.<schema>.<table>, a SELECT."),
    ("max.batch.size", Type.INT, None, CAPTURE, "Changes per batch, whole transactions (default: unlimited)."),
    ("transaction.spill.threshold.bytes", Type.LONG, 64 * 1024 * 1024, CAPTURE,
     "Bytes of a held transaction's changes kept in memory; the rest go to a temporary file."),
    ("transaction.spill.dir", Type.STRING, None, CAPTURE,
     "Where a held transaction's temporary file is made (default: the system's temporary directory)."),
    ("heartbeat.interval.ms", Type.INT, 10_000, CAPTURE, "Heartbeat messages keep an idle slot moving; 0 = off."),
    ("heartbeat.action.query", Type.STRING, None, CAPTURE, "SQL run on the database at each heartbeat."),
    ("decimal.handling.mode", Type.STRING, "precise", EVENTS, "precise, double or string."),
    ("time.precision.mode", Type.STRING, "adaptive", EVENTS, "adaptive, adaptive_time_microseconds or connect."),
    ("binary.handling.mode", Type.STRING, "bytes", EVENTS, "bytes, base64, base64-url-safe or hex."),
    ("interval.handling.mode", Type.STRING, "numeric", EVENTS, "numeric or string."),
    ("hstore.handling.mode", Type.STRING, "json", EVENTS, "json (a Json string) or map."),
    ("money.fraction.digits", Type.INT, 2, EVENTS, "Fraction digits of money values."),
    ("unavailable.value.placeholder", Type.STRING, "__debezium_unavailable_value", EVENTS,
     "Stands for an unchanged TOAST value."),
    ("tombstones.on.delete", Type.BOOLEAN, True, EVENTS, "A tombstone follows each delete."),
    ("provide.transaction.metadata", Type.BOOLEAN, False, EVENTS,
     "A transaction block in each event, BEGIN/END on <topic.prefix>.<topic.transaction>."),
    ("topic.transaction", Type.STRING, "transaction", EVENTS, "Suffix of the transaction metadata topic."),
    ("skipped.operations", Type.STRING, "t", EVENTS, "Operations not emitted (c, u, d, t, or none; r skips nothing)."),
    ("message.prefix.include.list", Type.STRING, None, EVENTS,
     "Regexes of pg_logical_emit_message prefixes emitted as op m events on <topic.prefix>.message."),
    ("message.prefix.exclude.list", Type.STRING, None, EVENTS, "Regexes of message prefixes left out."),
    ("skip.messages.without.change", Type.BOOLEAN, False, EVENTS,
     "Leave out an update whose before image (REPLICA IDENTITY FULL) equals its after image."),
)
_RENAMED = {"max.batch.size": "maxChangesPerTrigger"}
_EXCLUSIVE = (("table.include.list", "table.exclude.list"), ("schema.include.list", "schema.exclude.list"), ("column.include.list", "column.exclude.list"),
              ("message.prefix.include.list", "message.prefix.exclude.list"))
_NOT_FORWARDED = {"plugin.name"}

# Debezium's PostgreSQL connector keys (2.7: PostgresConnectorConfig, RelationalDatabaseConnectorConfig,
# CommonConnectorConfig, the topic naming strategy, heartbeats) that this connector does not implement.
_UNSUPPORTED = frozenset({
    "database.include.list", "database.exclude.list",
    "table.ignore.builtin", "include.schema.changes", "include.schema.comments",
    "include.unknown.datatypes", "schema.name.adjustment.mode",
    "field.name.adjustment.mode", "schema.refresh.mode", "replica.identity.autoset.values",
    "slot.stream.params", "slot.max.retries", "slot.retry.delay.ms", "status.update.interval.ms",
    "xmin.fetch.interval.ms", "flush.lsn.source", "read.only",
    "snapshot.include.collection.list", "snapshot.lock.timeout.ms", "snapshot.locking.mode",
    "snapshot.locking.mode.custom.name", "snapshot.query.mode", "snapshot.query.mode.custom.name",
    "snapshot.delay.ms", "snapshot.max.threads", "snapshot.tables.order.by.row.count", "streaming.delay.ms",
    "heartbeat.topics.prefix", "topic.heartbeat.prefix", "topic.delimiter",
    "topic.naming.strategy", "topic.cache.size", "converters", "post.processors", "sourceinfo.struct.maker",
    "transaction.metadata.factory", "event.processing.failure.handling.mode",
    "event.converting.failure.handling.mode", "custom.metric.tags", "max.queue.size", "max.queue.size.in.bytes",
    "poll.interval.ms", "query.fetch.size", "retriable.restart.connector.wait.ms",
    "provide.transaction.metadata.factory", "database.sslmode", "database.sslcert", "database.sslkey",
    "database.sslpassword", "database.sslrootcert", "database.sslfactory", "database.tcpKeepAlive",
    "database.initial.statements", "database.query.timeout.ms", "database.connection.timeout.ms",
    "database.connection.factory.class", "database.server.name",
    # Debezium's retries of retriable errors (a connector here restarts by errors.retry.timeout) and
    # its pre-2.0 field-name sanitising (schema.name.adjustment.mode's ancestor)
    "errors.max.retries", "sanitize.field.names",
})
# Families of Debezium keys with a name inside (the column mappers column.truncate.to.N.chars,
# column.mask.with.N.chars and column.mask.hash.* are taken, as column_lists.is_mapper_option says;
# a malformed one is refused here).
_UNSUPPORTED_FAMILIES = re.compile(
    r"column\.(mask|truncate)\..+|snapshot\.mode\..+|signal\..+"
    r"|notification\..+|incremental\.snapshot\..+|driver\..+")
# Namespaces this connector owns: a key there that is not one of its own is a typo or unsupported.
_OWNED = re.compile(r"(database|table|schema|column|slot|publication|snapshot|message|heartbeat|plugin|decimal|time"
                    r"|binary|interval|money|unavailable|tombstones|provide|skipped|topic)\.")
# postgres-cdc options that a Connect config spells otherwise.
_SPARK_ONLY = {
    "dsn": "use database.hostname, database.port, database.user, database.password and database.dbname",
    "maxChangesPerTrigger": "use max.batch.size", "startingOffsets": "alter the connector's offsets "
    "(PATCH /connectors/<name>/offsets) while it is STOPPED", "schemas.enable":
    "use key.converter.schemas.enable / value.converter.schemas.enable", "endingOffsets": "a connector streams"}
_CONNECT_OWN = re.compile(r"topic\.creation\..*")


def unsupported(key: str) -> str | None:
    """Why a config key is refused (None: the connector or the worker takes it)."""
    if (key in _SUPPORTED or _CONNECT_OWN.fullmatch(key) or snapshot_overrides.is_statement_key(key)
            or column_lists.is_mapper_option(key)):
        return None
    if key in _SPARK_ONLY:
        return f"{key} is an option of format(\"postgres-cdc\"), not of this connector: {_SPARK_ONLY[key]}"
    if key in _UNSUPPORTED or _UNSUPPORTED_FAMILIES.fullmatch(key):
        return (f"Debezium's {key} is not supported by this connector: remove it (ignored, the connector "
                "would not do what it asks; docs/cdc.md lists the keys it takes)")
    if _OWNED.match(key):
        return f"{key} is not a key of this connector; its keys are {', '.join(sorted(_SUPPORTED))}"
    return None


class _PostgresConfigDef(ConfigDef):
    """The connector's keys, plus a per-field error for every key :func:`unsupported` refuses."""

    def validate_all(self, props: Mapping[str, Any]) -> dict[str, ConfigValue]:
        values = super().validate_all(props)
        for name, raw in props.items():
            why = unsupported(name)
            if why is not None:
                values[name] = ConfigValue(name, raw, [], [why])
            elif column_lists.is_mapper_option(name):
                try:
                    _checked_by_source(name, Type.STRING)(name, raw)
                except Invalid as e:
                    values[name] = ConfigValue(name, raw, [], [str(e)])
        for include, exclude in _EXCLUSIVE:   # Debezium's validateColumnExcludeList and the like
            if props.get(include) not in (None, "") and props.get(exclude) not in (None, ""):
                values[exclude] = ConfigValue(exclude, props[exclude], [],
                                              [f"{include} and {exclude} cannot both be set"])
        try:   # the table list and its statements are checked together
            snapshot_overrides.parse({str(k).lower(): v for k, v in props.items()})
        except InvalidConfigError as e:
            name = e.details.get("config") or snapshot_overrides.OPTION
            raw = next((v for k, v in props.items() if str(k).lower() == name), props.get(name))
            values[name] = ConfigValue(name, raw, [], [str(e).removeprefix(f"option '{name}': ")])
        return values


def _checked_by_source(name: str, type_: str):
    """A validator that asks :class:`CdcOptions` about this one key, so the POST is refused with the
    source's own message."""
    def check(key: str, value: Any) -> None:
        if value is None:
            return
        if type_ == Type.PASSWORD or name in _NOT_FORWARDED:
            return
        from spark_source.postgres.options import CdcOptions
        text = str(value).lower() if isinstance(value, bool) else str(value)
        try:
            CdcOptions.parse({_RENAMED.get(name, name): text}, names_keep_case=True)
        except InvalidConfigError as e:
            raise Invalid(str(e).removeprefix(f"option '{_RENAMED.get(name, name)}': ")) from None
    return check


def _plugin_name(key: str, value: Any) -> None:
    if value is not None and str(value).strip().lower() != "pgoutput":
        raise Invalid("only pgoutput, PostgreSQL's built-in plugin, is supported")


def _config_def() -> ConfigDef:
    keys = []
    for order, (name, type_, default, group, doc) in enumerate(_KEYS, 1):
        validator = (_plugin_name if name == "plugin.name" else None if name == snapshot_overrides.OPTION
                     else _checked_by_source(name, type_))
        importance = Importance.HIGH if group == CONNECTION else Importance.MEDIUM
        keys.append(ConfigKey(name, type_, default, validator, importance, doc, group, order, Width.MEDIUM, name))
    return _PostgresConfigDef(keys)


_SUPPORTED = frozenset(name for name, *_ in _KEYS)


def debezium_offset(end_offset: Mapping[str, Any]) -> dict:
    """Debezium's PostgreSQL source offset for the ``postgres-cdc`` offset a batch ended at."""
    phase, lsn = end_offset["phase"], int(end_offset["lsn"])
    if phase == "snapshot":
        return {"lsn": lsn, "snapshot": True, "last_snapshot_record": False}
    if phase == "done":
        return {"lsn": lsn, "snapshot": True, "last_snapshot_record": True}
    out: dict[str, Any] = {"lsn": lsn, "lsn_commit": lsn, "lsn_proc": lsn}
    if end_offset.get("txId") is not None:
        out["txId"] = int(end_offset["txId"])
    if end_offset.get("ts_usec") is not None:
        out["ts_usec"] = int(end_offset["ts_usec"])
    return out


def stored_offset(stored: list[tuple[dict, dict]], server: str) -> dict | None:
    """The offset connect-offsets holds for ``{"server": server}`` (None when there is none)."""
    found = [o for p, o in stored if isinstance(p, Mapping) and p.get("server") == server and o]
    return dict(found[-1]) if found else None


def _schemas_enable(originals: Mapping[str, Any], which: str) -> bool:
    """What the configured converter would do: JsonConverter (Kafka's default) honours
    ``<which>.converter.schemas.enable``; other converters get the JSON with its schema."""
    name = str(originals.get(f"{which}.converter") or JSON_CONVERTERS[0]).strip()
    if name not in JSON_CONVERTERS:
        return True
    return str(originals.get(f"{which}.converter.schemas.enable", "true")).strip().lower() != "false"


def _payload_only(column: str) -> Column:
    return F.get_json_object(F.col(column).cast("string"), "$.payload").cast("binary")


@register_connector
class PostgresCdcSource(SourceConnector):
    """PostgreSQL changes as Debezium's change events; one slot, one reader (one task)."""
    class_name = "io.debezium.connector.postgresql.PostgresConnector"
    aliases = ("PostgresCdcSource", "PostgresConnector")
    pre_serialized = True
    config_def = _config_def()

    def __init__(self, config, context):
        super().__init__(config, context)
        from spark_source.postgres.options import CdcOptions
        try:
            self.options = CdcOptions.parse(self.source_options(), names_keep_case=True)
        except InvalidConfigError as e:
            field = _RENAMED_BACK.get(e.details.get("config", ""), e.details.get("config", ""))
            raise ConfigError(str(e), errors={field: [str(e)]}) from None

    @property
    def server(self) -> str:
        """The source partition's ``server``: Debezium's ``topic.prefix``."""
        return self.options.topic_prefix

    def output_topics(self) -> list[str]:
        """The topics ``topic.creation.*`` makes before the first change event: those of the
        tables the connector captures now, read from the catalog with the source's own matching
        (``table.include.list`` patterns, exclude and schema lists), and, with
        ``provide.transaction.metadata``, ``<topic.prefix>.<topic.transaction>``. A table created
        while the connector runs gets its topic from the broker's auto-creation. When the database
        cannot be read here, only the tables ``table.include.list`` names literally (the query then
        fails with the source's own error)."""
        from spark_source.postgres.debezium_schemas import topic_name
        try:
            tables = self._catalog_tables()
        except Exception as e:  # noqa: BLE001 - the source's query reports the cause
            log.warning("could not list the captured tables of %s (%s): topic creation covers only the tables "
                        "table.include.list names literally", self.options.dbname, e)
            tables = self._literal_tables()
        out = [topic_name(self.server, schema, table) for schema, table in tables]
        if self.options.envelope.provide_transaction_metadata:
            out.append(f"{self.server}.{self.options.envelope.topic_transaction}")
        return list(dict.fromkeys(out))

    def _catalog_tables(self) -> list[tuple[str, str]]:
        from spark_source.postgres import slot
        conn = slot.connect(self.options, timeout=30)   # the worker starts it: an unreachable server must not hang it
        try:
            return slot.captured_names(conn, self.options)
        finally:
            conn.close()

    def _literal_tables(self) -> list[tuple[str, str]]:
        """``table.include.list`` entries that name one table (lowercase identifiers, as
        PostgreSQL folds unquoted names) the other lists do not leave out."""
        out = []
        for entry in self.options.table_include:
            literal = re.fullmatch(r"([a-z_][a-z0-9_]*)\\?\.([a-z_][a-z0-9_]*)", entry.strip())
            if literal is not None and self.options.includes(*literal.groups()):
                out.append(literal.groups())
        return out

    def source_options(self) -> dict[str, str]:
        """The ``postgres-cdc`` options this config stands for."""
        known = {k for k, *_ in _KEYS} - _NOT_FORWARDED
        out = {}
        for key, value in self.config.originals.items():
            if key in known and value is not None and str(value) != "":
                out[_RENAMED.get(key, key)] = str(value).lower() if isinstance(value, bool) else str(value)
            elif (snapshot_overrides.is_statement_key(key) or column_lists.is_mapper_option(key)) \
                    and value is not None:
                out[key] = str(value)
        key_se, value_se = (_schemas_enable(self.config.originals, w) for w in ("key", "value"))
        out["schemas.enable"] = "true" if key_se or value_se else "false"
        return out

    def read_stream(self) -> DataFrame:
        from spark_source.postgres.cdc_source import PostgresCdcDataSource
        spark = self.context.spark
        spark.dataSource.register(PostgresCdcDataSource)
        reader = spark.readStream.format("postgres-cdc").options(**self.source_options())
        resume = stored_offset(self.context.stored_offsets, self.server)
        if resume is not None:
            reader = reader.option("startingOffsets", json.dumps(resume))
        df = reader.load()
        key_se, value_se = (_schemas_enable(self.config.originals, w) for w in ("key", "value"))
        key = F.col("key") if key_se or not value_se else _payload_only("key")
        value = F.col("value") if value_se or not key_se else _payload_only("value")
        return df.select("topic", F.lit(None).cast("int").alias("partition"), F.lit(None).cast("long").alias("offset"),
                         # Kafka timestamps are milliseconds; commit times come in microseconds.
                         F.date_trunc("millisecond", "timestamp").alias("timestamp"), key.alias("key"),
                         value.alias("value"), "headers")

    def source_offsets(self, end_offset: Mapping[str, Any]) -> list[tuple[dict, dict]]:
        return [({"server": self.server}, debezium_offset(end_offset))]

    def task_configs(self, tasks_max: int) -> list[dict[str, str]]:
        """One slot has one reader: one task, whatever ``tasks.max`` says (as Debezium's)."""
        return [dict(self.config.originals)]


_RENAMED_BACK = {v: k for k, v in _RENAMED.items()}

__all__ = ["PostgresCdcSource", "debezium_offset", "stored_offset"]
