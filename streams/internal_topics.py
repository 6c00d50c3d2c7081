"""A :class:`~streams.app.StreamsApp`'s topics, as Kafka Streams' ``InternalTopicManager``: the
partition count of every topic the topology reads (its tasks: one per partition), and the internal
topics created before the first query starts (repartition topics, changelogs, each stateful
sub-topology's meta changelog, the generations topic), an existing one with another partition
count refused.
"""
from __future__ import annotations

from broker.client import AdminClient, NewTopic
from broker.errors import TopicAlreadyExistsError
from streams.errors import StreamsError
from streams.spark_task import meta_changelog
from streams.topology import SubTopology, changelog_topic


class InternalTopics:
    """Needs ``topology``, ``app``, ``config``, ``admin`` and ``_generations_topic`` (from StreamsApp)."""

    # ------------------------------------------------------------------ topics
    def _topic_partitions(self, admin: AdminClient) -> None:
        md = admin.list_topics(timeout=30)
        for name, t in md.topics.items():
            self._partitions[name] = len(t.partitions)

    def partitions(self, topic: str) -> int:
        if topic in self._copartitioned:
            return self._copartitioned[topic]
        if topic in self._partitions:
            return self._partitions[topic]
        n = self.topology.repartition_partitions(self.app, topic, self.partitions)
        if n is not None:
            return n
        raise StreamsError(f"source topic {topic!r} does not exist: create it before starting the application")

    def tasks(self, sub: SubTopology) -> int:
        """Kafka's tasks: one per partition of the sub-topology's own topics (a global table's
        topic, whatever its partitions, is read whole by every task)."""
        return max(self.partitions(t) for t in self.topology.source_topics(self.app, sub))

    def runnable(self) -> list[SubTopology]:
        """The sub-topologies that become queries, each with the global stores it joins; a global
        sub-topology generates no tasks of its own."""
        from streams.global_table import is_global, with_global_stores
        return [with_global_stores(self.topology, s) for s in self.topology.subtopologies if not is_global(s)]

    def _create_internal_topics(self) -> None:
        from streams.joins import copartition
        admin = AdminClient(self.admin)
        self._topic_partitions(admin)
        self._copartitioned = copartition(self.topology, self.app, self._partitions.get)
        existing = set(self._partitions)  # the loops below cache repartition topics' counts too
        wanted = []
        for sub in self.topology.subtopologies:
            for n in sub.sinks:
                if n.internal:
                    t = f"{self.app}-{n.topics[0]}"
                    # Records keep their event time, which may be older than any retention.ms: a
                    # repartition topic keeps them until read and purged, as Kafka Streams' does
                    # (its RepartitionTopicConfig: delete policy, 50 MiB segments, no retention.ms).
                    wanted.append(NewTopic(t, self.partitions(t), self.config["replication.factor"],
                                           config={"cleanup.policy": "delete", "segment.bytes": "52428800",
                                                   "retention.ms": "-1"}))
                    self._partitions[t] = self.partitions(t)
        for sub in self.runnable():
            if not sub.stateful:
                continue
            n = self.tasks(self.topology.subtopologies[sub.id])
            for t, topic_config in ([(changelog_topic(self.app, s.name), s.changelog_config()) for s in sub.stores]
                                    + [(meta_changelog(self.app, sub.id), {"cleanup.policy": "compact"})]):
                wanted.append(NewTopic(t, n, self.config["replication.factor"], config=topic_config))
        wanted.append(NewTopic(self._generations_topic, 1, self.config["replication.factor"],
                               config={"cleanup.policy": "compact"}))
        futures = admin.create_topics([w for w in wanted if w.topic not in existing])
        for topic, f in futures.items():
            try:
                f.result()
            except TopicAlreadyExistsError:
                pass
        for w in wanted:
            have = self._partitions.get(w.topic)
            if have is not None and have != w.num_partitions:
                raise StreamsError(f"internal topic {w.topic!r} has {have} partitions, the topology needs "
                                   f"{w.num_partitions}: delete it (riverlog topics delete) and restart")
            self._partitions[w.topic] = w.num_partitions
