"""What one batch's write to Delta did, per table, and the records it could not apply (dead
letters, with Kafka Connect's ``__connect.errors.*`` headers, written by the Connect worker after
the Delta commit). Shared by the CDC apply and the append sink."""
from __future__ import annotations

from dataclasses import dataclass, field

from spark_sink.delta.errors import PoisonRecordError
from spark_sink.delta.records import SourceRecord


@dataclass(frozen=True)
class DeadLetter:
    """A record the sink could not apply, with ``errors.tolerance=all``."""
    record: SourceRecord
    error: PoisonRecordError

    def to_row(self) -> dict:
        """The record as a Kafka-shaped row for the dead-letter topic (its key, value and headers)."""
        return {"key": self.record.key, "value": self.record.value,
                "headers": [{"key": k, "value": v} for k, v in self.headers()]}

    def headers(self) -> list[tuple[str, bytes]]:
        """The record's headers plus Kafka Connect's ``__connect.errors.*`` dead-letter headers."""
        r = self.record
        return list(r.headers) + [(k, str(v).encode()) for k, v in (
            ("__connect.errors.topic", r.topic), ("__connect.errors.partition", r.partition),
            ("__connect.errors.offset", r.offset),
            ("__connect.errors.connector.name", "DeltaSink"),
            ("__connect.errors.exception.class.name", f"{type(self.error).__module__}.{type(self.error).__name__}"),
            ("__connect.errors.exception.message", self.error.message))]


@dataclass
class TableResult:
    path: str
    skipped: str | None = None       # "replayed" | "older" (batch id at/below the table's) | None
    version: int | None = None       # the Delta version this batch committed
    upserts: int = 0
    deletes: int = 0
    history_rows: int = 0
    held: int = 0                    # changes dropped: the table held them already
    truncates: int = 0


@dataclass
class ApplyResult:
    batch_id: int
    app_id: str
    tables: dict[str, TableResult] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
