"""What ``riverlog topics describe`` prints for one topic: Kafka's ``TopicCommand`` description
lines and its report options, as a pure function of the topic's metadata.

    describe_lines(TopicInfo("orders", "Xy..", [PartitionInfo(0, 1, [1, 2], [1])], {}, 1),
                   Reports(under_replicated=True))
    # ["\\tTopic: orders\\tPartition: 0\\tLeader: 1\\tReplicas: 1,2\\tIsr: 1"]

Without a report option: the topic line (``Topic``, ``TopicId``, ``PartitionCount``,
``ReplicationFactor``, ``Configs``) and every partition line (``Leader: none`` when there is no
leader). With ``--under-replicated-partitions`` (fewer in sync than replicas),
``--unavailable-partitions`` (no live leader), ``--under-min-isr-partitions`` (no leader or fewer
in sync than ``min.insync.replicas``) or ``--at-min-isr-partitions`` (exactly that many): only
the partitions that match one given, no topic line. ``--topics-with-overrides``: only the topic
line, and only for a topic with config overrides.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PartitionInfo", "Reports", "TopicInfo", "describe_lines"]


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int                  # -1: none
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: list[PartitionInfo]
    overrides: dict[str, str]
    min_isr: int = 1


@dataclass(frozen=True)
class Reports:
    under_replicated: bool = False
    unavailable: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False
    with_overrides: bool = False
    live_brokers: frozenset = field(default_factory=frozenset)

    @property
    def partition_reports(self) -> bool:
        return self.under_replicated or self.unavailable or self.under_min_isr or self.at_min_isr

    def wants(self, p: PartitionInfo, min_isr: int) -> bool:
        """``DescribeOptions.shouldPrintTopicPartition``."""
        if not self.partition_reports:
            return True
        has_leader = p.leader >= 0
        return ((self.under_replicated and len(p.replicas) - len(p.isr) > 0)
                or (self.unavailable and (not has_leader or p.leader not in self.live_brokers))
                or (self.under_min_isr and (not has_leader or len(p.isr) < min_isr))
                or (self.at_min_isr and len(p.isr) == min_isr))


def describe_lines(topic: TopicInfo, reports: Reports = Reports()) -> list[str]:
    parts = sorted(topic.partitions, key=lambda p: p.partition)
    out = []
    if not reports.partition_reports and (not reports.with_overrides or topic.overrides):
        rf = len(parts[0].replicas) if parts else 0
        configs = ",".join(f"{k}={v}" for k, v in sorted(topic.overrides.items()))
        out.append(f"Topic: {topic.name}\tTopicId: {topic.topic_id}\tPartitionCount: {len(parts)}\t"
                   f"ReplicationFactor: {rf}\tConfigs: {configs}")
    if reports.with_overrides:
        return out
    for p in parts:
        if reports.wants(p, topic.min_isr):
            out.append(f"\tTopic: {topic.name}\tPartition: {p.partition}\t"
                       f"Leader: {p.leader if p.leader >= 0 else 'none'}\t"
                       f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
    return out
