"""A seeded, model-based simulation of one partition's storage: the real :class:`~broker.partition.Partition`
on a real :class:`~broker.storage.log.Log` in a temporary directory (one thread, a manual clock),
with its producer state, cleaner, retention, loader and leader-epoch cache, against a plain model
of Kafka's documented rules.

Each step picks one event at random (the seed decides): a plain produce; an idempotent produce (the
next sequence, a resend of the last batch, an out-of-order sequence, a new producer epoch); a
transactional produce or a COMMIT/ABORT marker (several producers interleaved, some left open); a
segment roll; a clean; retention or DeleteRecords; the follower moving the high watermark; a
follower truncation (the replica follows, truncates at a batch boundary and leads again); a clean
restart; a crash (no flush; the unfsynced last batch torn, index files or producer snapshots
lost) and a recovery.
As in Kafka, nothing the high watermark ever passed (what ``acks=all`` acknowledged) is truncated
or torn.

The model keeps the logical history: every batch appended and not truncated, with its records,
producer, sequences and transaction. Invariants after every step:

- offsets only grow on disk, and every record on disk is the one the model wrote at that offset
  (never reused, never changed);
- every batch at or past the cleaner checkpoint and the log start is on disk intact, and each
  key's latest visible (plain or committed) record is there (a tombstone may go once
  ``delete.retention.ms`` passed since the first clean over it);
- the aborted ranges the partition lists all have their marker on disk;
- the last stable offset is the first offset of the earliest transaction still open or whose
  marker is not yet below the high watermark; ``read_committed`` below it shows every visible
  record on disk and nothing aborted or open;
- a marker goes only once nothing of its transaction is on disk and ``delete.retention.ms`` passed;
- each producer whose last batch is on disk is known with that epoch and sequence; a resend of that
  batch is answered with its first offsets, after restarts, crashes and cleans alike; a restart
  leaves the producer state as it was;
- a crash loses nothing below the recovery point (fsynced);
- a lookup by timestamp (time indexes rebuilt after a crash or lost index files) finds the first
  record at or past the log start with that timestamp or later;
- the leader-epoch cache names, for each batch on disk, the epoch that wrote it.
"""
from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field, fields

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import OutOfOrderSequenceError, UnknownProducerIdError
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL, iter_headers
from broker.records.reader import decode_records
from broker.storage.log import Log
from tests.simulation.seeds import SimulationFailure

RETENTION = 10_000                 # delete.retention.ms
IDEMPOTENT = (100, 101)
TRANSACTIONAL_IDS = (200, 201, 202)
KEYS = [b"k%d" % i for i in range(5)]
BIG = 1 << 30
FOLLOWER = 1


@dataclass(frozen=True)
class SimConfig:
    steps: int = 60
    trace_events: int = 200


@dataclass
class Stats:
    """Counts of the events that make a run mean something; a suite of seeds must see each."""
    produces: int = 0
    resends_recognised: int = 0
    out_of_order_refused: int = 0
    epoch_bumps: int = 0
    commits: int = 0
    aborts: int = 0
    cleans_swapped: int = 0
    tombstones_dropped: int = 0
    markers_dropped: int = 0
    aborted_dropped: int = 0
    segments_retained_away: int = 0
    delete_records: int = 0
    truncations: int = 0
    restarts: int = 0
    crashes: int = 0
    torn_batches: int = 0
    lost_indexes: int = 0
    lost_snapshots: int = 0
    resends_after_restart: int = 0

    def add(self, other: "Stats") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class Txn:
    pid: int
    first: int
    status: str = "open"           # open, committed, aborted
    marker: int = -1
    marker_ts: int = -1
    replicated: bool = False       # the high watermark passed its marker once (a restart may lower it)


@dataclass
class MBatch:
    base: int
    last: int
    pid: int
    epoch: int
    first_seq: int
    last_seq: int
    data: bytes
    records: list = field(default_factory=list)   # (key, value, ts)
    txn: Txn | None = None
    marker: Txn | None = None      # a control batch ends this transaction

    @property
    def visible(self) -> bool:
        return self.marker is None and (self.txn is None or self.txn.status == "committed")


class Simulation:
    def __init__(self, seed: int, config: SimConfig = SimConfig(), directory: str | None = None):
        self.seed, self.config = seed, config
        self.rng = random.Random(seed)
        self.stats = Stats()
        self.trace: list[str] = []
        self.step = 0
        self._own_dir = directory is None
        self.directory = directory or tempfile.mkdtemp(prefix="logsim-")
        policy = self.rng.choice(["compact", "compact,delete", "delete"])
        self.topic_config = TOPIC_CONFIG.parse({
            "cleanup.policy": policy, "segment.bytes": str(self.rng.choice([400, 700, 1500])),
            "min.cleanable.dirty.ratio": "0.0", "delete.retention.ms": str(RETENTION),
            "retention.ms": str(self.rng.choice([-1, 60_000])),
            "retention.bytes": str(self.rng.choice([-1, 3000])),
            "index.interval.bytes": "1"})
        self.clock = ManualClock()
        self.leader_epoch = 0
        self.batches: list[MBatch] = []
        self.open: dict[int, Txn] = {}
        self.txns: list[Txn] = []
        self.epochs = {pid: 0 for pid in IDEMPOTENT + TRANSACTIONAL_IDS}
        self.counter = 0
        self.first_cleaned: dict[int, int] = {}   # tombstone offset -> time of the first clean over it
        self.committed = 0    # the highest high watermark seen: what acks=all acknowledged
        self.snapshots_lost_below = 0   # the log end when the producer snapshots were last lost
        self.partition = self._open(clean_shutdown=True)

    # ------------------------------------------------------------------------------ plumbing
    def _open(self, clean_shutdown: bool) -> Partition:
        log = Log.open(self.directory, self.topic_config, self.clock, clean_shutdown=clean_shutdown)
        partition = Partition("t", 0, "id", log, AppendNotifier(), clock=self.clock)
        self.leader_epoch += 1
        partition.make_leader(self.leader_epoch, 0, [0, FOLLOWER], [0, FOLLOWER])
        return partition

    def close(self) -> None:
        self.partition.close_for_removal()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def fail(self, message: str) -> None:
        raise SimulationFailure(self.seed, self.step, message, self.trace[-self.config.trace_events:])

    def log_event(self, text: str) -> None:
        self.trace.append(f"{self.step}: {text}")

    @property
    def log(self) -> Log:
        return self.partition.log

    @property
    def end(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.log.log_end_offset

    def last_data_batch(self, pid: int) -> MBatch | None:
        for b in reversed(self.batches):
            if b.pid == pid and b.marker is None:
                return b
        return None

    def on_disk(self) -> list[tuple]:
        """(header, bytes) of every batch from the log start to the log end."""
        out, offset, log = [], self.log.log_start_offset, self.log
        while offset < log.log_end_offset:
            data = log.read(offset, BIG)
            if data is None:
                break
            for pos, header in iter_headers(data):
                out.append((header, bytes(data[pos:pos + header.size])))
                offset = header.next_offset
        return out

    def producer_certain(self, pid: int, disk=None) -> MBatch | None:
        """The producer's last batch, when it is on disk (so its state must be known)."""
        last = self.last_data_batch(pid)
        if last is None:
            return None
        disk = self.on_disk() if disk is None else disk
        if any(h.producer_id == pid and not h.is_control and h.last_offset == last.last for h, _ in disk):
            return last
        return None

    # ------------------------------------------------------------------------------ produce
    def _records(self, n: int, tombstones: bool = True) -> list:
        out = []
        for _ in range(n):
            self.counter += 1
            value = None if tombstones and self.rng.random() < 0.2 else b"v%d" % self.counter
            out.append((self.rng.choice(KEYS), value, self.clock.time_ms()))
        return out

    def _append(self, pid: int, epoch: int, seq: int, records: list, txn: Txn | None) -> MBatch:
        fields_ = {}
        if pid >= 0:
            fields_ = dict(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
            if txn is not None:
                fields_["attributes"] = TRANSACTIONAL
        keys, values, ts = zip(*records)
        data = encode_batch(record_batch(list(keys), list(values), list(ts)), **fields_)
        expected = self.end
        info = self.partition.append_records(data)
        if info.first_offset < expected:
            self.fail(f"append got offset {info.first_offset}, reusing offsets below the log end {expected}")
        batch = MBatch(info.first_offset, info.last_offset, pid, epoch, seq, seq + len(records) - 1, data,
                       list(records), txn)
        self.batches.append(batch)
        self.stats.produces += 1
        return batch

    def produce_plain(self) -> None:
        b = self._append(-1, -1, -1, self._records(self.rng.randint(1, 4)), None)
        self.log_event(f"plain produce at {b.base}..{b.last}")

    def next_sequence(self, pid: int) -> tuple[int, int]:
        """(epoch, sequence) the producer sends next; a producer the partition may have forgotten
        (its last batch gone) starts a new epoch at 0, as after UnknownProducerId."""
        last = self.last_data_batch(pid)
        if last is None or last.epoch != self.epochs[pid]:
            return self.epochs[pid], 0
        return self.epochs[pid], last.last_seq + 1

    def produce_idempotent(self) -> None:
        pid = self.rng.choice(IDEMPOTENT)
        kind = self.rng.choice(["next", "next", "resend", "out_of_order", "new_epoch"])
        certain = self.producer_certain(pid)
        entry = self.partition.producers.producers.get(pid)
        # A state rebuilt from a cleaned log knows the producer's last batch as the cleaner left it
        # (its surviving records), so a resend of the whole batch is not recognised; Kafka's is not
        # either (its snapshots usually avoid the rebuild, as ours do).
        remembered = entry is not None and bool(entry.batches) and certain is not None \
            and entry.batches[-1].first_sequence == certain.first_seq
        if kind == "resend" and remembered and certain.epoch == self.epochs[pid]:
            info = self.partition.append_records(certain.data)
            if (info.first_offset, info.last_offset) != (certain.base, certain.last):
                self.fail(f"resend of producer {pid} seq {certain.first_seq} answered {info.first_offset}.."
                          f"{info.last_offset}, appended at {certain.base}..{certain.last}")
            if self.log.log_end_offset != self.end:
                self.fail(f"resend of producer {pid} was appended again")
            self.stats.resends_recognised += 1
            if self.stats.restarts + self.stats.crashes:
                self.stats.resends_after_restart += 1
            self.log_event(f"resend p{pid} seq {certain.first_seq} recognised at {certain.base}")
            return
        if kind == "out_of_order" and certain is not None and certain.epoch == self.epochs[pid]:
            records = self._records(1)
            data = encode_batch(record_batch([records[0][0]], [records[0][1]], [records[0][2]]),
                                producer_id=pid, producer_epoch=self.epochs[pid],
                                base_sequence=certain.last_seq + 3)
            try:
                self.partition.append_records(data)
            except OutOfOrderSequenceError:
                self.stats.out_of_order_refused += 1
                self.log_event(f"p{pid} seq {certain.last_seq + 3} refused out of order")
                return
            self.fail(f"producer {pid} seq {certain.last_seq + 3} after {certain.last_seq} was accepted")
        if kind == "new_epoch":
            self.epochs[pid] += 1
            self.stats.epoch_bumps += 1
        epoch, seq = self.next_sequence(pid)
        records = self._records(self.rng.randint(1, 3))
        try:
            b = self._append(pid, epoch, seq, records, None)
        except UnknownProducerIdError:
            if certain is not None:
                self.fail(f"producer {pid} whose last batch is on disk was refused as unknown")
            self.epochs[pid] += 1   # the client's KIP-360 answer
            b = self._append(pid, self.epochs[pid], 0, records, None)
        self.log_event(f"p{pid} e{b.epoch} seq {b.first_seq}..{b.last_seq} at {b.base}..{b.last}")

    def produce_transactional(self) -> None:
        pid = self.rng.choice(TRANSACTIONAL_IDS)
        txn = self.open.get(pid)
        epoch, seq = self.next_sequence(pid)
        new = txn is None
        if new:
            txn = Txn(pid, self.end)
        try:
            b = self._append(pid, epoch, seq, self._records(self.rng.randint(1, 3)), txn)
        except OutOfOrderSequenceError:
            # Known only by a marker: its data went by retention, or by a clean before the snapshots
            # were lost; Kafka refuses it too. The producer takes a new epoch (InitProducerId).
            last = self.last_data_batch(pid)
            if not new or self.producer_certain(pid) is not None or last is None \
                    or (last.last >= self.log.log_start_offset and last.last >= self.snapshots_lost_below):
                raise
            self.epochs[pid] += 1
            self.log_event(f"txn p{pid} seq {seq} refused: only its marker is known; new epoch")
            return
        if new:
            txn.first = b.base
            self.open[pid] = txn
            self.txns.append(txn)
        self.log_event(f"txn p{pid} seq {seq} at {b.base}..{b.last}")

    def end_transaction(self, pid: int | None = None, commit: bool | None = None) -> None:
        """A COMMIT or ABORT marker for one open transaction (a random one unless ``pid``)."""
        if not self.open:
            return
        pid = self.rng.choice(sorted(self.open)) if pid is None else pid
        commit = self.rng.random() < 0.5 if commit is None else commit
        txn = self.open.pop(pid)
        epoch = self.last_data_batch(pid).epoch
        info = self.partition.write_marker(pid, epoch, commit, 0)
        txn.status, txn.marker, txn.marker_ts = ("committed" if commit else "aborted"), info.first_offset, \
            self.clock.time_ms()
        self.batches.append(MBatch(info.first_offset, info.last_offset, pid, epoch, -1, -1, b"", [], None, txn))
        if commit:
            self.stats.commits += 1
        else:
            self.stats.aborts += 1
        self.log_event(f"{'COMMIT' if commit else 'ABORT'} p{pid} (from {txn.first}) at {info.first_offset}")

    # ------------------------------------------------------------------------------ housekeeping
    def roll(self) -> None:
        if self.log.active.size:
            self.log.roll()
            self.partition.snapshot_producers()
            self.log_event(f"roll at {self.log.log_end_offset}")

    def clean(self) -> None:
        result = self.partition.clean(self.clock.time_ms())
        if result is not None and result.swapped:
            s = result.stats
            self.stats.cleans_swapped += 1
            self.stats.tombstones_dropped += s.tombstones_dropped
            self.stats.markers_dropped += s.markers_dropped
            self.stats.aborted_dropped += s.aborted_dropped
            cleaned_to, now = self.log.cleaner_checkpoint.first_dirty_offset, self.clock.time_ms()
            for b in self.batches:   # the first clean over a tombstone starts its delete.retention.ms
                for i, rec in enumerate(b.records):
                    if rec[1] is None and b.base + i < cleaned_to:
                        self.first_cleaned.setdefault(b.base + i, now)
            self.log_event(f"clean up to {cleaned_to}: {s}")

    def retention(self) -> None:
        if "delete" not in self.topic_config["cleanup.policy"]:
            return
        if self.rng.random() < 0.5:
            result = self.partition.apply_retention(self.clock.time_ms())
            self.stats.segments_retained_away += result.segments
            if result.segments:
                self.log_event(f"retention removed {result.segments} segment(s): start {result.log_start_offset}")
            return
        lo, hw = self.log.log_start_offset, self.partition.high_watermark
        offset = self.rng.randint(lo, max(lo, min(hw, lo + 10)))
        start = self.partition.delete_records(offset)
        self.stats.delete_records += 1
        self.log_event(f"DeleteRecords({offset}): log start {start}")

    def move_high_watermark(self) -> None:
        hw = self.partition.high_watermark
        ends = [b.last + 1 for b in self.batches if b.last + 1 >= hw] or [self.log.log_end_offset]
        offset = self.rng.choice(ends)   # a follower fetches from its log end: a batch boundary
        self.partition.read_for_follower(FOLLOWER, offset, BIG, self.leader_epoch)
        self.log_event(f"follower fetched at {offset}: HW {self.partition.high_watermark}")

    def truncate(self) -> None:
        # A follower never truncates what the high watermark passed (KIP-101/KIP-279).
        floor = max(self.log.log_start_offset, self.committed)
        bases = [b.base for b in self.batches if b.base >= floor]
        if not bases:
            return
        offset = self.rng.choice(bases[-4:])
        self.leader_epoch += 1
        self.partition.make_follower(FOLLOWER, self.leader_epoch, 0, [0, FOLLOWER], [0, FOLLOWER])
        self.partition.truncate_to(offset, self.leader_epoch)
        self._model_truncate(offset)
        self.leader_epoch += 1
        self.partition.make_leader(self.leader_epoch, 0, [0, FOLLOWER], [0, FOLLOWER])
        self.stats.truncations += 1
        self.log_event(f"follower truncation to {offset}")

    def _model_truncate(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b.last < offset]
        self.first_cleaned = {o: t for o, t in self.first_cleaned.items() if o < offset}
        for txn in self.txns:
            if txn.marker >= offset:
                txn.status, txn.marker, txn.marker_ts, txn.replicated = "open", -1, -1, False
        alive = {id(b.txn) for b in self.batches if b.txn is not None}
        self.txns = [t for t in self.txns if id(t) in alive or t.status != "open"]
        self.open = {t.pid: t for t in self.txns if t.status == "open"}

    def restart(self) -> None:
        start = self.log.log_start_offset
        before = (self.partition.producers.active(),
                  [a for a in self.partition.producers.aborted if a.last_offset >= start])
        self.partition.close()
        self.partition = self._open(clean_shutdown=True)
        after = (self.partition.producers.active(),
                 [a for a in self.partition.producers.aborted if a.last_offset >= start])
        if [p[:3] + p[4:] for p in before[0]] != [p[:3] + p[4:] for p in after[0]] or before[1] != after[1]:
            self.fail(f"producer state changed across a clean restart: {before} -> {after}")
        self.stats.restarts += 1
        self.log_event("clean restart")

    def crash(self) -> None:
        log = self.log
        recovery_point = log.recovery_point
        active = log.active
        last = self.batches[-1] if self.batches else None
        log.close_without_flush()
        torn = (last is not None and last.base >= max(recovery_point, self.committed)
                and last.base >= active.base_offset
                and active.size > 0 and self.rng.random() < 0.6)
        if torn:
            size = os.path.getsize(active.log_path)
            batch_size = len(last.data) if last.data else 80
            os.truncate(active.log_path, size - self.rng.randint(1, min(size, batch_size)))
            self.stats.torn_batches += 1
        if self.rng.random() < 0.15:   # the producer-state snapshots lost too: rebuilt from the log
            for name in os.listdir(self.directory):
                if name.startswith("producer-state"):
                    os.unlink(os.path.join(self.directory, name))
            self.stats.lost_snapshots += 1
            self.snapshots_lost_below = self.log.log_end_offset
        if self.rng.random() < 0.3:
            for path in (active.offset_index.path, active.time_index.path):
                if os.path.exists(path):
                    os.unlink(path)
            self.stats.lost_indexes += 1
        self.partition = self._open(clean_shutdown=False)
        end = self.log.log_end_offset
        if end < recovery_point:
            self.fail(f"a crash lost fsynced records: log end {end} below the recovery point {recovery_point}")
        if torn:
            self._model_truncate(last.base)
        if end != self.end:
            self.fail(f"after the crash the log ends at {end}; expected {self.end}")
        self.stats.crashes += 1
        self.log_event(f"crash (torn={torn}); recovered to {end}")

    # ------------------------------------------------------------------------------ invariants
    def model_lso(self, strict: bool) -> int:
        """The last stable offset. Lenient (not ``strict``) where Kafka's rebuilt state may differ
        from its kept one: a restart starts the high watermark again at the log start, so a
        transaction whose marker it had passed may count as stable; a transaction whose first
        records are below the log start is known from its records left (or, with none left, not
        at all) once the state is rebuilt from the log (Kafka's ``appendEndTxnMarker`` completes
        only a transaction it saw open)."""
        hw, start = self.partition.high_watermark, self.log.log_start_offset
        for t in self.txns:
            if 0 <= t.marker < hw:
                t.replicated = True
        firsts = []
        for t in self.txns:
            if not (t.status == "open" or (t.marker >= hw and (strict or not t.replicated))):
                continue
            if strict or t.first >= start:
                firsts.append(t.first)
                continue
            left = [b.base for b in self.batches if b.txn is t and b.base >= start]
            firsts.extend(left[:1])
        if not firsts:
            return hw
        return min(max(min(firsts), start), hw)

    def check(self) -> None:
        log, p = self.log, self.partition
        self.committed = max(self.committed, p.high_watermark)
        disk = self.on_disk()
        by_base = {b.base: b for b in self.batches}
        by_offset = {}
        for b in self.batches:
            for i, rec in enumerate(b.records):
                by_offset[b.base + i] = rec
        previous = -1
        stamps: list[tuple[int, int]] = []   # (offset, timestamp) of every record and marker on disk
        present: set[int] = set()
        markers: set[int] = set()
        for header, data in disk:
            epoch = p.epochs.epoch_for_offset(max(header.base_offset, log.log_start_offset))
            if epoch != header.partition_leader_epoch:
                self.fail(f"the leader-epoch cache gives epoch {epoch} at {header.base_offset}; the batch "
                          f"was written in epoch {header.partition_leader_epoch} ({p.epochs.entries})")
            if header.base_offset <= previous:
                self.fail(f"offsets go back on disk: batch at {header.base_offset} after {previous}")
            previous = header.last_offset
            if header.is_control:
                m = by_base.get(header.base_offset)
                if m is None or m.marker is None:
                    self.fail(f"a marker at {header.base_offset} the model never wrote")
                markers.add(header.base_offset)
                if header.base_offset >= log.log_start_offset:
                    stamps.append((header.base_offset, header.max_timestamp))
                continue
            for batch in decode_records(data, 0):
                cols = batch.records.to_pydict()
                for i, (k, v) in enumerate(zip(cols["key"], cols["value"])):
                    offset = batch.base_offset + i
                    if offset < log.log_start_offset:
                        continue
                    rec = by_offset.get(offset)
                    if rec is None or (rec[0], rec[1]) != (k, v):
                        self.fail(f"record at {offset} is {(k, v)}; the model wrote {rec}")
                    present.add(offset)
                    stamps.append((offset, cols["timestamp"][i]))
        self.check_time_lookups(stamps)
        start = log.log_start_offset
        bound = max(start, log.cleaner_checkpoint.first_dirty_offset)
        for b in self.batches:
            if b.base < bound:
                continue
            if b.marker is not None:
                if b.base not in markers:
                    self.fail(f"marker at {b.base}, past the cleaned range ({bound}), is gone")
            elif any(b.base + i not in present for i in range(len(b.records))):
                self.fail(f"batch {b.base}..{b.last}, past the cleaned range ({bound}), lost records")
        now = self.clock.time_ms()
        latest: dict[bytes, tuple[int, tuple]] = {}
        for b in self.batches:
            if b.visible:
                for i, rec in enumerate(b.records):
                    if b.base + i >= start:
                        latest[rec[0]] = (b.base + i, rec)
        for key, (offset, rec) in latest.items():
            if offset in present:
                continue
            if rec[1] is not None:
                self.fail(f"the latest record of {key!r} at {offset} is gone")
            cleaned = self.first_cleaned.get(offset)
            if cleaned is None or now - cleaned < RETENTION:
                self.fail(f"the tombstone of {key!r} at {offset} went before its delete horizon "
                          f"(first cleaned at {cleaned}, now {now})")
        for txn in self.txns:
            if txn.marker >= start and txn.marker not in markers:
                data_left = [o for b in self.batches if b.txn is txn for o in range(b.base, b.last + 1)
                             if o in present]
                if data_left or now - txn.marker_ts < RETENTION:
                    self.fail(f"marker at {txn.marker} removed with records {data_left} or too early")
        for a in p.producers.aborted:   # a listed range without its marker hides later transactions
            if a.last_offset >= start and a.last_offset not in markers:
                self.fail(f"aborted range {a} is listed but its marker is not on disk")
        lso, hw = p.stable_offsets()
        low, high = self.model_lso(strict=True), self.model_lso(strict=False)
        if not low <= lso <= high:
            self.fail(f"last stable offset {lso}; the model says {low}..{high} (HW {hw})")
        rows = self.read_committed()
        got = [o for o, _, _ in rows]
        if got != sorted(set(got)):
            self.fail(f"read_committed offsets not increasing: {got}")
        visible = {b.base + i for b in self.batches if b.visible for i in range(len(b.records))}
        for offset, k, v in rows:
            if offset not in visible:
                self.fail(f"read_committed showed {offset} ({k!r}), which is aborted or open")
        want = sorted(o for o in present if o in visible and o < lso)
        if got != want:
            self.fail(f"read_committed below {lso} shows {got}; on disk and visible: {want}")
        active = {pid: (epoch, seq, txn) for pid, epoch, seq, _, txn in p.producers.active()}
        for pid in IDEMPOTENT + TRANSACTIONAL_IDS:
            last = self.producer_certain(pid, disk)
            if last is None:
                continue
            state = active.get(pid)
            if state is None or state[:2] != (last.epoch, last.last_seq):
                self.fail(f"producer {pid}: state {state}; its last batch on disk is e{last.epoch} "
                          f"seq ..{last.last_seq} at {last.base}")
            txn = self.open.get(pid)
            expected_txn = -1 if txn is None else txn.first
            if state[2] != expected_txn and (txn is None or txn.first >= start):
                self.fail(f"producer {pid}: open transaction from {state[2]}; the model says {expected_txn}")

    def check_time_lookups(self, stamps: list[tuple[int, int]]) -> None:
        """ListOffsets by time (the time indexes, rebuilt after a crash or lost index files) finds
        the first record at or past the log start whose timestamp is at least the one asked for."""
        if not stamps:
            return
        _, ts = self.rng.choice(stamps)
        for target in (ts, ts + 1):
            expected = next(((o, t) for o, t in stamps if t >= target), None)
            found = self.log.offset_for_timestamp(target)
            if found != expected:
                self.fail(f"offset for timestamp {target}: {found}; the first record at or after it is {expected}")

    def read_committed(self) -> list[tuple]:
        rows, offset = [], self.log.log_start_offset
        while True:
            result = self.partition.read(offset, BIG, read_committed=True)
            if not len(result.records):
                return rows
            aborted = [(a.producer_id, a.first_offset) for a in result.aborted]
            for batch in decode_records(result.records, offset, True, aborted):
                cols = batch.records.to_pydict()
                rows += [(batch.base_offset + i, k, v) for i, (k, v) in enumerate(zip(cols["key"], cols["value"]))
                         if batch.base_offset + i >= offset]
            offset = [h for _, h in iter_headers(result.records)][-1].next_offset

    # ------------------------------------------------------------------------------ run
    def run(self) -> Stats:
        with no_fsync():
            return self._run()

    def _run(self) -> Stats:
        events = [(self.produce_plain, 2), (self.produce_idempotent, 5), (self.produce_transactional, 4),
                  (self.end_transaction, 3), (self.roll, 2), (self.clean, 2), (self.retention, 1),
                  (self.move_high_watermark, 4), (self.truncate, 1), (self.restart, 1), (self.crash, 1),
                  (lambda: self.clock.advance(self.rng.choice([100, RETENTION // 2, RETENTION + 1])), 2)]
        actions, weights = zip(*events)
        try:
            for self.step in range(self.config.steps):
                self.rng.choices(actions, weights)[0]()
                self.check()
            # Settle: every transaction ends, the follower catches up, time passes, cleans run.
            for pid in sorted(self.open):
                self.end_transaction(pid, commit=pid % 2 == 0)
            self.roll()
            self.partition.read_for_follower(FOLLOWER, self.log.log_end_offset, BIG, self.leader_epoch)
            for _ in range(3):
                self.clock.advance(RETENTION + 1)
                self.clean()
                self.check()
            self.restart()
            self.check()
        except SimulationFailure:
            raise
        except Exception as error:  # noqa: BLE001 - an unexpected refusal or crash is a failure too
            self.fail(f"{type(error).__name__}: {error}")
        finally:
            self.close()
        return self.stats


def run_seed(seed: int, config: SimConfig = SimConfig()) -> Stats:
    return Simulation(seed, config).run()


@contextlib.contextmanager
def no_fsync():
    """fsync made a no-op: a crash here is simulated (unflushed tails torn by hand), never a real
    power loss, and the fsyncs would make the runs wait on the disk, not compute."""
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real
