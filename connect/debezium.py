"""Debezium's ``io.debezium.transforms.ExtractNewRecordState`` ("unwrap") as column expressions:
a change event's envelope (``before``, ``after``, ``source``, ``op``, ``ts_ms``) becomes the row state.

Deletes and tombstones: ``delete.tombstone.handling.mode`` (Debezium 2.5+) wins when set —
``drop`` (drop both), ``tombstone`` and ``delete-to-tombstone`` (a delete becomes a null value that
keeps the row's schema — ``DefaultDeleteHandlingStrategy`` applies its ``after`` ExtractField, so no
real tombstone: see :func:`connect.record_frame.typed_null` — the connector's own tombstones dropped), ``rewrite`` (a delete becomes ``before`` plus
``__deleted="true"``, tombstones dropped), ``rewrite-with-tombstone`` (rewrite, tombstones kept).
Otherwise the older pair applies: ``drop.tombstones`` (true) and ``delete.handling.mode``
(``drop`` | ``rewrite`` | ``none``). An event with neither ``before`` nor ``after`` (a truncate, or a
delete of a table with ``REPLICA IDENTITY NOTHING``) is dropped. Only a change event is unwrapped:
as ``SmtManager.isValidEnvelope``, the value's Connect schema name (``connect.name`` on the frame's
``value`` column, which the JsonConverter sets from the envelope's schema) must end in
``.Envelope``; any other record — a heartbeat, a schema change, a schemaless value
(``schemas.enable=false``) — passes as it is, though its tombstones are still dropped or kept as
above (Debezium handles a tombstone before it checks the envelope). ``add.fields`` / ``add.headers`` copy event fields as Debezium's
``FieldReference`` names them: ``op``, ``ts_ms`` from the envelope, ``id``/``total_order``/
``data_collection_order`` from ``transaction``, any other bare name from ``source`` (or the
envelope's top level when ``source`` lacks it, as ``FieldReference.getField``), or
``struct.field``; under ``add.fields.prefix`` / ``add.headers.prefix`` (``__``) with the dot an
underscore, or ``field:name`` for ``<prefix>name``; a field the event lacks is skipped. The added
fields follow ``__deleted``. A kept tombstone gets the ``op`` header ``d``. ``route.by.field`` sets
the topic from a field of the row state (a blank one keeps the topic).
"""
from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from connect import record_frame
from connect.connect_types import DOC, NAME, OPTIONAL, PARAMETERS, VERSION
from connect.errors import DataError
from connect.transform_base import Plan, Setting, Transformation, connect_name, one_of

MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")


class ExtractNewRecordState(Transformation):
    class_name = "io.debezium.transforms.ExtractNewRecordState"
    SETTINGS = [Setting("drop.tombstones", "boolean", True),
                Setting("delete.handling.mode", default="drop",
                        validator=lambda v: one_of("drop", "rewrite", "none", case=False)(_mode(v))),
                Setting("delete.tombstone.handling.mode", default=None,
                        validator=lambda v: one_of(*MODES, case=False)(_mode(v))),
                Setting("add.fields", "list", ""), Setting("add.fields.prefix", default="__"),
                Setting("add.headers", "list", ""), Setting("add.headers.prefix", default="__"),
                Setting("route.by.field", default=""),
                Setting("replace.null.with.default", "boolean", True)]

    def _modes(self):
        """(what a delete becomes: drop | tombstone | rewrite, keep the connector's tombstones?)"""
        mode = _mode(self.values.get("delete.tombstone.handling.mode"))
        if mode:
            return {"drop": ("drop", False), "tombstone": ("tombstone", False), "rewrite": ("rewrite", False),
                    "rewrite-with-tombstone": ("rewrite", True), "delete-to-tombstone": ("tombstone", False)}[mode]
        legacy = _mode(self.values["delete.handling.mode"])
        return {"none": "tombstone"}.get(legacy, legacy), not self.values["drop.tombstones"]

    @staticmethod
    def _reference(spec: str, prefix: str, t: StructType):
        """Debezium's ``FieldReference``: (outgoing name, column, type) for ``field``,
        ``struct.field`` or either with ``:new_name``; None where the event has no such field
        (Debezium skips it). A bare name is the envelope's (``op``, ``ts_ms``, ``ts_us``,
        ``ts_ns``), the transaction's (``id``, ``total_order``, ``data_collection_order``) or
        the source's (``lsn``, ``table``, …)."""
        field, _, rename = spec.partition(":")
        parts = field.split(".")
        name = parts[0] if len(parts) == 1 else parts[1]
        struct = parts[0] if len(parts) > 1 else _HOSTS.get(name, "source")
        out = prefix + (rename or (name if len(parts) == 1 else f"{struct}_{name}"))
        def walk(steps):
            c, ct, meta = F.col("value"), t, None
            for step in steps:
                if not isinstance(ct, StructType) or step not in ct.names:
                    return None
                c, ct, meta = c.getField(step), ct[step].dataType, ct[step].metadata
            return out, c, ct, meta
        found = walk([name] if struct is None else [struct, name])
        if found is None and len(parts) == 1 and struct == "source":   # FieldReference.getField: the envelope's own
            found = walk([name])
        return found

    def plan(self, frame):
        t = frame.schema["value"].dataType
        if not is_envelope(frame) or any(f not in t.names for f in ("before", "after", "op")):
            return self._not_a_change_event()
        if t["before"].dataType.simpleString() != t["after"].dataType.simpleString():
            raise DataError("ExtractNewRecordState: 'before' and 'after' differ in type")
        row_t: StructType = t["after"].dataType
        env = F.col("value")
        delete_as, keep_tombstones = self._modes()
        before, after = env.getField("before"), env.getField("after")
        is_delete = after.isNull() & before.isNotNull()
        state = F.when(is_delete, before).otherwise(after)
        fields = [(f.name, state.getField(f.name), f.metadata) for f in row_t.fields]
        if delete_as == "rewrite":   # before the added fields, as Debezium adds it first (InsertField: optional string)
            fields.append(("__deleted", F.when(is_delete, "true").otherwise("false"), {OPTIONAL: True}))
        for spec in self.values["add.fields"]:
            found = self._reference(spec, self.values["add.fields.prefix"], t)
            if found is not None:
                fields.append((found[0], found[1], found[3] or {}))
        # The row's schema is the ``after`` field's (ExtractField); a row with fields added is
        # rebuilt by SchemaUtil.copySchemaBasics, which keeps name, version, doc and parameters
        # but not optionality (required).
        meta = dict(t["after"].metadata)
        if len(fields) > len(row_t.fields):
            meta = {k: v for k, v in meta.items() if k in (NAME, VERSION, DOC, PARAMETERS)}
            meta[OPTIONAL] = False
        deleted = is_delete & F.lit(delete_as == "tombstone")
        value = F.when(deleted, F.lit(None)).otherwise(
            F.struct(*[c.alias(n, metadata=m) if m else c.alias(n) for n, c, m in fields]))
        value = F.when(env.isNotNull(), value).alias("value", metadata=meta)
        # a truncate (or a delete without its row: REPLICA IDENTITY NOTHING) has neither, and is dropped
        keep = (F.when(env.isNull(), F.lit(keep_tombstones)).when(after.isNull() & before.isNull(), F.lit(False))
                .when(is_delete, F.lit(delete_as != "drop")).otherwise(True))
        columns = {"value": value}
        if delete_as == "tombstone":   # afterDelegate: the delete's null ``after``, with its schema (no tombstone)
            columns[record_frame.typed_null("value")] = F.when(env.isNull(), record_frame.is_typed_null(frame, "value")
                                                               ).otherwise(deleted)
        if self.values["add.headers"]:
            from connect.headers import header_bytes
            none = F.array().cast(record_frame.HEADERS_TYPE)
            new = []
            for spec in self.values["add.headers"]:
                found = self._reference(spec, self.values["add.headers.prefix"], t)
                if found is None:
                    continue
                name, c, ct, meta = found
                new.append(F.struct(F.lit(name).alias("key"), header_bytes(c, ct, meta).alias("value")))
            on_tombstone = self._tombstone_headers()
            columns["headers"] = F.concat(F.coalesce(F.col("headers"), none),
                                          F.when(env.isNotNull(), F.array(*new) if new else none)
                                          .otherwise(F.array(*on_tombstone) if on_tombstone else none))
        route = self.values["route.by.field"]
        if route:
            if route not in row_t.names:
                raise DataError(f"ExtractNewRecordState: route.by.field {route!r} is not a field of the row")
            target = state.getField(route)
            columns["topic"] = F.when(F.trim(target.cast("string")) != "", target.cast("string")).otherwise(F.col("topic"))
        return Plan(columns, keep=keep)

    def _tombstone_headers(self):
        """``makeHeaders`` on a tombstone: only ``op``, as ``d`` (a tombstone follows a delete)."""
        return [F.struct(F.lit(self._reference(spec, self.values["add.headers.prefix"], _OP_ONLY)[0]).alias("key"),
                         F.encode(F.lit("d"), "UTF-8").alias("value"))
                for spec in self.values["add.headers"] if spec.partition(":")[0] == "op"]

    def _not_a_change_event(self):
        """``doApply`` for a record whose value is not an envelope: a tombstone is handled as any
        tombstone (dropped unless kept, ``op`` header ``d``), anything else passes unchanged."""
        env = F.col("value")
        keep = F.when(env.isNull(), F.lit(self._modes()[1])).otherwise(F.lit(True))
        columns = {}
        on_tombstone = self._tombstone_headers()
        if on_tombstone:
            none = F.array().cast(record_frame.HEADERS_TYPE)
            columns["headers"] = F.concat(F.coalesce(F.col("headers"), none),
                                          F.when(env.isNull(), F.array(*on_tombstone)).otherwise(none))
        return Plan(columns, keep=keep)


def is_envelope(frame) -> bool:
    """``SmtManager.isValidEnvelope``: the value has a Connect schema whose name ends in
    ``.Envelope`` (``Envelope.isEnvelopeSchema``), as the converter recorded it in the ``value``
    column's metadata."""
    f = frame.schema["value"]
    name = connect_name(f.metadata)
    return isinstance(f.dataType, StructType) and name is not None and name.endswith(".Envelope")


def _mode(v):
    """A mode as Debezium reads it: trimmed, any case."""
    return v.strip().lower() if isinstance(v, str) else v


_OP_ONLY = StructType([StructField("op", StringType())])   # names the op header without an event
_HOSTS = {"op": None, "ts_ms": None, "ts_us": None, "ts_ns": None, "id": "transaction", "total_order": "transaction",
          "data_collection_order": "transaction", "updateDescription": "updateDescription"}
