"""A :class:`~streams.app.StreamsApp`'s topics, as Kafka Streams' ``InternalTopicManager``: the
partition count of every topic the topology reads (its tasks: one per partition), and the internal
topics created before the first query starts (repartition topics, changelogs, each stateful
sub-topology's meta changelog, the generations topic), an existing one with another partition
count refused (``InternalTopicManager.validateTopics``).

Their configs are Kafka's ``InternalTopicConfig.properties``, layered library defaults <
``topic.*`` settings of the application's config < the store's ``withLoggingEnabled`` configs:

* every internal topic: ``message.timestamp.type=CreateTime``;
* repartition topics (``RepartitionTopicConfig``): ``cleanup.policy=delete``,
  ``segment.bytes=52428800``, ``retention.ms=-1``;
* a key-value store's changelog (``UnwindowedUnversionedChangelogTopicConfig``), the outer-join
  shared store's too (a key-value store in Kafka): ``cleanup.policy=compact``;
* a window or session store's changelog: ``cleanup.policy=compact``. Kafka's
  ``WindowedChangelogTopicConfig`` makes it ``compact,delete`` with ``retention.ms`` = the store's
  retention + ``windowstore.changelog.additional.retention.ms`` (one day), a *wall-clock*
  retention: an application processing event times older than that (a backfill, a replay) would
  have the broker delete the changelog under live windows, and a restart from the broker would
  lose them. Riverlog's window and session aggregations write a tombstone for every window they
  expire, so compaction alone bounds their changelogs. ``topic.cleanup.policy=compact,delete``
  (or the store's ``withLoggingEnabled``) asks for Kafka's, and then ``retention.ms`` is computed
  as Kafka computes it unless given;
* a versioned table's changelog (``VersionedChangelogTopicConfig``): ``cleanup.policy=compact``
  and ``min.compaction.lag.ms`` = its history retention + one day, unless the store's configs
  give it.

Riverlog's own topics (meta changelogs, the generations topic) take the same defaults and
``topic.*`` settings, and stay compacted whatever those say.
"""
from __future__ import annotations

from broker.client import AdminClient, NewTopic
from broker.errors import InvalidConfigError, TopicAlreadyExistsError
from streams.errors import StreamsError
from streams.spark_task import meta_changelog
from streams.stores import StoreSpec
from streams.topology import SubTopology, Topology, changelog_topic

TOPIC_PREFIX = "topic."                      # Kafka's StreamsConfig.TOPIC_PREFIX
ADDITIONAL_RETENTION = "windowstore.changelog.additional.retention.ms"
ADDITIONAL_RETENTION_DEFAULT = 86_400_000    # StreamsConfig's default: one day
VERSIONED_ADDITIONAL_COMPACTION_LAG_MS = 86_400_000   # VersionedChangelogTopicConfig's, one day
_LONG_MAX = 2 ** 63 - 1
INTERNAL_TOPIC_DEFAULTS = {"message.timestamp.type": "CreateTime"}
REPARTITION_TOPIC_DEFAULTS = {**INTERNAL_TOPIC_DEFAULTS, "cleanup.policy": "delete", "segment.bytes": "52428800",
                              "retention.ms": "-1"}


def topic_defaults(config: dict) -> dict[str, str]:
    """The ``topic.*`` settings of a Streams config, prefix removed (Kafka's
    ``originalsWithPrefix(TOPIC_PREFIX)``): applied to every internal topic it creates. A
    ``topic.cleanup.policy`` without ``compact`` is refused, as ``Materialized.withLoggingEnabled``
    refuses one: it would let the broker delete the changelogs a restart restores from."""
    out = {k[len(TOPIC_PREFIX):]: str(v) for k, v in config.items()
           if k.startswith(TOPIC_PREFIX) and len(k) > len(TOPIC_PREFIX) and v is not None}
    policy = out.get("cleanup.policy")
    if policy is not None and "compact" not in [p.strip() for p in policy.split(",")]:
        raise InvalidConfigError(f"topic.cleanup.policy={policy!r} would let the broker delete the changelogs the "
                                 f"application restarts from; use compact or compact,delete",
                                 config="topic.cleanup.policy")
    return out


def additional_retention(config: dict) -> int:
    value = config.get(ADDITIONAL_RETENTION, ADDITIONAL_RETENTION_DEFAULT)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(f"Invalid value {value} for configuration {ADDITIONAL_RETENTION}: "
                                 f"Not a number of type LONG", config=ADDITIONAL_RETENTION) from None


def repartition_topic_config(defaults: dict[str, str]) -> dict[str, str]:
    """Kafka's ``RepartitionTopicConfig.properties``: records keep their event time, which may be
    older than any retention, so the topic keeps them until read and purged."""
    return {**REPARTITION_TOPIC_DEFAULTS, **defaults}


def changelog_config(store: StoreSpec, defaults: dict[str, str], additional_ms: int,
                     history_ms: int | None = None, windowed: bool | None = None) -> dict[str, str]:
    """A store's changelog configs, as Kafka's ``InternalTopologyBuilder.buildChangelogTopicConfig``
    picks them: versioned (``history_ms`` given), windowed (a window or session store, unless
    ``windowed`` says otherwise) or neither."""
    own = dict(store.log_config)
    if windowed is None:
        windowed = store.kind in ("window", "session")
    if history_ms is not None:
        out = {**INTERNAL_TOPIC_DEFAULTS, "cleanup.policy": "compact", **defaults, **own}
        if "min.compaction.lag.ms" not in own:
            out["min.compaction.lag.ms"] = str(min(history_ms + VERSIONED_ADDITIONAL_COMPACTION_LAG_MS, _LONG_MAX))
        return out
    if windowed:
        # Compacted only, unless asked for Kafka's compact,delete (see the module's docstring).
        out = {**INTERNAL_TOPIC_DEFAULTS, "cleanup.policy": "compact", **defaults, **own}
        deleting = "delete" in [p.strip() for p in out["cleanup.policy"].split(",")]
        if deleting and "retention.ms" not in own:
            out["retention.ms"] = str(min((store.retention or 0) + additional_ms, _LONG_MAX))
        return out
    return {**INTERNAL_TOPIC_DEFAULTS, "cleanup.policy": "compact", **defaults, **own}


def kafka_windowed_stores(topology: Topology) -> set[str]:
    """The stores whose changelog Kafka makes windowed: window and session stores, less the outer
    join's shared store (held by both sides' join processors), a key-value store in Kafka's
    ``KStreamImplJoin``."""
    holders: dict[str, int] = {}
    for n in topology.nodes:
        if n.op == "stream-join":
            for s in n.stores:
                holders[s.name] = holders.get(s.name, 0) + 1
    return {s.name for s in topology.stores().values()
            if s.kind in ("window", "session") and holders.get(s.name, 0) < 2}


def versioned_stores(topology: Topology) -> dict[str, int]:
    """``{store: history retention ms}`` of the versioned tables."""
    return {s.name: n.args["history_retention"] for n in topology.nodes
            if n.args.get("history_retention") is not None for s in n.stores}


class InternalTopics:
    """Needs ``topology``, ``app``, ``config``, ``admin`` and ``_generations_topic`` (from StreamsApp)."""

    # ------------------------------------------------------------------ topics
    def _topic_partitions(self, admin: AdminClient) -> None:
        md = admin.list_topics(timeout=30)
        for name, t in md.topics.items():
            self._partitions[name] = len(t.partitions)
        from streams.pattern_sources import match_existing
        match_existing(self.topology, md.topics)

    def partitions(self, topic: str) -> int:
        """A topic's partition count: a repartition topic's is the topology's (co-partitioning, else
        ``Repartitioned``, else its writer's inputs), whatever an existing topic has; any other's
        is the broker's."""
        if topic in self._copartitioned:
            return self._copartitioned[topic]
        n = self.topology.repartition_partitions(self.app, topic, self.partitions)
        if n is not None:
            return n
        if topic in self._partitions:
            return self._partitions[topic]
        raise StreamsError(f"source topic {topic!r} does not exist: create it before starting the application")

    def tasks(self, sub: SubTopology) -> int:
        """Kafka's tasks: one per partition of the sub-topology's own topics (a global table's
        topic, whatever its partitions, is read whole by every task). A pattern source that
        matched no topic at start counts one."""
        return max((self.partitions(t) for t in self.topology.source_topics(self.app, sub)), default=1)

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
        existing = dict(self._partitions)
        rf = self.config["replication.factor"]
        defaults = topic_defaults(self.config)
        additional = additional_retention(self.config)
        windowed, versioned = kafka_windowed_stores(self.topology), versioned_stores(self.topology)
        own = {**INTERNAL_TOPIC_DEFAULTS, **defaults, "cleanup.policy": "compact"}
        wanted = []
        for sub in self.topology.subtopologies:
            for n in sub.sinks:
                if n.internal:
                    t = f"{self.app}-{n.topics[0]}"
                    wanted.append(NewTopic(t, self.partitions(t), rf, config=repartition_topic_config(defaults)))
        for sub in self.runnable():
            if not sub.stateful:
                continue
            n = self.tasks(self.topology.subtopologies[sub.id])
            for s in sub.stores:
                config = changelog_config(s, defaults, additional, versioned.get(s.name), s.name in windowed)
                wanted.append(NewTopic(changelog_topic(self.app, s.name), n, rf, config=config))
            wanted.append(NewTopic(meta_changelog(self.app, sub.id), n, rf, config=own))
        wanted.append(NewTopic(self._generations_topic, 1, rf, config=own))
        # InternalTopicManager.validateTopics: an existing internal topic keeps its records' keys
        # hashed over its own partition count, so another count than the topology's is refused.
        for w in wanted:
            have = existing.get(w.topic)
            if have is not None and have != w.num_partitions:
                raise StreamsError(f"Existing internal topic {w.topic} has invalid partitions: expected: "
                                   f"{w.num_partitions}; actual: {have}. Delete it (riverlog topics delete "
                                   f"{w.topic}) before processing.")
        futures = admin.create_topics([w for w in wanted if w.topic not in existing])
        for topic, f in futures.items():
            try:
                f.result()
            except TopicAlreadyExistsError:
                pass
        for w in wanted:
            self._partitions[w.topic] = w.num_partitions
