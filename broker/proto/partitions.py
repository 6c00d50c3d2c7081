"""Sets of partitions on the wire: ``GroupPartitions`` (a topic and its partition numbers)."""
from __future__ import annotations

from collections.abc import Iterable

from broker.proto import riverlog_pb2 as pb


def grouped(partitions: Iterable) -> list[pb.GroupPartitions]:
    """(topic, partition) pairs, or objects with ``.topic`` and ``.partition``, grouped by topic."""
    by_topic: dict[str, list[int]] = {}
    for item in partitions:
        topic, partition = (item.topic, item.partition) if hasattr(item, "topic") else item
        by_topic.setdefault(topic, []).append(partition)
    return [pb.GroupPartitions(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]


def pairs(groups: Iterable[pb.GroupPartitions]) -> list[tuple[str, int]]:
    return [(g.topic, p) for g in groups for p in g.partitions]


def add_results(results, partitions: Iterable[tuple[str, int]], error=None) -> None:
    """One result per (topic, partition) in a repeated result field, all with ``error`` (or none):
    a commit or an offset delete succeeds or fails for all its partitions at once."""
    for topic, partition in partitions:
        results.add(topic=topic, partition=partition, error_code=error.code if error else 0,
                    error_message=error.message if error else "")
