"""The Delta sink's typed errors (codes 1380-1399), on the broker's one hierarchy."""
from __future__ import annotations

from broker.errors import InvalidConfigError, RetriableError, RiverlogError


class DeltaSinkError(RiverlogError):
    """Category of the Delta sink's errors: caught, never raised."""
    _category = True


class PoisonRecordError(DeltaSinkError):
    """A record the sink cannot apply (not Debezium JSON, no key, a value that does not fit its
    column). ``details`` name ``topic``, ``partition`` and ``offset``; with
    ``errors.tolerance=all`` the record goes to the dead-letter callback instead."""
    code, name, retriable, grpc_status = 1381, "DELTA_POISON_RECORD", False, "INVALID_ARGUMENT"


class SchemaChangeError(DeltaSinkError):
    """A source column changed to a type the Delta column cannot hold without losing values
    (anything but a widening). Rewrite the table under the new type, or route the table anew."""
    code, name, retriable, grpc_status = 1382, "DELTA_SCHEMA_CHANGE", False, "FAILED_PRECONDITION"


class StaleBatchError(DeltaSinkError):
    """A batch id at or below the one the table holds for this app id, carrying changes the table
    does not hold: the query's checkpoint was replaced while ``app.id`` stayed the same. Use a new
    ``app_id`` (the default is derived from the streaming query's id, which a new checkpoint changes)."""
    code, name, retriable, grpc_status = 1383, "DELTA_STALE_BATCH", False, "FAILED_PRECONDITION"


class CommitConflictError(DeltaSinkError, RetriableError):
    """Another writer committed to the table between the sink's read and its commit (an OPTIMIZE,
    a second writer) on every one of the sink's attempts; the batch was applied in none of them.
    Retriable: the query, restarted, replays the batch."""
    code, name, grpc_status = 1385, "DELTA_COMMIT_CONFLICT", "ABORTED"


class DeltaConfigError(InvalidConfigError):
    """An option of ``delta_apply`` / ``delta_append`` / ``DeltaSink`` is invalid; the message names it."""
    code, name, retriable, grpc_status = 1384, "DELTA_INVALID_CONFIG", False, "INVALID_ARGUMENT"
