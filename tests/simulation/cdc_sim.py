"""PostgreSQL change data capture over random WAL histories, against a model of the database's
committed history (the test is tests/simulation/test_cdc_simulation.py).

A history is several concurrent transactions whose writes (rows, TRUNCATEs, transactional logical
messages) interleave in the WAL, with logical messages written outside any transaction between
them. pgoutput delivers it as PostgreSQL does: a message outside a transaction when it is decoded,
a transaction whole at its commit, in commit order; a change's LSN is its record's start, a
message's its record's end, a commit's end LSN the next record's start. The real
``TransactionAssembler`` assembles what is delivered from a start position.

Two readers crash at random points and resume:

* Debezium 2.7.4 emits one event per change and stores, with each, the offset its
  ``PostgresStreamingChangeEventSource`` would have (``lsn``, ``lsn_proc``, ``lsn_commit`` —
  moved by every COMMIT and every logical message —, ``txId``, ``messageType``); a crash after
  any event resumes from that offset with ``stored_commit_and_event`` and ``resumed``;
* Riverlog's own driver reads batches of at most ``max_batch`` changes (whole transactions) into
  a ``ReplicationStream``'s buffer, stores each downstream with its ``CdcOffset`` and acknowledges
  it; it crashes before storing, between storing and acknowledging, or after, and resumes from the
  stored offset with the server sending again from the slot's acknowledged position.

Invariants: the downstream holds every committed change exactly once, in commit order; the slot
is never acknowledged past what is stored; once the history is quiet, everything stored is
acknowledged.
"""
from __future__ import annotations

import dataclasses
import random

from spark_source.postgres.cdc_offset import STREAM, CdcOffset
from spark_source.postgres.debezium_offset import resume_from, resumed
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.pgoutput import Begin, Column, Commit, Insert, LogicalMessage, Relation, Truncate
from spark_source.postgres.replication import ReplicationStream
from spark_source.postgres.slot import SlotState
from spark_source.postgres.transactions import TransactionAssembler
from tests.simulation.seeds import SimulationFailure

OID = 16384
RELATION = Relation(OID, "public", "t", "d", (Column(True, "id", 23, -1),))
OPTIONS = CdcOptions.parse({})
STEP = 16   # every WAL record's size: a record's end is the next one's start


class CdcSimulationFailure(SimulationFailure):
    pass


@dataclasses.dataclass
class Stats:
    histories: int = 0
    overlapping_transactions: int = 0      # a transaction wrote before another that committed first
    outside_messages: int = 0
    transactional_messages: int = 0
    truncates: int = 0
    debezium_resumes: int = 0
    debezium_resumes_mid_transaction: int = 0
    debezium_resumes_after_message: int = 0
    crashes_before_store: int = 0
    crashes_before_ack: int = 0
    crashes_after_ack: int = 0
    split_batches: int = 0                 # a batch cut before the buffered end
    handoffs_from_debezium: int = 0        # Riverlog's driver started from a Debezium offset

    def add(self, other: "Stats") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclasses.dataclass(frozen=True)
class Record:
    """One WAL record: ``kind`` insert, truncate, message (in ``xid``), outside (a message outside
    any transaction) or commit; ``ident`` names a change for the model."""
    kind: str
    xid: int | None
    start: int
    ident: str = ""

    @property
    def end(self) -> int:
        return self.start + STEP


def history(rng: random.Random, stats: Stats) -> list[Record]:
    """Random WAL: 2-5 transactions of 1-4 writes, interleaved, and 0-3 messages outside them."""
    queues = []
    for xid in range(100, 100 + rng.randint(2, 5)):
        writes = [(rng.choice(("insert", "insert", "insert", "truncate", "message")), xid)
                  for _ in range(rng.randint(1, 4))]
        queues.append(writes + [("commit", xid)])
    outside = [[("outside", None)] for _ in range(rng.randint(0, 3))]
    pending = queues + outside
    order = []
    while pending:
        q = rng.choice(pending)
        order.append(q.pop(0))
        if not q:
            pending.remove(q)
    records = [Record(kind, xid, 1000 + STEP * i, f"{kind}@{1000 + STEP * i}") for i, (kind, xid) in enumerate(order)]
    committed = set()
    for r in records:
        committed.add(r.xid) if r.kind == "commit" else None
        if r.kind != "commit" and r.xid is not None and committed - {r.xid}:
            stats.overlapping_transactions += 1
            break
    stats.outside_messages += sum(r.kind == "outside" for r in records)
    stats.transactional_messages += sum(r.kind == "message" for r in records)
    stats.truncates += sum(r.kind == "truncate" for r in records)
    return records


def _message(r: Record):
    """(pgoutput message, the LSN it arrives at) for a change record."""
    if r.kind == "insert":
        return Insert(OID, (r.ident.encode(),)), r.start
    if r.kind == "truncate":
        return Truncate(0, (OID,)), r.start
    return LogicalMessage(1 if r.kind == "message" else 0, r.end, r.ident, b"", None), r.end


def deliver(records: list[Record], start: int) -> list:
    """The transactions pgoutput sends from ``start`` (the slot's start_decoding_at), assembled."""
    assembler = TransactionAssembler()
    assembler.feed(RELATION, start)
    out = []
    for r in records:
        if r.start < start:
            continue
        if r.kind == "outside":
            out.extend(assembler.feed(*_message(r)))
        elif r.kind == "commit":
            writes = [w for w in records if w.xid == r.xid and w.kind != "commit"]
            assembler.feed(Begin(r.start, 5, r.xid), writes[0].start if writes else r.start)
            for w in writes:
                assembler.feed(*_message(w))
            out.extend(assembler.feed(Commit(0, r.start, r.end, 5), r.end))
    return out


def ident(change) -> str:
    m = change.message
    if isinstance(m, LogicalMessage):
        return m.prefix
    if isinstance(m, Truncate):
        return f"truncate@{change.lsn}"
    return m.new[0].decode()


def debezium_events(transactions: list) -> list[tuple[str, dict]]:
    """(change, offset stored with it) as Debezium 2.7.4 emits them; a COMMIT stores its position
    (the heartbeat after it) with no change, as (None, offset)."""
    out, commit, proc = [], None, None
    for txn in transactions:
        if txn.xid is None:
            c = txn.changes[0]
            commit = proc = c.lsn
            out.append((ident(c), {"lsn": c.lsn, "lsn_proc": proc, "lsn_commit": commit, "messageType": "MESSAGE"}))
            continue
        for c in txn.changes:
            proc = c.lsn
            if c.kind == "message":
                commit = c.lsn
            out.append((ident(c), {"lsn": c.lsn, "lsn_proc": proc, "lsn_commit": commit, "txId": txn.xid,
                                   "messageType": c.kind.upper()}))
        commit = proc = txn.end_lsn
        out.append((None, {"lsn": txn.end_lsn, "lsn_proc": proc, "lsn_commit": commit, "txId": txn.xid,
                           "messageType": "COMMIT"}))
    return out


class Simulation:
    def __init__(self, seed: int):
        self.seed, self.rng, self.stats, self.trace = seed, random.Random(seed), Stats(), []
        self.step = 0

    def fail(self, why: str):
        raise CdcSimulationFailure(self.seed, self.step, why, self.trace[-60:])

    def run(self) -> Stats:
        records = history(self.rng, self.stats)
        self.stats.histories += 1
        self.trace.append("wal: " + " ".join(f"{r.kind}:{r.xid}@{r.start}" for r in records))
        full = deliver(records, 0)
        expected = [ident(c) for t in full for c in t.changes]
        events = debezium_events(full)
        self.debezium(records, events, expected)
        self.riverlog(records, events, expected)
        return self.stats

    # ------------------------------------------------------------------------------ Debezium
    def debezium(self, records, events, expected) -> None:
        for k, (_, stored) in enumerate(events):
            self.step = k
            emitted = [e for e, _ in events[:k + 1] if e is not None]
            start = _resume(stored)
            event = start.event_lsn
            again = [t for t in deliver(records, start.lsn) if t.end_lsn > start.lsn]
            rest = [ident(c) for t in resumed(start, again) for c in t.changes]
            self.stats.debezium_resumes += 1
            self.stats.debezium_resumes_mid_transaction += event is not None
            self.stats.debezium_resumes_after_message += stored["messageType"] == "MESSAGE"
            if emitted + rest != expected:
                self.trace.append(f"stored {stored}; emitted {emitted}; resumed {rest}")
                self.fail(f"Debezium offset {stored} resumed to {emitted + rest}, the history is {expected}")

    # ------------------------------------------------------------------------------ Riverlog
    def riverlog(self, records, events, expected) -> None:
        """From the start, or (half the runs) from a Debezium offset given as ``startingOffsets``."""
        stored_rows: list[str] = []
        stored = CdcOffset(STREAM, 0)
        if self.rng.random() < 0.5:
            k = self.rng.randrange(len(events))
            stored_rows = [e for e, _ in events[:k + 1] if e is not None]
            stored = _resume(events[k][1])
            self.stats.handoffs_from_debezium += 1
            self.trace.append(f"from Debezium offset {events[k][1]}")
        slot = 0          # the slot's confirmed_flush_lsn
        quiet_rounds = 0
        while quiet_rounds < 2:
            stream = ReplicationStream(None, stored.lsn)
            stream.acked = slot
            for txn in deliver(records, stream.resume_lsn):   # the server sends from the slot
                if txn.end_lsn > stream.high:
                    stream.buffer.append(txn)
                    stream.high = txn.end_lsn
            crashed = False
            while not crashed:
                self.step += 1
                batch, end, taken = [], stored.lsn, 0
                cap = self.rng.randint(1, 4)
                pending = resumed(stored, stream.take(stored.lsn, stream.high))
                for txn in pending:
                    if taken and taken + len(txn.changes) > cap:
                        self.stats.split_batches += 1
                        break
                    batch.append(txn)
                    taken += len(txn.changes)
                    end = txn.end_lsn
                if end == stored.lsn:
                    quiet_rounds += 1
                    break
                quiet_rounds = 0
                point = self.rng.choice(("none", "none", "none", "before_store", "before_ack", "after_ack"))
                if point == "before_store":
                    self.stats.crashes_before_store += 1
                    crashed = True
                    continue
                stored_rows += [ident(c) for t in batch for c in t.changes]
                stored = CdcOffset.from_json(CdcOffset(STREAM, end).to_json())
                self.trace.append(f"stored up to {end} ({len(batch)} transactions)")
                if point == "before_ack":
                    self.stats.crashes_before_ack += 1
                    crashed = True
                    continue
                stream.acknowledge(stored.lsn)
                slot = stream.acked
                if slot > stored.lsn:
                    self.fail(f"the slot is acknowledged to {slot}, past what is stored ({stored.lsn})")
                if point == "after_ack":
                    self.stats.crashes_after_ack += 1
                    crashed = True
            if crashed:
                self.trace.append(f"crash; resume from {stored.lsn}, slot at {slot}")
        if stored_rows != expected:
            self.fail(f"downstream holds {stored_rows}, the history is {expected}")
        # quiet: the next batch start acknowledges what is stored (as next_offset does)
        slot = max(slot, stored.lsn)
        last = max((r.end for r in records if r.kind in ("commit", "outside")), default=0)
        if slot < last:
            self.fail(f"quiet, yet the slot stays at {slot} below the last commit {last}")


def _resume(stored: dict) -> CdcOffset:
    return resume_from(stored, SlotState(OPTIONS.slot_name, "pgoutput", OPTIONS.dbname, None, 0, 0, "reserved"),
                       OPTIONS)


def run_seed(seed: int) -> Stats:
    return Simulation(seed).run()
