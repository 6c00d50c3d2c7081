"""The CDC source's connection and replication errors (codes 1360-1379), each saying what to do.

A server that cannot serve logical decoding (``wal_level``), a role without the ``REPLICATION``
privilege, a table whose changes cannot be keyed, a publication or slot in the wrong state: each
is found when the query starts, before any row is read, and named with the statement that fixes it.
"""
from __future__ import annotations

from broker.errors import RetriableError, RiverlogError


class PostgresConnectionError(RetriableError):
    """The server cannot be reached or dropped the connection; the query may be restarted."""
    code, name, retriable, grpc_status = 1360, "CDC_CONNECTION", True, "UNAVAILABLE"


class WalLevelError(RiverlogError):
    """``wal_level`` is not ``logical``: PostgreSQL writes no logical decoding information."""
    code, name, retriable, grpc_status = 1361, "CDC_WAL_LEVEL", False, "FAILED_PRECONDITION"


class ReplicationPrivilegeError(RiverlogError):
    """The role may not open a replication connection or create a slot."""
    code, name, retriable, grpc_status = 1362, "CDC_REPLICATION_PRIVILEGE", False, "PERMISSION_DENIED"


class MissingPrimaryKeyError(RiverlogError):
    """A captured table has neither a primary key nor ``REPLICA IDENTITY FULL``: its updates and
    deletes could not name the row they change."""
    code, name, retriable, grpc_status = 1363, "CDC_TABLE_WITHOUT_KEY", False, "FAILED_PRECONDITION"


class PublicationError(RiverlogError):
    """The publication is missing (``publication.autocreate.mode=disabled``) or cannot be made."""
    code, name, retriable, grpc_status = 1364, "CDC_PUBLICATION", False, "FAILED_PRECONDITION"


class SlotInUseError(RetriableError):
    """Another process streams from the slot (one reader per slot); retried after it lets go."""
    code, name, retriable, grpc_status = 1365, "CDC_SLOT_IN_USE", True, "UNAVAILABLE"


class SlotLostError(RiverlogError):
    """The query's offsets point into a slot that no longer exists or no longer holds their WAL;
    resuming would skip changes."""
    code, name, retriable, grpc_status = 1366, "CDC_SLOT_LOST", False, "DATA_LOSS"


class NoTablesError(RiverlogError):
    """``table.include.list`` matches no table."""
    code, name, retriable, grpc_status = 1367, "CDC_NO_TABLES", False, "INVALID_ARGUMENT"


class SlotError(RiverlogError):
    """A slot exists under ``slot.name`` but cannot serve this source (another plugin or database)."""
    code, name, retriable, grpc_status = 1368, "CDC_SLOT", False, "FAILED_PRECONDITION"


class SlotNotFoundError(RiverlogError):
    """A batch read of pending changes names a slot that does not exist (a batch read never
    creates one)."""
    code, name, retriable, grpc_status = 1369, "CDC_SLOT_NOT_FOUND", False, "FAILED_PRECONDITION"
