"""Debezium's ``io.debezium.transforms.ExtractNewRecordState`` ("unwrap") as column expressions:
a change event's envelope (``before``, ``after``, ``source``, ``op``, ``ts_ms``) becomes the row state.

Deletes and tombstones: ``delete.tombstone.handling.mode`` (Debezium 2.5+) wins when set —
``drop`` (drop both), ``tombstone`` (a delete becomes a tombstone, tombstones kept), ``rewrite``
(a delete becomes ``before`` plus ``__deleted="true"``, tombstones dropped),
``rewrite-with-tombstone`` (rewrite, tombstones kept), ``delete-to-tombstone`` (a delete becomes a
tombstone, the connector's own tombstones dropped). Otherwise the older pair applies:
``drop.tombstones`` (true) and ``delete.handling.mode`` (``drop`` | ``rewrite`` | ``none``).
``add.fields`` / ``add.headers`` copy envelope fields (``op``, ``ts_ms``, ``source.<f>`` or a bare
source field such as ``table``) under ``add.fields.prefix`` / ``add.headers.prefix`` (``__``), dots
becoming underscores; ``route.by.field`` sets the topic from a field of the row state.
"""
from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from connect.errors import DataError
from connect.transform_base import Plan, Setting, Transformation, one_of, require_struct

MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")


class ExtractNewRecordState(Transformation):
    class_name = "io.debezium.transforms.ExtractNewRecordState"
    SETTINGS = [Setting("drop.tombstones", "boolean", True),
                Setting("delete.handling.mode", default="drop", validator=one_of("drop", "rewrite", "none")),
                Setting("delete.tombstone.handling.mode", default=None, validator=one_of(*MODES)),
                Setting("add.fields", "list", ""), Setting("add.fields.prefix", default="__"),
                Setting("add.headers", "list", ""), Setting("add.headers.prefix", default="__"),
                Setting("route.by.field", default=""),
                Setting("replace.null.with.default", "boolean", True)]

    def _modes(self):
        """(what a delete becomes: drop | tombstone | rewrite, keep tombstones?)"""
        mode = self.values.get("delete.tombstone.handling.mode")
        if mode:
            return {"drop": ("drop", False), "tombstone": ("tombstone", True), "rewrite": ("rewrite", False),
                    "rewrite-with-tombstone": ("rewrite", True), "delete-to-tombstone": ("tombstone", False)}[mode]
        legacy = self.values["delete.handling.mode"]
        return {"none": "tombstone"}.get(legacy, legacy), not self.values["drop.tombstones"]

    def _envelope_field(self, env, t: StructType, spec: str):
        path = spec.split(".")
        if len(path) == 1 and spec not in t.names:
            path = ["source", spec]
        c, ct = env, t
        for p in path:
            if not isinstance(ct, StructType) or p not in ct.names:
                raise DataError(f"ExtractNewRecordState: no field {spec!r} in the change event")
            c, ct = c.getField(p), ct[p].dataType
        return "_".join(path if path[0] != "source" or len(spec.split(".")) > 1 else path[1:]), c, ct

    def plan(self, frame):
        t = require_struct(frame, "value", "record state extraction")
        missing = [f for f in ("before", "after", "op") if f not in t.names]
        if missing:
            raise DataError(f"ExtractNewRecordState: value is not a Debezium change event (no {missing})")
        if t["before"].dataType.simpleString() != t["after"].dataType.simpleString():
            raise DataError("ExtractNewRecordState: 'before' and 'after' differ in type")
        row_t: StructType = t["after"].dataType
        env = F.col("value")
        delete_as, keep_tombstones = self._modes()
        is_delete = env.getField("op") == "d"
        state = F.when(is_delete, env.getField("before")).otherwise(env.getField("after"))
        fields = [(f.name, state.getField(f.name)) for f in row_t.fields]
        for spec in self.values["add.fields"]:
            name, c, _ = self._envelope_field(env, t, spec)
            fields.append((self.values["add.fields.prefix"] + name, c))
        if delete_as == "rewrite":
            fields.append(("__deleted", F.when(is_delete, "true").otherwise("false")))
        value = F.when(is_delete & F.lit(delete_as == "tombstone"), F.lit(None)).otherwise(
            F.when(state.isNotNull() | is_delete, F.struct(*[c.alias(n) for n, c in fields])))
        value = F.when(env.isNotNull(), value)
        keep = F.when(env.isNull(), F.lit(keep_tombstones)).when(is_delete, F.lit(delete_as != "drop")).otherwise(True)
        columns = {"value": value}
        if self.values["add.headers"]:
            from connect.transforms import header_bytes
            new = []
            for spec in self.values["add.headers"]:
                name, c, ct = self._envelope_field(env, t, spec)
                new.append(F.struct(F.lit(self.values["add.headers.prefix"] + name).alias("key"),
                                    header_bytes(c, ct).alias("value")))
            columns["headers"] = F.when(env.isNotNull(), F.concat(F.col("headers"), F.array(*new))).otherwise(F.col("headers"))
        route = self.values["route.by.field"]
        if route:
            if route not in row_t.names:
                raise DataError(f"ExtractNewRecordState: route.by.field {route!r} is not a field of the row")
            columns["topic"] = F.coalesce(state.getField(route), F.col("topic"))
        return Plan(columns, keep=keep)
