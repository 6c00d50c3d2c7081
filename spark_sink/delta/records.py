"""Kafka-shaped rows holding Debezium JSON -> :class:`Change`\\ s, or a poison record.

Pure. A row is ``key, value, topic, partition, offset, timestamp, headers`` (the shape of
``format("riverlog")`` and of ``format("postgres-cdc")``). Key and value are Debezium's JSON with the
``{"schema", "payload"}`` envelope or the payload alone. A change's **position** orders it exactly:
``(riverlog.cdc.commit_lsn, riverlog.cdc.order)`` from the headers; without them (a topic written by
Debezium itself, of any connector) ``(offset, 0)``, the topic's order: Debezium writes a partition in
commit order, as Debezium's JDBC sink applies it, while ``source.lsn`` (a change's own LSN) is not
monotonic in commit order and MySQL's or SQL Server's events have none. The table's high-water
marks compare the same position. A tombstone (value null) parses to None: its delete came just
before it (:meth:`ChangeParser.tombstone` reads it as a delete of its key, for the shell to apply
when that delete is gone from a compacted topic); so do Debezium's heartbeat records (topic
``__debezium-heartbeat.*``), transaction metadata records (``status`` BEGIN/END) and logical
decoding messages (``op`` ``m``). A truncate
(``op`` ``t``) is a change with no key. The create of a primary-key change (delete old key +
tombstone + create new key) carries the old key in its ``__debezium.oldkey`` header
(:attr:`Change.old_key`): an unchanged TOAST value of the row is the old key's. An update whose
``before`` image has other key values (a keyless table under ``REPLICA IDENTITY FULL`` keyed by
``keys=``) is a delete of the old key and the update (:meth:`ChangeParser.changes`). A change
names its :attr:`Change.key_columns`: the record key's fields follow the source table's key,
which a primary key dropped and added on other columns changes mid-stream.

Anything malformed in a record (not JSON, not a change event, a ``source`` that is not an object,
a time or header that is not a number, a value that does not match its schema) is a
:class:`PoisonRecordError` naming the record, never another exception.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from broker.errors import RiverlogError
from spark_sink.delta.arrow_rows import header_pairs
from spark_sink.delta.envelope import EnvelopeDecoder
from spark_sink.delta.errors import DeltaConfigError, PoisonRecordError
from spark_sink.delta.schema import DEFAULT_PLACEHOLDER, EPOCH, UNAVAILABLE, arrow_schema, converter, defaults

COMMIT_LSN_HEADER = "riverlog.cdc.commit_lsn"
ORDER_HEADER = "riverlog.cdc.order"
OLD_KEY_HEADER = "__debezium.oldkey"
OPS = {"c", "u", "d", "r", "t"}
HEARTBEAT_TOPIC_PREFIX = "__debezium-heartbeat"
_ABSENT = object()


@dataclass(frozen=True)
class SourceRecord:
    """One input row, as the sink reads it."""
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()
    timestamp_us: int | None = None

    @property
    def coordinates(self) -> tuple[str, int, int]:
        return self.topic, self.partition, self.offset


@dataclass(frozen=True)
class Change:
    """One row change in the sink's terms. ``row`` is the after image (c/u/r) or, for ``d``, the
    before image; values are converted (:func:`~spark_sink.delta.schema.converter`) and may be
    :data:`~spark_sink.delta.schema.UNAVAILABLE`. ``schema`` is the row's Arrow schema, or None when
    the record came without one."""
    table: str
    key: tuple
    op: str
    row: dict
    position: tuple[int, int]
    ts_us: int
    record: SourceRecord
    schema: Any = field(default=None, compare=False)
    mark: tuple[int, int] | None = None   # the stream position the table's high-water mark compares
    old_key: tuple | None = None          # a primary-key change's create: the key the row had before
    defaults: Mapping = field(default_factory=dict, compare=False)   # the columns' Connect defaults
    key_columns: tuple = field(default=(), compare=False)   # the columns ``key`` holds the values of
    tombstone: bool = False   # a delete read from a tombstone (see ChangeParser.tombstone)

    @property
    def stream_mark(self) -> tuple[int, int]:
        return self.mark if self.mark is not None else self.position


def record_position(record: SourceRecord) -> tuple[int, int] | None:
    """The position from the two riverlog.cdc headers, or None when the record has neither."""
    lsn = order = _ABSENT
    for k, v in record.headers:   # the last of a repeated header counts
        if k == COMMIT_LSN_HEADER:
            lsn = v
        elif k == ORDER_HEADER:
            order = v
    if lsn is not _ABSENT and order is not _ABSENT:
        try:
            return int(_text(lsn)), int(_text(order))
        except (ValueError, UnicodeDecodeError) as e:
            raise _poison(record, f"the {COMMIT_LSN_HEADER} / {ORDER_HEADER} headers are not decimal integers "
                                  f"({e})", e) from e
    return None


def _text(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray, memoryview)) else str(v)


def _poison(record: SourceRecord, why: str, cause: Exception | None = None) -> PoisonRecordError:
    topic, partition, offset = record.coordinates
    return PoisonRecordError(f"record {topic}/{partition}@{offset}: {why}", topic=topic,
                             partition=partition, offset=offset, cause=repr(cause) if cause else None)


def _envelope(raw: bytes, record: SourceRecord, what: str,
              decoder: EnvelopeDecoder | None = None) -> tuple[dict | None, Any]:
    """(schema, payload) of Debezium JSON with or without the schema envelope."""
    try:
        return (decoder or EnvelopeDecoder()).decode(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise _poison(record, f"the {what} is not JSON ({e})", e) from e


def _field_schema(struct: dict | None, name: str) -> dict | None:
    if not struct:
        return None
    return next((f for f in struct.get("fields", []) if f.get("field") == name), None)


class ChangeParser:
    """Turns records into changes under fixed options (frozen once per query).

    ``keys`` maps a table (``schema.table``) to its key columns, ``"*"`` to the key columns of
    every other table; a table not named takes the record key's fields (Debezium's key is the
    primary key)."""

    def __init__(self, keys: Mapping[str, Sequence[str]] | None = None, *,
                 placeholder: str = DEFAULT_PLACEHOLDER):
        self.keys = {t: tuple(k) for t, k in (keys or {}).items()}
        self.placeholder = placeholder
        self._converters: dict[str, Any] = {}
        self._decoder = EnvelopeDecoder()
        self._last_key: tuple | None = None   # (a record key's bytes, their envelope)
        self._by_identity: dict = {}   # id(a decoded schema) [, field] -> (it, what was found for it)

    def _convert_struct(self, struct: dict | None, payload: dict) -> dict:
        if struct is None:
            conv = self._converters.setdefault("", converter(None, self.placeholder))
            return {k: conv(v) for k, v in payload.items()}
        convs = self._struct(struct)[0]
        return {n: c(payload.get(n)) for n, c in convs}

    def _struct(self, struct: dict) -> tuple[list, Any, dict]:
        """(field converters, Arrow schema, Connect defaults) of a row schema, memoised by its
        fingerprint, and by identity for the schema objects :class:`EnvelopeDecoder` shares."""
        hit = self._by_identity.get(id(struct))
        if hit is not None and hit[0] is struct:
            return hit[1]
        key = _fingerprint(struct)
        found = self._converters.get(key)
        if found is None:
            found = ([(f["field"], converter(f, self.placeholder)) for f in struct.get("fields", [])],
                     arrow_schema(struct), defaults(struct))
            self._converters[key] = found
        self._remember(id(struct), struct, found)
        return found

    def _remember(self, key, struct: dict, found) -> None:
        if len(self._by_identity) >= 256:
            self._by_identity.clear()
        self._by_identity[key] = (struct, found)   # holding it keeps its id unique

    def _field_schema(self, struct: dict | None, name: str) -> dict | None:
        """:func:`_field_schema`, memoised by identity as :meth:`_struct` is."""
        hit = self._by_identity.get((id(struct), name))
        if hit is not None and hit[0] is struct:
            return hit[1]
        found = _field_schema(struct, name)
        if struct is not None:
            self._remember((id(struct), name), struct, found)
        return found

    def parse(self, record: SourceRecord) -> Change | None:
        """The record's change; None for a tombstone; :class:`PoisonRecordError` for anything else."""
        return self._parsed(record)[0]

    def _parsed(self, record: SourceRecord) -> tuple[Change | None, Any, Any]:
        """(change, value schema, value payload); the envelope for :meth:`changes` to read again."""
        try:
            return self._parse(record)
        except RiverlogError:
            raise
        except Exception as e:   # noqa: BLE001 - whatever a malformed record trips over names the record
            raise _poison(record, f"a malformed change event ({type(e).__name__}: {e})", e) from e

    def _parse(self, record: SourceRecord) -> tuple[Change | None, Any, Any]:
        if record.value is None or record.topic.startswith(HEARTBEAT_TOPIC_PREFIX):
            return None, None, None
        schema, payload = _envelope(record.value, record, "value", self._decoder)
        if isinstance(payload, dict) and "op" not in payload and payload.get("status") in ("BEGIN", "END"):
            return None, None, None   # a record of Debezium's transaction metadata topic
        if isinstance(payload, dict) and payload.get("op") == "m":
            return None, None, None   # a logical decoding message: not a row of any table
        if not isinstance(payload, dict) or payload.get("op") not in OPS:
            raise _poison(record, "the value is not a Debezium change event (no op c/u/d/r/t)")
        op, source = payload["op"], payload.get("source") or {}
        if not isinstance(source, dict):
            raise _poison(record, f"the change event's source is {type(source).__name__}, not an object")
        table = _table_name(source, record.topic)
        position = record_position(record) or _fallback_position(record)
        if op == "t":
            change = Change(table, (), "t", {}, position, _ts_us(payload, source, record), record, None, position)
            return change, schema, payload
        image_name = "before" if op == "d" else "after"
        image = payload.get(image_name)
        if not isinstance(image, dict):
            raise _poison(record, f"op {op!r} without a {image_name!r} row image")
        image_schema = self._field_schema(schema, image_name)
        try:
            row = self._convert_struct(image_schema, image)
        except (ValueError, TypeError, KeyError, ArithmeticError) as e:
            raise _poison(record, f"a value does not match its schema ({e})", e) from e
        row, image_schema = self._with_key_fields(record, table, row, image_schema)
        key = self._key(record, table, row)
        ts_us = _ts_us(payload, source, record)
        _, arrow, defaults_ = self._struct(image_schema) if image_schema is not None else (None, None, {})
        old_key = self._old_key(record, table, image_schema) if op != "d" else None
        return Change(table, key, op, row, position, ts_us, record, arrow, position, old_key, defaults_,
                      self.key_columns(table, record)), schema, payload

    def changes(self, record: SourceRecord) -> list[Change]:
        """The record's changes: :meth:`parse`'s, and before an update that moves its row to
        another key, a delete of the key it had. Debezium emits a primary-key change as delete +
        tombstone + create (``RelationalChangeRecordEmitter.emitUpdateRecord``), but an update of
        a table without a key, or of key columns named by ``keys=`` that are not the record key,
        is one ``u`` event: only its ``before`` image (``REPLICA IDENTITY FULL``; a MySQL row
        image) says the row left its old key. Under ``REPLICA IDENTITY DEFAULT`` an update has no
        before image and the old key cannot be known (docs/cdc.md)."""
        change, schema, payload = self._parsed(record)
        if change is None or change.op != "u":
            return [] if change is None else [change]
        before = payload.get("before")
        if not isinstance(before, dict) or any(before.get(c) is None for c in change.key_columns):
            return [change]
        try:
            row = self._convert_struct(_field_schema(schema, "before"), before)
        except (ValueError, TypeError, KeyError, ArithmeticError) as e:
            raise _poison(record, f"a value does not match its schema ({e})", e) from e
        old = tuple(row.get(c) for c in change.key_columns)
        if old == change.key or any(v is None or v is UNAVAILABLE for v in old):
            return [change]
        moved = replace(change, old_key=old)
        return [replace(change, key=old, op="d", row=row, old_key=None), moved]

    def tombstone(self, record: SourceRecord, table: str) -> Change | None:
        """A tombstone of ``table`` as a delete of its record key, as Debezium's JDBC sink applies
        one (``JdbcChangeEventSink.execute``: ``isDelete() || isTombstone()``; skipped when the
        key is not the record key's, as there with ``primary.key.mode=record_value``). It is a
        no-op after its delete, and the only delete left once log compaction removed the delete
        event its tombstone supersedes. None for a record that is no tombstone or has no usable key."""
        if record.value is not None or record.key is None or record.topic.startswith(HEARTBEAT_TOPIC_PREFIX):
            return None
        try:
            schema, payload = self._key_envelope(record)
        except PoisonRecordError:
            return None
        if not isinstance(payload, dict) or not payload:
            return None
        columns = self.key_columns(table, record)
        if any(payload.get(c) is None for c in columns):
            return None
        try:
            row = self._convert_struct(schema if isinstance(schema, dict) else None, payload)
        except (ValueError, TypeError, KeyError, ArithmeticError):
            return None
        key = tuple(row.get(c) for c in columns)
        if any(v is None or v is UNAVAILABLE for v in key):
            return None
        try:
            position = record_position(record) or _fallback_position(record)
        except PoisonRecordError:
            return None
        return Change(table, key, "d", {c: row[c] for c in columns}, position, record.timestamp_us or 0, record,
                      None, position, key_columns=columns, tombstone=True)

    def _key_envelope(self, record: SourceRecord) -> tuple[Any, Any]:
        """The record key's (schema, payload), read once for the several questions put to it."""
        last = self._last_key
        if last is not None and last[0] is record.key:
            return last[1]
        found = _envelope(record.key, record, "key", self._decoder)
        self._last_key = (record.key, found)
        return found

    def key_columns(self, table: str, record: SourceRecord) -> tuple[str, ...]:
        if table in self.keys or "*" in self.keys:
            return self.keys.get(table) or self.keys["*"]
        if record.key is None:
            raise _poison(record, f"table {table!r} has no key columns: the record has no key and "
                                  f"keys={{{table!r}: [...]}} is not set")
        _, payload = self._key_envelope(record)
        if not isinstance(payload, dict) or not payload:
            raise _poison(record, "the key is not a JSON object of primary key columns")
        return tuple(payload)

    def _old_key(self, record: SourceRecord, table: str, image_schema: dict | None) -> tuple | None:
        """The ``__debezium.oldkey`` header's key values, converted as the row's; None without the
        header, or when the key columns (``keys=``) are not all in it."""
        raw = None
        for k, v in record.headers:
            if k == OLD_KEY_HEADER:
                raw = v
                break
        if raw is None:
            return None
        _, payload = _envelope(raw, record, f"{OLD_KEY_HEADER} header", self._decoder)
        if not isinstance(payload, dict):
            raise _poison(record, f"the {OLD_KEY_HEADER} header is not a JSON object of key columns")
        columns = self.key_columns(table, record)
        if any(c not in payload for c in columns):
            return None
        convs = dict(self._struct(image_schema)[0]) if image_schema is not None else {}
        plain = self._converters.setdefault("", converter(None, self.placeholder))
        values = tuple(convs.get(c, plain)(payload[c]) for c in columns)
        return None if any(v is None or v is UNAVAILABLE for v in values) else values

    def _with_key_fields(self, record: SourceRecord, table: str, row: dict,
                         image_schema: dict | None) -> tuple[dict, dict | None]:
        """The row image with the record key's columns it lacks, first, and their fields in its
        schema. A ``column.exclude.list`` can leave a key column out of ``before``/``after`` while
        the record key keeps it; Debezium's JDBC sink (``primary.key.mode=record_key``) takes the
        key columns from the key and the rest from the value, and so does this sink. Key columns
        named by ``keys=`` are the value's own, as there under ``record_value``."""
        if table in self.keys or "*" in self.keys or record.key is None:
            return row, image_schema
        key_schema, payload = self._key_envelope(record)
        if not isinstance(payload, dict):
            return row, image_schema
        missing = [c for c in payload if c not in row]
        if not missing:
            return row, image_schema
        key_schema = key_schema if isinstance(key_schema, dict) else None
        if image_schema is not None:
            fields = {f.get("field"): f for f in (key_schema or {}).get("fields", [])}
            if any(c not in fields for c in missing):
                return row, image_schema   # no type for the column: the key check names it
            image_schema = {**image_schema, "fields": [fields[c] for c in missing] + list(image_schema.get("fields", []))}
        key_row = self._convert_struct(key_schema, payload)
        return {**{c: key_row.get(c) for c in missing}, **row}, image_schema

    def _key(self, record: SourceRecord, table: str, row: dict) -> tuple:
        columns = self.key_columns(table, record)
        values = tuple(row.get(c) for c in columns)
        if any(v is None or v is UNAVAILABLE for v in values) or any(c not in row for c in columns):
            raise _poison(record, f"table {table!r}: key column(s) {list(columns)} missing or null in the row")
        return values


def _fingerprint(struct: dict) -> tuple:
    """Cheap for flat primitive fields (the common case), exact JSON for anything nested."""
    return tuple((f.get("field"), f.get("type"), f.get("name"))
                 if f.get("type") not in ("struct", "array", "map") and not f.get("parameters") and "default" not in f
                 else json.dumps(f, sort_keys=True) for f in struct.get("fields", []))


def _table_name(source: dict, topic: str) -> str:
    schema = source.get("schema") or source.get("db")
    if schema and source.get("table"):
        return f"{schema}.{source['table']}"
    return topic_table(topic)


def topic_table(topic: str) -> str:
    """``schema.table`` from Debezium's topic name ``<topic.prefix>.<schema>.<table>``."""
    parts = topic.split(".")
    return ".".join(parts[-2:]) if len(parts) >= 2 else topic


def _fallback_position(record: SourceRecord) -> tuple[int, int]:
    """A record without the riverlog.cdc headers is ordered by its offset: Debezium writes a key's
    changes to one partition in commit order, and Debezium's JDBC sink applies them in that order.
    Neither ``source.lsn`` (a change's own LSN, not its commit's) nor the transaction block (its id
    is the xid in Debezium 2) orders commits, and other connectors have neither."""
    return record.offset, 0


def _ts_us(payload: dict, source: dict, record: SourceRecord) -> int:
    for container, name, scale in ((source, "ts_us", 1), (source, "ts_ms", 1000), (payload, "ts_ms", 1000)):
        v = container.get(name)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _poison(record, f"{'source.' if container is source else ''}{name} is {v!r}, not a number")
            return int(v) * scale
    return record.timestamp_us if record.timestamp_us is not None else 0


def records_from_arrow(table) -> list[SourceRecord]:
    """Kafka-shaped Arrow rows -> records (``headers`` and ``timestamp`` optional)."""
    if "value" not in table.column_names:
        raise DeltaConfigError(f"the batch has no 'value' column (columns: {table.column_names}); the sink reads "
                               "Kafka-shaped rows: key, value, topic, partition, offset, timestamp, headers")
    cols = {n: table.column(n).to_pylist() for n in table.column_names if n != "headers"}
    n = table.num_rows
    headers = header_pairs(table.column("headers")) if "headers" in table.column_names else [None] * n
    stamps = cols.get("timestamp") or [None] * n
    return [SourceRecord(cols["topic"][i] if "topic" in cols else "", int(cols["partition"][i] or 0)
                         if "partition" in cols else 0, int(cols["offset"][i]) if "offset" in cols else i,
                         _bytes(cols["key"][i]) if "key" in cols else None, _bytes(cols["value"][i]),
                         headers[i] if type(headers[i]) is tuple else tuple((h["key"], h["value"])
                                                                            for h in headers[i] or ()),
                         _micros(stamps[i]))
            for i in range(n)]


def _bytes(v) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def _micros(ts) -> int | None:
    if ts is None:
        return None
    if ts.tzinfo is not None:
        ts = ts.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return (ts - EPOCH) // dt.timedelta(microseconds=1)
