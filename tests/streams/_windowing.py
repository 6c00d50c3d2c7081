"""Helpers for the windowing tests: run records through one processor in a fresh task."""
from __future__ import annotations

from streams.record import Change, Record, Windowed
from streams.task import Collect, Task, chain


class Run:
    """A processor (and optional followers) in a task with dict backings; ``out`` is what they forward."""

    def __init__(self, *processors, backings=None):
        self.backings = {} if backings is None else backings
        specs = [p.store_spec() for p in processors]
        self.task = Task("app", 0, specs, backing=self._backing)
        self.collect = Collect()
        self.head = chain(self.task, *processors, self.collect)

    def _backing(self, name):
        from streams.stores import DictBacking
        return self.backings.setdefault(name, DictBacking())

    def send(self, key, value, ts) -> list[tuple]:
        """Process one record; return what it produced as (key, start, end, new, old, ts) tuples."""
        before = len(self.collect.records)
        self.head.process(Record(key, value, ts))
        return [flat(r) for r in self.collect.records[before:]]

    def dropped(self) -> int:
        return self.task.meta("p0.dropped") or 0


def flat(r: Record) -> tuple:
    k, v = r.key, r.value
    assert isinstance(k, Windowed) and isinstance(v, Change)
    return (k.key, k.start, k.end, v.new, v.old, r.timestamp)


def concat(key, value, agg):
    return agg + "+" + value
