"""Debezium's change events: committed transactions and snapshot rows as Kafka records.

Each record is what Debezium's PostgreSQL connector writes through Kafka's JsonConverter: a key
(the primary key) and a value ``{"before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns",
"transaction"}``, each as ``{"schema": ..., "payload": ...}`` bytes (``schemas.enable`` true) or
the payload alone. A delete is followed by a tombstone (``tombstones.on.delete``); an update that
changes the primary key is a delete of the old key (header ``__debezium.newkey``), its tombstone
(the same header) and a create of the new key (header ``__debezium.oldkey``); ``skipped.operations``
filters them as the ``d`` and ``c`` they are, not as an update. A TOASTed column the change did not
touch carries ``unavailable.value.placeholder`` (typed to its schema, see types.py; a schema with
none, a float, fails the event rather than carry a null), except under REPLICA IDENTITY FULL,
where the old tuple has the value and ``after`` takes it from there, as Debezium does. ``before``
is what pgoutput sent: null for an update under REPLICA IDENTITY DEFAULT that kept its key, the key alone (other NOT NULL columns at their type's zero, as
Debezium's converters fill a required field) for a delete, the whole row under FULL. A table
without a primary key (captured under REPLICA IDENTITY FULL) has no key: its records' key is null
and its columns keep their own optionality, as Debezium's ``TableSchemaBuilder`` gives them.
``message.key.columns`` replaces the key, ``column.include.list`` / ``column.exclude.list`` thin
``before`` and ``after`` and the column mappers rewrite their values (the key is taken from the
whole, unmapped row): :mod:`column_lists`, :mod:`column_mappers`.

Every record carries ``riverlog.cdc.commit_lsn`` (the transaction's commit end LSN; for snapshot
rows the slot's consistent point) and ``riverlog.cdc.order`` (its 0-based position among the
records of its transaction or snapshot, tombstones included), decimal ASCII, so a sink orders
changes exactly. ``transaction.id`` is ``"<xid>:<commit end LSN>"`` for the same reason.

    builder = EnvelopeBuilder(CdcConfig.from_options({"topic.prefix": "shop", "database.dbname": "shop"}))
    for record in builder.transaction_records(txn):
        producer.produce(record.topic, record.value, record.key, headers=record.headers)
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from broker.errors import RiverlogError
from spark_source.postgres import debezium_schemas as D
from spark_source.postgres import column_lists, logical_messages
from spark_source.postgres.cdc_config import VERSION, CdcConfig  # noqa: F401  (re-exported)
from spark_source.postgres.column_masks import utf8_json as _utf8
from spark_source.postgres.debezium_schemas import topic_name  # noqa: F401  (re-exported)
from spark_source.postgres.pgoutput import UNCHANGED_TOAST, Relation
from spark_source.postgres.transactions import Change, Transaction
from spark_source.postgres.types import ValueConversionError, bytes_json, column_type, convert_value

COMMIT_LSN_HEADER = "riverlog.cdc.commit_lsn"
ORDER_HEADER = "riverlog.cdc.order"
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""JsonConverter's compact output, UTF-8 rather than escapes, NaN refused (types.py writes it as a string)."""


class ReplicaIdentityError(RiverlogError):
    """A change cannot be keyed as its table's schema says. Kept for its stable code; a table
    without a key is no longer refused (its records have a null key, as Debezium's)."""
    code, name, retriable, grpc_status = 1351, "CDC_REPLICA_IDENTITY", False, "FAILED_PRECONDITION"


@dataclass(frozen=True)
class CdcRecord:
    """One Kafka record: ``value`` None is a tombstone; ``key`` None for truncate/transaction events."""
    topic: str
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple
    commit_lsn: int
    order: int


@dataclass
class TableSchema:
    """A captured table's key and value schemas, derived from its Relation message;
    ``key_columns`` empty and ``key_schema`` None for a table without a primary key."""
    relation: Relation
    topic: str
    key_columns: tuple
    types: tuple
    key_schema: Optional[dict]
    row_schema: dict
    value_schema: dict
    fallbacks: tuple = ()
    hint: tuple = ()        # (catalog key, NOT NULL columns) the schemas were built with
    optional: tuple = ()    # per column of the Relation: whether its field is optional
    value_columns: Optional[tuple] = None   # the columns before/after carry (column.*.list); None: all
    mappers: dict = field(default_factory=dict)   # column -> its mapper's function (column_mappers.py)

    @property
    def data_collection(self) -> str:
        return f"{self.relation.namespace}.{self.relation.name}"


class EnvelopeBuilder:
    """Pure: changes in, records out. Keeps the table schemas (rebuilt when a Relation changes) and
    the last commit LSN (``source.sequence``'s first element). ``now_us`` is the clock for the
    payload's ``ts_ms`` (processing time), passed in so tests fix it. ``types`` (a
    :class:`~spark_source.postgres.type_registry.TypeRegistry` read from the catalog) resolves
    domains, enums and extension types; without it those are strings."""

    def __init__(self, config: CdcConfig, now_us: Callable[[], int] = lambda: time.time_ns() // 1000,
                 last_commit_lsn: Optional[int] = None, types=None):
        self.config = config
        self.types = types
        self.now_us = now_us
        self.last_commit_lsn = last_commit_lsn
        self._tables: dict[int, TableSchema] = {}
        self._hints: dict[int, tuple] = {}
        self._schema_json: dict[int, tuple] = {}
        content_type = "bytes" if config.modes.binary_handling_mode == "bytes" else "string"
        self.message_schema = logical_messages.value_schema(D.source_schema(), content_type)

    # -- tables ---------------------------------------------------------------------------------
    def table(self, relation: Relation, primary_key: Optional[Sequence[str]] = None,
              not_null: Iterable[str] = ()) -> TableSchema:
        """The table's schemas. ``primary_key``: the key's columns from the catalog (the primary
        key, else the first unique index; needed under REPLICA IDENTITY FULL, whose Relation flags
        every column); None derives it from the Relation's key flags. A table with no key has a
        null record key, as Debezium's (``TableSchemaBuilder.create``). The schemas are rebuilt when
        the Relation or the catalog's description changes (a primary key added or replaced)."""
        hint = (tuple(primary_key) if primary_key is not None else None, frozenset(not_null))
        if primary_key is not None or not_null:
            self._hints[relation.oid] = hint
        else:
            hint = self._hints.get(relation.oid, hint)
        cached = self._tables.get(relation.oid)
        if cached is not None and cached.relation == relation and cached.hint == hint:
            return cached
        schema = self._build(relation, *hint)
        self._tables[relation.oid] = schema
        return schema

    def _build(self, relation: Relation, primary_key: Optional[tuple], not_null: frozenset) -> TableSchema:
        hint = (primary_key, not_null)
        names = [c.name for c in relation.columns]
        flagged = tuple(c.name for c in relation.columns if c.flags_key)
        # A key column is optional where the catalog says it is nullable: a unique index's may hold
        # NULLs (Debezium's TableSchemaBuilder.addField: ``column.isOptional()``, in the key schema
        # too). The Relation's own key flags are a primary key's or replica identity index's: NOT NULL.
        nullable_key = frozenset() if primary_key is None else frozenset(primary_key) - not_null
        if primary_key is None:
            primary_key = flagged if relation.replica_identity in ("d", "i") else ()
        # Key columns the Relation does not have are dropped, as PgOutputMessageDecoder's
        # retainAll drops a key read from a catalog that is ahead of the message.
        key_columns = tuple(k for k in primary_key if k in names)
        cfg = self.config
        optional = tuple(n in nullable_key or (n not in not_null and n not in key_columns) for n in names)
        is_optional = dict(zip(names, optional))
        # message.key.columns replaces the key; column lists choose the value's fields (column_lists.py).
        record_key = cfg.columns.message_key(relation.namespace, relation.name, names) or key_columns
        kept = cfg.columns.value_columns(relation.namespace, relation.name, names)
        types = tuple(column_type(c.type_oid, c.type_modifier, cfg.modes, cfg.unavailable_value_placeholder,
                                  self.types) for c in relation.columns)
        by_name = dict(zip(names, types))
        base = (cfg.topic_prefix, relation.namespace, relation.name)
        key_schema = {"type": "struct", "fields": [by_name[k].schema(k, is_optional[k]) for k in record_key],
                      "optional": False, "name": D.schema_name(*base, "Key")} if record_key else None
        fields = [t.schema(n, opt) for n, t, opt in zip(names, types, optional)]
        shown, mappers = column_lists.mapped(cfg.columns, *base[1:], relation.columns, fields, self.types)
        row = {"type": "struct", "fields": [f for f, n in zip(shown, names) if n in kept], "optional": True,
               "name": D.schema_name(*base, "Value")}
        value_schema = {"type": "struct", "fields": [
            {**row, "field": "before"}, {**row, "field": "after"}, D.source_schema(),
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {"type": "int64", "optional": True, "field": "ts_us"},
            {"type": "int64", "optional": True, "field": "ts_ns"},
            D.TRANSACTION_BLOCK], "optional": False, "name": D.schema_name(*base, "Envelope"),
            "version": D.ENVELOPE_VERSION}
        fallbacks = tuple(None if f["optional"] else t.fallback if t.fallback is not None else D.fallback(f)
                          for f, t in zip(fields, types))
        return TableSchema(relation, D.topic_name(*base), record_key, types, key_schema, row, value_schema,
                           fallbacks, hint, optional, None if len(kept) == len(names) and not mappers else kept,
                           mappers)

    # -- values ---------------------------------------------------------------------------------
    def _row(self, table: TableSchema, values: Optional[tuple]) -> Optional[dict]:
        if values is None:
            return None
        row = {}
        for column, ctype, raw, fallback, optional in zip(table.relation.columns, table.types, values,
                                                          table.fallbacks, table.optional):
            if raw is None:
                row[column.name] = fallback    # an old key-only tuple: Debezium's fallback for a required field
            elif raw is UNCHANGED_TOAST:
                row[column.name] = ctype.placeholder
            else:
                value = convert_value(ctype, raw, column.name, column.type_oid)
                if value is None and not optional:
                    raise _unrepresentable(table, column.name, raw)
                row[column.name] = value
        return row

    @staticmethod
    def _kept(table: TableSchema, row: Optional[dict]) -> Optional[dict]:
        """``row`` with the columns the column lists keep, their mappers applied (the key was taken
        from the whole row)."""
        if row is None or table.value_columns is None:
            return row
        mappers = table.mappers
        return {c: mappers[c](row[c]) if c in mappers else row[c] for c in table.value_columns}

    def _key_payload(self, table: TableSchema, row: dict) -> Optional[dict]:
        """The record key's payload; None (a null key) for a table without a primary key."""
        return {k: row[k] for k in table.key_columns} if table.key_columns else None

    def _json(self, schema: Optional[dict], payload: Any) -> bytes:
        """JsonConverter's bytes; a schema is serialized once and spliced in (it is most of the bytes)."""
        body = _ENCODER.encode(payload)
        if not self.config.schemas_enable:
            return _utf8(body)
        cached = self._schema_json.get(id(schema))
        if cached is None or cached[0] is not schema:
            cached = (schema, _ENCODER.encode(schema))
            self._schema_json[id(schema)] = cached
        return _utf8(f'{{"schema":{cached[1]},"payload":{body}}}')

    def _source(self, table: Optional[TableSchema], ts_us: int, snapshot: str, xid: Optional[int],
                lsn: Optional[int], schema: str = "", name: str = "") -> dict:
        prev = None if self.last_commit_lsn is None else str(self.last_commit_lsn)
        return {"version": self.config.version, "connector": "postgresql", "name": self.config.topic_prefix,
                "ts_ms": ts_us // 1000, "ts_us": ts_us, "ts_ns": ts_us * 1000, "snapshot": snapshot,
                "db": self.config.database,
                "sequence": _ENCODER.encode([prev, None if lsn is None else str(lsn)]),
                "schema": table.relation.namespace if table else schema,
                "table": table.relation.name if table else name, "txId": xid, "lsn": lsn, "xmin": None}

    def _envelope(self, table: TableSchema, op: str, before, after, source: dict, block) -> bytes:
        now = self.now_us()
        payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": now // 1000,
                   "ts_us": now, "ts_ns": now * 1000, "transaction": block}
        return self._json(table.value_schema, payload)

    # -- records --------------------------------------------------------------------------------
    def snapshot_record(self, relation: Relation, row: tuple, consistent_lsn: int, order: int,
                        snapshot: str = "true", ts_us: Optional[int] = None, xid: Optional[int] = None) -> CdcRecord:
        """One snapshot row (text values, as COPY or a text-mode SELECT gives them) as an ``op: r``
        record. ``snapshot``: the row's ``source.snapshot`` marker (snapshot.snapshot_markers)."""
        table = self.table(relation)
        after = self._row(table, row)
        source = self._source(table, self.now_us() if ts_us is None else ts_us, snapshot, xid, consistent_lsn)
        key_payload = self._key_payload(table, after)
        key = None if key_payload is None else self._json(table.key_schema, key_payload)
        return CdcRecord(table.topic, key, self._envelope(table, "r", None, self._kept(table, after), source, None),
                         _headers(consistent_lsn, order), consistent_lsn, order)

    def transaction_records(self, txn: Transaction,
                            include: Optional[Callable[[Relation], bool]] = None) -> list[CdcRecord]:
        """All records of one committed transaction, in order; with ``provide.transaction.metadata``
        framed by BEGIN and END records on ``<topic.prefix>.transaction``. ``include`` filters
        tables (``table.include.list``)."""
        return list(self.iter_transaction_records(txn, include))

    def iter_transaction_records(self, txn: Transaction,
                                 include: Optional[Callable[[Relation], bool]] = None) -> Iterator[CdcRecord]:
        """:meth:`transaction_records` one change at a time: a large transaction's records never
        all exist at once."""
        # Debezium frames every transaction pgoutput sends, one with no captured change too
        # (PostgresStreamingChangeEventSource dispatches BEGIN and COMMIT; event_count 0).
        framed = self.config.provide_transaction_metadata and txn.xid is not None
        out: list[CdcRecord] = []
        emit = _Emitter(self, txn, out, next_order=int(framed))
        if framed:
            yield CdcRecord(self.transaction_topic, self.transaction_key(txn), self.transaction_event("BEGIN", txn),
                            _headers(txn.end_lsn, 0), txn.end_lsn, 0)
        for change in txn.changes:
            if change.relation is not None and include is not None and not include(change.relation):
                continue
            self._change(emit, change)
            yield from out
            out.clear()
        if txn.xid is not None:
            self.last_commit_lsn = txn.end_lsn
        if framed:
            collections = [{"data_collection": c, "event_count": n} for c, n in emit.per_collection.items()]
            yield CdcRecord(self.transaction_topic, self.transaction_key(txn),
                            self.transaction_event("END", txn, emit.total, collections),
                            _headers(txn.end_lsn, emit.next_order), txn.end_lsn, emit.next_order)

    def _change(self, emit: "_Emitter", change: Change) -> None:
        kind, skipped = change.kind, self.config.skipped_operations
        if kind == "message":
            cfg = self.config
            if logical_messages.wanted(change.message.prefix, cfg.message_prefix_include_list,
                                       cfg.message_prefix_exclude_list):
                emit.message(change)
            return
        table = self.table(change.relation)
        if kind == "truncate":
            if "t" not in skipped:
                emit.value(table, None, "t", None, None, change)
            return
        new = self._row(table, change.new)
        old = self._row(table, change.old)
        if new is not None and UNCHANGED_TOAST in change.new:
            _fill_unchanged_toast(table, change, new, old)
        before, after = self._kept(table, old), self._kept(table, new)
        if kind == "update" and old is not None and after == before and self.config.skip_messages_without_change:
            # RelationalChangeRecordEmitter.emitUpdateRecord: an update whose old image (REPLICA
            # IDENTITY FULL) equals its new one is not emitted, nor counted in transaction metadata.
            return
        if kind == "insert":
            if "c" not in skipped:
                emit.value(table, self._key_payload(table, new), "c", None, after, change)
        elif kind == "delete":
            if "d" not in skipped:
                key = self._key_payload(table, old)
                emit.value(table, key, "d", before, None, change)
                if self.config.tombstones_on_delete:
                    emit.tombstone(table, key)
        elif old is not None and self._key_payload(table, old) != self._key_payload(table, new):
            # A key change is a DELETE and a CREATE (RelationalChangeRecordEmitter.
            # emitUpdateAsPrimaryKeyChangeRecord), and EventDispatcher filters each record by its own
            # operation: skipping u keeps both, skipping d drops the delete and its tombstone, c the create.
            old_key, new_key = self._key_payload(table, old), self._key_payload(table, new)
            old_key_json, new_key_json = self._json(table.key_schema, old_key), self._json(table.key_schema, new_key)
            if "d" not in skipped:
                newkey = (("__debezium.newkey", new_key_json),)
                emit.value(table, old_key, "d", before, None, change, newkey)
                if self.config.tombstones_on_delete:
                    emit.tombstone(table, old_key, newkey)   # the delete's headers, as Debezium copies them
            if "c" not in skipped:
                emit.value(table, new_key, "c", None, after, change, (("__debezium.oldkey", old_key_json),))
        elif "u" not in skipped:
            emit.value(table, self._key_payload(table, new), "u", before, after, change)

    def transaction_event(self, status: str, txn: Transaction, event_count: Optional[int] = None,
                          data_collections: Optional[list] = None) -> bytes:
        """A transaction topic value (BEGIN or END), with ``schemas.enable`` honoured."""
        ts_ms = (txn.commit_ts_us or self.now_us()) // 1000
        payload = {"status": status, "id": f"{txn.xid}:{txn.end_lsn}", "event_count": event_count,
                   "data_collections": data_collections, "ts_ms": ts_ms}
        return self._json(D.TRANSACTION_VALUE_SCHEMA, payload)

    def transaction_key(self, txn: Transaction) -> bytes:
        return self._json(D.TRANSACTION_KEY_SCHEMA, {"id": f"{txn.xid}:{txn.end_lsn}"})

    @property
    def transaction_topic(self) -> str:
        return f"{self.config.topic_prefix}.{self.config.topic_transaction}"


@dataclass
class _Emitter:
    """Numbers a transaction's records and keeps Debezium's per-transaction event counts."""
    builder: EnvelopeBuilder
    txn: Transaction
    out: list
    total: int = 0
    per_collection: dict = field(default_factory=dict)
    next_order: int = 0   # 1 when a BEGIN record comes first

    def _append(self, topic: str, key: Optional[bytes], value: Optional[bytes], extra: tuple = ()) -> None:
        order, self.next_order = self.next_order, self.next_order + 1
        self.out.append(CdcRecord(topic, key, value, _headers(self.txn.end_lsn, order) + extra,
                                  self.txn.end_lsn, order))

    def value(self, table: TableSchema, key: Optional[dict], op: str, before, after, change: Change,
              extra: tuple = ()) -> None:
        b = self.builder
        self.total += 1
        collection = table.data_collection
        self.per_collection[collection] = self.per_collection.get(collection, 0) + 1
        block = None
        if b.config.provide_transaction_metadata:
            block = {"id": f"{self.txn.xid}:{self.txn.end_lsn}", "total_order": self.total,
                     "data_collection_order": self.per_collection[collection]}
        ts = self.txn.commit_ts_us if self.txn.commit_ts_us is not None else b.now_us()
        source = b._source(table, ts, "false", self.txn.xid, change.lsn)
        key_bytes = None if key is None else b._json(table.key_schema, key)
        self._append(table.topic, key_bytes, b._envelope(table, op, before, after, source, block), extra)

    def message(self, change: Change) -> None:
        """A logical decoding message event (``op: "m"``), outside the transaction's event counts."""
        b, m = self.builder, change.message
        now = b.now_us()
        ts = self.txn.commit_ts_us if m.transactional and self.txn.commit_ts_us is not None else now
        source = b._source(None, ts, "false", self.txn.xid if m.transactional else None, change.lsn)
        value = logical_messages.value_payload(source, m.prefix, bytes_json(m.content, b.config.modes), now)
        topic = f"{b.config.topic_prefix}.{logical_messages.TOPIC_SUFFIX}"
        self._append(topic, b._json(logical_messages.KEY_SCHEMA, {"prefix": m.prefix}),
                     b._json(b.message_schema, value))

    def tombstone(self, table: TableSchema, key: Optional[dict], extra: tuple = ()) -> None:
        """A delete's tombstone: its key and headers (EventDispatcher's ``record.newRecord``)."""
        self._append(table.topic, None if key is None else self.builder._json(table.key_schema, key), None, extra)


def _fill_unchanged_toast(table: TableSchema, change: Change, new: dict, old: Optional[dict]) -> None:
    """An unchanged TOASTed value is the old tuple's where it has one (a key column, or any column
    under FULL: Debezium's PostgresChangeRecordEmitter.columnValues), else its placeholder. A kept
    column whose schema has none (a ``numeric`` under ``decimal.handling.mode=double``) fails the
    event: its null would overwrite the value in every sink."""
    for i, (column, ctype) in enumerate(zip(table.relation.columns, table.types)):
        if change.new[i] is not UNCHANGED_TOAST:
            continue
        if old is not None and change.old[i] is not None:
            new[column.name] = old[column.name]
        elif ctype.placeholder is None and (table.value_columns is None or column.name in table.value_columns):
            kind = ctype.schema_body.get("name") or ctype.schema_body["type"]
            raise ValueConversionError(
                f"column {column.name!r} of {table.data_collection}: an update left its TOASTed value unchanged, so "
                f"pgoutput did not send it, and its schema ({kind}) has no value to stand for "
                "unavailable.value.placeholder. Set decimal.handling.mode=precise or string on the source (for a "
                f"numeric), or ALTER TABLE {table.data_collection} REPLICA IDENTITY FULL for later updates",
                column=column.name, type_oid=column.type_oid, table=table.data_collection)


def _unrepresentable(table: TableSchema, column: str, raw) -> ValueConversionError:
    """A value with no form under the column's schema in a required (NOT NULL) field: NaN or
    ±Infinity in a numeric under ``decimal.handling.mode=precise``. Debezium's Connect struct
    refuses the null there too (an optional field carries null)."""
    text = bytes(raw).decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else str(raw)
    return ValueConversionError(
        f"column {column!r} of {table.data_collection} is NOT NULL and holds {text!r}, which "
        "decimal.handling.mode=precise cannot represent (a Decimal has no NaN or Infinity): set "
        "decimal.handling.mode=string (or double) on the source", column=column, value=text[:200],
        table=table.data_collection)


def _headers(commit_lsn: int, order: int) -> tuple:
    return ((COMMIT_LSN_HEADER, str(commit_lsn).encode("ascii")), (ORDER_HEADER, str(order).encode("ascii")))


