"""OPTIMIZE and VACUUM for the sink's tables, with the sink's defaults.

MERGE is copy-on-write: its cost grows with the files the batch's keys touch, so z-ordering by the
key keeps a batch's keys in few files. Unlike delta-rs's ``vacuum()``, whose default is a dry run,
:func:`vacuum` deletes unless ``dry_run=True``.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from deltalake import DeltaTable


def optimize(path: str, z_order_by: Sequence[str] | None = None, *, target_size: int | None = None,
             storage_options: Mapping[str, str] | None = None) -> dict:
    """Compact small files; with ``z_order_by`` (e.g. the primary key) also cluster by those
    columns. Returns delta-rs's metrics (``numFilesAdded``, ``numFilesRemoved``, ...)."""
    dt = DeltaTable(path, storage_options=dict(storage_options) if storage_options else None)
    if z_order_by:
        return dt.optimize.z_order(list(z_order_by), target_size=target_size)
    return dt.optimize.compact(target_size=target_size)


def vacuum(path: str, retention_hours: int | None = None, *, dry_run: bool = False,
           enforce_retention_duration: bool = True, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Delete files no longer referenced by versions newer than ``retention_hours`` (the table's
    ``delta.deletedFileRetentionDuration``, 7 days, when None). Returns the files (to be) deleted.
    Time travel to versions older than the retention stops working for the deleted files."""
    dt = DeltaTable(path, storage_options=dict(storage_options) if storage_options else None)
    return dt.vacuum(retention_hours=retention_hours, dry_run=dry_run,
                     enforce_retention_duration=enforce_retention_duration)
