"""Property tests: a table grouped and summed with a subtractor always equals the sums recomputed
from the table's current rows, and a task restored from its changelogs continues identically."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.aggregate import KTableAggregate
from streams.stores import DictBacking
from streams.table import KTableRepartitionMap, KTableSource
from tests.streams.table_kit import Pipeline

pytestmark = pytest.mark.unit

KEYS = ["a", "b", "c", "d", "e"]


def selector(key, value):
    """Values into three groups; 8 has a None group key and 9 no pair at all (both skipped)."""
    if value == 9:
        return None
    if value == 8:
        return (None, value)
    return (f"g{value % 3}", value)


def _valid(pair) -> bool:
    return pair is not None and pair[0] is not None and pair[1] is not None


updates = st.lists(st.tuples(st.sampled_from(KEYS), st.none() | st.integers(0, 9), st.integers(0, 100)),
                   max_size=60)


def summing(caching: bool, backing=None) -> Pipeline:
    return Pipeline(["source", "sum"], KTableSource("source", send_old_values=True, caching=caching),
                    KTableRepartitionMap(selector),
                    KTableAggregate("sum", lambda: 0, lambda k, v, a: a + v, lambda k, v, a: a - v, caching=caching),
                    backing=backing)


class Oracle:
    """The table's rows, and per group the largest timestamp of an update that touched it."""

    def __init__(self):
        self.table: dict = {}
        self.group_ts: dict = {}

    def apply(self, key, value, ts) -> set:
        touched = {p[0] for p in (selector(key, self.table.get(key)) if key in self.table else None,
                                  selector(key, value) if value is not None else None) if _valid(p)}
        for g in touched:
            self.group_ts[g] = max(ts, self.group_ts.get(g, ts))
        if value is None:
            self.table.pop(key, None)
        else:
            self.table[key] = value
        return touched

    def sums(self) -> dict:
        """Group sums from scratch; a group once created keeps its row (sum 0 when emptied)."""
        out = {g: 0 for g in self.group_ts}
        for key, value in self.table.items():
            pair = selector(key, value)
            if _valid(pair):
                out[pair[0]] += pair[1]
        return {g: (s, self.group_ts[g]) for g, s in out.items()}


@settings(max_examples=300, deadline=None)
@given(history=updates, caching=st.booleans())
def test_group_sums_equal_sums_recomputed_from_the_table_after_every_update(history, caching):
    p, oracle = summing(caching), Oracle()
    for key, value, ts in history:
        touched = oracle.apply(key, value, ts)
        out = p.pipe(key, value, ts)
        expected = oracle.sums()
        assert p.rows("sum") == expected
        assert {g for g, _, _ in out} == touched and len(out) == len(touched)   # no transient state
        last = {g: (change.new, t) for g, change, t in out}
        assert last == {g: expected[g] for g in touched}


class Changelogs:
    """A backing factory that keeps each backing, so a new task can be restored from them."""

    def __init__(self, restore_from: "Changelogs | None" = None):
        self.backings: dict[str, DictBacking] = {}
        self.restore_from = restore_from

    def __call__(self, name: str) -> DictBacking:
        b = self.backings[name] = DictBacking()
        if self.restore_from is not None and name in self.restore_from.backings:
            for k, v in self.restore_from.backings[name].changes:   # replay the changelog, in order
                b.data.pop(k, None) if v is None else b.data.__setitem__(k, v)
        return b


@settings(max_examples=200, deadline=None)
@given(history=updates, cut=st.floats(0, 1), caching=st.booleans())
def test_a_task_restored_from_its_changelogs_continues_identically(history, cut, caching):
    split = int(cut * len(history))
    whole = summing(caching)
    expected = [whole.pipe(*u) for u in history]

    first_logs = Changelogs()
    first = summing(caching, backing=first_logs)
    before = [first.pipe(*u) for u in history[:split]]
    restored_logs = Changelogs(restore_from=first_logs)
    restored = summing(caching, backing=restored_logs)
    for name, b in first_logs.backings.items():
        assert restored_logs.backings[name].data == b.data
    after = [restored.pipe(*u) for u in history[split:]]

    assert before + after == expected
    assert restored.rows("sum") == whole.rows("sum")
    assert restored.rows("source") == whole.rows("source")
