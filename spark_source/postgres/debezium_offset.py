"""Resuming from a Debezium PostgreSQL source offset (as a Connect worker keeps it).

Debezium stores the last *event* it emitted: ``lsn`` (that change's LSN), ``lsn_proc`` (the last
change emitted completely), ``lsn_commit`` (the commit end LSN before it) and ``messageType``.
``PostgresStreamingChangeEventSource`` resumes at ``lsn_proc`` and ``WalPositionLocator`` skips
the messages up to it; these functions give the same start and the same skipping over whole
committed transactions. Pure: no connections.
"""
from __future__ import annotations

import dataclasses


def stored_commit_and_event(stored: dict, lsn: int) -> tuple[int, int | None]:
    """(where the stream resumes, the last emitted change's LSN or None) for a stored Debezium
    offset. One stored after a change (``messageType`` INSERT, UPDATE, DELETE, TRUNCATE, MESSAGE)
    resumes after ``lsn_commit`` and skips the changes up to ``lsn``; after a BEGIN or COMMIT, or
    without ``messageType`` (older offsets, Riverlog's own), WalPositionLocator replays from the
    transaction's start, and so does this. A change's LSN can equal the commit end before it (the
    next WAL record), so ``lsn`` and ``lsn_commit`` alone cannot tell the cases apart. The last
    change *completely* emitted is ``lsn_proc`` when present, as ``PostgresStreamingChangeEventSource``
    reads it: inside a TRUNCATE of several tables (one event per table, all at one LSN) ``lsn`` is
    the TRUNCATE's and ``lsn_proc`` the change before it, so the TRUNCATE is emitted again for every
    table rather than lost for the tables not yet emitted."""
    commit, proc = stored.get("lsn_commit"), stored.get("lsn_proc")
    event = lsn if proc is None else int(proc)
    kind = str(stored.get("messageType") or "").upper()
    if commit is None or kind in ("", "BEGIN", "COMMIT") or int(commit) > event:
        return lsn, None
    return int(commit), event


def resumed(start: CdcOffset, transactions: list) -> list:
    """``transactions`` after ``start`` without the changes up to ``start.event_lsn``, in stream
    order: those were emitted before a Debezium offset was stored (WalPositionLocator.skipMessage
    drops every message until the stored one has passed)."""
    if start.event_lsn is None:
        return transactions
    out = []
    for i, txn in enumerate(transactions):
        if txn.end_lsn <= start.event_lsn:
            continue
        out.append(dataclasses.replace(txn, changes=[c for c in txn.changes if c.lsn > start.event_lsn]))
        return out + transactions[i + 1:]
    return out
