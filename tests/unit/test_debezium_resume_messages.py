"""A Debezium offset resumed next to logical decoding messages written outside a transaction
(``pg_logical_emit_message(false, ...)``: another CDC reader's heartbeats, an application's
markers). pgoutput sends such a message when it is decoded, so it reaches the reader before every
transaction that commits after it, including one whose first changes were written before it.
Debezium's ``WalPositionLocator`` goes by the order of the stream: what came before the stored
event was emitted, what came after it was not."""
from __future__ import annotations

import pytest

from spark_source.postgres.capture import STREAM, CdcOffset
from spark_source.postgres.debezium_offset import resumed, stored_commit_and_event
from spark_source.postgres.pgoutput import Column, Insert, LogicalMessage, Relation
from spark_source.postgres.transactions import Change, Transaction

pytestmark = pytest.mark.unit

RELATION = Relation(16384, "public", "t", "d", (Column(True, "id", 23, -1),))


def _txn(xid: int, end: int, *lsns: int) -> Transaction:
    return Transaction(xid, end - 10, end, 5, [Change(RELATION, i, lsn, Insert(16384, (str(i).encode(),)), xid)
                                               for i, lsn in enumerate(lsns)])


def _message(lsn: int) -> Transaction:
    m = LogicalMessage(0, lsn, "other.heartbeat", b"", None)
    return Transaction(None, lsn, lsn, None, [Change(None, 0, lsn, m, None)])


def _resume(stored: dict, transactions: list) -> list[list[int]]:
    commit, event = stored_commit_and_event(stored, stored["lsn"])
    start = CdcOffset(STREAM, commit, xid=stored.get("txId"), event_lsn=event)
    return [[c.lsn for c in t.changes] for t in resumed(start, [t for t in transactions if t.end_lsn > commit])]


def test_a_message_outside_a_transaction_before_the_stored_events_transaction_is_not_emitted_again():
    """T1 committed (end 50); T2 wrote a row at 100; a message at 150; T2 wrote at 180 and committed
    (end 210). Debezium emitted the message, then T2's row at 100, and stored that event. Resumed,
    neither the message nor the row at 100 is emitted again."""
    stored = {"lsn": 100, "lsn_proc": 100, "lsn_commit": 50, "txId": 2, "ts_usec": 5, "messageType": "INSERT"}
    assert _resume(stored, [_message(150), _txn(2, 210, 100, 180)]) == [[180]]


def test_an_offset_stored_after_a_message_outside_a_transaction_loses_nothing_of_the_next_transaction():
    """T3 wrote a row at 250; a message at 300 (Debezium stores it with ``lsn_commit`` its own LSN
    and no ``txId``); T3 wrote at 320 and committed (end 400). Debezium emitted the message and
    nothing of T3 (it comes after the message): resumed, T3 is emitted whole."""
    stored = {"lsn": 300, "lsn_proc": 300, "lsn_commit": 300, "ts_usec": 5, "messageType": "MESSAGE"}
    assert _resume(stored, [_message(300), _txn(3, 400, 250, 320)]) == [[250, 320]]


def test_an_offset_stored_after_a_transactional_message_skips_up_to_it():
    """A message written inside T2 (``pg_logical_emit_message(true, ...)``), which Debezium stores
    with T2's ``txId`` (and, as for every message, ``lsn_commit`` its own LSN): T2's changes up to
    it were emitted."""
    stored = {"lsn": 150, "lsn_proc": 150, "lsn_commit": 150, "txId": 2, "messageType": "MESSAGE"}
    t2 = _txn(2, 210, 100, 150, 180)
    assert _resume(stored, [t2]) == [[180]]
