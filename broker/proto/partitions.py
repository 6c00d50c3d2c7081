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
