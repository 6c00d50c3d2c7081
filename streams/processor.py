"""The processor API every DSL operation compiles to, run the same way by the reference interpreter
and inside Spark's stateful processor: push-based, one record at a time, as Kafka Streams' own.

A :class:`Processor` is made per task (one input partition number of a sub-topology). It gets its
stores and its children from the :class:`ProcessorContext` and forwards records downstream.
Processors keep no state outside their stores and :meth:`ProcessorContext.meta`, so a task
restored from its changelogs behaves exactly as the one that wrote them.
"""
from __future__ import annotations

from typing import Any, Protocol

from streams.record import Record


class ProcessorContext(Protocol):
    application_id: str
    task: int                      # the input partition number this task owns
    children: list                 # the child processors, in the order the topology added them

    def forward(self, record: Record) -> None: ...
    def store(self, name: str) -> Any: ...
    def caching(self, store: str) -> bool: ...    # the store forwards by Kafka's caching rules
    def record_cache(self, store: str) -> Any: ...   # the task's RecordCache, or None: forward per record
    def meta(self, name: str) -> Any: ...        # a processor's persisted scalar (e.g. its stream time); None if unset
    def set_meta(self, name: str, value: Any) -> None: ...
    def source(self) -> tuple[str | None, int | None, int | None]: ...   # topic, partition, offset of the input record
    def swap_source(self, source: tuple) -> tuple: ...   # a held record's position for what follows; returns the old
    def default_serde(self, which: str) -> Any: ...   # default.key.serde ("key") / default.value.serde, or None
    def store_key_serde(self, store: str) -> Any: ...   # a store's key serde, else the default, else None


class Processor:
    """Base for processors; subclasses override :meth:`process`."""
    def init(self, context: ProcessorContext) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        raise NotImplementedError

    def forward(self, record: Record) -> None:
        self.context.forward(record)

    def observe_stream_time(self, name: str, timestamp: int) -> int:
        """Advance and return this processor's observed stream time (the largest timestamp it has
        seen), as Kafka's windowed processors track it; persisted so a restore resumes it."""
        seen = self.context.meta(name)
        now = timestamp if seen is None or timestamp > seen else seen
        if now != seen:
            self.context.set_meta(name, now)
        return now
