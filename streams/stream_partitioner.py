"""A user's ``StreamPartitioner`` (``Produced.streamPartitioner``, ``Repartitioned.withStreamPartitioner``):
a callable ``(topic, key, value, num_partitions)`` answering Kafka's ``partition()`` (an int; None
for the producer's default partitioner) or KIP-837's ``partitions()`` (a set of partitions: the
record is written to each, to none when empty)."""
from __future__ import annotations

from typing import Any, Callable

from streams.errors import StreamsError, TopologyError


def check_partitioner(fn: Any, where: str) -> Callable:
    if not callable(fn):
        raise TopologyError(f"{where} stream partitioner must be a callable (topic, key, value, num_partitions), "
                            f"got {type(fn).__name__}")
    return fn


def choose(fn: Callable, topic: str, key, value, partitions: int) -> list[int | None]:
    """The partitions ``fn`` writes the record to: ``[None]`` for the default partitioner. A
    partition outside the topic fails, as Kafka's producer fails the send (the task stops)."""
    got = fn(topic, key, value, partitions)
    if got is None:
        return [None]
    chosen = sorted(got) if isinstance(got, (set, frozenset)) else [got]
    for p in chosen:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < partitions:
            raise StreamsError(f"the stream partitioner chose partition {p!r} of topic {topic!r}, which has "
                               f"{partitions} partitions: return an int in [0, {partitions}), None or a set of them")
    return chosen
