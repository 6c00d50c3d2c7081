"""A task wired to table processors, fed (key, value, timestamp) rows as Kafka's tests pipe them."""
from __future__ import annotations

from streams.record import Record
from streams.stores import StoreSpec
from streams.task import Collect, Task, chain


class Pipeline:
    """``chain(Task(...), *processors, Collect())`` with key-value stores named ``stores``."""

    def __init__(self, stores: list[str], *processors, backing=None):
        kwargs = {} if backing is None else {"backing": backing}
        self.task = Task("app", 0, [StoreSpec(s, "keyValue") for s in stores], **kwargs)
        self.out = Collect()
        self.head = chain(self.task, *processors, self.out)

    def pipe(self, key, value, timestamp: int) -> list[tuple]:
        """Process one record; return what reached the end as (key, value, timestamp)."""
        start = len(self.out.records)
        self.head.process(Record(key, value, timestamp))
        return [(r.key, r.value, r.timestamp) for r in self.out.records[start:]]

    def pipe_all(self, rows) -> list[tuple]:
        return [out for row in rows for out in self.pipe(*row)]

    def rows(self, store: str) -> dict:
        """A timestamped store's rows as {key: (value, timestamp)}."""
        return {k: tuple(v) for k, v in self.task.store(store).all()}
