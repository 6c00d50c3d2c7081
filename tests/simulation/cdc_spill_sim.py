"""The compact transaction assembler (pgoutput bytes held packed, spilled to a file past a
threshold) against the in-memory one over random pgoutput histories (the test is
tests/simulation/test_cdc_spill_simulation.py).

A history interleaves ordinary transactions, streamed ones (chunks between Stream Start and Stream
Stop, changes of subtransactions, Stream Abort of a subtransaction or of the whole, Stream Commit,
Stream Prepare), two-phase ones (Begin Prepare .. Prepare, then Commit or Rollback Prepared), a
Relation message replaced mid-transaction, Truncates of several tables and logical messages in
and outside transactions. Each message is encoded to its bytes, decoded as the replication stream
does, and fed to both assemblers; the spill threshold is small and random (0 spills at the first
change). Invariant: both emit the same transactions, changes, numbering and LSNs, in the same
order, every time the compact one's changes are read; a released transaction's file is closed.
"""
from __future__ import annotations

import dataclasses
import random

from spark_source.postgres.capture import _relations_of
from spark_source.postgres.pgoutput import (Begin, BeginPrepare, Column, Commit, CommitPrepared, Delete, Insert,
                                            LogicalMessage, PgOutputDecoder, Prepare, Relation, RollbackPrepared,
                                            StreamAbort, StreamCommit, StreamPrepare, StreamStart, StreamStop,
                                            Truncate, Update)
from spark_source.postgres.transactions import ChangeList, TransactionAssembler
from tests.simulation.seeds import SimulationFailure
from tests.unit.test_pgoutput import encode

OIDS = (16384, 16385)


class SpillSimulationFailure(SimulationFailure):
    pass


@dataclasses.dataclass
class Stats:
    histories: int = 0
    ordinary_commits: int = 0
    stream_commits: int = 0
    subtransaction_aborts: int = 0
    stream_aborts: int = 0
    prepared_commits: int = 0
    prepared_rollbacks: int = 0
    spilled_transactions: int = 0
    relations_replaced_mid_transaction: int = 0
    truncates: int = 0
    messages: int = 0

    def add(self, other: "Stats") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def _relation(oid: int, width: int) -> Relation:
    return Relation(oid, "public", f"t{oid}", "d", tuple(Column(i == 0, f"c{i}", 25, -1) for i in range(width)))


def _row(rng: random.Random, width: int) -> tuple:
    return tuple(rng.choice([None, b"", str(rng.randrange(10**rng.randrange(1, 12))).encode()])
                 for _ in range(width))


class History:
    """Random pgoutput messages in a valid order."""

    def __init__(self, rng: random.Random, stats: Stats):
        self.rng, self.stats, self.out = rng, stats, []
        self.width = {oid: 2 for oid in OIDS}
        self.xid = 1000
        self.lsn = 100

    def _next_lsn(self) -> int:
        self.lsn += self.rng.randrange(1, 50)
        return self.lsn

    def _emit(self, message) -> None:
        self.out.append((message, self._next_lsn()))

    def _change(self, xid) -> None:
        rng, oid = self.rng, self.rng.choice(OIDS)
        roll = rng.random()
        if roll < 0.06:
            self.width[oid] += 1
            self._emit(dataclasses.replace(_relation(oid, self.width[oid]), xid=xid))
            self.stats.relations_replaced_mid_transaction += 1
        elif roll < 0.12:
            self._emit(Truncate(rng.randrange(4), tuple(rng.sample(OIDS, rng.randrange(1, 3))), xid))
            self.stats.truncates += 1
        elif roll < 0.18:
            self._emit(LogicalMessage(1, self.lsn + 1, "app", rng.randbytes(rng.randrange(8)), xid))
            self.stats.messages += 1
        else:
            w = self.width[oid]
            self._emit(rng.choice([Insert(oid, _row(rng, w), xid), Update(oid, None, None, _row(rng, w), xid),
                                   Update(oid, _row(rng, w), "O", _row(rng, w), xid),
                                   Delete(oid, _row(rng, w), "K", xid)]))

    def _ordinary(self, two_phase: bool) -> None:
        rng = self.rng
        self.xid += 1
        xid, ts = self.xid, 1_700_000_000_000_000 + self.lsn
        gid = f"g{xid}"
        self._emit(BeginPrepare(self.lsn + 500, self.lsn + 501, ts, xid, gid) if two_phase else Begin(self.lsn + 500, ts, xid))
        for _ in range(rng.randrange(0, 12)):
            self._change(None)
        end = self._next_lsn()
        if not two_phase:
            self._emit(Commit(0, end - 1, end, ts))
            self.stats.ordinary_commits += 1
            return
        self._emit(Prepare(0, end - 1, end, ts, xid, gid))
        self._decide_prepared(xid, gid, ts)

    def _decide_prepared(self, xid: int, gid: str, ts: int) -> None:
        end = self._next_lsn()
        if self.rng.random() < 0.7:
            self._emit(CommitPrepared(0, end - 1, end, ts, xid, gid))
            self.stats.prepared_commits += 1
        else:
            self._emit(RollbackPrepared(0, end - 2, end, ts, ts, xid, gid))
            self.stats.prepared_rollbacks += 1

    def build(self) -> list:
        rng = self.rng
        for oid in OIDS:
            self._emit(_relation(oid, self.width[oid]))
        open_streams: dict[int, list[int]] = {}        # top xid -> its subxids
        for _ in range(rng.randrange(4, 14)):
            roll = rng.random()
            if roll < 0.2:
                self._ordinary(two_phase=rng.random() < 0.3)
            elif roll < 0.3:
                self._emit(LogicalMessage(0, self.lsn + 1, "heartbeat", b"", None))
            elif roll < 0.65 or not open_streams:
                if open_streams and rng.random() < 0.5:
                    xid = rng.choice(sorted(open_streams))
                else:
                    self.xid += 1
                    xid = self.xid
                    open_streams[xid] = [xid]
                self._emit(StreamStart(xid, len(open_streams[xid]) == 1))
                for _ in range(rng.randrange(1, 10)):
                    if rng.random() < 0.25:
                        self.xid += 1
                        open_streams[xid].append(self.xid)
                    self._change(rng.choice(open_streams[xid]))
                self._emit(StreamStop())
            else:
                xid = rng.choice(sorted(open_streams))
                subs = open_streams[xid]
                decide, ts = rng.random(), 1_700_000_000_000_000 + self.lsn
                if decide < 0.3 and len(subs) > 1:
                    sub = rng.choice(subs[1:])
                    subs.remove(sub)
                    self._emit(StreamAbort(xid, sub))
                    self.stats.subtransaction_aborts += 1
                    continue
                del open_streams[xid]
                end = self._next_lsn()
                if decide < 0.45:
                    self._emit(StreamAbort(xid, xid))
                    self.stats.stream_aborts += 1
                elif decide < 0.55:
                    self._emit(StreamPrepare(0, end - 1, end, ts, xid, f"g{xid}"))
                    self._decide_prepared(xid, f"g{xid}", ts)
                else:
                    self._emit(StreamCommit(xid, 0, end - 1, end, ts))
                    self.stats.stream_commits += 1
        return self.out


def _view(txn) -> tuple:
    return (txn.xid, txn.commit_lsn, txn.end_lsn, txn.commit_ts_us, txn.origin, txn.streamed,
            [(c.relation, c.order, c.lsn, c.message, c.xid, c.kind) for c in txn.changes])


def run_seed(seed: int) -> Stats:
    rng, stats, trace = random.Random(seed), Stats(histories=1), []
    messages = History(rng, stats).build()
    spill = rng.choice([None, 0, 1, 40, 200, 1000])
    oracle = TransactionAssembler()
    compact = TransactionAssembler(compact=True, spill_bytes=spill)
    decoder = PgOutputDecoder()
    for step, (message, lsn) in enumerate(messages):
        payload = encode(message)
        trace.append(f"{lsn}: {message}")
        decoded = decoder.decode(payload)
        expected, got = oracle.feed(decoded, lsn), compact.feed(decoded, lsn, payload)
        if len(got) != len(expected):
            raise SpillSimulationFailure(seed, step, f"{len(got)} transactions, the oracle {len(expected)}", trace)
        for mine, theirs in zip(got, expected):
            for reading in (1, 2):   # a transaction is read more than once (relations, then records)
                if _view(mine) != _view(theirs):
                    raise SpillSimulationFailure(seed, step, f"reading {reading} of xid {mine.xid} differs:\n"
                                                             f"{_view(mine)}\n{_view(theirs)}", trace)
            if len(mine.changes) != len(theirs.changes):
                raise SpillSimulationFailure(seed, step, f"xid {mine.xid} counts {len(mine.changes)} changes", trace)
            if list(_relations_of(mine.changes)) != list(_relations_of(theirs.changes)):
                raise SpillSimulationFailure(seed, step, f"xid {mine.xid}'s relations differ", trace)
            if isinstance(mine.changes, ChangeList):
                buffer = mine.changes.buffer
                stats.spilled_transactions += buffer.spilled
                mine.release()
                if buffer.spilled and not buffer._file.closed:
                    raise SpillSimulationFailure(seed, step, f"xid {mine.xid}'s spill file left open", trace)
        if compact.pending_xids() != oracle.pending_xids():
            raise SpillSimulationFailure(seed, step, f"pending {compact.pending_xids()} vs {oracle.pending_xids()}",
                                         trace)
    return stats
