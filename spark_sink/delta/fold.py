"""A batch's changes folded per key into what one MERGE does; the table's high-water marks.

Pure. Changes are applied in position order (commit LSN, order in the transaction); a change of a
key seen twice at one position is one change (a replay inside the batch). Folds are keyed by
``(source table, key)``: two tables' equal keys are different rows (the shell refuses to write two
source tables into one Delta table).

* **SCD type 1** (:func:`fold_scd1`): the last change of a key decides: :class:`Upsert` with the
  row, or :class:`Delete`. A column Debezium could not read (an unchanged TOAST value,
  :data:`UNAVAILABLE`) takes the key's previous value in the batch, else stays UNAVAILABLE and the
  shell fills it from the table's row of the key named by ``fill`` (:func:`resolve`).
* A **primary-key change** is delete(old key) + tombstone + create(new key) whose
  :attr:`~spark_sink.delta.records.Change.old_key` names the old key; its unchanged TOAST values
  are the old row's: the old key's values just before its delete in the batch, else the table's
  row of the old key (``fill``), read before the MERGE deletes it. Both SCD types.
* **SCD type 2** (:func:`fold_scd2`): every change becomes a history row (:class:`Version`). A
  delete's row carries the key's last values (it ends the row's life, it changes no column) and is
  never current. :func:`history_rows` gives ``__valid_from`` (the change's source time),
  ``__valid_to`` (the next change's time; null while current; a delete row is an instant, its own
  time), ``__is_current``, ``__op``, ``__lsn`` and ``__order``.
* A **tombstone** (:attr:`~spark_sink.delta.records.Change.tombstone`) is a delete of its key
  unless the key's last change in the batch is a delete (its own delete, just before it). The
  shell drops, before folding, an SCD-2 tombstone of a key the table holds no current row of.
* A **truncate** (``op`` ``t``) empties an SCD-1 table; in SCD-2 it ends every current row at its
  time and writes no rows of its own.

**Replays across batches** are decided by :class:`Watermarks`: per source stream (topic, partition)
the highest position the table holds (the riverlog.cdc header position, else the offset), recorded
in the Delta commit metadata with every commit. A stream delivers its changes in position order
and batches commit in order, so a change at or below
the mark is already in the table: it is dropped, whatever batch id carries it. This is what lets a
restarted query whose checkpoint was deleted replay from the source's committed position without
applying anything twice, and why an older change can never move a row backwards.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from spark_sink.delta.records import Change
from spark_sink.delta.schema import UNAVAILABLE

METADATA_COLUMNS = ("__valid_from", "__valid_to", "__is_current", "__op", "__lsn", "__order")


@dataclass(frozen=True)
class Upsert:
    """``fill``: the key whose table row fills what stays UNAVAILABLE (None: this key)."""
    key: tuple
    row: dict
    position: tuple[int, int]
    fill: tuple | None = None


@dataclass(frozen=True)
class Delete:
    key: tuple
    position: tuple[int, int]


@dataclass(frozen=True)
class Version:
    """One SCD-2 history row before its validity is known."""
    key: tuple
    row: dict
    op: str
    position: tuple[int, int]
    ts_us: int
    fallback: dict = field(default_factory=dict, compare=False)  # a delete's before image
    fill: tuple | None = None   # the key whose table row fills what stays UNAVAILABLE (None: this key)


Key = tuple  # (source table, key values)


def _in_order(changes: Iterable[Change]) -> list[Change]:
    """The batch's changes in position order, a key's change at a position once."""
    seen: dict[tuple, Change] = {}
    for c in changes:
        seen.setdefault((c.table, c.key, c.position), c)
    return sorted(seen.values(), key=lambda c: c.position)


def _carry(row: dict, previous: dict | None) -> dict:
    if previous is None or not any(v is UNAVAILABLE for v in row.values()):
        return row
    return {c: previous.get(c, UNAVAILABLE) if v is UNAVAILABLE else v for c, v in row.items()}


def fold_scd1(changes: Iterable[Change]) -> dict[Key, Upsert | Delete]:
    """The final action per ``(table, key)``."""
    out: dict[Key, Upsert | Delete] = {}
    before_delete: dict[Key, Upsert | None] = {}   # a key's state when it was last deleted
    for c in _in_order(changes):
        k = (c.table, c.key)
        state = out.get(k)
        if c.tombstone and isinstance(state, Delete):
            continue   # its delete's tombstone
        if c.op == "d":
            before_delete[k] = state if isinstance(state, Upsert) else None
            out[k] = Delete(c.key, c.position)
            continue
        previous, fill = (state, state.fill) if isinstance(state, Upsert) else (None, None)
        if c.old_key is not None and c.old_key != c.key:
            previous = before_delete.get((c.table, c.old_key))
            fill = c.old_key if previous is None or previous.fill is None else previous.fill
        out[k] = Upsert(c.key, _carry(dict(c.row), previous.row if previous else None), c.position, fill)
    return out


def fold_scd2(changes: Iterable[Change], key_columns: Iterable[str]) -> dict[Key, list[Version]]:
    """The history rows per ``(table, key)``, in position order."""
    key_columns = tuple(key_columns)
    out: dict[Key, list[Version]] = {}
    deleted: dict[Key, Version] = {}   # a key's last delete row: its values when it was deleted
    for c in _in_order(changes):
        k = (c.table, c.key)
        versions = out.setdefault(k, [])
        last = versions[-1] if versions else None
        previous, fill = (last.row, last.fill) if last else (None, None)
        if c.tombstone and last is not None and last.op == "d":
            continue   # its delete's tombstone
        if c.op == "d":
            row = {col: (c.row.get(col) if col in key_columns else UNAVAILABLE) for col in
                   (previous or c.row)}
            row.update({col: UNAVAILABLE for col in c.row if col not in row})
            versions.append(Version(c.key, _carry(row, previous), "d", c.position, c.ts_us, dict(c.row), fill))
            deleted[k] = versions[-1]
            continue
        if c.old_key is not None and c.old_key != c.key:
            source = deleted.get((c.table, c.old_key))
            previous = source.row if source is not None else None
            fill = source.fill if source is not None and source.fill is not None else c.old_key
        versions.append(Version(c.key, _carry(dict(c.row), previous), c.op, c.position, c.ts_us, fill=fill))
    return out


def unresolved(rows: Iterable[dict]) -> bool:
    return any(v is UNAVAILABLE for r in rows for v in r.values())


def resolve(row: dict, current: Mapping | None, fallback: Mapping | None = None) -> dict:
    """Fill UNAVAILABLE from the table's current row, then a delete's before image, else null."""
    if not any(v is UNAVAILABLE for v in row.values()):
        return row
    out = {}
    for c, v in row.items():
        if v is UNAVAILABLE:
            v = current.get(c) if current is not None and c in current else (fallback or {}).get(c)
            v = None if v is UNAVAILABLE else v
        out[c] = v
    return out


Truncate = tuple  # (position, ts_us) of a TRUNCATE of the table


def split_truncates(changes: Iterable[Change]) -> tuple[list[Change], list[Truncate]]:
    """(row changes, the table's truncates in position order)."""
    rows, truncates = [], set()
    for c in changes:
        if c.op == "t":
            truncates.add((c.position, c.ts_us))
        else:
            rows.append(c)
    return rows, sorted(truncates)


def after_last_truncate(changes: list[Change], truncates: list[Truncate]) -> list[Change]:
    """SCD-1: a truncate empties the table, so only the changes after the last one matter."""
    return [c for c in changes if c.position > truncates[-1][0]] if truncates else changes


def _truncated_between(truncates: list[Truncate], start, end) -> Truncate | None:
    return next((t for t in truncates if (start is None or t[0] > start) and (end is None or t[0] < end)), None)


def close_time(versions: list[Version], truncates: list[Truncate] = ()) -> int:
    """When the table's current row of a key ends: the batch's first truncate before the key's
    first version, else that version."""
    t = _truncated_between(truncates, None, versions[0].position)
    return t[1] if t is not None else versions[0].ts_us


def history_rows(versions: list[Version], current: Mapping | None, truncates: list[Truncate] = (),
                 rows_of: Mapping[tuple, Mapping] | None = None) -> list[dict]:
    """A key's history rows with their validity; ``current`` is the table's current row (for
    unavailable values), ``rows_of`` the table's rows of the keys versions are filled from (a
    primary-key change's old key). A truncate between two versions ends the earlier one; it
    writes no row."""
    rows, previous = [], current
    for i, v in enumerate(versions):
        if i == 0 or v.fill != versions[i - 1].fill:
            if _truncated_between(truncates, None, v.position) is not None:
                previous = None
            elif v.fill is not None:
                previous = (rows_of or {}).get(v.fill)
        row = resolve(v.row, previous, v.fallback)
        last = i == len(versions) - 1
        cut = _truncated_between(truncates, v.position, None if last else versions[i + 1].position)
        valid_to = v.ts_us if v.op == "d" else cut[1] if cut else (None if last else versions[i + 1].ts_us)
        rows.append({**row, "__valid_from": v.ts_us, "__valid_to": valid_to,
                     "__is_current": last and v.op != "d" and cut is None, "__op": v.op,
                     "__lsn": v.position[0], "__order": v.position[1]})
        previous = row if cut is None else None
    return rows


# ------------------------------------------------------------------------------ watermarks
Stream = tuple[str, int]


@dataclass(frozen=True)
class Watermarks:
    """Highest position held per source stream ``(topic, partition)``; immutable."""
    marks: Mapping[Stream, tuple[int, int]] = field(default_factory=dict)

    def holds(self, stream: Stream, position: tuple[int, int]) -> bool:
        mark = self.marks.get(stream)
        return mark is not None and tuple(position) <= tuple(mark)

    def split(self, changes: Iterable[Change]) -> tuple[list[Change], list[Change]]:
        """(changes the table does not hold yet, changes it holds)."""
        fresh, held = [], []
        for c in changes:
            (held if self.holds((c.record.topic, c.record.partition), c.stream_mark) else fresh).append(c)
        return fresh, held

    def advanced(self, positions: Iterable[tuple[Stream, tuple[int, int]]]) -> "Watermarks":
        marks = dict(self.marks)
        for stream, position in positions:
            if stream not in marks or tuple(position) > tuple(marks[stream]):
                marks[stream] = tuple(position)
        return Watermarks(marks)

    def to_json(self) -> dict:
        return {f"{t}/{p}": list(pos) for (t, p), pos in sorted(self.marks.items())}

    @classmethod
    def from_json(cls, doc: Mapping | None) -> "Watermarks":
        marks = {}
        for name, pos in (doc or {}).items():
            topic, _, partition = name.rpartition("/")
            marks[(topic, int(partition))] = (int(pos[0]), int(pos[1]))
        return cls(marks)

