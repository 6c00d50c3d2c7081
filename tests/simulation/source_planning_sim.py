"""The Spark source's offset planning (``StreamReader``'s driver side) under random histories, against
a model of Spark's Kafka source rules (KafkaMicroBatchStream, the structured-streaming Kafka guide).

A fake of the brokers answers the reader's questions (partitions, watermarks, the group's pin); the
history appends records, adds partitions, deletes and re-creates topics (offsets go back), moves log
starts past unread offsets, triggers micro-batches, restarts the query from its checkpoint and runs
``Trigger.AvailableNow``. The invariants, checked after every batch and when the history goes quiet:
a partition's batches tile its offsets (no gap, no overlap) within one incarnation of its topic; a
record is read at most once, and every record still held when the history goes quiet is read unless
Spark's rules allow skipping it (removed before it was read, or below a re-created partition's old
position); ``maxOffsetsPerTrigger`` is never exceeded by more than Spark's rounding (a share under one
offset is one);
an ``AvailableNow`` run ends exactly at the offsets fixed when it started; data loss fails the
query with ``failOnDataLoss=true``.
"""
from __future__ import annotations

import dataclasses
import random

from spark_source.offset_lookup import DataLossError
from spark_source.options import SourceOptions
from spark_source.planning import from_json, to_json
from spark_source.reader import StreamReader
from tests.simulation.seeds import SimulationFailure

TP = tuple[str, int]


@dataclasses.dataclass
class Stats:
    appends: int = 0
    partitions_added: int = 0
    recreated: int = 0
    retention: int = 0
    batches: int = 0
    restarts: int = 0
    lost_checkpoints: int = 0
    available_now_runs: int = 0
    rate_limited: int = 0
    delayed: int = 0
    data_loss_failures: int = 0

    def add(self, other: "Stats") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Brokers:
    """The cluster as the reader sees it: ``{topic: [[low, high, epoch], ...]}``; ``epoch`` counts
    the topic's incarnations, so a record is ``(topic, partition, epoch, offset)``."""

    def __init__(self):
        self.topics: dict[str, list[list[int]]] = {}
        self.epochs: dict[str, int] = {}
        self.committed: dict[TP, tuple[int, bool]] = {}
        self.start_at = "earliest"

    # the OffsetLookup questions StreamReader asks
    def partitions(self):
        return sorted((t, p) for t, ps in self.topics.items() for p in range(len(ps)))

    def watermarks(self, tps):
        return {tp: (self.topics[tp[0]][tp[1]][0], self.topics[tp[0]][tp[1]][1]) for tp in tps}

    def starting(self, tps):
        return {tp: self.topics[tp[0]][tp[1]][0 if self.start_at == "earliest" else 1] for tp in tps}

    def pinned_start(self, tps):
        """Batch 0's start as the group holds it: pinned offsets, unless a plain commit replaced one."""
        found = {tp: self.committed[tp] for tp in tps if tp in self.committed}
        if not found or not all(pin for _, pin in found.values()):
            return None
        return {tp: o for tp, (o, _) in found.items()}

    def commit_group(self, offsets, pin=False):
        self.committed.update({tp: (o, pin) for tp, o in offsets.items()})

    def latest(self) -> dict[TP, int]:
        return {tp: hw for tp, (_, hw) in self.watermarks(self.partitions()).items()}


class Simulation:
    def __init__(self, seed: int, steps: int = 60):
        self.rng = random.Random(seed)
        self.seed, self.steps, self.trace, self.stats = seed, steps, [], Stats()
        r = self.rng
        self.fail_on_data_loss = r.random() < 0.4
        self.max_rows = r.choice([None, None, 3, 7, 20])
        self.min_rows = r.choice([None, None, 2, 5]) if not self.max_rows or r.random() < 0.5 else None
        if self.max_rows and self.min_rows and self.min_rows > self.max_rows:
            self.min_rows = self.max_rows
        self.min_partitions = r.choice([None, 2, 5])
        self.brokers = Brokers()
        self.brokers.start_at = r.choice(["earliest", "latest"])
        self.initial: dict | None = None        # batch 0's start as first answered
        for t in ("a", "b")[:r.randint(1, 2)]:
            self.brokers.topics[t] = [[0, 0, 0] for _ in range(r.randint(1, 3))]
            self.brokers.epochs[t] = 0
        self.now = 0.0
        self.checkpoint: dict | None = None     # the last committed batch's end
        self.read: set[tuple] = set()           # (topic, partition, epoch, offset)
        self.exempt: dict[tuple, int] = {}      # (topic, partition, epoch) -> offsets below may be skipped
        self.lost: set[tuple] = set()           # records removed (retention, deletion) before they were read
        self.unread_removed = False
        self.idle_at: dict | None = None        # where a trigger that ran no batch started

    def fail(self, message: str):
        raise SimulationFailure(self.seed, len(self.trace), message, self.trace[-40:])

    def new_reader(self) -> StreamReader:
        opts = {"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribePattern": "^[ab]$",
                "failOnDataLoss": str(self.fail_on_data_loss).lower(), "startingOffsets": self.brokers.start_at,
                "maxTriggerDelay": "10s", "fetchOffset.retryIntervalMs": "0"}
        if self.max_rows:
            opts["maxOffsetsPerTrigger"] = str(self.max_rows)
        if self.min_rows:
            opts["minOffsetsPerTrigger"] = str(self.min_rows)
        if self.min_partitions:
            opts["minPartitions"] = str(self.min_partitions)
        reader = StreamReader(SourceOptions.parse(opts, streaming=True))
        reader._lookup = self.brokers
        reader.clock = lambda: self.now
        return reader

    # ------------------------------------------------------------------ history events
    def append(self):
        t = self.rng.choice(sorted(self.brokers.topics))
        p = self.rng.randrange(len(self.brokers.topics[t]))
        n = self.rng.randint(1, 6)
        self.brokers.topics[t][p][1] += n
        self.stats.appends += 1
        self.trace.append(f"append {n} to {t}-{p}")

    def add_partition(self):
        t = self.rng.choice(sorted(self.brokers.topics))
        if len(self.brokers.topics[t]) < 4:
            self.brokers.topics[t].append([0, 0, self.brokers.epochs[t]])
            # a partition the query read in an earlier incarnation of the topic: the same rule
            pos = from_json(self.checkpoint or self.initial or {})
            self.exempt[(t, len(self.brokers.topics[t]) - 1, self.brokers.epochs[t])] = pos.get(
                (t, len(self.brokers.topics[t]) - 1), 0)
            self.stats.partitions_added += 1
            self.trace.append(f"add partition {t}-{len(self.brokers.topics[t]) - 1}")

    def recreate(self):
        t = self.rng.choice(sorted(self.brokers.topics))
        for p, (low, high, epoch) in enumerate(self.brokers.topics[t]):
            self.lost.update((t, p, epoch, o) for o in range(low, high))
        self.brokers.epochs[t] += 1
        # Kafka drops a deleted topic's committed offsets from every group
        self.brokers.committed = {tp: c for tp, c in self.brokers.committed.items() if tp[0] != t}
        if self.checkpoint is None:
            self.initial = None   # the pin went with the topic: batch 0 starts where the options say, anew
        epoch = self.brokers.epochs[t]
        pos = from_json(self.checkpoint or self.initial or {})
        count = self.rng.randint(1, 3)
        for p in range(count):
            # Spark's rule: a re-created partition is read from where the query's position falls
            # back to; offsets below the old position may be skipped (reported as data loss).
            self.exempt[(t, p, epoch)] = pos.get((t, p), 0)
        self.brokers.topics[t] = [[0, self.rng.randint(0, 4), epoch] for _ in range(count)]
        self.stats.recreated += 1
        self.trace.append(f"recreate {t} with {len(self.brokers.topics[t])} partitions")

    def retention(self):
        t = self.rng.choice(sorted(self.brokers.topics))
        p = self.rng.randrange(len(self.brokers.topics[t]))
        low, high, epoch = self.brokers.topics[t][p]
        new_low = self.rng.randint(low, high)
        self.lost.update((t, p, epoch, o) for o in range(low, new_low) if (t, p, epoch, o) not in self.read)
        pos = from_json(self.checkpoint) if self.checkpoint else None
        if pos is not None and (t, p) in pos and new_low > pos[(t, p)] and not self.stats.recreated:
            self.unread_removed = True   # Spark's reportDataLoss: the query must fail with failOnDataLoss
        self.brokers.topics[t][p][0] = new_low
        self.stats.retention += 1
        self.trace.append(f"retention {t}-{p} log start {low} -> {new_low}")

    # ------------------------------------------------------------------ the query
    def trigger(self, reader: StreamReader, target: dict | None = None) -> bool:
        """One trigger; True when a batch ran."""
        if self.checkpoint is None:
            start = reader.initialOffset()
            if self.initial is None:
                self.initial = start
                for tp, off in from_json(start).items():   # the query reads from its start on
                    key = (*tp, self.brokers.topics[tp[0]][tp[1]][2])
                    self.exempt[key] = max(self.exempt.get(key, 0), off)
            elif any(off != from_json(self.initial).get(tp, off) for tp, off in from_json(start).items()):
                # (a partition gone since is left out, as one added since is: read from its start)
                self.fail(f"batch 0's start moved from {self.initial} to {start} before batch 0 finished")
        else:
            start = self.checkpoint
        self.now += self.rng.choice([0.5, 3, 12])
        before = self.brokers.latest()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if end == start:
            self.idle_at = start
            if self.min_rows and target is None:
                self.stats.delayed += 1
            return False
        begin, finish = from_json(start), from_json(end)
        if self.rng.random() < 0.3:
            self.append()                  # producers write while Spark plans the batch
        if self.checkpoint is None and reader.initialOffset() != start:   # Spark asks again to plan batch 0
            self.fail(f"batch 0's start changed between constructing and planning it: {start}")
        parts = [p.value for p in reader.partitions(start, end)]
        self.check_batch(begin, finish, before, parts)
        for s in parts:
            low, high, epoch = self.brokers.topics[s.topic][s.partition]
            for o in range(s.start, s.until):
                record = (s.topic, s.partition, epoch, o)
                if record in self.read:
                    self.fail(f"{record} read twice")
                if low <= o < high:
                    self.read.add(record)
        reader.commit(end)
        self.checkpoint = end
        self.stats.batches += 1
        self.trace.append(f"batch {start} -> {end}: {[tuple(s) for s in parts]}")
        return True

    def check_batch(self, begin, finish, latest, parts):
        by_tp: dict[TP, list] = {}
        for s in parts:
            by_tp.setdefault((s.topic, s.partition), []).append((s.start, s.until))
        for tp, ranges in by_tp.items():
            ranges.sort()
            for (_, u), (s2, _) in zip(ranges, ranges[1:]):
                if u != s2:
                    self.fail(f"{tp}'s slices {ranges} leave a gap or overlap")
            low = self.brokers.topics[tp[0]][tp[1]][0]
            first = max(begin.get(tp, 0), low)
            if ranges[0][0] != first or ranges[-1][1] != finish[tp]:
                self.fail(f"{tp}'s slices {ranges} do not tile [{first}, {finish[tp]})")
        for tp, off in finish.items():
            if off > latest.get(tp, off):
                self.fail(f"{tp} planned to {off}, past its latest offset {latest[tp]}")
        if self.max_rows:
            first = {**{tp: self.brokers.topics[tp[0]][tp[1]][0] for tp in finish}, **begin}   # new: from earliest
            moved = {tp: finish[tp] - first[tp] for tp in finish if finish[tp] > first[tp]}
            if sum(moved.values()) > self.max_rows + len(moved):   # Spark rounds a share under 1 up
                self.fail(f"batch of {sum(moved.values())} offsets over maxOffsetsPerTrigger={self.max_rows}: "
                          f"{to_json(begin)} -> {to_json(finish)}, latest {to_json(latest)}")
            if sum(latest.get(tp, 0) - first[tp] for tp in moved) > self.max_rows:
                self.stats.rate_limited += 1

    def available_now(self):
        reader = self.new_reader()
        reader.prepareForTriggerAvailableNow()
        target = self.brokers.latest()
        if self.checkpoint is None:
            reader.initialOffset()
        self.stats.available_now_runs += 1
        self.trace.append(f"AvailableNow run to {to_json(target)}")
        for _ in range(200):
            if self.rng.random() < 0.3:
                self.append()        # producers go on: not this run's
            if not self.trigger(reader, target):
                break
        ended = from_json(self.checkpoint or self.idle_at or {})
        want = {tp: off for tp, off in target.items() if tp in self.brokers.latest()}
        short = {tp: (ended.get(tp), off) for tp, off in want.items() if ended.get(tp, 0) != off}
        if short:
            self.fail(f"AvailableNow run ended at {to_json(ended)}, not at its target (got, wanted): {short}")

    def run(self) -> Stats:
        reader = self.new_reader()
        try:
            for _ in range(self.steps):
                roll = self.rng.random()
                if roll < 0.35:
                    self.append()
                elif roll < 0.40:
                    self.add_partition()
                elif roll < 0.43:
                    self.recreate()
                elif roll < 0.50:
                    self.retention()
                elif roll < 0.55:
                    reader = self.new_reader()
                    self.stats.restarts += 1
                    self.trace.append("restart from the checkpoint")
                elif roll < 0.57:
                    # a new checkpoint, the same group: a new query (Spark re-reads what the start says)
                    self.checkpoint = self.initial = self.idle_at = None
                    self.read, self.unread_removed = set(), False
                    reader = self.new_reader()
                    self.stats.lost_checkpoints += 1
                    self.trace.append("restart with a lost checkpoint")
                elif roll < 0.60:
                    self.available_now()
                    reader = self.new_reader()
                else:
                    self.trigger(reader)
            # quiet: trigger until nothing is left (maxTriggerDelay passes)
            for _ in range(300):
                self.now += 20
                if not self.trigger(reader):
                    break
        except DataLossError as e:
            if not self.fail_on_data_loss:
                self.fail(f"failOnDataLoss=false yet the query failed: {e}")
            self.stats.data_loss_failures += 1
            self.trace.append(f"query failed: {e}")
            return self.stats
        if self.fail_on_data_loss and self.unread_removed:
            self.fail("records the query had not read were removed, yet failOnDataLoss=true did not fail it")
        self.check_quiet()
        return self.stats

    def check_quiet(self):
        for t, parts in self.brokers.topics.items():
            for p, (low, high, epoch) in enumerate(parts):
                floor = self.exempt.get((t, p, epoch), 0)
                missed = [o for o in range(max(low, floor), high) if (t, p, epoch, o) not in self.read]
                if missed:
                    self.fail(f"{t}-{p} (incarnation {epoch}) records {missed} never read")


def run_seed(seed: int) -> Stats:
    return Simulation(seed).run()
