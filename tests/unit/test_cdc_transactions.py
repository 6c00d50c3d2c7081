"""TransactionAssembler: committed transactions only, in commit order, however pgoutput interleaves
streamed chunks; aborted transactions and subtransactions dropped; relations remembered."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_source.postgres.pgoutput import (Begin, BeginPrepare, Column, Commit, CommitPrepared, Delete, Insert,
                                            LogicalMessage, Origin, Prepare, Relation, RollbackPrepared,
                                            StreamAbort, StreamCommit, StreamPrepare, StreamStart, StreamStop,
                                            Truncate, TypeMessage, Update)
from spark_source.postgres.transactions import (TransactionAssembler, TransactionSequenceError,
                                                UnknownRelationError)

pytestmark = pytest.mark.unit

REL = Relation(16385, "public", "t", "d", (Column(True, "id", 23, -1),))
REL2 = Relation(16386, "public", "u", "f", (Column(True, "a", 25, -1),))


def feed_all(assembler, messages):
    out = []
    for lsn, message in enumerate(messages, start=1000):
        out += assembler.feed(message, lsn)
    return out


def ids(txn):
    return [int(c.new[0]) for c in txn.changes]


def test_an_ordinary_transaction_numbers_its_changes_and_keeps_their_lsns():
    a = TransactionAssembler()
    txns = feed_all(a, [REL, Begin(5000, 1_700_000_000_000_000, 700), Insert(REL.oid, (b"1",)),
                        Update(REL.oid, None, None, (b"1",)), Delete(REL.oid, (b"1",), "K"),
                        Commit(0, 4990, 5000, 1_700_000_000_000_000)])
    assert len(txns) == 1
    txn = txns[0]
    assert (txn.xid, txn.commit_lsn, txn.end_lsn, txn.commit_ts_us, txn.streamed) == (700, 4990, 5000,
                                                                                     1_700_000_000_000_000, False)
    assert [(c.kind, c.order, c.lsn, c.relation) for c in txn.changes] == [
        ("insert", 0, 1002, REL), ("update", 1, 1003, REL), ("delete", 2, 1004, REL)]
    assert txn.changes[2].old == (b"1",) and txn.changes[2].old_kind == "K" and txn.changes[2].new is None


def test_nothing_is_emitted_before_the_commit():
    a = TransactionAssembler()
    assert feed_all(a, [REL, Begin(1, 0, 1), Insert(REL.oid, (b"1",))]) == []
    assert a.in_transaction
    assert len(a.feed(Commit(0, 1, 2, 0), 9)) == 1 and not a.in_transaction


def test_a_relation_after_ddl_replaces_the_old_one_and_each_change_keeps_its_own():
    wider = Relation(REL.oid, "public", "t", "d", REL.columns + (Column(False, "note", 25, -1),))
    a = TransactionAssembler()
    txns = feed_all(a, [REL, Begin(1, 0, 1), Insert(REL.oid, (b"1",)), Commit(0, 1, 2, 0),
                        wider, Begin(3, 0, 2), Insert(REL.oid, (b"2", b"x")), Commit(0, 3, 4, 0)])
    assert [t.changes[0].relation for t in txns] == [REL, wider]
    assert a.relations[REL.oid] == wider


def test_truncate_of_two_tables_is_two_changes_and_types_are_remembered():
    a = TransactionAssembler()
    (txn,) = feed_all(a, [REL, REL2, TypeMessage(90000, "public", "mood"), Begin(1, 0, 1),
                          Truncate(1, (REL.oid, REL2.oid)), Commit(0, 1, 2, 0)])
    assert [(c.kind, c.relation.name, c.order) for c in txn.changes] == [("truncate", "t", 0), ("truncate", "u", 1)]
    assert a.types[90000].name == "mood"


def test_a_non_transactional_message_comes_out_at_once_with_its_lsn():
    a = TransactionAssembler()
    (txn,) = a.feed(LogicalMessage(0, 777, "heartbeat", b""), 770)
    assert (txn.xid, txn.commit_lsn, txn.end_lsn) == (None, 777, 777)
    assert txn.changes[0].kind == "message" and txn.changes[0].relation is None
    # a transactional one waits for its transaction like any change
    assert feed_all(a, [Begin(1, 0, 5), LogicalMessage(1, 3, "app", b"x")]) == []
    (txn,) = a.feed(Commit(0, 1, 2, 0), 9)
    assert txn.changes[0].message.prefix == "app"


def test_origin_is_kept_on_the_transaction():
    a = TransactionAssembler()
    (txn,) = feed_all(a, [REL, Begin(1, 0, 1), Origin(55, "node_a"), Insert(REL.oid, (b"1",)), Commit(0, 1, 2, 0)])
    assert txn.origin == "node_a"


def test_streamed_transactions_interleave_and_emit_at_stream_commit():
    a = TransactionAssembler()
    messages = [
        REL,
        StreamStart(10, True), Insert(REL.oid, (b"1",), 10), Insert(REL.oid, (b"2",), 10), StreamStop(),
        StreamStart(11, True), Insert(REL.oid, (b"100",), 11), StreamStop(),
        Begin(50, 0, 12), Insert(REL.oid, (b"500",)), Commit(0, 49, 50, 0),        # small txn in between
        StreamStart(10, False), Insert(REL.oid, (b"3",), 10), Insert(REL.oid, (b"4",), 13), StreamStop(),
        StreamStart(11, False), Insert(REL.oid, (b"101",), 11), StreamStop(),
        StreamAbort(10, 13),                                                          # subtransaction 13 rolled back
        StreamCommit(11, 0, 60, 61, 0),
        StreamCommit(10, 0, 70, 71, 0),
    ]
    txns = feed_all(a, messages)
    assert [(t.xid, t.end_lsn, t.streamed, ids(t)) for t in txns] == [
        (12, 50, False, [500]), (11, 61, True, [100, 101]), (10, 71, True, [1, 2, 3])]
    assert [c.order for c in txns[2].changes] == [0, 1, 2]
    assert a.pending_xids() == []


def test_an_aborted_streamed_transaction_is_dropped():
    a = TransactionAssembler()
    txns = feed_all(a, [REL, StreamStart(10, True), Insert(REL.oid, (b"1",), 10), StreamStop(),
                        StreamAbort(10, 10), Begin(5, 0, 11), Insert(REL.oid, (b"2",)), Commit(0, 5, 6, 0)])
    assert [ids(t) for t in txns] == [[2]]
    assert a.pending_xids() == []


def test_two_phase_transactions_wait_for_commit_prepared():
    a = TransactionAssembler()
    txns = feed_all(a, [REL, BeginPrepare(10, 11, 0, 20, "g1"), Insert(REL.oid, (b"1",)), Prepare(0, 10, 11, 0, 20, "g1"),
                        BeginPrepare(12, 13, 0, 21, "g2"), Insert(REL.oid, (b"2",)), Prepare(0, 12, 13, 0, 21, "g2"),
                        StreamStart(22, True), Insert(REL.oid, (b"3",), 22), StreamStop(),
                        StreamPrepare(0, 14, 15, 0, 22, "g3")])
    assert txns == []
    txns = feed_all(a, [RollbackPrepared(0, 13, 16, 0, 0, 21, "g2"), CommitPrepared(0, 17, 18, 0, 22, "g3"),
                        CommitPrepared(0, 19, 20, 0, 20, "g1")])
    assert [(t.xid, t.end_lsn, ids(t)) for t in txns] == [(22, 18, [3]), (20, 20, [1])]


@pytest.mark.parametrize("messages, error", [
    ([Insert(REL.oid, (b"1",))], TransactionSequenceError),
    ([Commit(0, 1, 2, 0)], TransactionSequenceError),
    ([Begin(1, 0, 1), Begin(2, 0, 2)], TransactionSequenceError),
    ([StreamStop()], TransactionSequenceError),
    ([StreamStart(1, True), StreamStart(2, True)], TransactionSequenceError),
    ([Begin(1, 0, 1), Insert(99, (b"1",))], UnknownRelationError),
    ([object()], TransactionSequenceError),
])
def test_protocol_violations_are_typed_errors(messages, error):
    a = TransactionAssembler()
    a.feed(REL, 1)
    with pytest.raises(error) as info:
        feed_all(a, messages)
    assert "lsn" in info.value.details


# -- property: any interleaving pgoutput could produce gives the committed transactions in order -----
SPEC = st.lists(st.tuples(st.booleans(),                      # streamed
                          st.sampled_from(["commit", "commit", "abort"]),
                          st.integers(0, 6),                   # changes
                          st.integers(0, 2)),                  # subtransactions (one aborted if >0)
                min_size=1, max_size=7)


@settings(max_examples=200, deadline=None, database=None)
@given(SPEC, st.randoms(use_true_random=False))
def test_random_interleavings_give_exactly_the_committed_changes_in_commit_order(spec, rnd: random.Random):
    messages, expected, chunks = [REL], [], {}
    serial = iter(range(1, 10**6))
    txns = []
    for i, (streamed, fate, n, subs) in enumerate(spec):
        xid = 1000 + 10 * i
        subxids = [xid + 1 + s for s in range(subs)]
        aborted_sub = subxids[0] if subxids else None
        changes = [(rnd.choice([xid] + subxids), next(serial)) for _ in range(n)]
        txns.append((xid, streamed, fate, changes, aborted_sub))
        if fate == "commit":
            expected.append((xid, [v for x, v in changes if x != aborted_sub]))
        if streamed:
            parts, rest = [], list(changes)
            while rest:
                k = rnd.randint(1, len(rest))
                parts.append(rest[:k])
                rest = rest[k:]
            chunks[xid] = parts
    started = set()

    def emit_chunk(xid):
        part = chunks[xid].pop(0)
        messages.append(StreamStart(xid, xid not in started))
        started.add(xid)
        messages.extend(Insert(REL.oid, (str(v).encode(),), x) for x, v in part)
        messages.append(StreamStop())

    for index, (xid, streamed, fate, changes, aborted_sub) in enumerate(txns):
        while rnd.random() < 0.5:
            candidates = [t[0] for t in txns[index:] if t[1] and chunks[t[0]]]
            if not candidates:
                break
            emit_chunk(rnd.choice(candidates))
        if streamed:
            while chunks[xid]:
                emit_chunk(xid)
            if aborted_sub is not None:
                messages.append(StreamAbort(xid, aborted_sub))
            messages.append(StreamCommit(xid, 0, index * 10, index * 10 + 1, 0) if fate == "commit"
                            else StreamAbort(xid, xid))
        elif fate == "commit":   # PostgreSQL sends neither an aborted transaction nor an aborted subtransaction
            messages.append(Begin(index * 10 + 1, 0, xid))
            messages.extend(Insert(REL.oid, (str(v).encode(),)) for x, v in changes if x != aborted_sub)
            messages.append(Commit(0, index * 10, index * 10 + 1, 0))
    assembler = TransactionAssembler()
    got = [(t.xid, ids(t)) for t in feed_all(assembler, messages)]
    assert got == expected
    assert assembler.pending_xids() == [] and not assembler.in_transaction
