"""How far a CDC query has read: its offset, JSON in Spark's checkpoint (and what the broker's
connect-offsets topic holds for a Connect source).

The shapes:

    {"phase": "snapshot", "lsn": C, "tables": [...], "table": i, "after": [key as text] | null, "rows": n}
    {"phase": "stream", "lsn": L, ["txId": X, "ts_usec": T], ["event_lsn": E, ["event_kind": "message"]]}
                                       every transaction with commit end LSN <= L is read; X and T are
                                       the last one's xid and commit time; E (only from a Debezium offset
                                       stored mid-transaction): the next transaction's changes up to E are
                                       read too (after a logical message, a row change at E is not: it
                                       is the record after the message, which ends at E)
    {"phase": "done", "lsn": C}        initial_only: the snapshot is read, nothing follows
    {"phase": "new", "lsn": 0}         a query's initial offset, before its slot exists
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from spark_source.postgres.snapshot import Position

SNAPSHOT, STREAM, DONE, NEW = "snapshot", "stream", "done", "new"


@dataclass(frozen=True)
class CdcOffset:
    phase: str
    lsn: int
    tables: tuple = ()
    position: Position | None = None
    rows: int = 0
    xid: int | None = None
    ts_us: int | None = None
    event_lsn: int | None = None
    event_kind: str | None = None

    def to_json(self) -> dict:
        if self.phase != SNAPSHOT:
            last = {k: v for k, v in (("txId", self.xid), ("ts_usec", self.ts_us), ("event_lsn", self.event_lsn),
                                      ("event_kind", self.event_kind)) if v is not None}
            return {"phase": self.phase, "lsn": self.lsn, **last}
        return {"phase": SNAPSHOT, "lsn": self.lsn, "tables": list(self.tables), **self.position.to_json(),
                "rows": self.rows}

    @classmethod
    def from_json(cls, data) -> "CdcOffset":
        data = json.loads(data) if isinstance(data, str) else data
        if data["phase"] != SNAPSHOT:
            xid, ts, event = data.get("txId"), data.get("ts_usec"), data.get("event_lsn")
            return cls(data["phase"], int(data["lsn"]), xid=None if xid is None else int(xid),
                       ts_us=None if ts is None else int(ts), event_lsn=None if event is None else int(event),
                       event_kind=data.get("event_kind"))
        return cls(SNAPSHOT, int(data["lsn"]), tuple(data["tables"]), Position.from_json(data), int(data["rows"]))

    @property
    def key(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)
