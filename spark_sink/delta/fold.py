"""A batch's changes folded per key into what one MERGE does; the table's high-water marks.

Pure. Changes of a key are applied in position order (commit LSN, order in the transaction); a
position seen twice is one change (a replay inside the batch).

* **SCD type 1** (:func:`fold_scd1`): the last change of a key decides: :class:`Upsert` with the
  row, or :class:`Delete`. A column Debezium could not read (an unchanged TOAST value,
  :data:`UNAVAILABLE`) takes the key's previous value in the batch, else stays UNAVAILABLE and the
  shell fills it from the table (:func:`resolve`).
* **SCD type 2** (:func:`fold_scd2`): every change becomes a history row (:class:`Version`). A
  delete's row carries the key's last values (it ends the row's life, it changes no column) and is
  never current. :func:`history_rows` gives ``__valid_from`` (the change's source time),
  ``__valid_to`` (the next change's time; null while current; a delete row is an instant, its own
  time), ``__is_current``, ``__op``, ``__lsn`` and ``__order``.
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
    key: tuple
    row: dict
    position: tuple[int, int]


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


def _ordered(changes: Iterable[Change]) -> dict[tuple, list[Change]]:
    by_key: dict[tuple, dict[tuple, Change]] = {}
    for c in changes:
        by_key.setdefault(c.key, {}).setdefault(c.position, c)
    return {k: [v[p] for p in sorted(v)] for k, v in by_key.items()}


def _carry(row: dict, previous: dict | None) -> dict:
    if previous is None or not any(v is UNAVAILABLE for v in row.values()):
        return row
    return {c: previous.get(c, UNAVAILABLE) if v is UNAVAILABLE else v for c, v in row.items()}


def fold_scd1(changes: Iterable[Change]) -> dict[tuple, Upsert | Delete]:
    """The final action per key."""
    out: dict[tuple, Upsert | Delete] = {}
    for key, ordered in _ordered(changes).items():
        state: Upsert | Delete | None = None
        for c in ordered:
            if c.op == "d":
                state = Delete(key, c.position)
            else:
                previous = state.row if isinstance(state, Upsert) else None
                state = Upsert(key, _carry(dict(c.row), previous), c.position)
        out[key] = state
    return out


def fold_scd2(changes: Iterable[Change], key_columns: Iterable[str]) -> dict[tuple, list[Version]]:
    """The history rows per key, in position order."""
    key_columns = tuple(key_columns)
    out: dict[tuple, list[Version]] = {}
    for key, ordered in _ordered(changes).items():
        versions: list[Version] = []
        for c in ordered:
            previous = versions[-1].row if versions else None
            if c.op == "d":
                row = {col: (c.row.get(col) if col in key_columns else UNAVAILABLE) for col in
                       (previous or c.row)}
                row.update({col: UNAVAILABLE for col in c.row if col not in row})
                versions.append(Version(key, _carry(row, previous), "d", c.position, c.ts_us, dict(c.row)))
            else:
                versions.append(Version(key, _carry(dict(c.row), previous), c.op, c.position, c.ts_us))
        out[key] = versions
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


def history_rows(versions: list[Version], current: Mapping | None, truncates: list[Truncate] = ()) -> list[dict]:
    """A key's history rows with their validity; ``current`` is the table's current row (for
    unavailable values). A truncate between two versions ends the earlier one; it writes no row."""
    rows, previous = [], current
    if _truncated_between(truncates, None, versions[0].position) is not None:
        previous = None
    for i, v in enumerate(versions):
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

