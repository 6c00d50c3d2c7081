"""The CDC → Delta apply (the real :class:`~spark_sink.delta.apply.DeltaApply` writing with
delta-rs, no Spark) over random source histories, against a model of the source table (the test is
tests/simulation/test_delta_apply_simulation.py).

A history is Debezium's snapshot-then-stream of one table ``public.t`` (key ``id``): snapshot
reads (``r``, at the slot's consistent point, read over a time in which the stream's first
transactions commit), then transactions of inserts, updates, deletes (each followed by its
tombstone), primary-key changes (delete + tombstone + create with ``__debezium.oldkey``),
truncates, a column added (with or without a Connect ``default``), ``qty`` widened from int32 to
int64, and the odd poison record (a dead letter under ``errors_tolerance=all``). The topic is cut
into micro-batches at transaction boundaries at random; the shell (Spark's role) crashes before
the Delta commit, after it but before the offset commit (the same batch id replayed with the same
records), loses its checkpoint (a new app id, batch ids from 0, the source from an earlier
position, a different split), and redelivers changes the table holds already.

Invariants after every step: SCD-1: the table is the model's rows at the furthest position
applied (nothing lost, nothing twice, never backwards); SCD-2: every version of every key in
order with its (op, lsn, order, valid_from, valid_to), exactly one current row per live key
holding the model's row, none for a deleted key, a closed row's ``__valid_to`` the next
version's ``__valid_from`` (a snapshot row's ``__valid_from`` is its read time, docs/cdc.md);
and every run of a batch id returns the same dead letters.
"""
from __future__ import annotations

import dataclasses
import random
import tempfile

import pyarrow as pa
from deltalake import DeltaTable

from spark_sink.delta import DeltaApply, delta_apply
from spark_sink.delta.fold import Watermarks
from spark_sink.delta.table import SinkTable
from tests.delta_cdc import KAFKA_SCHEMA, PLACEHOLDER, Events
from tests.simulation.seeds import ModelFailure

TABLE = "public.t"
DEFAULT_TIER = 5
CONSISTENT_POINT = 100


@dataclasses.dataclass
class Stats:
    histories: int = 0
    snapshot_rows: int = 0
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    key_changes: int = 0
    truncates: int = 0
    columns_added_plain: int = 0
    columns_added_with_default: int = 0
    widenings: int = 0
    poison_records: int = 0
    unchanged_toast: int = 0
    misfit_records: int = 0
    batches_applied: int = 0
    crashes_before_commit: int = 0
    crashes_after_commit: int = 0
    replays_skipped: int = 0
    lost_checkpoints: int = 0
    duplicates_redelivered: int = 0
    changes_held: int = 0
    dead_letters_compared: int = 0

    def add(self, other: "Stats") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclasses.dataclass(frozen=True)
class Event:
    """One change of the model's history: ``op`` r/c/u/d/T (truncate); ``row`` the after image
    (the before image for d); ``ts`` in ms (a snapshot row's read time)."""
    op: str
    row: dict | None
    lsn: int
    order: int
    ts: int


@dataclasses.dataclass
class SchemaState:
    qty: str = "int32"
    tier: str | None = None    # None, "plain" or "default"

    def fields(self) -> list[dict]:
        out = [{"type": "int32", "optional": False, "field": "id"},
               {"type": "string", "optional": True, "field": "name"},
               {"type": self.qty, "optional": True, "field": "qty"}]
        if self.tier == "plain":
            out.append({"type": "int32", "optional": True, "field": "tier"})
        elif self.tier == "default":
            out.append({"type": "int32", "optional": False, "default": DEFAULT_TIER, "field": "tier"})
        return out


@dataclasses.dataclass(frozen=True)
class SimConfig:
    keys: int | None = None          # None: 1-6 at random
    txns: int = 10
    topic_cuts: bool | None = None   # a batch may end inside a transaction (read through topics); None: at random
    plants: frozenset = frozenset()  # bugs planted to show the invariants catch them (see Simulation.apply)


def history(rng: random.Random, stats: Stats, keys: int = 6, txns: int = 10, topic_cuts: bool = False):
    """(records, boundaries, events): the topic's records in order, the record indexes a batch may
    end at (whole transactions and snapshot rows one by one; with ``topic_cuts`` any record, as a
    batch read from a topic with ``maxOffsetsPerTrigger`` can end), and per record index the model
    :class:`Event` it carries (None for a tombstone or a poison record)."""
    schema = SchemaState()
    events = Events(TABLE, fields=schema.fields(), topic="shop.public.t")
    state: dict[int, dict] = {}
    records, carried, boundaries = [], [], [0]

    def emit(record, event):
        records.append(record)
        carried.append(event)

    # The snapshot: the table at the consistent point, read in chunks while the stream commits.
    for k in range(rng.randint(0, keys)):
        state[k] = {"id": k, "name": f"s{k}", "qty": rng.randrange(100)}
    read_ts, commit_ts = 1000, 1000
    for order, k in enumerate(sorted(state)):
        read_ts += rng.randint(0, 3)
        emit(events.change("r", after=dict(state[k]), lsn=CONSISTENT_POINT, order=order, ts_ms=read_ts,
                           fields=schema.fields()), Event("r", dict(state[k]), CONSISTENT_POINT, order, read_ts))
        boundaries.append(len(records))
        stats.snapshot_rows += 1
    lsn = CONSISTENT_POINT
    for step in range(txns):
        lsn += rng.randint(1, 20)
        commit_ts += rng.randint(0, 4)
        changes = []   # (record, event)
        glued = set()  # indexes in changes a batch does not end after
        order = 0

        def change(op, before=None, after=None, old_key=None, event=True, toast=False):
            nonlocal order
            row = after if op not in ("d", "t") else before
            sent = dict(after, name=PLACEHOLDER) if toast else after   # an unchanged TOAST value
            stats.unchanged_toast += toast
            rec = events.change(op if op != "T" else "truncate", before=before, after=sent, lsn=lsn, order=order,
                                ts_ms=commit_ts, fields=schema.fields(), old_key=old_key)
            if op == "t":   # a tombstone: the key, no value
                rec = dict(rec, key=events._json(None, {"id": before["id"]}), value=None)
            changes.append((rec, Event(op, dict(row) if row else None, lsn, order, commit_ts)
                            if event and op != "t" else None))
            order += 1

        roll = rng.random()
        if roll < 0.05:
            change("T")
            state.clear()
            stats.truncates += 1
        elif roll < 0.25 and schema.tier is None:
            schema.tier = "default" if rng.random() < 0.65 else "plain"
            for row in state.values():
                row["tier"] = DEFAULT_TIER if schema.tier == "default" else None
            if schema.tier == "default":
                stats.columns_added_with_default += 1
            else:
                stats.columns_added_plain += 1
        elif roll < 0.32 and schema.qty == "int32":
            schema.qty = "int64"
            stats.widenings += 1
        for _ in range(rng.randint(1, 3)):
            k = rng.randrange(keys)
            if k not in state:
                big = 2**40 if schema.qty == "int64" else 0   # a value only the widened column holds
                row = {"id": k, "name": f"n{step}", "qty": rng.randrange(1000) + big}
                if schema.tier is not None:
                    row["tier"] = rng.choice((DEFAULT_TIER, 7, None if schema.tier == "plain" else 8))
                state[k] = row
                change("c", after=dict(row))
                stats.inserts += 1
                continue
            r = rng.random()
            if r < 0.55:
                toast = rng.random() < 0.3
                row = dict(state[k], name=state[k]["name"] if toast else f"u{step}.{rng.randrange(100)}")
                if toast or rng.random() < 0.5:
                    row["qty"] = rng.randrange(1000)
                if schema.tier is not None and rng.random() < 0.3:
                    row["tier"] = rng.randrange(3)
                state[k] = row
                change("u", before=None, after=dict(row), toast=toast)
                stats.updates += 1
            elif r < 0.8:
                old = state.pop(k)
                change("d", before=dict(old))
                change("t", before=dict(old))
                stats.deletes += 1
            else:
                new = next((n for n in range(keys) if n not in state), None)
                if new is None:
                    continue
                old = state.pop(k)
                row = dict(old, id=new)
                moved_toast = rng.random() < 0.4
                change("d", before=dict(old))
                change("t", before=dict(old))
                if moved_toast:   # no batch ends between the two: the documented SCD-1 limit (docs/cdc.md)
                    glued.update((len(changes) - 2, len(changes) - 1))
                change("c", after=dict(row), old_key={"id": k}, toast=moved_toast)
                state[new] = row
                stats.key_changes += 1
        if rng.random() < 0.08:   # a poison record between two transactions
            rec = dict(events.change("c", after={"id": 0, "name": "x", "qty": 0}, lsn=lsn, order=order, ts_ms=commit_ts,
                                     fields=schema.fields()), value=b"{not json")
            changes.append((rec, None))
            stats.poison_records += 1
        elif rng.random() < 0.1:   # a change no column type can hold: a dead letter found against the table's schema
            changes.append((events.change("c", after={"id": 90 + step, "name": "x", "qty": 2**70}, lsn=lsn, order=order,
                                          ts_ms=commit_ts, fields=schema.fields()), None))
            stats.misfit_records += 1
        for i, (rec, event) in enumerate(changes):
            emit(rec, event)
            if topic_cuts and i + 1 < len(changes) and i not in glued:
                boundaries.append(len(records))
        if boundaries[-1] != len(records):
            boundaries.append(len(records))
    return records, boundaries, carried


# ------------------------------------------------------------------------------ the model
def model_rows(carried: list, upto: int) -> dict[int, dict]:
    """SCD-1: the source table after the first ``upto`` records."""
    rows: dict[int, dict] = {}
    arrived = False
    for e in carried[:upto]:
        if e is None:
            continue
        if e.row is not None and "tier" in e.row and not arrived:   # the column arrived: every row has it
            arrived = True
            for r in rows.values():
                r.setdefault("tier", DEFAULT_TIER if e.row["_default"] else None)
        if e.op == "T":
            rows.clear()
        elif e.op == "d":
            rows.pop(e.row["id"], None)
        else:
            rows[e.row["id"]] = dict(e.row)
    return rows


def model_history(carried: list, upto: int) -> dict[int, list[tuple]]:
    """SCD-2: per key, (op, lsn, order, valid_from_ms, valid_to_ms, is_current, name, qty)."""
    out: dict[int, list[list]] = {}
    live: dict[int, list] = {}
    for e in carried[:upto]:
        if e is None:
            continue
        if e.op == "T":
            for v in live.values():
                v[4], v[5] = e.ts, False
            live.clear()
            continue
        k = e.row["id"]
        if k in live:
            live[k][4], live[k][5] = e.ts, False
        version = [e.op, e.lsn, e.order, e.ts, e.ts if e.op == "d" else None, e.op != "d", e.row["name"], e.row["qty"]]
        out.setdefault(k, []).append(version)
        if e.op == "d":
            live.pop(k, None)
        else:
            live[k] = version
    return {k: [tuple(v) for v in vs] for k, vs in out.items()}


def _ms(ts) -> int | None:
    if ts is None:
        return None
    return int(ts.timestamp() * 1000 + 0.5) if hasattr(ts, "timestamp") else ts // 1000


class Simulation:
    def __init__(self, seed: int, scd_type: int = 1, config: SimConfig = SimConfig(), trace: list | None = None):
        self.seed, self.scd_type, self.config = seed, scd_type, config
        self.rng, self.stats, self.step = random.Random(seed), Stats(), 0
        self.trace = trace if trace is not None else []

    def fail(self, why: str):
        raise ModelFailure(f"step {self.step}: {why}")

    def run(self) -> Stats:
        cuts = self.config.topic_cuts if self.config.topic_cuts is not None else self.rng.random() < 0.3
        keys = self.config.keys if self.config.keys is not None else self.rng.randint(1, 6)
        records, boundaries, carried = history(self.rng, self.stats, keys, self.config.txns, cuts)
        self.carried = _with_defaults(records, carried)
        self.stats.histories += 1
        self.trace.append(f"scd{self.scd_type} records: " + " ".join(
            f"{i}:{e.op if e else ('tomb' if r['value'] is None else 'poison')}{(e.row or {}).get('id', '') if e else ''}"
            for i, (r, e) in enumerate(zip(records, carried))))
        with tempfile.TemporaryDirectory() as path:
            self.path = path
            self.drive(records, boundaries)
        return self.stats

    def sink(self, app: int):
        return delta_apply(table_path=self.path, scd_type=self.scd_type, app_id=f"app{app}", errors_tolerance="all")

    def drive(self, records, boundaries) -> None:
        app, batch_id, position = 0, 0, 0       # the checkpoint: app id, next batch id, committed source position
        apply = self.sink(app)
        applied_to = 0                          # the furthest record index the table must hold
        dead: dict[tuple[int, int], list] = {}  # (app, batch id) -> its dead letters
        end_of = len(records)
        guard = 0
        while position < end_of and guard < 200:
            guard += 1
            self.step += 1
            ends = [b for b in boundaries if b > position]
            end = ends[min(len(ends) - 1, self.rng.randrange(5))]
            start = position
            if position and self.rng.random() < 0.15:   # the source redelivers some changes the table holds
                start = self.rng.choice([b for b in boundaries if b < position])
                self.stats.duplicates_redelivered += 1
            batch = pa.Table.from_pylist(records[start:end], schema=KAFKA_SCHEMA)
            roll = self.rng.random()
            if roll < 0.1:
                self.trace.append(f"step {self.step}: app{app} batch {batch_id} [{start}:{end}) crashes before commit")
                self.stats.crashes_before_commit += 1
                apply = self.sink(app)
                continue
            self.trace.append(f"step {self.step}: app{app} batch {batch_id} [{start}:{end})")
            result = self.apply(apply, batch, batch_id)
            applied_to = max(applied_to, end)
            self.stats.batches_applied += 1
            self.stats.changes_held += sum(t.held for t in result.tables.values())
            letters = [d.record.coordinates for d in result.dead_letters]
            dead[(app, batch_id)] = letters
            self.check(applied_to)
            if roll < 0.3:   # crash after the Delta commit, before the offset commit: the same batch again
                self.stats.crashes_after_commit += 1
                apply = self.sink(app)
                again = self.apply(apply, batch, batch_id)
                if any(t.skipped for t in again.tables.values()):
                    self.stats.replays_skipped += 1
                got = [d.record.coordinates for d in again.dead_letters]
                self.stats.dead_letters_compared += bool(letters)
                if got != letters:
                    self.fail(f"batch {batch_id} replayed returned dead letters {got}, its first run {letters}")
                self.trace.append(f"  replayed batch {batch_id}: {[t.skipped for t in again.tables.values()]}")
                self.check(applied_to)
            position, batch_id = end, batch_id + 1
            if self.rng.random() < 0.12:   # the checkpoint is lost: a new query from an earlier position
                app, batch_id = app + 1, 0
                position = self.rng.choice([b for b in boundaries if b <= position][-4:] + [0])
                apply = self.sink(app)
                self.stats.lost_checkpoints += 1
                self.trace.append(f"  checkpoint lost: app{app} from record {position}")

    def apply(self, apply, batch, batch_id):
        """``apply(batch, batch_id)``; with planted bugs: ``no_replay_check`` (the application
        transaction is never read), ``no_marks`` (the high-water marks hold nothing),
        ``replay_loses_rejects`` (a skipped replay returns no dead letters), ``no_empty_commit`` (a
        MERGE that changed no row leaves no record of the batch)."""
        plants = self.config.plants
        saved = []
        for plant, owner, name, fake in (
                ("no_replay_check", SinkTable, "transaction_version", lambda self, app_id: None),
                ("no_marks", Watermarks, "holds", lambda self, stream, position: False),
                ("replay_loses_rejects", DeltaApply, "_rejects_of_applied", lambda self, *a: None),
                ("no_empty_commit", SinkTable, "record", lambda self, props: None)):
            if plant in plants:
                saved.append((owner, name, getattr(owner, name)))
                setattr(owner, name, fake)
        try:
            return apply(batch, batch_id)
        finally:
            for owner, name, original in saved:
                setattr(owner, name, original)

    # ------------------------------------------------------------------------------ invariants
    def rows(self) -> list[dict]:
        if not DeltaTable.is_deltatable(self.path):
            return []
        return DeltaTable(self.path).to_pyarrow_table().to_pylist()

    def check(self, upto: int) -> None:
        rows = self.rows()
        expected = model_rows(self.carried, upto)
        if self.scd_type == 1:
            got = {r["id"]: r for r in rows}
            if len(got) != len(rows):
                self.fail(f"two rows of one key: {sorted(r['id'] for r in rows)}")
            want = {k: {c: v for c, v in r.items() if not c.startswith("_")} for k, r in expected.items()}
            have = {k: {c: r.get(c) for c in want[k]} if k in want else r for k, r in got.items()}
            if have != want:
                self.fail(f"table after record {upto}: {_diff(have, want)}")
            return
        current = {}
        for r in rows:
            if r["__is_current"]:
                if r["id"] in current:
                    self.fail(f"two current rows of key {r['id']}")
                current[r["id"]] = r
        want = {k: {c: v for c, v in r.items() if not c.startswith("_")} for k, r in expected.items()}
        have = {k: {c: r.get(c) for c in want[k]} if k in want else r for k, r in current.items()}
        if have != want:
            self.fail(f"current rows after record {upto}: {_diff(have, want)}")
        history_ = {}
        for r in sorted(rows, key=lambda r: (r["__lsn"], r["__order"])):
            history_.setdefault(r["id"], []).append((r["__op"], r["__lsn"], r["__order"], _ms(r["__valid_from"]),
                                                    _ms(r["__valid_to"]), r["__is_current"], r["name"], r["qty"]))
        model = model_history(self.carried, upto)
        if history_ != model:
            self.fail(f"history after record {upto}: {_diff(history_, model)}")


def _with_defaults(records, carried) -> list:
    """The events with each row's ``_default`` flag: its schema gives ``tier`` a default."""
    out = []
    for rec, e in zip(records, carried):
        if e is not None and "tier" in (e.row or {}):
            e = dataclasses.replace(e, row=dict(e.row, _default=b'"default"' in (rec["value"] or b"")))
        out.append(e)
    return out


def _diff(have: dict, want: dict) -> str:
    keys = sorted(set(have) | set(want))
    return "; ".join(f"key {k}: table {have.get(k)} model {want.get(k)}" for k in keys if have.get(k) != want.get(k))


def run(seed: int, scd_type: int, config: SimConfig, trace: list) -> Stats:
    """One seeded history under ``scd_type``; raises :class:`ModelFailure` (``trace`` tells how)."""
    return Simulation(seed, scd_type, config, trace).run()
