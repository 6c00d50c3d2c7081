"""The ``postgres-cdc`` source's options, parsed once on the driver when the query starts.

Names are Debezium's PostgreSQL connector's (``database.hostname``, ``slot.name``,
``snapshot.mode``, …), so a Debezium user's configuration carries over; ``dsn`` (a libpq
connection string or URI) may replace the ``database.*`` options. A bad value or an unknown option
fails here, naming it.

=============================== ========================= ==========================================
option                          default                   meaning
=============================== ========================= ==========================================
dsn                             (none)                    libpq DSN/URI; wins over database.*
database.hostname               localhost                 server host
database.port                   5432                      server port
database.user                   postgres                  role with LOGIN and REPLICATION
database.password               (none)                    its password
database.dbname                 postgres                  database to capture
topic.prefix                    the database name         topics are <prefix>.<schema>.<table>
table.include.list              (all user tables)         comma-separated regexes on schema.table
                                                          (case ignored; ``\\,`` is a comma in one)
table.exclude.list              (none)                    regexes of tables left out (not with include)
schema.include.list             (all schemas)             regexes of schema names captured (with the
                                                          table lists, as Debezium's filters combine)
schema.exclude.list             (none)                    regexes of schemas left out (not with include)
publication.name                riverlog_publication      the pgoutput publication
publication.autocreate.mode     all_tables                all_tables | filtered | disabled
slot.name                       riverlog                  the logical replication slot
slot.drop.on.stop               false                     drop the slot when the query stops
snapshot.mode                   initial                   initial | initial_only | no_data | when_needed
                                                          (Debezium's deprecated never = no_data)
heartbeat.interval.ms           10000                     0 = off; WAL position kept moving when idle
heartbeat.action.query          (none)                    SQL run on the database at each heartbeat
maxChangesPerTrigger            (unlimited)               changes per micro-batch (whole transactions)
snapshot.fetch.size             10000                     snapshot rows per micro-batch when
                                                          maxChangesPerTrigger is not set
transaction.spill.threshold.   67108864 (64 MiB)         a transaction held in the driver beyond this
bytes                                                     many bytes of pgoutput goes to a temp file
transaction.spill.dir           (the system temp dir)     where those files are made (unlinked at once)
startingOffsets                 earliest                  a new query (no checkpoint): earliest (as
                                                          snapshot.mode says) or Debezium's source
                                                          offset JSON {"lsn": ..., ...} to resume from
=============================== ========================= ==========================================

The envelope's options are Debezium's too and are checked by
:meth:`spark_source.postgres.envelope.CdcConfig.from_options`: ``decimal.handling.mode`` (precise),
``time.precision.mode`` (adaptive), ``binary.handling.mode`` (bytes), ``interval.handling.mode``
(numeric), ``money.fraction.digits`` (2), ``hstore.handling.mode`` (json), ``unavailable.value.placeholder``
(__debezium_unavailable_value), ``tombstones.on.delete`` (true), ``provide.transaction.metadata``
(false), ``topic.transaction`` (transaction), ``skipped.operations`` (t), ``schemas.enable`` (true),
``column.include.list`` / ``column.exclude.list`` and ``message.key.columns`` (column_lists.py),
``column.truncate.to.<N>.chars``, ``column.mask.with.<N>.chars`` and
``column.mask.hash[.v2].<algorithm>.with.salt.<salt>``, ``column.propagate.source.type`` and
``datatype.propagate.source.type`` (column_mappers.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from broker.errors import InvalidConfigError
from spark_source.postgres import column_lists, regex_lists, snapshot_overrides
from spark_source.postgres.envelope import CdcConfig
from spark_source.postgres.type_modes import CdcConfigError

ENVELOPE_OPTIONS = ("decimal.handling.mode", "time.precision.mode", "binary.handling.mode",
                    "interval.handling.mode", "money.fraction.digits", "hstore.handling.mode",
                    "unavailable.value.placeholder",
                    "tombstones.on.delete", "provide.transaction.metadata", "topic.transaction",
                    "skipped.operations", "schemas.enable", "message.prefix.include.list",
                    "message.prefix.exclude.list", "skip.messages.without.change", "column.include.list",
                    "column.exclude.list", "message.key.columns")
SNAPSHOT_MODES = ("initial", "initial_only", "no_data", "when_needed")
SNAPSHOT_MODE_ALIASES = {"never": "no_data"}
"""Debezium 2.7's deprecated ``never``, which for PostgreSQL (no schema history) is ``no_data``."""
AUTOCREATE_MODES = ("all_tables", "filtered", "disabled")
_KNOWN = {"dsn", "database.hostname", "database.port", "database.user", "database.password", "database.dbname",
          "topic.prefix", "table.include.list", "table.exclude.list", "schema.include.list",
          "schema.exclude.list", "publication.name",
          "publication.autocreate.mode", "slot.name",
          "slot.drop.on.stop", "snapshot.mode", "heartbeat.interval.ms", "heartbeat.action.query", "maxchangespertrigger",
          "snapshot.fetch.size", "startingoffsets", "path",
          "transaction.spill.threshold.bytes", "transaction.spill.dir", snapshot_overrides.OPTION} | set(ENVELOPE_OPTIONS)
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _bad(option: str, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"option '{option}': {why}", config=option)


def _choice(opts: dict, name: str, default: str, allowed: tuple[str, ...], aliases: dict | None = None) -> str:
    value = str(opts.get(name, default)).strip().lower()
    value = (aliases or {}).get(value, value)
    if value not in allowed:
        raise _bad(name, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _int(opts: dict, name: str, default: int | None, least: int) -> int | None:
    value = opts.get(name.lower())
    if value is None or str(value).strip() == "":
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise _bad(name, f"must be an integer, got {value!r}") from None
    if number < least:
        raise _bad(name, f"must be at least {least}, got {number}")
    return number


def _bool(opts: dict, name: str, default: bool) -> bool:
    value = opts.get(name)
    if value is None:
        return default
    if str(value).strip().lower() not in ("true", "false"):
        raise _bad(name, f"must be true or false, got {value!r}")
    return str(value).strip().lower() == "true"


def _envelope(opts: dict, prefix: str, dbname: str, mappers: dict, names_keep_case: bool) -> CdcConfig:
    given = {k: opts[k] for k in opts if k in ENVELOPE_OPTIONS}
    try:
        return CdcConfig.from_options({**given, **mappers, "topic.prefix": prefix, "database.dbname": dbname},
                                      names_keep_case=names_keep_case)
    except CdcConfigError as e:
        option = e.details.get("option", "")
        raise _bad(option, str(e)) from None


def _starting_offset(value) -> dict | None:
    """``startingOffsets``: ``earliest`` (none), or a Debezium PostgreSQL source offset (a JSON
    object with ``lsn`` as a number, a decimal string or PostgreSQL's ``X/Y`` text)."""
    if value is None or str(value).strip().lower() in ("", "earliest"):
        return None
    import json
    try:
        offset = json.loads(value) if isinstance(value, str) else dict(value)
    except (ValueError, TypeError):
        offset = None
    if not isinstance(offset, dict) or offset.get("lsn") in (None, ""):
        raise _bad("startingOffsets", f"must be earliest or a JSON object with \"lsn\", got {value!r}")
    lsn = str(offset["lsn"]).strip()
    try:
        if "/" in lsn:
            from spark_source.postgres.pgoutput import lsn_from_str
            offset["lsn"] = lsn_from_str(lsn)
        else:
            offset["lsn"] = int(lsn)
    except ValueError:
        raise _bad("startingOffsets", f"lsn {lsn!r} is not an LSN (a number or X/Y)") from None
    return offset


def _patterns(opts: dict, name: str) -> tuple[str, ...]:
    """A Debezium regex list (:mod:`regex_lists`: ``\\,`` escapes a comma, case ignored)."""
    patterns = regex_lists.split(str(opts.get(name, "")))
    for pattern in patterns:
        try:
            regex_lists.compile_all([pattern])
        except re.error as e:
            raise _bad(name, f"{pattern!r} is not a regular expression: {e}") from None
    return patterns


def _identifier(opts: dict, name: str, default: str) -> str:
    value = str(opts.get(name, default)).strip()
    if not _IDENTIFIER.fullmatch(value):
        raise _bad(name, f"{value!r} is not a valid name: lower-case letters, digits and _, at most 63, "
                         "not starting with a digit")
    return value


@dataclass(frozen=True)
class CdcOptions:
    """Every option, typed. ``connect_kwargs()`` gives psycopg2's connection arguments."""
    dsn: str | None = None
    hostname: str = "localhost"
    port: int = 5432
    user: str = "postgres"
    password: str | None = None
    dbname: str = "postgres"
    topic_prefix: str = "postgres"
    table_include: tuple[str, ...] = ()
    table_exclude: tuple[str, ...] = ()
    schema_include: tuple[str, ...] = ()
    schema_exclude: tuple[str, ...] = ()
    publication_name: str = "riverlog_publication"
    publication_autocreate: str = "all_tables"
    slot_name: str = "riverlog"
    slot_drop_on_stop: bool = False
    snapshot_mode: str = "initial"
    heartbeat_interval_ms: int = 10_000
    heartbeat_action_query: str | None = None
    max_changes_per_trigger: int | None = None
    snapshot_fetch_size: int = 10_000
    spill_threshold_bytes: int = 64 << 20
    spill_dir: str | None = None
    envelope: CdcConfig | None = None
    starting_offset: dict | None = None
    snapshot_overrides: tuple = ()   # ((schema.table lower-cased, SELECT), ...): snapshot_overrides.py

    @classmethod
    def parse(cls, options, names_keep_case: bool = False) -> "CdcOptions":
        """``names_keep_case``: the option names are as the user wrote them (a Connect config);
        Spark's arrive lower-cased, which matters for a ``column.mask.hash.*`` salt."""
        opts = {str(k).lower(): v for k, v in dict(options or {}).items()}
        # column mapper options keep their name as given: a hash option's salt is in it
        mappers = {str(k) if column_lists.is_mapper_option(str(k)) else str(k).lower(): v
                   for k, v in dict(options or {}).items() if column_lists.is_mapper_option(str(k).lower())}
        unknown = sorted(k for k in set(opts) - _KNOWN if not snapshot_overrides.is_statement_key(k)
                         and not column_lists.is_mapper_option(k))
        if unknown:
            raise _bad(unknown[0], "unknown option for format(\"postgres-cdc\"); the options are "
                                   + ", ".join(sorted(_KNOWN - {"path"})).replace("maxchangespertrigger",
                                                                                     "maxChangesPerTrigger")
                                   .replace("startingoffsets", "startingOffsets"))
        dsn = opts.get("dsn") or None
        dbname = str(opts.get("database.dbname") or "").strip()
        if not dbname and dsn:
            import psycopg2.extensions
            try:
                dbname = psycopg2.extensions.parse_dsn(dsn).get("dbname", "")
            except psycopg2.ProgrammingError as e:
                raise _bad("dsn", f"not a libpq connection string or URI: {e}") from None
        dbname = dbname or "postgres"
        include, exclude = _patterns(opts, "table.include.list"), _patterns(opts, "table.exclude.list")
        if include and exclude:
            raise _bad("table.exclude.list", "table.include.list and table.exclude.list cannot both be set")
        schema_include, schema_exclude = _patterns(opts, "schema.include.list"), _patterns(opts, "schema.exclude.list")
        if schema_include and schema_exclude:
            raise _bad("schema.exclude.list", "schema.include.list and schema.exclude.list cannot both be set")
        mode = _choice(opts, "publication.autocreate.mode", "all_tables", AUTOCREATE_MODES)
        return cls(
            dsn=dsn, hostname=str(opts.get("database.hostname", "localhost")),
            port=_int(opts, "database.port", 5432, 1), user=str(opts.get("database.user", "postgres")),
            password=opts.get("database.password"), dbname=dbname,
            topic_prefix=str(opts.get("topic.prefix") or dbname), table_include=include, table_exclude=exclude,
            schema_include=schema_include, schema_exclude=schema_exclude,
            publication_name=_identifier(opts, "publication.name", "riverlog_publication"),
            publication_autocreate=mode, slot_name=_identifier(opts, "slot.name", "riverlog"),
            slot_drop_on_stop=_bool(opts, "slot.drop.on.stop", False),
            snapshot_mode=_choice(opts, "snapshot.mode", "initial", SNAPSHOT_MODES, SNAPSHOT_MODE_ALIASES),
            heartbeat_interval_ms=_int(opts, "heartbeat.interval.ms", 10_000, 0),
            heartbeat_action_query=str(opts.get("heartbeat.action.query") or "").strip() or None,
            max_changes_per_trigger=_int(opts, "maxChangesPerTrigger", None, 1),
            snapshot_fetch_size=_int(opts, "snapshot.fetch.size", 10_000, 1),
            spill_threshold_bytes=_int(opts, "transaction.spill.threshold.bytes", 64 << 20, 0),
            spill_dir=str(opts.get("transaction.spill.dir") or "").strip() or None,
            starting_offset=_starting_offset(opts.get("startingoffsets")),
            envelope=_envelope(opts, str(opts.get("topic.prefix") or dbname), dbname, mappers, names_keep_case),
            snapshot_overrides=snapshot_overrides.parse(opts))

    def connect_kwargs(self) -> dict:
        """psycopg2.connect's arguments: the DSN if given (with dbname as given there), else the parts."""
        if self.dsn:
            return {"dsn": self.dsn}
        kwargs = {"host": self.hostname, "port": self.port, "user": self.user, "dbname": self.dbname}
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs

    def includes(self, schema: str, table: str) -> bool:
        """Debezium's rule: no list means every table; else a regex must match ``schema.table`` whole,
        ignoring case (an include list), or none may (an exclude list); the schema lists the same
        over the schema's name, and a table must pass both (``RelationalTableFilters``)."""
        if self.schema_exclude and regex_lists.matches(self.schema_exclude, schema):
            return False
        if self.schema_include and not regex_lists.matches(self.schema_include, schema):
            return False
        name = f"{schema}.{table}"
        if self.table_exclude:
            return not regex_lists.matches(self.table_exclude, name)
        if not self.table_include:
            return True
        return regex_lists.matches(self.table_include, name)
