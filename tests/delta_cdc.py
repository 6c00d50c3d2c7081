"""Debezium change events as the PostgreSQL CDC source emits them (docs/cdc.md, the contract), built
by hand for the Delta sink's tests: Kafka-shaped rows with Debezium JSON key/value and the two
``riverlog.cdc.*`` headers, and a reference model of what the Delta table must hold."""
from __future__ import annotations

import base64
import json

import pyarrow as pa

PLACEHOLDER = "__debezium_unavailable_value"
KAFKA_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                          ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))])

CUSTOMER_FIELDS = [{"type": "int32", "optional": False, "field": "id"},
                   {"type": "string", "optional": True, "field": "name"},
                   {"type": "string", "optional": True, "field": "note"}]


def struct(fields, name):
    return {"type": "struct", "fields": fields, "optional": True, "name": name}


class Events:
    """A source stream: each :meth:`change` becomes one record at the next offset."""

    def __init__(self, table="public.customers", fields=CUSTOMER_FIELDS, key=("id",), topic=None,
                 with_schema=True, partition=0):
        self.schema_name, self.table = table.split(".")
        self.fields, self.key, self.with_schema = list(fields), tuple(key), with_schema
        self.topic = topic or f"shop.{table}"
        self.partition, self.offset = partition, 0

    def _json(self, schema, payload) -> bytes:
        doc = {"schema": schema, "payload": payload} if self.with_schema else payload
        return json.dumps(doc).encode()

    def change(self, op, *, before=None, after=None, lsn, order=0, ts_ms=None, headers=True, fields=None,
               old_key=None):
        """One record (a dict of the Kafka columns) for op c/u/d/r; ``op='t'`` is a tombstone and
        ``op='truncate'`` Debezium's truncate event (op ``t``, no key). ``old_key`` (a create of a
        primary-key change): the ``__debezium.oldkey`` header's key payload."""
        fields = fields or self.fields
        row = after if op != "d" else before
        key_payload = {k: (row or {}).get(k) for k in self.key}
        key_schema = struct([f for f in fields if f["field"] in self.key], f"{self.topic}.Key")
        value = None
        if op == "truncate":
            op, key_payload = "t", None
            value = b""
        if op != "t" or value is not None:
            value_schema = struct([struct(fields, f"{self.topic}.Value") | {"field": "before"},
                                   struct(fields, f"{self.topic}.Value") | {"field": "after"},
                                   {"type": "struct", "fields": [], "field": "source"},
                                   {"type": "string", "field": "op"}, {"type": "int64", "field": "ts_ms"}],
                                  f"{self.topic}.Envelope")
            ts = ts_ms if ts_ms is not None else lsn
            payload = {"before": before, "after": after, "op": op, "ts_ms": ts,
                       "source": {"connector": "postgresql", "name": "shop", "schema": self.schema_name,
                                  "table": self.table, "lsn": lsn, "ts_ms": ts, "snapshot": "false"},
                       "transaction": None}
            value = self._json(value_schema, payload)
        key = None if key_payload is None else self._json(key_schema, key_payload)
        record = {"key": key, "value": value, "topic": self.topic,
                  "partition": self.partition, "offset": self.offset, "timestamp": None, "timestampType": 0,
                  "headers": ([{"key": "riverlog.cdc.commit_lsn", "value": str(lsn).encode()},
                               {"key": "riverlog.cdc.order", "value": str(order).encode()}] if headers else [])
                  + ([{"key": "__debezium.oldkey", "value": self._json(key_schema, old_key)}] if old_key else [])}
        self.offset += 1
        return record


def batch(records) -> pa.Table:
    return pa.Table.from_pylist(list(records), schema=KAFKA_SCHEMA)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def decimal_bytes(unscaled: int) -> str:
    """Java's BigInteger.toByteArray: minimal two's complement."""
    return b64(unscaled.to_bytes((unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1, "big", signed=True))


# ------------------------------------------------------------------------------ random histories
def random_history(rng, keys=4, steps=30, toast=True, truncates=False, moved_toast=False):
    """Transactions of a random history over a few keys: inserts, updates (some with an unchanged
    TOAST ``note``), deletes and primary-key changes (delete old + tombstone + create new, the create
    with the old key's header; with ``moved_toast`` some with an unchanged TOAST ``note``), and with
    ``truncates`` the odd TRUNCATE (op ``T`` here), as ``(commit_lsn, [(op, before, after,
    unchanged_toast)])``; and the source table's end state."""
    state: dict[int, dict] = {}
    txns, lsn = [], 100
    for step in range(steps):
        lsn += rng.randint(1, 50)
        changes = []
        if truncates and rng.random() < 0.08:
            changes.append(("T", None, None, False))
            state.clear()
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(keys)
            if k not in state:
                row = {"id": k, "name": f"n{step}", "note": f"big{step}"}
                changes.append(("c", None, row, False))
                state[k] = row
            else:
                r = rng.random()
                if r < 0.5:
                    row = dict(state[k], name=f"u{step}.{rng.randrange(100)}")
                    keep = toast and rng.random() < 0.5
                    if not keep:
                        row["note"] = f"big{step}.{rng.randrange(100)}"
                    changes.append(("u", None, row, keep))
                    state[k] = row
                elif r < 0.75:
                    changes.append(("d", state.pop(k), None, False))
                else:
                    new = next((n for n in range(keys) if n not in state), None)
                    if new is None:
                        continue
                    old = state.pop(k)
                    row = dict(old, id=new)
                    changes.append(("d", old, None, False))
                    changes.append(("t", old, None, False))
                    changes.append(("c", None, row, moved_toast and rng.random() < 0.5))
                    state[new] = row
        if changes:
            txns.append((lsn, changes))
    return txns, state


def records_of(events: Events, txns):
    """The records of :func:`random_history`'s transactions, in order."""
    out = []
    for lsn, changes in txns:
        for order, (op, before, after, keep) in enumerate(changes):
            sent_after = dict(after, note=PLACEHOLDER) if keep else after
            moved = op == "c" and order and changes[order - 1][0] == "t"   # a primary-key change's create
            old_key = {"id": changes[order - 1][1]["id"]} if moved else None
            out.append(events.change("truncate" if op == "T" else op, before=before, after=sent_after, lsn=lsn,
                                     order=order, ts_ms=lsn, old_key=old_key))
    return out


def reference_history(txns) -> dict[int, list[tuple]]:
    """SCD-2 reference, replayed in commit order: per key, (op, row, lsn, order, valid_from,
    valid_to, is_current). A change ends the key's live version; a delete row is an instant; a
    truncate ends every live version and writes nothing."""
    out: dict[int, list[list]] = {}
    live: dict[int, list] = {}
    for lsn, changes in txns:
        for order, (op, before, after, _) in enumerate(changes):
            if op == "t":
                continue
            if op == "T":
                for version in live.values():
                    version[5], version[6] = lsn, False
                live.clear()
                continue
            row = after if op != "d" else before
            k = row["id"]
            if k in live:
                live[k][5], live[k][6] = lsn, False
            version = [op, dict(row), lsn, order, lsn, lsn if op == "d" else None, op != "d"]
            out.setdefault(k, []).append(version)
            if op == "d":
                live.pop(k, None)
            else:
                live[k] = version
    return {k: [tuple(v) for v in vs] for k, vs in out.items()}
