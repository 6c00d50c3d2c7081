"""Compaction of transactional logs: random histories of committed, aborted and open transactions,
plain writes, tombstones and cleans at random points, against a model of what was committed.

A ``Partition`` on a real ``Log`` in a temporary directory (one thread, a manual clock) keeps the
producer state (last stable offset, aborted ranges) that the cleaner relies on, and its
``read(..., read_committed=True)`` is what a consumer gets.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL, iter_headers
from broker.records.reader import decode_records
from broker.storage.cleaner_transactions import Transactions, aborted_after_clean
from broker.storage.log import Log
from broker.storage.producer_state import SNAPSHOT_FILE, AbortedTxn

pytestmark = pytest.mark.unit

RETENTION = 10_000  # delete.retention.ms
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "700", "min.cleanable.dirty.ratio": "0.0",
          "delete.retention.ms": str(RETENTION)}
KEYS = [b"k%d" % i for i in range(6)]
PRODUCERS = 3
BIG = 1 << 30


@dataclass
class Txn:
    producer: int
    status: str = "open"   # open, committed, aborted
    marker: int = -1       # the marker's offset
    marker_ts: int = -1
    offsets: list = field(default_factory=list)


@dataclass
class Written:
    key: bytes
    value: bytes | None
    ts: int
    txn: Txn | None        # None: a plain (non-transactional) write

    @property
    def committed(self) -> bool:
        return self.txn is None or self.txn.status == "committed"


class History:
    """Drives a partition and remembers every record and transaction it was given."""

    def __init__(self, directory: str):
        self.directory = directory
        self.clock = ManualClock()
        self.partition = self._open()
        self.written: dict[int, Written] = {}
        self.txns: list[Txn] = []
        self.open: dict[int, Txn] = {}
        self.sequences = [0] * PRODUCERS
        self.counter = 0

    def _open(self) -> Partition:
        log = Log.open(self.directory, TOPIC_CONFIG.parse(CONFIG), self.clock)
        partition = Partition("t", 0, "id", log, AppendNotifier(), clock=self.clock)
        partition.make_leader(0, 0, [0], [0])
        return partition

    def roll(self) -> None:
        if self.partition.log.active.size:
            self.partition.log.roll()

    def reopen(self, drop_snapshot: bool) -> None:
        self.partition.close()
        if drop_snapshot:
            os.unlink(os.path.join(self.directory, SNAPSHOT_FILE))
        self.partition = self._open()

    def write(self, keys: list[bytes], tombstones: list[bool], producer: int | None) -> None:
        values = []
        for tombstone in tombstones:
            self.counter += 1
            values.append(None if tombstone else b"v%d" % self.counter)
        now = self.clock.time_ms()
        fields = {}
        txn = None
        if producer is not None:
            txn = self.open.get(producer)
            if txn is None:
                txn = self.open[producer] = Txn(producer)
                self.txns.append(txn)
            fields = dict(attributes=TRANSACTIONAL, producer_id=1000 + producer, producer_epoch=0,
                          base_sequence=self.sequences[producer])
            self.sequences[producer] += len(keys)
        data = encode_batch(record_batch(keys, values, [now] * len(keys)), **fields)
        info = self.partition.append_records(data)
        for i, (key, value) in enumerate(zip(keys, values)):
            self.written[info.first_offset + i] = Written(key, value, now, txn)
            if txn is not None:
                txn.offsets.append(info.first_offset + i)

    def end(self, producer: int, commit: bool) -> None:
        txn = self.open.pop(producer, None)
        if txn is None:
            return
        info = self.partition.write_marker(1000 + producer, 0, commit, 0)
        txn.status, txn.marker, txn.marker_ts = ("committed" if commit else "aborted"), info.first_offset, \
            self.clock.time_ms()

    # ------------------------------------------------------------------------------ what readers see
    def batches(self) -> list:
        """(header, bytes) of every batch in the log, straight from it."""
        out, offset = [], self.partition.log.log_start_offset
        while offset < self.partition.log.log_end_offset:
            data = self.partition.log.read(offset, BIG)
            if data is None or not len(data):
                break
            for pos, header in iter_headers(data):
                out.append((header, bytes(data[pos:pos + header.size])))
                offset = header.next_offset
        return out

    def read_committed(self) -> list[tuple[int, bytes, bytes | None]]:
        rows, offset = [], self.partition.log.log_start_offset
        while True:
            result = self.partition.read(offset, BIG, read_committed=True)
            if not len(result.records):
                return rows
            aborted = [(a.producer_id, a.first_offset) for a in result.aborted]
            for batch in decode_records(result.records, offset, True, aborted):
                cols = batch.records.to_pydict()
                rows += [(batch.base_offset + i, k, v) for i, (k, v) in enumerate(zip(cols["key"], cols["value"]))]
            offset = [h for _, h in iter_headers(result.records)][-1].next_offset

    def records_on_disk(self) -> dict[int, tuple]:
        rows = {}
        for header, data in self.batches():
            for batch in decode_records(data, 0):
                cols = batch.records.to_pydict()
                for i, (k, v) in enumerate(zip(cols["key"], cols["value"])):
                    rows[batch.base_offset + i] = (k, v)
        return rows

    def markers_on_disk(self) -> set[int]:
        return {h.base_offset for h, _ in self.batches() if h.is_control}


def committed_model(history: History, below: int) -> dict[bytes, bytes]:
    """The last committed value of each key below ``below`` (the last stable offset), by offset."""
    model: dict[bytes, bytes | None] = {}
    for offset in sorted(history.written):
        w = history.written[offset]
        if offset < below and w.committed:
            model[w.key] = w.value
    return {k: v for k, v in model.items() if v is not None}


def check(history: History, lso_at_clean: int, written_before: set[int], markers_before: set[int]) -> None:
    partition, now = history.partition, history.clock.time_ms()
    lso, _ = partition.stable_offsets()
    rows = history.read_committed()
    # Only committed records, each at the offset it was written at.
    for offset, key, value in rows:
        w = history.written[offset]
        assert w.committed and (w.key, w.value) == (key, value), (offset, w)
    # The latest committed value of every key.
    state: dict[bytes, bytes | None] = {}
    for _, key, value in rows:
        state[key] = value
    assert {k: v for k, v in state.items() if v is not None} == committed_model(history, lso)
    # Each key's latest committed record survives (a tombstone at least delete.retention.ms: its
    # delete horizon is set by a clean, which is never earlier than its write).
    latest: dict[bytes, int] = {}
    for offset in sorted(history.written):
        if offset < lso and history.written[offset].committed:
            latest[history.written[offset].key] = offset
    present = {offset for offset, _, _ in rows}
    for key, offset in latest.items():
        w = history.written[offset]
        if w.value is not None or now - w.ts < RETENTION:
            assert offset in present, f"the latest committed record of {key!r} at {offset} is gone"
    # Nothing at or past the last stable offset of the clean was touched.
    on_disk = history.records_on_disk()
    for offset in written_before:
        if offset >= lso_at_clean:
            assert on_disk.get(offset) == (history.written[offset].key, history.written[offset].value), offset
    markers = history.markers_on_disk()
    assert {m for m in markers_before if m >= lso_at_clean} <= markers
    # A marker goes only once its delete horizon (a clean's time + delete.retention.ms) has come,
    # and only when nothing of its transaction is left.
    for txn in history.txns:
        if txn.marker >= 0 and txn.marker not in markers:
            assert now - txn.marker_ts >= RETENTION, f"marker at {txn.marker} removed too early"
            assert not any(o in on_disk for o in txn.offsets), f"marker at {txn.marker} removed before its records"
    # Every aborted range the partition lists still has its marker (else readers would skip the
    # producer's later transactions).
    for a in partition.producers.aborted:
        if a.last_offset >= partition.log.log_start_offset:
            assert a.last_offset in markers, a


ops = st.one_of(
    st.tuples(st.just("write"), st.lists(st.tuples(st.sampled_from(KEYS), st.booleans()), min_size=1, max_size=5),
              st.one_of(st.none(), st.integers(0, PRODUCERS - 1))),
    st.tuples(st.just("end"), st.integers(0, PRODUCERS - 1), st.booleans()),
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean")),
    st.tuples(st.just("advance"), st.sampled_from([1, 100, RETENTION // 2, RETENTION + 1])),
)


def clean(history: History) -> None:
    before, markers = set(history.written), history.markers_on_disk()
    lso, _ = history.partition.stable_offsets()
    history.partition.clean(history.clock.time_ms())
    check(history, lso, before, markers)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=5, max_size=40))
def test_a_cleaned_transactional_log_keeps_every_committed_value_and_nothing_aborted(history_ops):
    with tempfile.TemporaryDirectory() as directory:
        history = History(directory)
        for op in history_ops:
            if op[0] == "write":
                history.write([k for k, _ in op[1]], [t for _, t in op[1]], op[2])
            elif op[0] == "end":
                history.end(op[1], op[2])
            elif op[0] == "roll":
                history.roll()
            elif op[0] == "clean":
                clean(history)
            else:
                history.clock.advance(op[1])
        clean(history)

        # Every transaction ends, everything is sealed, and cleans keep coming past the delete
        # horizons the first of them sets: the markers of transactions with nothing left go, the
        # others stay.
        for producer in list(history.open):
            history.end(producer, commit=producer % 2 == 0)
        history.write([KEYS[0]], [False], None)
        history.roll()
        history.clock.advance(RETENTION + 1)
        for _ in range(4):
            clean(history)
            history.clock.advance(RETENTION)
        on_disk, markers = history.records_on_disk(), history.markers_on_disk()
        for txn in history.txns:
            if txn.marker >= 0:
                has_records = any(o in on_disk for o in txn.offsets)
                assert (txn.marker in markers) == has_records, (txn, has_records)
        assert not [o for o, w in history.written.items() if o in on_disk and not w.committed]

        # A restart, from the snapshot or from the log alone, reads the same.
        expected = history.read_committed()
        history.reopen(drop_snapshot=False)
        assert history.read_committed() == expected
        history.reopen(drop_snapshot=True)
        assert history.read_committed() == expected
        history.partition.close()


def test_a_committed_value_is_not_shadowed_by_an_aborted_one(tmp_path):
    """The issue's case in miniature: v1 committed, v2 aborted, then a clean."""
    history = History(str(tmp_path))
    history.write([b"a", b"b"], [False, False], producer=0)
    history.end(0, commit=True)
    history.write([b"a", b"b"], [False, False], producer=0)
    history.end(0, commit=False)
    history.write([b"c"], [False], None)
    history.roll()
    assert history.partition.clean(history.clock.time_ms()).swapped
    assert {k: v for _, k, v in history.read_committed()} == {b"a": b"v1", b"b": b"v2", b"c": b"v5"}
    history.partition.close()


def test_nothing_at_or_past_the_last_stable_offset_is_cleaned(tmp_path):
    history = History(str(tmp_path))
    for producer in (None, None, 1, None, None):      # 2 opens a transaction that stays open: the LSO
        history.write([b"a"], [False], producer)
        if producer is None:
            history.roll()
    history.partition.clean(history.clock.time_ms())
    assert history.partition.stable_offsets()[0] == 2
    assert sorted(history.records_on_disk()) == [1, 2, 3, 4], "records at or past the LSO were cleaned"


def test_transactions_decide_aborted_batches_and_removable_markers():
    from broker.records.batch import CONTROL, parse_header

    def header(offset, pid, control=False):
        data = encode_batch(record_batch([b"k"], [b"v"], [0]), attributes=TRANSACTIONAL | (CONTROL if control else 0),
                            producer_id=pid, producer_epoch=0)
        return parse_header(data)._replace(base_offset=offset)

    txns = Transactions([AbortedTxn(7, 10, 20)])
    assert txns.is_aborted(header(10, 7)) and txns.is_aborted(header(19, 7))
    assert not txns.is_aborted(header(9, 7)) and not txns.is_aborted(header(21, 7))
    assert not txns.is_aborted(header(12, 8))
    assert txns.marker_removable(header(20, 7, control=True)) is None  # still listed
    txns.kept_records(header(30, 7))
    assert txns.marker_removable(header(31, 7, control=True)) is False
    assert txns.marker_removable(header(40, 7, control=True)) is True
    assert aborted_after_clean([AbortedTxn(7, 10, 20), AbortedTxn(8, 15, 40)], 30) == [AbortedTxn(8, 15, 40)]
