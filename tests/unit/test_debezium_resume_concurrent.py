"""A Debezium offset stored inside a transaction whose ``lsn_commit`` is a logical message of that
same transaction (Debezium commits the position of every message, transactional or not), while
another transaction committed between that message and the event's transaction. The stream
delivered the other transaction first, so it was emitted; found by tests/simulation/cdc_sim.py."""
from __future__ import annotations

import pytest

from spark_source.postgres.cdc_offset import CdcOffset
from spark_source.postgres.debezium_offset import resume_from, resumed, stored_commit_and_event
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.pgoutput import Column, Insert, LogicalMessage, Relation
from spark_source.postgres.slot import SlotState
from spark_source.postgres.transactions import Change, Transaction

pytestmark = pytest.mark.unit

RELATION = Relation(16384, "public", "t", "d", (Column(True, "id", 23, -1),))


def _change(xid: int, i: int, lsn: int, message: bool = False) -> Change:
    if message:
        return Change(None, i, lsn, LogicalMessage(1, lsn, "app", b"", xid), xid)
    return Change(RELATION, i, lsn, Insert(16384, (str(lsn).encode(),)), xid)


def _resume(stored: dict, transactions: list, show=lambda c: c.lsn) -> list[list]:
    """What a query given ``stored`` as its starting offset reads of ``transactions`` (the stream)."""
    o = CdcOptions.parse({})
    start = resume_from(stored, SlotState(o.slot_name, "pgoutput", o.dbname, None, 0, 0, "reserved"), o)
    return [[show(c) for c in t.changes] for t in resumed(start, [t for t in transactions if t.end_lsn > start.lsn])]


def test_a_transaction_committed_after_the_stored_transactions_message_is_not_emitted_again():
    """T2 wrote a row at 100 and a message at 150; T1 wrote at 160 and committed (end 170); T2
    wrote at 180 and committed (end 210). The stream: T1, then T2. Debezium emitted T1, T2's row
    at 100 and its message (``lsn_commit`` 150), then the row at 180, and stored that. Resumed,
    nothing was left to emit (T1 was emitted again, and T2 whole)."""
    t1 = Transaction(1, 160, 170, 5, [_change(1, 0, 160)])
    t2 = Transaction(2, 200, 210, 6, [_change(2, 0, 100), _change(2, 1, 150, message=True), _change(2, 2, 180)])
    after_row = {"lsn": 180, "lsn_proc": 180, "lsn_commit": 150, "txId": 2, "messageType": "INSERT"}
    assert _resume(after_row, [t1, t2]) == [[]]
    after_message = {"lsn": 150, "lsn_proc": 150, "lsn_commit": 150, "txId": 2, "messageType": "MESSAGE"}
    assert _resume(after_message, [t1, t2]) == [[180]]


def test_the_stored_transaction_not_yet_delivered_holds_the_resume_back():
    """Only T1 (committed after T2's message) has arrived: nothing is emitted until T2 arrives
    (T1 came before the stored event in the stream)."""
    t1 = Transaction(1, 160, 170, 5, [_change(1, 0, 160)])
    stored = {"lsn": 150, "lsn_proc": 150, "lsn_commit": 150, "txId": 2, "messageType": "MESSAGE"}
    assert _resume(stored, [t1]) == []


def test_a_row_written_right_after_a_stored_transactional_message_is_not_lost():
    """A message's LSN is its record's end, which is where the next record starts: T2's row right
    after its message (record 1192-1208) arrives at 1208, the message's LSN. Stored at the message,
    the row was not emitted yet (it was dropped as emitted); stored at the row, neither is again."""
    t2 = Transaction(2, 1224, 1240, 6, [_change(2, 0, 1176), _change(2, 1, 1208, message=True), _change(2, 2, 1208)])
    at_message = {"lsn": 1208, "lsn_proc": 1208, "lsn_commit": 1208, "txId": 2, "messageType": "MESSAGE"}
    assert _resume(at_message, [t2], show=lambda c: (c.kind, c.lsn)) == [[("insert", 1208)]]
    at_row = {"lsn": 1208, "lsn_proc": 1208, "lsn_commit": 1208, "txId": 2, "messageType": "INSERT"}
    assert _resume(at_row, [t2]) == [[]]


def test_an_offset_stored_before_the_first_commit_streamed_resumes_at_the_slot_and_skips_by_txid():
    """No ``lsn_commit`` yet (no snapshot, the first transaction streamed): T1's row at 1016 was
    emitted, T1 commits first; resumed from the slot, T1's row is not emitted again."""
    t1 = Transaction(1, 1096, 1112, 5, [_change(1, 0, 1016), _change(1, 1, 1064)])
    t2 = Transaction(2, 1128, 1144, 6, [_change(2, 0, 1000)])
    stored = {"lsn": 1016, "lsn_proc": 1016, "lsn_commit": None, "txId": 1, "messageType": "INSERT"}
    assert stored_commit_and_event(stored, 1016) == (0, 1016)
    assert _resume(stored, [t1, t2]) == [[1064], [1000]]


def test_the_message_mark_survives_the_checkpoint():
    """A batch planned (not yet moved on) from such an offset keeps it in Spark's checkpoint."""
    o = CdcOptions.parse({})
    stored = {"lsn": 1208, "lsn_proc": 1208, "lsn_commit": 1208, "txId": 2, "messageType": "MESSAGE"}
    start = resume_from(stored, SlotState(o.slot_name, "pgoutput", o.dbname, None, 0, 0, "reserved"), o)
    again = CdcOffset.from_json(start.to_json())
    assert (again.event_lsn, again.event_kind, again.xid) == (1208, "message", 2)
    assert CdcOffset.from_json({"phase": "stream", "lsn": 7}).event_kind is None


def test_a_slot_acknowledged_past_the_stored_transaction_does_not_hold_the_query_back():
    """The slot was confirmed past T2's commit (another reader, keepalives): T2 never comes again,
    so the query goes on with T3 rather than waiting for T2's ``txId`` forever."""
    o = CdcOptions.parse({})
    stored = {"lsn": 180, "lsn_proc": 180, "lsn_commit": 150, "txId": 2, "messageType": "INSERT"}
    start = resume_from(stored, SlotState(o.slot_name, "pgoutput", o.dbname, None, 0, 300, "reserved"), o)
    t3 = Transaction(3, 390, 400, 7, [_change(3, 0, 350)])
    assert [[c.lsn for c in t.changes] for t in resumed(start, [t3])] == [[350]]
