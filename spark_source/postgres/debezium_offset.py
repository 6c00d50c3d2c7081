"""Resuming from a Debezium PostgreSQL source offset (as a Connect worker keeps it).

Debezium stores the last *event* it emitted: ``lsn`` (that change's LSN), ``lsn_proc`` (the last
change emitted completely), ``lsn_commit`` (the commit end LSN before it) and ``messageType``.
``PostgresStreamingChangeEventSource`` resumes at ``lsn_proc`` and ``WalPositionLocator`` skips
the messages up to it; these functions give the same start and the same skipping over whole
committed transactions, and :func:`resume_from` decides where a query given such an offset
starts. Pure: no connections (the slot's state is read by the caller).
"""
from __future__ import annotations

import dataclasses
import logging

from spark_source.postgres import slot as slots
from spark_source.postgres.cdc_offset import DONE, STREAM, CdcOffset
from spark_source.postgres.errors import SlotLostError
from spark_source.postgres.pgoutput import lsn_to_str

log = logging.getLogger(__name__)


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
    table rather than lost for the tables not yet emitted. ``lsn_commit`` may be past the event: a
    transaction that wrote its first changes before the previous one committed (concurrent
    writers) has changes at lower LSNs than that commit; it is still the first transaction after
    ``lsn_commit``, so resuming there (not at ``lsn``, where the server would send the previous
    transaction again) and skipping up to the event is what ``WalPositionLocator`` does. A MESSAGE
    without ``txId`` was written outside a transaction and lies between transactions (Debezium
    stores it as its own commit): the stream resumes after it and nothing is skipped, since a
    transaction after it in the stream may have written changes before it. Without ``lsn_commit``
    (stored before the first commit streamed), a change's offset resumes at the slot's position."""
    commit, proc = stored.get("lsn_commit"), stored.get("lsn_proc")
    event = lsn if proc is None else int(proc)
    kind = str(stored.get("messageType") or "").upper()
    if commit is None:
        if kind not in ("", "BEGIN", "COMMIT") and stored.get("txId") is not None:
            # stored before the first commit Debezium streamed: no position below the event is known, so
            # the stream starts at the slot's (0) and the event's transaction is found by its txId
            return 0, event
        return lsn, None
    if kind in ("", "BEGIN", "COMMIT") or (kind == "MESSAGE" and stored.get("txId") is None):
        # a BEGIN's LSN is its transaction's first record's, which may be before the commit that
        # preceded it
        return max(lsn, int(commit)), None
    return int(commit), event


def resumed(start: CdcOffset, transactions: list) -> list:
    """``transactions`` after ``start`` without the changes up to ``start.event_lsn``, in stream
    order: those were emitted before a Debezium offset was stored (WalPositionLocator.skipMessage
    drops every message until the stored one has passed). The event is a change of a transaction,
    so a message written outside one that arrives before that transaction came before the event
    in the stream too, whatever its LSN: it was emitted. So was every transaction before the
    event's (``txId``, when stored) in the stream, even one that ends past ``lsn_commit`` and the
    event: Debezium commits the position of a message inside a transaction too, so ``lsn_commit``
    may be inside the event's transaction, before another that committed first. A logical
    message's LSN is its record's end, so the change written right after it has the same LSN:
    stored at the message, that change was not emitted (``event_kind`` "message")."""
    if start.event_lsn is None:
        return transactions
    out = []
    for i, txn in enumerate(transactions):
        if txn.xid is None or (txn.xid != start.xid if start.xid is not None else txn.end_lsn <= start.event_lsn):
            continue
        after_message = start.event_kind == "message"
        out.append(dataclasses.replace(txn, changes=[
            c for c in txn.changes
            if c.lsn > start.event_lsn or (after_message and c.lsn == start.event_lsn and c.kind != "message")]))
        return out + transactions[i + 1:]
    return out


def resume_from(stored: dict, state, o) -> CdcOffset | None:
    """Where a stored Debezium offset says to go on (None: start as ``snapshot.mode`` says), given
    the slot's state (``slot.slot_state``, None: no slot) and the query's options ``o``.

    An unfinished snapshot (``snapshot`` without ``last_snapshot_record``) is taken again, as
    Debezium does. Otherwise the stream resumes after ``lsn``: PostgreSQL skips what committed
    before it, and so does the stream (``ReplicationStream.take``), so a slot that was not
    acknowledged as far as the offset (a crash between the broker's commit and the slot's
    acknowledgement) replays nothing twice. Debezium stores the last *event* it emitted: ``lsn``
    is that change's LSN and ``lsn_commit`` the commit before it; when the event was a change
    (``messageType``), the stream resumes after ``lsn_commit`` and drops the next
    transaction's changes up to ``lsn``, as ``WalPositionLocator.resumeFromLsn`` and
    ``skipMessage`` do, so that transaction's emitted part is not emitted again. A slot
    acknowledged past the offset (only ever by keepalives over WAL with nothing for it, or by
    another reader) starts where it is: the slot is the truth for what PostgreSQL can still send. A missing slot fails (SlotLostError), or
    with ``when_needed`` takes a new snapshot."""
    lsn = int(stored["lsn"])
    # Debezium writes "snapshot": true (newer versions: the snapshot kind, e.g. "INITIAL").
    snapshot = str(stored.get("snapshot", "false")).strip().lower() not in ("false", "0", "", "none")
    last = str(stored.get("last_snapshot_record", "false")).strip().lower() in ("true", "1")
    if snapshot and not last:
        log.info("slot '%s': the stored offset is inside an unfinished snapshot; taking it again", o.slot_name)
        return None
    if snapshot and o.snapshot_mode == "initial_only":
        return CdcOffset(DONE, lsn)
    if state is None or state.wal_status == "lost":
        if o.snapshot_mode == "when_needed":
            log.warning("slot '%s' cannot resume from the stored offset %s; snapshot.mode=when_needed takes a "
                        "new snapshot", o.slot_name, lsn_to_str(lsn))
            return None
        raise SlotLostError(f"slot '{o.slot_name}' {'does not exist' if state is None else 'lost its WAL'}: the "
                            f"stored offset {lsn_to_str(lsn)} cannot be resumed; reset the offsets (a new "
                            "snapshot) or set snapshot.mode=when_needed")
    slots.check_slot(dataclasses.replace(state, active_pid=None), o)   # an active reader is waited for later
    commit, event = stored_commit_and_event(stored, lsn)
    ahead = commit > 0 and state.confirmed_flush_lsn is not None and state.confirmed_flush_lsn > commit
    if ahead:
        log.warning("slot '%s' was acknowledged up to %s, past the stored offset %s: streaming from the slot's "
                    "position", o.slot_name, lsn_to_str(state.confirmed_flush_lsn), lsn_to_str(commit))
    xid, ts = stored.get("txId"), stored.get("ts_usec")
    if ahead and event is not None:
        xid = None   # the event's transaction may never come again: skip by LSN, not by waiting for its txId
    kind = str(stored.get("messageType") or "").lower()
    return CdcOffset(STREAM, commit, xid=None if xid is None else int(xid), ts_us=None if ts is None else int(ts),
                     event_lsn=event, event_kind="message" if event is not None and kind == "message" else None)
